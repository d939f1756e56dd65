"""The causal engine's work grows linearly with the trace (views/causal.py,
model/wakeups.py): a check on the sizes of the arrays it builds and searches, never on a
time. The shape is the one that once made it quadratic: a root thread polling in
clock_nanosleep (each sleep ended by its timer continues into the other threads), a
worker joined in futex with no waker seen, and worker threads whose waits are linked to
requests, to each other and to a helper."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from iowhy import abi
from iowhy.model import wakeups
from iowhy.views import causal

import tracebuilder as tb

H, K, T = abi.WCTX_HARDIRQ, abi.WCTX_SOFTIRQ, abi.WCTX_TASK
NANOSLEEP, FUTEX, PWRITE, FSYNC = 230, 202, 18, 74
CYCLE = 1000  # ns per cycle of every thread


def _trace(path, cycles: int) -> str:
    w0 = 1_000_000_000
    end = w0 + cycles * CYCLE + 500
    offs, helpers, reqs = [], [], []
    seq = 1
    for c in range(cycles):
        t = w0 + c * CYCLE
        # The root polls: asleep [t, t + 900), woken by its timer.
        offs.append(tb.off(100, t, t + 900, ctx=H, syscall=NANOSLEEP))
        # Worker 101: a write woken by its completion, then a futex woken by 102.
        reqs.append(tb.req(t + 120, t + 380, seq=seq, tid=101))
        offs.append(tb.off(101, t + 100, t + 400, ctx=K, rq_seq=seq, syscall=PWRITE))
        seq += 1
        offs.append(tb.off(101, t + 500, t + 800, waker=102, ctx=T, comm="w", syscall=FUTEX))
        # Worker 102: an fsync woken by the journal thread (300), which waits on a flush.
        offs.append(tb.off(102, t + 50, t + 700, waker=300, ctx=T, comm="jbd2/sdz1-8",
                           syscall=FSYNC))
        reqs.append(tb.req(t + 200, t + 600, op=abi.OP_FLUSH, seq=seq, flags=0, tid=300))
        h = tb.off(300, t + 150, t + 650, ctx=K, rq_seq=seq)
        h["flags_u16"] |= abi.OFF_HELPER
        h["run_total_ns"] = (c + 1) * 200
        helpers.append(h)
        seq += 1
    # Worker 103 joined in futex all along, its waker never seen.
    o = tb.off(103, w0 + 10, 0, syscall=FUTEX)
    o["waking_ns"], o["end_ns"], o["ts_ns"] = 0, 0, end
    offs.append(o)
    tasks = [tb.task(100, w0)] + [tb.task(t, w0, abi.TASK_FORK) for t in (101, 102, 103)]
    offs.sort(key=lambda r: r["ts_ns"])
    return tb.write_trace(path, start=w0, end=end, requests=reqs, offcpu=offs, tasks=tasks,
                          helpers=helpers, recorder={"attach_mode": "command"})


class _Counting:
    """numpy as the engine's modules see it, adding up the sizes of the arrays given to
    the calls that make or search arrays."""

    CALLS = ("searchsorted", "repeat", "concatenate", "argsort", "lexsort", "unique", "where",
             "cumsum", "flatnonzero", "clip", "full", "zeros", "empty",
             "arange", "stack", "bincount")

    def __init__(self) -> None:
        self.elements = 0

    def __getattr__(self, name: str) -> Any:
        fn = getattr(np, name)
        if name not in self.CALLS:
            return fn

        def counted(*a: Any, **k: Any) -> Any:
            for x in (*a, *k.values()):
                if isinstance(x, np.ndarray):
                    self.elements += x.size
                elif isinstance(x, (list, tuple)):
                    self.elements += sum(v.size for v in x if isinstance(v, np.ndarray))
            out = fn(*a, **k)
            self.elements += out.size if isinstance(out, np.ndarray) else 0
            return out
        return counted


def _work(tmp_path, monkeypatch, cycles: int) -> tuple[int, dict[str, Any]]:
    path = _trace(tmp_path / f"w{cycles}.iowt", cycles)
    count = _Counting()
    monkeypatch.setattr(causal, "np", count)
    monkeypatch.setattr(wakeups, "np", count)
    # Keyed times of the timeline's segments: made once, or once per search.
    orig_keys = wakeups.Timeline.keys

    def keys(self: Any, actor: np.ndarray, t: np.ndarray) -> np.ndarray:
        count.elements += len(np.asarray(t))
        return orig_keys(self, actor, t)
    monkeypatch.setattr(wakeups.Timeline, "keys", keys)
    r = tb.run(path)
    monkeypatch.undo()
    return count.elements, r


def test_the_engines_work_grows_linearly(tmp_path, monkeypatch):
    small, rs = _work(tmp_path, monkeypatch, 400)
    large, rl = _work(tmp_path, monkeypatch, 1600)
    for r in (rs, rl):
        tb.assert_sums(r)
        # The shape is what it is meant to be: the root's sleeps continued into the
        # workers (no sleep left where one worked), the joined worker unseen.
        assert r["attribution_ns"]["sleep"] < r["elapsed_ns"] // 10, r["attribution_ns"]
        assert r["unseen_wakers"]["count"] == 1
    ratio = large / small
    # 4x the records: 4x the work, within a margin for the fixed costs; a quadratic
    # engine gives about 16x.
    assert 3.0 < ratio < 4.8, (small, large, ratio)
    print(f"work: {small} -> {large} elements, x{ratio:.2f}")


@pytest.mark.parametrize("cycles", [50])
def test_the_shape_has_every_kind_of_wait(tmp_path, cycles):
    r = tb.run(_trace(tmp_path / "s.iowt", cycles))
    att = {k: v for k, v in r["thread_time"]["attribution_ns"].items() if v}
    assert {"cpu", "log", "data", "wait-other"} <= set(att), att
    # The commit (102 waits on the journal thread) is served by its CPU and its flush.
    assert {"helper-cpu", "flush"} <= set(r["thread_time"]["attribution_detail_ns"]["log"])


def test_outputs_do_not_depend_on_the_batch_sizes(tmp_path, monkeypatch):
    """The engine's batches (threads, pieces, leaves and intervals taken a few at a time to
    bound memory) change nothing: the golden causal traces give their golden outputs
    with every batch a handful of elements, so that every batch boundary is crossed."""
    import test_golden
    import golden_traces as gt
    for mod, name, n in ((wakeups, "LAYOUT_CHUNK", 5), (wakeups, "LINK_CHUNK", 3),
                         (causal, "THREAD_BATCH", 17), (causal, "CONTINUE_BATCH", 11),
                         (causal, "ELAPSED_BATCH", 13)):
        monkeypatch.setattr(mod, name, n)
    names = ["causal_mix", "causal_stack"]
    gt.build(tmp_path, names)
    monkeypatch.chdir(tmp_path)
    for name in names:
        test_golden.check(name, test_golden.outputs(name))
