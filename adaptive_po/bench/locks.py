"""Who may touch a sweep folder and a run folder, and workers that die with their driver.

Three guards, so that a sweep survives misuse (a second sweep on its folder, a killed driver):

* **One sweep per folder.** :func:`sweep_lock` holds ``<out>/<suite>/.sweep.lock`` for the
  sweep (and, through :func:`keep_sweep_locks`, for the bench's report too). A second sweep on the
  same folder is refused with :class:`SweepLocked` (a ``ValueError``: the command line's exit code
  2, as for other bad input) naming the holder's pid, host, start time and command. The lock is an
  ``flock`` on that file: the kernel releases it when its holder dies, however it dies, so a lock
  left by a killed sweep is taken over at once and safely (two sweeps racing for a stale lock
  cannot both win, which a "check the pid, then replace the file" scheme cannot promise). The
  file's content (pid, host, start time, command) is for the messages only.
* **Run folders with an owner.** :func:`claim_run_folder` writes ``.owner.json`` (pid, host and
  the process's start time) into a run folder when a process starts training into it;
  :func:`wait_for_owner` waits for a live owner to exit and raises :class:`RunFolderBusy` if it
  does not, so no process deletes or marks a folder that another live process is writing.
* **Workers die with their driver.** :func:`die_with_driver`, called first thing in a worker,
  asks Linux to SIGKILL the worker when its parent dies (``prctl(PR_SET_PDEATHSIG)``) and starts
  a thread that watches the parent's pid (the fallback elsewhere). A worker killed that way
  writes nothing, so its run folder is left incomplete and a rerun redoes it.

Also :func:`check_destination`: an ``--out`` that is a file, cannot be written or has no room
(a 64 KiB test write) is refused before anything runs; and :class:`DestinationError`, with which a
sweep ends when its disk fills up or turns read-only later (no half-written complete run, no stale lock).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import signal
import socket
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Iterator

from adaptive_po.contract import pid_alive, process_stat  # noqa: F401 - pid_alive: the bench's name for it

#: the lock file of a sweep folder (``<out>/<suite>/``); hidden, so analysis ignores it
LOCK_FILE = ".sweep.lock"
#: a run folder's owner while a process trains into it; removed when the run ends
OWNER_FILE = ".owner.json"
#: the environment variable through which the sweep tells a worker its driver's pid
DRIVER_PID_ENV = "ADAPTIVE_PO_DRIVER_PID"
#: seconds :func:`wait_for_owner` waits for a live owner (an orphan of a killed sweep dies within
#: a moment of its driver; anything alive longer is another live sweep or ``train``)
OWNER_WAIT_S = 30.0
#: how often a worker's watch thread looks at its parent
WATCH_INTERVAL_S = 0.5


class SweepLocked(ValueError):
    """Another live process holds the sweep folder's lock."""


class RunFolderBusy(RuntimeError):
    """A live process other than this one owns the run folder."""


