"""fsync_view on shapes that once crashed it."""

from __future__ import annotations

import golden_traces as gt
from iowhy.analysis import analyze
from iowhy.cli import main
from iowhy.traceformat import read_trace


def test_ext4_calls_without_commit_while_xfs_logs(tmp_path, capsys):
    # Five fdatasyncs [t, t + 20) on ext4 (t = 1010, 1040, ..., 1130), each with its own
    # data write (submitted t + 1, done t + 12) and no jbd2 commit in the trace; the
    # journal holds only an XFS log on another disk. Each call: data 11 (from submission),
    # commit 0, flush 0, other 9.
    p = tmp_path / "t.iowt"
    gt.ext4_no_commit_xfs_busy(p)
    r = analyze(read_trace(str(p)))
    fd = r["fsync"]["by_call"]["fdatasync"]
    assert fd["count"] == 5 and fd["needed_commit"] == 0
    assert fd["split_ns"] == {"data": 55, "commit": 0, "flush": 0, "other": 45}
    assert fd["latency_ns"]["p50"] == 20
    # The XFS log is not the workload's: its commits are not counted.
    assert r["commits"]["count"] == 0
    for argv in (["report", str(p)], ["report", "--json", str(p)],
                 ["compare", str(p), str(p)]):
        assert main(argv) == 0
    capsys.readouterr()
