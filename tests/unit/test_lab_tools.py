"""The lab's tools without a disk: `iowhy lab list` and `lab run`'s argument check,
lab/workloads.py's command list, and lab/validate.py on synthetic truth whose figures
are known by construction."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import numpy as np

from conftest import REPO
from iowhy.lab import emudisk, scenarios, validate


# -- the command (in-process: other tests run the CLI as a process) ------------------------

def _main(argv: list[str], capsys: Any) -> tuple[int, str, str]:
    """`iowhy ARGV` in-process: (exit status, stdout, stderr); argparse's exit too."""
    from iowhy.cli import main
    try:
        rc = main(argv)
    except SystemExit as e:
        rc = e.code if isinstance(e.code, int) else 1
    out, err = capsys.readouterr()
    return rc, out, err


def test_lab_list_names_every_scenario(capsys):
    rc, out, _ = _main(["lab", "list"], capsys)
    assert rc == 0
    names = [ln.split()[0] for ln in out.splitlines()[1:] if ln.strip()]  # header
    assert names == list(scenarios.SCENARIOS)
    for required in ("tar", "fsync-tar", "rmtree", "fsync-tasks-1", "fsync-tasks-8",
                     "fsync-tasks-32", "sqlite-full", "sqlite-off", "fio-seq", "fio-rand",
                     "wc-barrier", "wc-nobarrier", "wc-off"):
        assert required in names
    desc = scenarios.SCENARIOS["wc-nobarrier"].description
    assert "write through" in desc and "nobarrier" in desc


def test_lab_run_refuses_unknown_scenario(capsys):
    rc, _, err = _main(["lab", "run", "no-such-scenario"], capsys)
    assert rc == 2
    assert "unknown scenario" in err


def test_lab_run_without_the_emulated_disk_is_one_line(tmp_path, monkeypatch, capsys):
    """A checkout where the emulated disk was never built: one line naming the make
    target (it was an EmulatedDiskError traceback), before root is asked for."""
    monkeypatch.setenv("IOWHY_EMUDISK", str(tmp_path / "no-emudisk"))
    rc, _, err = _main(["lab", "run", "tar", "--out", str(tmp_path / "out")], capsys)
    assert rc == 1, err
    assert err == ("iowhy: the emulated disk (lab/emudisk) is not built (run `make "
                   "emudisk` in the iowhy checkout, which installs libfuse3-dev, or "
                   "`make install`; IOWHY_EMUDISK may name the binary)\n")
    assert not (tmp_path / "out").exists()


# -- validate.py on synthetic truth ---------------------------------------------------------

def _truth(rows):
    t = np.zeros(len(rows), emudisk.TRUTH_DTYPE)
    for i, row in enumerate(rows):
        for k, v in row.items():
            t[i][k] = v
    return t


def test_union_ns():
    s = np.array([0, 5, 20, 21, 40], np.int64)
    e = np.array([10, 12, 25, 22, 40], np.int64)
    assert validate.union_ns(s, e) == 12 + 5
    assert validate.union_ns(np.zeros(0, np.int64), np.zeros(0, np.int64)) == 0


def test_truth_figures_clip_to_the_window_and_classify_by_log_range():
    W, R, F = emudisk.KIND_WRITE, emudisk.KIND_READ, emudisk.KIND_FLUSH
    t = _truth([
        # before the window: left out entirely
        {"kind": F, "start_ns": 0, "end_ns": 50},
        # first read in the window: its seek started from an unseen head position
        {"kind": R, "start_ns": 100, "end_ns": 120, "offset_bytes": 0, "positioning_ns": 15},
        {"kind": W, "start_ns": 130, "end_ns": 150, "offset_bytes": 512 * 1000,
         "len_bytes": 4096, "positioning_ns": 10},
        # a log write (sector 2000 inside [2000, 3000))
        {"kind": W, "start_ns": 150, "end_ns": 160, "offset_bytes": 512 * 2000,
         "len_bytes": 4096},
        {"kind": F, "start_ns": 170, "end_ns": 200, "destage_positioning_ns": 25},
        {"kind": emudisk.KIND_MARK, "start_ns": 180, "end_ns": 180},
        # cut by the window end at 210: counted up to the end, no positioning
        {"kind": W, "start_ns": 205, "end_ns": 230, "offset_bytes": 0, "positioning_ns": 20},
    ])
    f = validate.truth_figures(t, 90, 210, [(2000, 3000)])
    assert f["device_busy"] == 20 + 20 + 10 + 30 + 5
    assert f["barrier"] == 30
    assert f["log"] == 10
    assert f["positioning"] == 10         # flush destage and the two edge requests excluded
    assert f["flushes"] == 1 and f["log_writes"] == 1


def test_compare_marks_btrfs_log_not_comparable_with_fsync_calls():
    report = {"elapsed_ns": 1000, "trace": {"start_ns": 0, "end_ns": 1000},
              "devices": [{"major": 7, "minor": 3, "busy_ns": 100,
                           "busy_by_category_ns": {"log": 40},
                           "flush": {"total_ns": 50, "count": 1}}],
              "placement": {}, "fsync": {"by_call": {"fsync": {"count": 3}}}}
    meta = {"filesystems": [{"disk": "loop3", "fstype": "btrfs",
                             "log": {"ranges": [[128, 136]]}}]}
    t = _truth([{"kind": emudisk.KIND_FLUSH, "start_ns": 10, "end_ns": 60}])
    entries = {e["figure"]: e for e in validate.compare(report, t, meta, "loop3", 7, 3)}
    assert entries["log"]["comparable"] is False and entries["log"]["ok"] is None
    assert entries["barrier"]["truth_ns"] == 50 and entries["barrier"]["ok"]
    report["fsync"]["by_call"] = {"syncfs": {"count": 1}}
    entries = {e["figure"]: e for e in validate.compare(report, t, meta, "loop3", 7, 3)}
    assert entries["log"]["comparable"] is True


