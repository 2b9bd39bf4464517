"""Atomic writes: every file goes to a temporary name in the target folder, then ``os.replace``.

A reader (or a second analysis run) never sees a half-written figure or table.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Callable

__all__ = ["atomic_write", "write_text_atomic", "save_figure_atomic", "write_csv_atomic"]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write(path: str | os.PathLike, writer: Callable[[str], None]) -> Path:
    """Call ``writer(tmp_path)`` then move ``tmp_path`` onto ``path`` with ``os.replace``.

    The temporary file lives in the same folder (same filesystem), so the replace is atomic.
    On any error the temporary file is removed and the target is left untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp creates 0600; give the usual permissions
        writer(tmp)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return path


def write_text_atomic(path: str | os.PathLike, text: str) -> Path:
    def _w(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)

    return atomic_write(path, _w)


def save_figure_atomic(fig, path: str | os.PathLike, dpi: int = 120) -> Path:
    """Save a matplotlib figure as PNG atomically (the format is explicit: the temp name has no .png)."""

    def _w(tmp: str) -> None:
        fig.savefig(tmp, format="png", dpi=dpi)

    return atomic_write(path, _w)


def write_csv_atomic(df, path: str | os.PathLike, **kwargs) -> Path:
    kwargs.setdefault("index", False)

    def _w(tmp: str) -> None:
        df.to_csv(tmp, **kwargs)

    return atomic_write(path, _w)
