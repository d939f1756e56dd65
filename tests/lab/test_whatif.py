"""`iowhy whatif` against the lab's ground truth: a recording's prediction is compared
with the elapsed time of the same scenario run for real with the changed storage.

* wc-barrier (cache on, barriers) on the emulated hdd-7200, predicted --nobarrier and
  --write-cache off, against wc-nobarrier and wc-off run for real;
* fsync-tar on hdd-7200, predicted --disk ssd, against fsync-tar on the emulated ssd;

on XFS, ext4 and btrfs: each prediction within 25% of the measured elapsed time. The
runs are the session's (tests/conftest.py lab_runs: each scenario recorded once, shared
with tests/lab/test_lab.py). This machine is shared: a run's elapsed time moves with
the load beside it (the recorded CPU bursts and run-queue waits, which the replay keeps,
with it). When a prediction misses, the scenario is recorded and run again, up to
ATTEMPTS times in all, and the medians of the predictions and of the real runs are
compared (every figure, with the load averages and each run's waits for a CPU on
its critical path, is in the message).

The Python disk model is also checked against each run's ground truth, request by
request, and the profile fitted from a recording of the emulated hdd-7200 against its
parameters.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
from pathlib import Path

import pytest

from iowhy.lab import emudisk, scenarios
from iowhy.traceformat import read_trace
from iowhy.whatif import disk
from iowhy.whatif.predict import Scenario, fit_profile, predict

TOLERANCE = 0.25
# Known misses, measured on this machine (docs/whatif.md, "Where it is weakest"); they
# run and report (XFAIL, or XPASS when a run lands within the tolerance) while the
# model does not hold them to 25%:
KNOWN_MISS = {
    ("ssd", "btrfs"): "fsync-tar on btrfs predicted on the ssd: +8% at load 4.3 (949 vs "
                      "875 ms) and +40% at load 2.7 (948 vs 678 ms), +55 to +64% at load "
                      "7-13 without the bound on helpers' waits for a CPU: the workload's "
                      "CPU as on the hdd (181 vs 97 ms) and the log; each request's path as on "
                      "the hdd (186 vs 132 us; with the ssd run's, +33% -> +9%: "
                      "docs/whatif.md, \"The path on another disk\")",
    ("ssd", "ext4"): "fsync-tar on ext4 predicted on the ssd: +39% at load 4.8 (854 vs 614 "
                     "ms), +18% at load 3 (690 vs 587 ms), +36% at load 3.8 (1485 vs 1093 "
                     "ms: the workload waited 629 ms for a CPU in the recording, 176 ms in "
                     "the real run). The workload's CPU really is longer on the hdd (the "
                     "kernel counted 121-127 ms, 61-84 ms on the ssd: the same work on a CPU "
                     "gone cold in the hdd's 33 ms waits) and the recording has no sample of "
                     "it after a short wait; with its bursts cut to the ssd's, still +18% "
                     "(the workload's and the helpers' waits for a CPU as on the hdd); each "
                     "request's path as on the hdd (201 vs 141 us; with the ssd run's, "
                     "+19% -> +12%: docs/whatif.md, \"The path on another disk\")",
    ("ssd", "xfs"): "fsync-tar on xfs predicted on the ssd: +39% at load 4.9 (731 vs 526 ms), "
                    "+25% at load 3 (644 vs 516 ms); +26 to +31% at load 1.5-1.8 (640-648 "
                    "ms predicted, 489-532 ms real) without the bound on helpers' waits for "
                    "a CPU: the cold CPU as on ext4 (163 ms kept from the hdd, 80 ms in the "
                    "real run; the kernel counted 146 ms on the hdd, 70-74 ms on the ssd) "
                    "and the recording's waits for a CPU; each request's path as on the hdd "
                    "(178 vs 123 us; with the ssd run's, +18% -> +10%: docs/whatif.md, "
                    "\"The path on another disk\")",
    ("cache-off", "ext4"): "wc-barrier on ext4 predicted --write-cache off: 0.71-0.79 s "
                           "predicted, 0.84 and 0.96 s real in 2 runs, 2.8-3.5 s in 4 at "
                           "load 0.7-2; -26% at load 3.7 (0.80 vs 1.08 s), +11% at load 2.2 "
                           "(0.77 vs 0.69 s): ext4 places small files by the CPU its "
                           "writeback runs on, and with the cache off the writeback sleeps "
                           "~750 times and may wake on the other CPU, a seek at each move; "
                           "the recording cannot tell how often (docs/whatif.md)",
}
ATTEMPTS = 3
# The elapsed times compared here move with the machine's load (the recorded CPU bursts
# and run-queue waits with them): above this 1-minute load average the comparison says
# nothing about the model, and the test skips naming the load it measured.
MAX_LOAD = 8.0
FILESYSTEMS = ("xfs", "ext4", "btrfs")
# (recorded scenario, what if, the real scenario, its disk)
CASES = {
    "nobarrier": ("wc-barrier", Scenario(nobarrier=True), "wc-nobarrier", "hdd-7200"),
    "cache-off": ("wc-barrier", Scenario(write_cache="off"), "wc-off", "hdd-7200"),
    "ssd": ("fsync-tar", Scenario(disk="ssd"), "fsync-tar", "ssd"),
}


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def _runqueue_ms(run: dict) -> int:
    """The run's waits for a CPU on its critical path (its report): how loaded the
    machine was while it ran, which the replay keeps from the recording."""
    att = json.loads(Path(run["files"]["report_json"]).read_text())["attribution_ns"] or {}
    return round(int(att.get("runqueue", 0)) / 1e6)


def _predicted(run: dict, sc: Scenario) -> tuple[int, int]:
    r = predict(read_trace(run["files"]["trace"]), sc)
    return r["predicted_elapsed_ns"], r["baseline_elapsed_ns"]


def _again(lab_runs, name: str, fs: str, disk_: str) -> dict:
    """One more run of a scenario, beside the session's."""
    out = Path(tempfile.mkdtemp(prefix="whatif-", dir=lab_runs.out))
    return scenarios.run(name, fs, disk_, out_dir=out, workdir=lab_runs.workdir)


