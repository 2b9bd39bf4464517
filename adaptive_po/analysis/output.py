"""The one way every report writes its figures and tables: through the contract's atomic write,
so a reader (or a second analysis run) never sees a half-written figure or table.

This module imports no matplotlib: a report that writes tables only stays free of it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from adaptive_po.contract import atomic_write, pid_alive

__all__ = ["save_figure", "save_csv"]


def save_figure(fig, path: str | os.PathLike, dpi: int = 120) -> Path:
    """Save a matplotlib figure as PNG (the format is explicit: the temporary name has no .png)
    and close it."""
    import matplotlib.pyplot as plt  # the figure exists, so matplotlib is loaded already

    try:
        return atomic_write(path, lambda tmp: fig.savefig(tmp, format="png", dpi=dpi))
    finally:
        plt.close(fig)


def save_csv(df: pd.DataFrame, path: str | os.PathLike) -> Path:
    """Save a table as CSV without its index."""
    return atomic_write(path, lambda tmp: df.to_csv(tmp, index=False))


# -- a report folder replaced whole -------------------------------------------------------------
#: the hidden sibling a report is written into before it replaces the report folder
STAGING_MARK = ".staging-"
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths in one step (Linux ``renameat2(RENAME_EXCHANGE)``); False where unsupported."""
    import sys

    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        call = libc.renameat2
    except (OSError, AttributeError):
        return False
    return call(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0


def _remove_dead_stagings(final: Path) -> None:
    """Staging folders of ``final`` left by a report process that was killed (SIGKILL)."""
    import shutil

    prefix = f".{final.name}{STAGING_MARK}"
    if not final.parent.is_dir():
        return
    for path in final.parent.iterdir():
        tail = path.name[len(prefix):]
        if path.name.startswith(prefix) and tail.isdigit() and not path.is_symlink() and path.is_dir() and not pid_alive(int(tail)):
            shutil.rmtree(path, ignore_errors=True)


class _DeferTerm:
    """SIGTERM (and SIGINT) turned into ``SystemExit(143)`` while the report is written (so the
    staging folder is removed on the way out), and held back while the folder is swapped and
    cleaned up; in the main thread only (elsewhere the signal keeps its handler)."""

    def __init__(self) -> None:
        self.deferred = False
        self.saved: dict[int, object] = {}

    def install(self) -> None:
        import signal
        import threading

        if threading.current_thread() is not threading.main_thread():
            return

        def stop(signum: int, frame: object) -> None:
            raise SystemExit(128 + signum)

        for sig in (signal.SIGTERM,):
            self.saved[sig] = signal.signal(sig, stop)

    def hold(self) -> None:
        import signal

        def later(signum: int, frame: object) -> None:
            self.deferred = True

        for sig in self.saved:
            signal.signal(sig, later)

    def restore(self) -> None:
        import signal

        for sig, handler in self.saved.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]
        if self.deferred:
            raise SystemExit(143)


class StagedFolder:
    """Write a whole folder, then let it replace ``final`` at once::

        with StagedFolder(out) as staging:
            ...write into staging...

    The files are written into a hidden sibling (``.<name>.staging-<pid>``); when the block ends
    normally, files of the old folder that the new one does not have are carried over (another
    report writing into the same folder keeps its files), and the two folders are exchanged in one
    step (``renameat2``; elsewhere two renames). A stop (an error, SIGTERM) before that leaves the
    old folder as it was and removes the staging folder: a reader sees either the old report or
    the new one, never a mix, and no temporary files. An existing ``final`` that holds folders
    (a suite's runs, say) is refused: it is not a report folder."""

    def __init__(self, final: str | os.PathLike) -> None:
        self.final = Path(final)
        self.staging = self.final.parent / f".{self.final.name}{STAGING_MARK}{os.getpid()}"
        self._term = _DeferTerm()

    def __enter__(self) -> Path:
        import shutil

        final = self.final
        if final.is_symlink() or (final.exists() and not final.is_dir()):
            raise ValueError(f"--out: {final} is not a folder (a file or a link); give a folder for the report")
        if final.is_dir():
            inside = sorted(p.name for p in final.iterdir() if p.is_dir() or p.is_symlink())
            if inside:
                raise ValueError(f"--out: {final} holds {inside[:3]} (folders or links): not a report folder; give an empty or a report folder")
        final.parent.mkdir(parents=True, exist_ok=True)
        _remove_dead_stagings(final)
        shutil.rmtree(self.staging, ignore_errors=True)
        self._term.install()
        try:
            self.staging.mkdir()
        except BaseException:
            self._term.restore()
            raise
        return self.staging

    def __exit__(self, kind, err, tb) -> None:  # type: ignore[no-untyped-def]
        import shutil

        try:
            if kind is None:
                self._term.hold()
                self._swap()
        finally:
            self._term.hold()
            shutil.rmtree(self.staging, ignore_errors=True)  # the new folder on a stop, the old one after the swap
            self._term.restore()

    def _swap(self) -> None:
        final, staging = self.final, self.staging
        if not final.is_dir():
            os.rename(staging, final)
            return
        for old in final.iterdir():  # files of the folder this report does not write
            target = staging / old.name
            if old.is_file() and not old.is_symlink() and not target.exists():
                try:
                    os.link(old, target)
                except OSError:
                    import shutil

                    shutil.copy2(old, target)
        if not _exchange(staging, final):
            parked = final.parent / f".{final.name}{STAGING_MARK}old-{os.getpid()}"
            os.rename(final, parked)
            os.rename(staging, final)
            os.rename(parked, staging)
