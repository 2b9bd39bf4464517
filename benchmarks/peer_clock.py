"""The clock both sides of ``benchmarks/peers.py`` read (imported first, so that its start is the
process's): the CPU seconds of this process and of the child processes it has waited for (user and
system, all threads), and its wall seconds since it started. The children count: our side's
compiler runs g++ in processes of its own, once per generated kernel, and a clock of the process
alone missed that time (a cold CartPole population: about 30 s). Plain Python, so that the peer's
interpreter (without adaptive-po) imports it too."""

from __future__ import annotations

import resource
import time

STARTED = time.perf_counter()


def cpu() -> float:
    """CPU seconds (user + system) of this process and of its waited-for children."""
    return sum(u.ru_utime + u.ru_stime for u in (resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)))


def wall() -> float:
    """Seconds since the process imported this module."""
    return time.perf_counter() - STARTED


def measure(fn):  # type: ignore[no-untyped-def]
    """``(fn(), {"cpu_s", "wall_s"})``: what calling ``fn`` costs."""
    cpu0, wall0 = cpu(), time.perf_counter()
    out = fn()
    return out, {"cpu_s": cpu() - cpu0, "wall_s": time.perf_counter() - wall0}