@pytest.mark.lab
@pytest.mark.parametrize("case,fs", [
    pytest.param(c, f, marks=pytest.mark.xfail(reason=KNOWN_MISS[c, f], strict=False))
    if (c, f) in KNOWN_MISS else (c, f) for c in CASES for f in FILESYSTEMS])
def test_prediction_is_within_25_percent_of_the_real_run(lab_runs, case, fs):
    src_name, sc, dst_name, dst_disk = CASES[case]
    tolerance = TOLERANCE
    attempts = 1 if (case, fs) in KNOWN_MISS else ATTEMPTS  # a known miss: one look
    load = float(_load().split()[0])
    if load > MAX_LOAD:
        pytest.skip(f"load average {_load()} (1, 5, 15 min) above {MAX_LOAD:g} on "
                    f"{os.cpu_count()} CPUs: elapsed times are not comparable")
    sources = [lab_runs(src_name, fs)]
    reals = [lab_runs(dst_name, fs, dst_disk)]
    preds = [_predicted(sources[0], sc)]
    lines = []
    for attempt in range(attempts):
        pred = statistics.median(p for p, _ in preds)
        real = statistics.median(r["elapsed_ns"] for r in reals)
        err = (pred - real) / real
        lines.append(
            f"attempt {attempt + 1} (load {_load()}): recorded "
            f"{[round(s['elapsed_ns'] / 1e6) for s in sources]} ms, replayed as recorded "
            f"{[round(b / 1e6) for _, b in preds]} ms, predicted "
            f"{[round(p / 1e6) for p, _ in preds]} ms, real "
            f"{[round(r['elapsed_ns'] / 1e6) for r in reals]} ms: median {pred / 1e6:.0f} "
            f"vs {real / 1e6:.0f} ms, {100 * err:+.1f}%; runqueue recorded "
            f"{[_runqueue_ms(s) for s in sources]} ms, real {[_runqueue_ms(r) for r in reals]} "
            "ms")
        print(lines[-1], flush=True)  # with -s, kept even if a run below fails
        if abs(err) <= tolerance or attempt == attempts - 1:
            break
        sources.append(_again(lab_runs, src_name, fs, "hdd-7200"))
        preds.append(_predicted(sources[-1], sc))
        reals.append(_again(lab_runs, dst_name, fs, dst_disk))
    detail = f"{src_name} on {fs} {sc.words()} vs {dst_name} on {dst_disk}:\n  " + \
        "\n  ".join(lines)
    assert abs(err) <= tolerance, detail


@pytest.mark.lab
@pytest.mark.parametrize("fs", FILESYSTEMS)
def test_the_python_model_charges_what_the_daemon_charged(lab_runs, fs):
    """Every request the emulated disk served during the session's runs of this file
    system, replayed through whatif/disk.py from the daemon's own stream: the same
    positioning, transfer, destage and overhead, the same head position."""
    checked = 0
    for (name, f, dsk), r in list(lab_runs.done.items()):
        if f != fs or not isinstance(r, dict) or not os.path.exists(r["files"]["truth"]):
            continue
        h = emudisk.read_truth_header(r["files"]["truth"])
        p = disk.DiskParams(h["preset"], h["rpm"], h["t2t_ns"], h["full_stroke_ns"],
                            h["media_rate"], h["iface_rate"], h["cache_bytes"], h["flush_ns"],
                            h["size_bytes"], bool(h["cache_on"]))
        d = disk.Disk(p)
        for rec in emudisk.read_truth(r["files"]["truth"]):
            k = int(rec["kind"])
            if k == emudisk.KIND_MARK:
                continue
            c = d.serve(k, int(rec["offset_bytes"]), int(rec["len_bytes"]))
            assert (c.positioning_ns, c.transfer_ns, c.destage_ns, c.overhead_ns, d.head) == (
                int(rec["positioning_ns"]), int(rec["transfer_ns"]), int(rec["destage_ns"]),
                int(rec["overhead_ns"]), int(rec["head_after"])), (name, dsk, int(rec["seq"]))
            checked += 1
    if not checked:
        pytest.skip(f"no run on {fs} in this session")
    assert checked > 100


@pytest.mark.lab
def test_a_profile_fitted_on_the_emulated_hdd_finds_its_parameters(lab_runs):
    run = lab_runs("fsync-tar", "xfs")
    prof = fit_profile(read_trace(run["files"]["trace"]))
    d = prof["disk"]
    hdd = disk.PRESETS["hdd-7200"]
    assert prof["prior"] == "hdd-7200"
    # the seek's growth with distance and the media rate are measured; the seek's
    # constant may not be (every flush destages one extent after one seek, nearly every
    # read seeks: the few requests that tell it from the paths decide nothing), and is
    # then the prior's and listed as assumed
    assert {"seek_scale_ns", "media_ns_per_byte"} <= set(prof["measured"])
    # the rotational latency is folded into the seek's constant (rpm 0)
    assert d["t2t_ns"] == pytest.approx(hdd.t2t_ns + hdd.rot_ns, rel=0.1)
    assert d["full_stroke_ns"] == pytest.approx(hdd.full_stroke_ns + hdd.rot_ns, rel=0.1)
    assert d["media_rate"] == pytest.approx(hdd.media_rate, rel=0.1)
    assert d["write_cache"] == "on" and prof["queue_depth"] == 1