def test_compare_judges_a_lower_bound_positioning_as_one():
    W = emudisk.KIND_WRITE
    t = _truth([{"kind": W, "start_ns": 100 + 100 * i, "end_ns": 190 + 100 * i,
                 "offset_bytes": 512 * 1000 * (i + 1), "len_bytes": 4096,
                 "positioning_ns": 80} for i in range(5)])
    # truth: 4 x 80 = 320 (the first request's seek started from an unseen position)
    place = {"data": {"positioning_ns": 100, "baseline_requests": {
        "zero-seek bucket": 0, "device fit": 0, "fastest decile": 5}}}
    report = {"elapsed_ns": 1000, "trace": {"start_ns": 0, "end_ns": 1000},
              "devices": [{"major": 7, "minor": 1, "busy_ns": 450,
                           "busy_by_category_ns": {"log": 0},
                           "flush": {"total_ns": 0, "count": 0}}],
              "placement": place, "fsync": {}}

    def pos() -> dict:
        return {e["figure"]: e for e in validate.compare(report, t, {}, "loop1", 7, 1)
                }["positioning"]
    # 100 of 320: far off as an estimate, right as the lower bound iowhy says it is
    e = pos()
    assert e["truth_ns"] == 320 and e["bound"] == "lower" and e["ok"] is True
    place["data"]["positioning_ns"] = 400  # a "lower bound" above the truth + 20%: wrong
    assert pos()["ok"] is False
    place["data"]["positioning_ns"] = 0    # nothing found while the truth is 40% of elapsed
    assert pos()["ok"] is False
    # the same 100 from a zero-seek baseline is an estimate, and 69% off
    place["data"]["positioning_ns"] = 100
    place["data"]["baseline_requests"] = {"zero-seek bucket": 5, "device fit": 0,
                                          "fastest decile": 0}
    e = pos()
    assert "bound" not in e and e["ok"] is False


def test_emulation_latency_separates_queueing_from_the_emulation_delay():
    from iowhy import abi
    W, F = emudisk.KIND_WRITE, emudisk.KIND_FLUSH
    # the disk served A [100, 200), then B [200, 300) (B waited behind A), then a flush
    t = _truth([{"kind": W, "start_ns": 100, "end_ns": 200, "offset_bytes": 0, "len_bytes": 512},
                {"kind": W, "start_ns": 200, "end_ns": 300, "offset_bytes": 512,
                 "len_bytes": 512},
                {"kind": F, "start_ns": 400, "end_ns": 450}])
    r = np.zeros(3, abi.REQUEST_DTYPE)
    for i, (op, sec, ln, issue, done) in enumerate([(1, 0, 512, 90, 210), (1, 1, 512, 95, 310),
                                                    (2, 0, 0, 380, 470)]):
        r[i]["op"], r[i]["start_sector"], r[i]["len_bytes"] = op, sec, ln
        r[i]["issue_ns"], r[i]["data_done_ns"], r[i]["done_ns"] = issue, done, done
        r[i]["dev_major"], r[i]["dev_minor"] = 7, 1
    em = validate.emulation_latency(t, r, 0, 1000, 7, 1)
    # A: 10 before + 10 after; B: queued behind A (not a delay) + 10 after; F: 20 + 20
    assert em["matched"] == 3
    assert em["total_ns"] == 20 + 10 + 40
    assert em["median_ns"] == 20 and em["jitter_ns"] == 20
    assert validate.request_counts(t, r, 0, 1000, 7, 1)["trace"] == \
        validate.request_counts(t, r, 0, 1000, 7, 1)["truth"]
    # every served operation has its request (the window is too short to judge any here)
    assert validate.missing_requests(t, r, 0, 1000, 7, 1) == 0
    assert validate.missing_requests(t, r, 0, 1000, 7, 1, edge_ns=0) == 0
    assert validate.missing_requests(t, r[:0], 0, 1000, 7, 1, edge_ns=0) == 3
    assert validate.missing_requests(t, r[1:], 0, 1000, 7, 1, edge_ns=0) == 1


def test_compare_does_not_judge_a_figure_the_emulation_jitter_swamps():
    report = {"elapsed_ns": 1000, "trace": {"start_ns": 0, "end_ns": 1000},
              "devices": [], "placement": {}, "fsync": {}}
    entries = validate.compare(report, _truth([]), {}, "loop1", 7, 1, jitter_ns=30)
    by = {e["figure"]: e for e in entries}
    assert by["positioning"]["comparable"] is False          # allowed: 1% of 1000 = 10
    assert by["barrier"]["comparable"] is True               # allowed: 5% of 1000 = 50


def test_workloads_lists_the_lab_workloads():
    p = subprocess.run([sys.executable, str(REPO / "lab" / "workloads.py"), "--help"],
                       capture_output=True, text=True, check=True)
    for name in ("untar", "untar-fsync", "untar-eatmydata", "rmtree", "fsync-tasks", "sqlite",
                 "fio-seq", "fio-rand"):
        assert name in p.stdout
