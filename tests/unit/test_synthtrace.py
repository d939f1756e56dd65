"""The synthetic traces of tests/synthtrace.py: recorded_mix draws the record mix it is
given (measured back with measure_mix, as the benchmark prints it for recorded traces),
its wakeup links name real requests, and causal_mix is deterministic and analyzable."""

from __future__ import annotations

import numpy as np

import synthtrace as st
import tracebuilder as tb
from iowhy import abi
from iowhy.traceformat import read_trace


def test_recorded_mix_has_the_busy_recordings_mix(tmp_path):
    path = st.write_recorded_mix(str(tmp_path / "m.iowt"), 100_000, seed=2)
    tr = read_trace(path)
    assert not tr.damage.damaged
    got = st.measure_mix(tr)
    m = st.BUSY_MIX
    assert abs(got["records"] - 100_000) < 100
    for name in ("request", "offcpu", "helper", "fsync", "journal"):
        assert abs(got["share"][name] - getattr(m, name)) < 0.002, name
    assert got["threads"] == m.threads and got["helpers"] == m.helpers
    for kind, pre, woken in (("offcpu", m.off_preempt, m.off_woken),
                             ("helper", m.hel_preempt, m.hel_woken)):
        g = got[kind]
        assert abs(g["preempt"] - pre) < 0.01, kind
        for i, w in enumerate(st.WOKEN):
            assert abs(g["woken"][w] - woken[i]) < 0.01, (kind, w)
    assert abs(got["offcpu"]["sleep-syscall"] - m.poll) < 0.001
    assert abs(got["rq_devices"]["loop1"] - m.rq_fs_dev) < 0.01


def test_links_name_requests_completed_before_the_wakeup(tmp_path):
    d = st.recorded_mix(50_000, seed=3)
    rq = d["request"]
    done = dict(zip(rq["seq"].tolist(), rq["done_ns"].tolist()))
    assert len(done) == len(rq)  # numbers are unique
    for name in ("offcpu", "helper"):
        o = d[name]
        linked = o[(o["flags_u16"] & abi.OFF_WAKER_RQ) != 0]
        assert len(linked)
        at = np.array([done[s] for s in linked["waker_rq_seq"].tolist()])
        assert (at <= linked["waking_ns"]).all() and (at > linked["start_ns"]).all()
    for name in ("offcpu", "helper"):  # each actor's intervals follow one another
        o = d[name][np.lexsort((d[name]["start_ns"], d[name]["tid"]))]
        same = o["tid"][1:] == o["tid"][:-1]
        assert (o["start_ns"][1:][same] > o["end_ns"][:-1][same]).all()
    fs, off = d["fsync"], d["offcpu"]
    assert (fs["enter_ns"] < fs["exit_ns"]).all()
    assert d["start_ns"] < off["start_ns"].min() and off["end_ns"].max() < d["end_ns"]


def test_causal_mix_is_deterministic_and_sums_to_the_elapsed_time(tmp_path):
    a = st.causal_mix(str(tmp_path / "a.iowt"))
    b = st.causal_mix(str(tmp_path / "b.iowt"))
    assert open(a, "rb").read() == open(b, "rb").read()
    c = st.causal_mix(str(tmp_path / "c.iowt"), seed=2)
    assert open(a, "rb").read() != open(c, "rb").read()
    r = tb.run(a)
    tb.assert_sums(r)
    att = r["attribution_ns"]
    assert set(att) == set(tb.CAUSAL_CATS)  # a causal trace: wakeup links followed
    assert att["cpu"] > 0 and att["data"] + att["barrier"] + att["log"] > 0


def test_no_test_imports_bench():
    """bench/ may import the tests' builders (synthtrace.py); no test imports bench/."""
    import ast
    from pathlib import Path

    tests = Path(__file__).resolve().parents[1]
    bench = {p.stem for p in (tests.parent / "bench").glob("*.py")} | {"bench"}
    found = []
    for f in sorted(tests.rglob("*.py")):
        text = f.read_text()
        if not any(b in text for b in bench):  # an import names its module: no need to parse
            continue
        for node in ast.walk(ast.parse(text, str(f))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            found += [f"{f.relative_to(tests)}: {n}" for n in names
                      if n.split(".")[0] in bench]
    assert not found, found
