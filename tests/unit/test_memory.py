"""iowhy.memory: the allocator tuning (tune_allocator, heap_kept) and the heap faulted
in up front (prefault_heap): which jobs it makes of the arrays about to be filled, and
that each applies (Linux >= 5.14, glibc)."""

from __future__ import annotations

import numpy as np

from iowhy import memory


def test_tune_allocator_reports_what_applied():
    # The CLI calls it before every analysis; the commands' tests run it in this process.
    ok = memory.tune_allocator()
    assert ok is True  # glibc: every mallopt() took its value
    assert memory.heap_kept() is ok


def test_prefault_jobs_cover_the_rows_in_order_then_the_rest(monkeypatch):
    monkeypatch.setattr(memory, "PREFAULT_ROWS", 1000)
    monkeypatch.setattr(memory, "PREFAULT_STEP", 1 << 14)
    nbytes = 64 << 10  # below glibc's mmap threshold: carved from the heap and kept
    jobs = memory.prefault_heap(nbytes)
    assert jobs is not None
    a = np.zeros(2500, dtype=np.int64)
    b = np.zeros(2500, dtype=np.int8)
    work = jobs([a, b])
    # ceil(2500 / 1000) jobs over the rows, then at most one per PREFAULT_STEP of the
    # block (and one per gap)
    assert 3 + 1 <= len(work) <= 3 + nbytes // (1 << 14) + 3
    assert all(w() for w in work)


def test_prefault_of_no_arrays_is_only_the_block():
    jobs = memory.prefault_heap(32 << 10)
    assert jobs is not None
    work = jobs([])
    assert 1 <= len(work) <= (32 << 10) // memory.PREFAULT_STEP + 2
    assert all(w() for w in work)


def test_prefault_thresholds_are_ordered():
    # the block stays below the trim threshold (INT_MAX) so that glibc keeps it
    assert memory.PREFAULT_MAX < (1 << 31) - 1
    assert memory.PREFAULT_MIN * memory.PREFAULT_BYTES <= memory.PREFAULT_MAX
