"""Stop a local Ray instance's processes when the driver that started it ends, however it ends.

The driver's local instance (:func:`adaptive_po.bench.ray_executor.start_local_ray`) is its
own: Ray makes the GCS server and the raylet die with the driver, but the raylet's children, the
dashboard agent and the runtime-env agent (about 170 MB together), go on waiting for a GCS that is
gone for over a minute after a ``kill -9`` of the driver, and a worker may outlive it too.

So the driver starts this reaper beside the instance: a small process (standard library only, in
a session of its own) whose stdin is a pipe that only the driver holds open. When the driver ends
(``ray.shutdown()`` and a normal exit, an exception, ``kill -9``), the kernel closes that pipe,
the reaper's read returns, and it stops every process of the Ray session: SIGTERM, then SIGKILL to
those still alive after :data:`GRACE_S`. It also stops when the driver is no longer its parent
(a child forked by the driver could hold the pipe open). The driver waits until the reaper has
looked at the session once (it prints :data:`READY`), so a driver killed a moment after
starting Ray leaves nothing behind either.

The session's processes are those whose command line names the session (``session_<date>_<pid>``,
unique per instance: the GCS server and the raylet carry it in ``--session-name`` or
``--session-dir``) and all their descendants: the agents and workers retitle themselves
(``ray::DashboardAgent``, ``ray::IDLE``), so the reaper keeps the tree it saw (pids with their
start times, so a reused pid is never taken for one of them) while the driver lives, and stops
those still alive together with what it finds at the end. Only this user's processes are looked
at. The reaper reads the session from its environment (:data:`SESSION_ENV`), not from its command
line, so it never matches itself.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import time

from adaptive_po.contract import pid_alive, process_stat

#: the environment variable that names the Ray session to the reaper
SESSION_ENV = "ADAPTIVE_PO_RAY_SESSION"
#: the environment variable with the driver's pid (the reaper's parent when it starts)
DRIVER_ENV = "ADAPTIVE_PO_RAY_DRIVER"
#: the line the reaper prints once it has seen the session's processes (the driver waits for it)
READY = "ready"
#: seconds a process of the session has to exit after SIGTERM, before SIGKILL
GRACE_S = 3.0
#: seconds between looks at the driver when the pipe stays open
POLL_S = 1.0


def _alive(pid: int, start: int) -> bool:
    """Whether ``pid`` is still the process that started at ``start`` (and not a zombie)."""
    return pid_alive(pid, start)


def session_processes(session: str, driver: int | None = None) -> dict[int, int]:
    """``{pid: start time}`` of this user's live processes whose command line names ``session``,
    and of all their descendants; this process and the ``driver`` (and what only descends from
    it) are left out."""
    if not session:
        return {}
    needle, uid, me = session.encode(), os.getuid(), os.getpid()
    try:
        entries = list(os.scandir("/proc"))
    except OSError:
        return {}
    starts: dict[int, int] = {}
    children: dict[int, list[int]] = {}
    roots = []
    for entry in entries:
        if not entry.name.isdigit() or int(entry.name) in (me, driver):
            continue
        try:
            if entry.stat().st_uid != uid:
                continue
            with open(f"/proc/{entry.name}/cmdline", "rb") as fh:
                cmdline = fh.read()
        except OSError:
            continue
        stat = process_stat(entry.name)
        if stat is None or stat[0] == "Z":
            continue
        pid = int(entry.name)
        starts[pid] = stat[2]
        children.setdefault(stat[1], []).append(pid)
        if needle in cmdline:
            roots.append(pid)
    found: dict[int, int] = {}
    todo = roots
    while todo:
        pid = todo.pop()
        if pid not in found and pid in starts:
            found[pid] = starts[pid]
            todo.extend(children.get(pid, ()))
    return found


def _signal(pids: dict[int, int], sig: int) -> None:
    for pid, start in pids.items():
        if _alive(pid, start):
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass


def stop_session(session: str, seen: dict[int, int] | None = None, grace: float = GRACE_S,
                 driver: int | None = None) -> dict[int, int]:
    """SIGTERM the processes of ``session`` (those found now and those in ``seen`` still alive),
    SIGKILL those alive after ``grace`` seconds and any started meanwhile; returns them."""
    targets = {**(seen or {}), **session_processes(session, driver)}
    targets = {pid: start for pid, start in targets.items() if _alive(pid, start)}
    _signal(targets, signal.SIGTERM)
    deadline = time.monotonic() + grace
    alive = targets
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        alive = {pid: start for pid, start in alive.items() if _alive(pid, start)}
    _signal(alive, signal.SIGKILL)
    _signal(session_processes(session, driver), signal.SIGKILL)  # a worker its raylet started meanwhile
    return targets


def wait_for_driver(driver: int, session: str) -> dict[int, int]:
    """Return once stdin is closed (the driver ended) or the driver is no longer the parent, with
    every process of ``session`` seen meanwhile (``{pid: start time}``, looked at every
    :data:`POLL_S` seconds). Prints :data:`READY` once it has looked the first time."""
    stdin = sys.stdin.fileno()
    seen = session_processes(session, driver)
    try:
        print(READY, flush=True)
    except OSError:  # the driver is gone already: nobody reads it
        pass
    while os.getppid() == driver:
        readable, _, _ = select.select([stdin], [], [], POLL_S)
        if readable and not os.read(stdin, 4096):
            break
        seen = {pid: start for pid, start in seen.items() if _alive(pid, start)}  # long sweeps: only the living
        seen.update(session_processes(session, driver))
    return seen


def main() -> int:
    for sig in (signal.SIGINT, signal.SIGHUP):  # a terminal's Ctrl-C is for the driver
        signal.signal(sig, signal.SIG_IGN)
    session, driver = os.environ.get(SESSION_ENV, ""), os.environ.get(DRIVER_ENV, "")
    if not session.startswith("session_") or not driver.isdigit():
        print(f"ray_reaper: {SESSION_ENV} must name a Ray session and {DRIVER_ENV} its driver's pid, "
              f"got {session!r} and {driver!r}", file=sys.stderr)
        return 2
    seen = wait_for_driver(int(driver), session)
    stop_session(session, seen, driver=int(driver))
    return 0


if __name__ == "__main__":
    sys.exit(main())
