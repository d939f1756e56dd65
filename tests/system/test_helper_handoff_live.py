"""Helper threads are recorded from the moment a workload thread hands them work:
sqlite3 committing 300 transactions on ext4 waits on jbd2's commits after waking jbd2,
and jbd2's wait for a CPU and its work from that waking on are in the trace, so the
attribution leaves no "(not recorded)" stretch of jbd2 in the waits it ends."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import run
from iowhy.analysis import analyze
from iowhy.traceformat import read_trace

pytestmark = pytest.mark.bpf

SQL = "create table t(a, b);\n" + "".join(
    f"insert into t values({i}, randomblob(200));\n" for i in range(300))


def test_jbd2_is_recorded_from_the_handoff(bpf, make_fs, tmp_path, iowhy_bin):
    lp, mnt = make_fs("ext4", size_mib=256)
    out = tmp_path / "sqlite.iowt"
    sql = tmp_path / "ins.sql"
    sql.write_text(SQL)
    run([*iowhy_bin, "record", "-q", "-o", str(out), "--dev", lp.dev, "--",
         "sqlite3", str(mnt / "db.sqlite"), f".read {sql}"])
    tr = read_trace(str(out))
    off = tr.records("offcpu")
    by_jbd2 = np.array([bytes(c).startswith(b"jbd2/") for c in off["waker_comm"]], bool)
    assert by_jbd2.sum() >= 100, int(by_jbd2.sum())  # the premise: jbd2 ended the fsyncs
    r = analyze(tr)
    el = r["elapsed_ns"]
    nr = (r.get("wait_other_by_waker_ns") or {}).get("(not recorded)", 0)
    assert nr < 0.01 * el, (nr, el, r["attribution_ns"])
