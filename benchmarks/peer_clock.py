"""The clock both sides of ``benchmarks/peers.py`` read (imported first, so that its start is the
process's): this process's CPU seconds (user and system, all its threads) and its wall seconds
since it started. Plain Python, so that the peer's interpreter (without adaptive-po) imports it too."""

from __future__ import annotations

import resource
import time

STARTED = time.perf_counter()


def cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def wall() -> float:
    """Seconds since the process imported this module."""
    return time.perf_counter() - STARTED


def measure(fn):  # type: ignore[no-untyped-def]
    """``(fn(), {"cpu_s", "wall_s"})``: what calling ``fn`` costs."""
    cpu0, wall0 = cpu(), time.perf_counter()
    out = fn()
    return out, {"cpu_s": cpu() - cpu0, "wall_s": time.perf_counter() - wall0}
