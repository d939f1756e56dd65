"""The process's memory for the analysis: glibc keeps what the analysis frees, and the
heap the request columns are carved from is faulted in beside their copying.
"""

from __future__ import annotations

import mmap
from typing import Callable, Sequence

import numpy as np


def tune_allocator() -> bool:
    """Keep freed memory in the process for reuse (glibc): the analysis allocates and
    frees many large temporaries, and glibc would otherwise return each to the kernel
    and fault it in again on the next allocation. One arena for all threads, so that
    memory one analysis thread frees serves the other. Large arrays in small pages:
    numpy asks for transparent huge pages on them (madvise), and on the VM the benchmark
    ran on, faulting in the analysis' memory as huge pages took three times the system
    time of small pages. For processes that exit after the analysis (the CLI); call it
    before starting threads. Returns whether it applied."""
    try:
        from numpy._core import multiarray
        getattr(multiarray, "_set_madvise_hugepage")(False)
    except (ImportError, AttributeError):
        pass
    try:
        import ctypes
        libc = ctypes.CDLL("libc.so.6")
        m_trim_threshold, m_mmap_max, m_arena_max = -1, -4, -8
        # mallopt() takes a C int: the largest threshold is INT_MAX (a larger Python int
        # would be truncated by ctypes, 1 << 40 to 0: trim on every free).
        int_max = ctypes.c_int((1 << 31) - 1)
        ok = (bool(libc.mallopt(m_mmap_max, 0))
              and bool(libc.mallopt(m_trim_threshold, int_max))
              and bool(libc.mallopt(m_arena_max, 1)))
    except (OSError, AttributeError):
        return False
    global _HEAP_KEPT
    _HEAP_KEPT = ok
    return ok


def release_freed() -> bool:
    """Give the memory glibc keeps (tune_allocator) back to the kernel, once the large
    temporaries are gone: a process that goes on to load more libraries or build other
    data (an export's tables) then adds them to what it holds, not to the heap's peak.
    Whether it applied."""
    if not _HEAP_KEPT:
        return False
    try:
        import ctypes
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        return False
    return True


def heap_kept() -> bool:
    """Whether tune_allocator() applied: glibc keeps freed memory in the process."""
    return _HEAP_KEPT


# Set by tune_allocator(): glibc keeps freed memory in the process, whose heap analyze()
# may then fault in up front (prefault_heap).
_HEAP_KEPT = False


# Heap faulted in up front per request, below what the analysis of any large trace
# touches (the request columns alone take 65 bytes a request, the device stages about
# 40 more); at most PREFAULT_MAX bytes, well below the trim threshold (INT_MAX) so that
# glibc keeps the block once freed. Only for traces of PREFAULT_MIN requests or more.
PREFAULT_BYTES = 120


PREFAULT_MAX = 3 << 29


PREFAULT_MIN = 1 << 20


PREFAULT_ROWS = 1 << 16  # rows of the columns being filled faulted in at a time


PREFAULT_STEP = 1 << 24  # bytes of the rest of the block faulted in at a time


_MADV_POPULATE_WRITE = 23  # Linux >= 5.14


def prefault_heap(nbytes: int) -> Callable[[Sequence[np.ndarray]], list[Callable[[], bool]]] | None:
    """Grow the heap by `nbytes` without touching it, and return what faults it in, for
    load_requests(alongside=...): given the arrays about to be filled (carved from the
    block), MADV_POPULATE_WRITE calls over PREFAULT_ROWS rows of them at a time, in the
    order they are filled, then over the rest of the block. After tune_allocator(),
    glibc keeps the block (allocated and freed at once) at the top of its heap, where
    the request columns and the analysis' later arrays are carved: no page fault at the
    first touch of each page. On the benchmark VM faulting in takes about two thirds of
    the CPU time of the page faults it replaces, and beside the copying of the request
    records (bound by memory bandwidth) it hardly slows that copying. None if it cannot
    apply."""
    try:
        import ctypes
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        malloc, free, madvise = libc.malloc, libc.free, libc.madvise
    except (OSError, AttributeError):
        return None
    malloc.restype = ctypes.c_void_p
    malloc.argtypes = [ctypes.c_size_t]
    free.restype = None
    free.argtypes = [ctypes.c_void_p]
    madvise.restype = ctypes.c_int
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    p = malloc(nbytes)
    if not p:
        return None
    free(p)
    page = mmap.PAGESIZE
    block = ((p + page - 1) & -page, (p + nbytes) & -page)

    def populate(ranges: list[tuple[int, int]]) -> Callable[[], bool]:
        def run() -> bool:
            # ctypes releases the GIL during each call: the copying goes on meanwhile.
            return all([madvise(lo, hi - lo, _MADV_POPULATE_WRITE) == 0
                        for lo, hi in ranges if hi > lo])
        return run

    def jobs(arrays: Sequence[np.ndarray]) -> list[Callable[[], bool]]:
        # (address, item size, rows) per array
        spans = [(a.ctypes.data, a.itemsize, len(a)) for a in arrays]

        def pages(base: int, size: int, first: int, last: int) -> tuple[int, int]:
            """The pages holding rows [first, last) of an array."""
            return (base + first * size) & -page, (base + last * size + page - 1) & -page
        rows = max((n for _, _, n in spans), default=0)
        out = [populate([pages(b, s, i, min(i + PREFAULT_ROWS, n)) for b, s, n in spans])
               for i in range(0, rows, PREFAULT_ROWS)]
        # The rest of the block: the gaps between the arrays' pages.
        gaps, at = [], block[0]
        for lo, hi in sorted(pages(b, s, 0, n) for b, s, n in spans):
            gaps.append((at, min(lo, block[1])))
            at = max(at, hi)
        gaps.append((at, block[1]))
        out += [populate([(a, min(a + PREFAULT_STEP, stop))])
                for start, stop in gaps for a in range(start, stop, PREFAULT_STEP)]
        return out
    return jobs