# -- processes ------------------------------------------------------------------------------------
def _proc_start(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (None where there is no /proc)."""
    stat = process_stat(pid)
    return None if stat is None else stat[2]


def process_identity() -> dict[str, Any]:
    """This process, as the lock and owner files record it."""
    return {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "proc_start": _proc_start(os.getpid()),
        "started_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join(sys.argv)[:500],
    }


def holder_alive(info: dict[str, Any]) -> bool:
    """Whether the process a lock or owner file names still runs. A process on another host
    cannot be checked and counts as alive."""
    try:
        pid = int(info["pid"])
    except (KeyError, TypeError, ValueError):
        return False
    if info.get("host") not in (None, socket.gethostname()):
        return True
    start = info.get("proc_start")
    return pid_alive(pid, int(start) if isinstance(start, int) else None)


def _describe(info: dict[str, Any]) -> str:
    text = f"pid {info.get('pid', '?')} on {info.get('host', '?')}"
    if info.get("started_at"):
        text += f", started {info['started_at']}"
    if info.get("command"):
        text += f", command: {info['command']}"
    return text


def _read_info(path: Path) -> dict[str, Any] | None:
    from adaptive_po.contract import read_regular_text

    try:
        data = json.loads(read_regular_text(path))  # never through a link (a planted one says nothing)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


# -- destinations ---------------------------------------------------------------------------------
#: bytes :func:`check_destination` writes (and removes) to prove there is room for results: an
#: empty file needs no space, so a full disk would pass a test that writes nothing
PROBE_BYTES = 64 * 1024
#: errors that mean "this destination cannot take results": a full disk, an exhausted quota, a
#: read-only filesystem. The sweep ends on them with :class:`DestinationError`, never a traceback.
DISK_ERRNOS: frozenset[int] = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS})


#: a sweep worker's exit status when it could not write its files for one of :data:`DISK_ERRNOS`
#: (75: EX_TEMPFAIL, "try again later"); 120 is Python's own when flushing its output at exit
#: failed, which for a worker writing into a log file means the same
WORKER_DISK_EXITS: frozenset[int] = frozenset({75, 120})


class DestinationError(ValueError):
    """The results folder cannot take results (a full disk, a quota, a read-only filesystem).

    A ``ValueError``, so the command line ends with exit code 2 and this one-line message, as for
    an ``--out`` refused before anything runs: the sweep stopped for a reason outside the runs."""


def is_disk_error(err: BaseException) -> bool:
    """Whether ``err`` is one of :data:`DISK_ERRNOS` (an ``OSError``)."""
    return isinstance(err, OSError) and err.errno in DISK_ERRNOS


def disk_error_text(text: str) -> bool:
    """Whether an error line reported by a worker (``"OSError: [Errno 28] No space left on device"``)
    is one of :data:`DISK_ERRNOS`."""
    return any(f"[Errno {code}]" in text or os.strerror(code) in text for code in DISK_ERRNOS)


def destination_error(err: OSError | str, folders: Iterable[str | os.PathLike], run: str | None = None) -> DestinationError:
    """:class:`DestinationError` for ``err`` (the driver's ``OSError``, or a worker's error line
    about ``run``), naming the folder(s) the results go to and what to do."""
    where = ", ".join(str(f) for f in folders)
    if isinstance(err, OSError):
        cause = err.strerror or str(err)
        if err.filename:
            cause += f" (writing {err.filename})"
    else:
        cause = f"run {run}: {err}" if run else err
    return DestinationError(
        f"cannot write results into {where}: {cause}; the sweep stopped, complete runs are kept and no run was "
        f"left marked complete with missing files; free some space (or make the folder writable) and rerun the "
        f"same command to resume"
    )


def check_destination(folder: str | os.PathLike, flag: str = "--out") -> Path:
    """Create ``folder`` if needed and prove it writable and not full (:data:`PROBE_BYTES` are
    written, flushed to disk and removed); a ``ValueError`` naming it otherwise (a file in the
    way, no permission, a read-only filesystem, a full disk or quota)."""
    folder = Path(folder)
    for part in (folder, *folder.parents):
        if part.exists() and not part.is_dir():
            raise ValueError(f"{flag}: {part} exists and is not a folder; give a folder for the results")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        # an unnamed file where the system has them (O_TMPFILE): nothing is left if we are killed
        with tempfile.TemporaryFile(dir=folder, prefix=".write-test-", buffering=0) as probe:
            block = memoryview(bytes(PROBE_BYTES))
            written = 0
            while written < PROBE_BYTES:
                written += probe.write(block[written:]) or 0
            os.fsync(probe.fileno())  # delayed allocation (ext4, xfs) reports a full disk here, not at write()
    except OSError as err:
        full = " (a test write of 64 KiB failed)" if err.errno in (errno.ENOSPC, errno.EDQUOT) else ""
        raise ValueError(f"{flag}: cannot write results into {folder}: {err.strerror or err}{full}") from None
    return folder


# -- the sweep lock -------------------------------------------------------------------------------
#: locks this process holds: resolved path -> [fd, depth]
_held: dict[str, list[int]] = {}
_held_guard = threading.Lock()


def _acquire(folder: Path) -> None:
    import fcntl

    from adaptive_po.contract import PlantedLink, open_regular

    path = folder / LOCK_FILE
    key = str(folder.resolve() / LOCK_FILE)  # the lock file itself is never resolved: a link is refused
    with _held_guard:
        if key in _held:
            _held[key][1] += 1
            return
    check_destination(folder)
    for _ in range(50):
        try:
            # never through a link: a planted .sweep.lock -> ~/.bashrc would be truncated and
            # overwritten with the lock's JSON; PlantedLink names it
            fd = open_regular(path, os.O_RDWR | os.O_CREAT, 0o644)
        except PlantedLink:
            raise
        except (OSError, ValueError) as err:
            raise DestinationError(f"--out: cannot create the lock file {path}: {getattr(err, 'strerror', None) or err}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            info = None
            for _ in range(20):  # a holder that just took the lock writes its name a moment later
                info = _read_info(path)
                if info is not None:
                    break
                time.sleep(0.05)
            who = _describe(info) if info else "a process that did not record itself"
            raise SweepLocked(
                f"another sweep is writing into {folder} ({who}); wait for it to finish or stop it"
                + (f" (kill {info['pid']})" if info and "pid" in info else "")
                + ", or give another --out"
            ) from None
        # the file may have been removed and re-created by a holder releasing it meanwhile
        try:
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if not same:
            os.close(fd)
            continue
        previous = _read_info(path)
        if previous and previous.get("pid") != os.getpid():
            print(
                f"note: taking over the lock of {folder} left by {_describe(previous)} (no longer running)",
                file=sys.stderr,
            )
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, (json.dumps(process_identity()) + "\n").encode(), 0)
            os.fsync(fd)
        except OSError as err:  # a disk that filled since the check: no lock file is left behind
            with contextlib.suppress(OSError):
                os.unlink(path)
            os.close(fd)
            raise DestinationError(f"--out: cannot write the lock file {path}: {err.strerror or err}") from None
        with _held_guard:
            _held[key] = [fd, 1]
        return
    raise SweepLocked(f"could not take the lock of {folder}: it keeps changing hands")


def _release(folder: Path) -> None:
    path = folder / LOCK_FILE
    key = str(folder.resolve() / LOCK_FILE)
    with _held_guard:
        entry = _held.get(key)
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] > 0:
            return
        del _held[key]
    # unlink while still holding the lock; a waiter that opened the old file sees another inode
    with contextlib.suppress(OSError):
        os.unlink(path)
    os.close(entry[0])


def sweep_folders(specs: Iterable[Any]) -> list[Path]:
    """The sweep folders (``<out>/<suite>``) of run specs."""
    return sorted({Path(spec.out) / spec.suite for spec in specs})


@contextlib.contextmanager
def sweep_lock(folders: Iterable[str | os.PathLike]) -> Iterator[None]:
    """Hold the lock of every folder (in sorted order) for the block; re-entrant in a process."""
    taken: list[Path] = []
    try:
        for folder in sorted({Path(f) for f in folders}):
            _acquire(folder)
            taken.append(folder)
        yield
    finally:
        for folder in reversed(taken):
            _release(folder)


#: the locks :func:`keep_sweep_locks` holds in this process (released at exit, or by
#: :func:`release_kept_locks`)
_KEPT: list[Any] = []


def keep_sweep_locks(folders: Iterable[str | os.PathLike]) -> None:
    """Take the folders' locks until this process exits (the bench: its sweep and its report)."""
    import atexit

    lock = sweep_lock(folders)
    lock.__enter__()
    _KEPT.append(lock)
    if len(_KEPT) == 1:
        atexit.register(release_kept_locks)


def release_kept_locks() -> None:
    """Release what :func:`keep_sweep_locks` took, newest first (at exit; a caller that runs the
    command line in its own process, as the tests do, calls it when the command returns)."""
    while _KEPT:
        _KEPT.pop().__exit__(None, None, None)


# -- run folder owners ----------------------------------------------------------------------------
def run_folder_owner(run_dir: str | os.PathLike) -> dict[str, Any] | None:
    """The live process other than this one that owns ``run_dir``, else None."""
    info = _read_info(Path(run_dir) / OWNER_FILE)
    if info is None or info.get("pid") == os.getpid() and info.get("host") == socket.gethostname():
        return None
    return info if holder_alive(info) else None


def wait_for_owner(run_dir: str | os.PathLike, timeout: float | None = None) -> None:
    """Return once no live process other than this one owns ``run_dir``; :class:`RunFolderBusy`
    after ``timeout`` seconds (default :data:`OWNER_WAIT_S`) if one still does."""
    deadline = time.time() + (OWNER_WAIT_S if timeout is None else timeout)
    while True:
        owner = run_folder_owner(run_dir)
        if owner is None:
            return
        if time.time() >= deadline:
            raise RunFolderBusy(f"{run_dir} is being written by a live process ({_describe(owner)}); not touching it")
        time.sleep(0.1)


def claim_run_folder(run_dir: str | os.PathLike) -> None:
    """Record this process as the owner of ``run_dir`` (which exists)."""
    from adaptive_po.contract import atomic_write_json

    atomic_write_json(Path(run_dir) / OWNER_FILE, process_identity())


def release_run_folder(run_dir: str | os.PathLike) -> None:
    """Remove ``run_dir``'s owner file if this process is the owner."""
    path = Path(run_dir) / OWNER_FILE
    info = _read_info(path)
    if info is not None and info.get("pid") == os.getpid():
        with contextlib.suppress(OSError):
            path.unlink()


def owned_by_another(run_dir: str | os.PathLike) -> bool:
    """Whether a live process other than this one owns ``run_dir`` (then leave it alone)."""
    return run_folder_owner(run_dir) is not None


# -- workers that die with their driver -----------------------------------------------------------
_PR_SET_PDEATHSIG = 1


def _set_parent_death_signal(sig: int) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _watch_parent(parent: int) -> None:
    while True:
        time.sleep(WATCH_INTERVAL_S)
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)


def die_with_driver() -> bool:
    """In a sweep's worker (its driver set :data:`DRIVER_PID_ENV`): be SIGKILLed when the driver
    dies. Returns whether this process is such a worker. A worker whose driver is already gone
    (it died while the worker started) kills itself at once."""
    text = os.environ.pop(DRIVER_PID_ENV, None)  # not for the worker's own children
    if not text or not text.isdigit():
        return False
    parent = int(text)
    _set_parent_death_signal(signal.SIGKILL)
    if os.getppid() != parent:  # the driver died before the signal was armed
        os.kill(os.getpid(), signal.SIGKILL)
    threading.Thread(target=_watch_parent, args=(parent,), name="watch-driver", daemon=True).start()
    return True
