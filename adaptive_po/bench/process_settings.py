"""Process-wide settings of the bench's training processes: they belong to the process that
trains, not to a library import (an SB3 user's process building a learner keeps its allocator as
it was).

:func:`keep_freed_memory` is called by the population engine when a job starts, in a worker
process of the bench (or in the bench's own process with ``--executor inline``), beside its
``torch.set_num_threads(1)``; the worker processes also start with ``OMP_NUM_THREADS=1`` and
``MKL_NUM_THREADS=1`` (:mod:`adaptive_po.bench.local_executor`).
"""

from __future__ import annotations

#: glibc's ``mallopt`` parameters (``malloc.h``): the free memory at the heap's top from which the
#: heap gives memory back to the system, and the most blocks it maps for themselves
_M_TRIM_THRESHOLD, _M_MMAP_MAX = -1, -4
_KEEPS_FREED_MEMORY: bool | None = None


def keep_freed_memory() -> bool:
    """Have this process's allocator (glibc) serve every block from its heap and keep the memory
    it frees; ``True`` where it took the settings, ``False`` elsewhere (another C library: nothing
    changes). Once per process; a training process of the bench calls it, never the library.

    A stacked step, and each whole-batch pass, allocates its activations afresh at every call (a
    50-member CartPole minibatch: a dozen 3.3 MB buffers; a Breakout-MinAtar MLP update's pass: 67
    and 105 MB ones). By default glibc maps such a block for itself and unmaps it when freed, so
    every call touches new pages: about 1,500 page faults per CartPole step, 2.6-3.4 ms of kernel
    time on a 16-20 ms step; 4.9 s of kernel time in four Breakout updates of 8 members. Kept, the
    same memory is reused: no faults, the same numbers. The price is a resident size that stays at
    its peak, which a training process reaches anyway."""
    global _KEEPS_FREED_MEMORY
    if _KEEPS_FREED_MEMORY is None:
        try:
            import ctypes

            mallopt = ctypes.CDLL(None).mallopt
        except (OSError, AttributeError):
            _KEEPS_FREED_MEMORY = False
        else:
            _KEEPS_FREED_MEMORY = bool(mallopt(_M_MMAP_MAX, 0)) and bool(mallopt(_M_TRIM_THRESHOLD, 2**31 - 1))
    return _KEEPS_FREED_MEMORY
