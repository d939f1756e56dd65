#!/usr/bin/env python3
"""Benchmark `iowhy.analysis.analyze` on a synthetic trace (printed, not asserted).

Builds an N-request trace (default 10 million) with the same TraceWriter the tests use,
vectorised, in a temporary directory, then analyzes it in a fresh subprocess twice:
once for time (requests/s), once under tracemalloc for the peak of Python/numpy
allocations, while a sampler thread follows RSS (anonymous and file-backed: the trace
is memory-mapped, so its touched pages count as RssFile, not as allocations).

Targets: >= 5 million requests/s, < 200 bytes of peak memory per
request, for the analysis without plots.

    python bench/bench_analyze.py                 # 10M requests
    python bench/bench_analyze.py --requests 1e6  # smaller run
    python bench/bench_analyze.py --keep /tmp/x.iowt
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

import numpy as np

TARGET_RATE = 5_000_000
TARGET_BYTES = 200
NTID = 8
DEV_A, DEV_B, PART_A = (8, 0), (8, 16), (8, 1)
LOG = (2_000_000, 2_262_144)  # 128 MiB journal, whole-disk sectors


def synth(n: int, seed: int = 1) -> dict[str, np.ndarray]:
    """Arrays of every record type for an fsync-heavy ext4-like workload on two disks."""
    from iowhy import abi
    rng = np.random.default_rng(seed)
    w0 = 1_000_000_000
    kinds = rng.choice(7, size=n, p=[0.55, 0.10, 0.15, 0.06, 0.02, 0.08, 0.04])
    # 0 data, 1 metadata, 2 log, 3 FF flush, 4 empty preflush, 5 read, 6 readahead
    gap = (rng.exponential(40_000, n) + 2_000).astype(np.int64)
    issue = w0 + 1_000_000 + np.cumsum(gap)
    dev_t = rng.lognormal(np.log(120_000), 0.7, n).astype(np.int64) + 5_000
    dev_t[kinds == 3] = rng.lognormal(np.log(2_000_000), 0.4, int((kinds == 3).sum()))
    done = issue + dev_t
    r = np.zeros(n, dtype=abi.REQUEST_DTYPE)
    nbytes = (4096 << rng.integers(0, 7, n)).astype(np.uint32)
    nbytes[(kinds == 1)] = 4096
    nbytes[(kinds == 3) | (kinds == 4)] = 0
    sect = (nbytes.astype(np.int64) + 511) >> 9
    # data: sequential streams with occasional jumps; metadata random; log sequential.
    jump = rng.random(n) < 0.05
    seq_pos = np.cumsum(np.where(jump, rng.integers(0, 1 << 20, n), sect))
    sector = np.where(kinds == 1, rng.integers(0, 1 << 30, n), (seq_pos % (1 << 30)) + (1 << 22))
    sector = np.where(kinds == 2, LOG[0] + (np.cumsum(np.where(kinds == 2, sect, 0))
                                            % (LOG[1] - LOG[0] - 128)), sector)
    sector[(kinds == 3) | (kinds == 4)] = 0
    op = np.full(n, abi.OP_WRITE, np.uint8)
    op[kinds == 3] = abi.OP_FLUSH
    op[kinds >= 5] = abi.OP_READ
    iflags = np.zeros(n, np.uint16)
    iflags[kinds == 1] = abi.F_META
    iflags[kinds == 2] = abi.F_META | abi.F_SYNC
    iflags[kinds == 4] = abi.F_PREFLUSH | abi.F_SYNC
    iflags[kinds == 6] = abi.F_RAHEAD
    flushseq = (kinds == 3) | (kinds == 4) | ((kinds == 2) & (rng.random(n) < 0.1))
    flags = np.where((kinds == 0) | (kinds >= 4), abi.RQ_TRACKED, 0).astype(np.uint16)
    flags[flushseq] |= abi.RQ_FLUSH_SEQ
    submit = issue - rng.integers(1_000, 60_000, n)
    insert = np.where(rng.random(n) < 0.5, submit + 500, 0)
    data_done = np.where(flushseq & (kinds == 2), issue + dev_t // 2, done)
    empty = kinds == 4
    issue = np.where(empty, 0, issue)
    insert = np.where(empty, 0, insert)
    flags[empty] |= abi.RQ_NO_ISSUE
    devb = rng.random(n) < 0.1
    r["start_sector"] = sector
    r["submit_ns"] = submit
    r["insert_ns"] = insert
    r["issue_ns"] = issue
    r["data_done_ns"] = data_done
    r["done_ns"] = done
    r["ts_ns"] = done
    r["len_bytes"] = nbytes
    r["done_bytes"] = nbytes
    r["dev_major"] = 8
    r["dev_minor"] = np.where(devb & (kinds >= 5), DEV_B[1], DEV_A[1])
    r["tid"] = 1000 + rng.integers(0, NTID, n)
    r["tgid"] = 1000
    r["op"] = op
    r["iflags"] = iflags
    r["flags_u16"] = flags
    r["seq"] = np.arange(n)
    r = r[np.argsort(done, kind="stable")]  # the recorder writes requests when done
    end = int(done.max()) + 1_000_000
    elapsed = end - w0
    # fsync calls: per thread back to back, 5 calls per jbd2 commit.
    nf = max(n // 20, NTID)
    j = np.arange(nf)
    period = elapsed // (nf // NTID + 1)
    f = np.zeros(nf, dtype=abi.FSYNC_DTYPE)
    f["tid"] = 1000 + j % NTID
    f["tgid"] = 1000
    f["enter_ns"] = w0 + (j // NTID) * period + (j % NTID) * (period // (2 * NTID))
    f["exit_ns"] = f["enter_ns"] + period // 3
    f["ts_ns"] = f["exit_ns"]
    f["call_u16"] = np.where(j % 4 == 0, abi.CALL_FDATASYNC, abi.CALL_FSYNC)
    f["fs_u16"] = abi.FS_EXT4
    f["flags_u16"] = abi.FS_F_FSEVENT | abi.FS_F_SEQ
    f["commit_seq"] = 1 + j // 5
    f["dev_major"], f["dev_minor"] = PART_A
    ncom = int(f["commit_seq"].max())
    cs = np.arange(1, ncom + 1)
    t0 = w0 + ((cs - 1) * 5 // NTID) * period + period // 8
    jr = np.zeros(5 * ncom, dtype=abi.JOURNAL_DTYPE)
    for k, (ev, dt) in enumerate(((abi.J_JBD2_START, 0), (abi.J_JBD2_LOCKING, period // 64),
                                  (abi.J_JBD2_FLUSHING, period // 32),
                                  (abi.J_JBD2_LOGGING, period // 16),
                                  (abi.J_JBD2_END, period // 6))):
        jr["event_u16"][k::5] = ev
        jr["seq"][k::5] = cs
        jr["ts_ns"][k::5] = t0 + dt
    jr["dev_major"], jr["dev_minor"] = PART_A
    jr["fs_u16"] = abi.FS_EXT4
    jr["tid"] = 77
    # off-CPU: each fsync blocks most of its duration; plus preemptions.
    no = 2 * nf
    o = np.zeros(no, dtype=abi.OFFCPU_DTYPE)
    o["tid"][:nf] = f["tid"]
    o["start_ns"][:nf] = f["enter_ns"] + period // 50
    o["waking_ns"][:nf] = f["exit_ns"] - period // 100
    o["end_ns"][:nf] = f["exit_ns"] - period // 200
    o["syscall_nr"][:nf] = 74
    o["tid"][nf:] = f["tid"]
    o["start_ns"][nf:] = f["exit_ns"] + period // 10
    o["end_ns"][nf:] = f["exit_ns"] + period // 8
    o["waking_ns"][nf:] = 0
    o["syscall_nr"][nf:] = 1
    o["flags_u16"][nf:] = abi.OFF_PREEMPT
    o = o[np.argsort(o["end_ns"], kind="stable")]
    o["ts_ns"] = o["end_ns"]
    t = np.zeros(NTID, dtype=abi.TASK_DTYPE)
    t["tid"] = 1000 + np.arange(NTID)
    t["tgid"] = 1000
    t["ts_ns"] = w0
    t["event_u16"] = abi.TASK_ROOT
    return {"request": r, "fsync": f, "journal": jr, "offcpu": o, "task": t,
            "start_ns": np.int64(w0), "end_ns": np.int64(end)}


def write(path: str, n: int) -> None:
    from iowhy import abi
    from iowhy.tracewriter import TraceWriter
    d = synth(n)
    meta = {
        "devices": [{"name": "sdb", "major": DEV_A[0], "minor": DEV_A[1], "rotational": 1,
                     "write_cache": "write back", "fua": 0, "size_bytes": 1 << 40},
                    {"name": "sdc", "major": DEV_B[0], "minor": DEV_B[1], "rotational": 0,
                     "write_cache": "write through", "fua": 1, "size_bytes": 1 << 40}],
        "filesystems": [{"fstype": "ext4", "source": "/dev/sdb1", "mountpoint": "/mnt/bench",
                         "dev_major": PART_A[0], "dev_minor": PART_A[1],
                         "st_dev_major": PART_A[0], "st_dev_minor": PART_A[1], "disk": "sdb",
                         "disk_major": DEV_A[0], "disk_minor": DEV_A[1],
                         "part_start_sector": 2048,
                         "log": {"kind": "jbd2", "ranges": [list(LOG)], "fc_ranges": []}}],
    }
    w = TraceWriter(path)
    w.write_json(abi.CHUNK_META, meta)
    w.write_json(abi.CHUNK_RECORDER, {"start_ns": int(d["start_ns"]),
                                      "command": ["synthetic", str(n)], "pid": 1000})
    for name in ("task", "fsync", "journal", "offcpu", "request"):
        arr = d.pop(name)
        w.write_records(arr)
        del arr
    w.close({"end_ns": int(d["end_ns"]), "stop_reason": "synthetic"})


def _status() -> dict[str, int]:
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "RssAnon", "RssFile", "VmHWM"):
                out[k] = int(v.split()[0]) * 1024
    return out


def analyze_child(path: str, mode: str, threads: int) -> dict[str, Any]:
    """Runs in a fresh process: returns timing or memory figures as JSON."""
    import tracemalloc

    from iowhy.analysis import AnalysisConfig, analyze
    from iowhy.memory import tune_allocator
    from iowhy.traceformat import read_trace
    tune_allocator()  # as `iowhy report` does
    tr = read_trace(path)
    n = tr.count("request")
    base = _status()
    peak = {"RssAnon": base["RssAnon"], "VmRSS": base["VmRSS"]}
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            s = _status()
            for k in peak:
                peak[k] = max(peak[k], s[k])
            time.sleep(0.005)

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    if mode == "mem":
        tracemalloc.start()
    t0 = time.perf_counter()
    res = analyze(tr, AnalysisConfig(timings=(mode == "time"), threads=threads))
    dt = time.perf_counter() - t0
    traced = tracemalloc.get_traced_memory()[1] if mode == "mem" else 0
    stop.set()
    th.join()
    return {"requests": n, "seconds": dt, "tracemalloc_peak": traced,
            "phases": res.get("_timings_s", {}), "load": os.getloadavg()[0],
            "anon_peak": peak["RssAnon"] - base["RssAnon"],
            "rss_peak": peak["VmRSS"] - base["VmRSS"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=float, default=10e6,
                    help="requests in the synthetic trace (default: 1e7)")
    ap.add_argument("--keep", metavar="PATH", help="write the trace here and keep it")
    ap.add_argument("--trace", metavar="PATH", help="analyze an existing trace instead")
    ap.add_argument("--threads", type=int, default=2,
                    help="AnalysisConfig.threads: 2 loads the requests and runs the analysis "
                         "tasks two at a time "
                         "(default: %(default)s)")
    ap.add_argument("--child", choices=("time", "mem"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(analyze_child(args.trace, args.child, args.threads)))
        return 0
    n = int(args.requests)
    tmp = None
    path = args.trace or args.keep
    if path is None:
        tmp = tempfile.TemporaryDirectory(prefix="iowhy-bench-")
        path = os.path.join(tmp.name, "bench.iowt")
    try:
        if not args.trace:
            t0 = time.perf_counter()
            write(path, n)
            print(f"wrote {n:,} requests to {path} ({os.path.getsize(path) / 2**20:,.0f} MiB) "
                  f"in {time.perf_counter() - t0:.1f} s")
        res = {}
        for mode in ("time", "mem"):
            out = subprocess.run([sys.executable, __file__, "--trace", path, "--child", mode,
                                  "--threads", str(args.threads)],
                                 check=True, capture_output=True, text=True).stdout
            res[mode] = json.loads(out.strip().splitlines()[-1])
        nreq = res["time"]["requests"]
        rate = nreq / res["time"]["seconds"]
        m = res["mem"]
        tm = m["tracemalloc_peak"] / nreq
        anon = res["time"]["anon_peak"] / nreq
        rss = res["time"]["rss_peak"] / nreq
        print(f"analyze(): {nreq:,} requests in {res['time']['seconds']:.2f} s = "
              f"{rate / 1e6:.2f} M requests/s (target {TARGET_RATE / 1e6:.0f} M/s: "
              f"{rate / TARGET_RATE:.2f}x)")
        print(f"peak memory per request: tracemalloc {tm:.0f} B, RSS anon {anon:.0f} B, "
              f"RSS {rss:.0f} B (growth after read_trace, which maps the file and touches "
              f"it for its CRCs) (target < {TARGET_BYTES} B: "
              f"tracemalloc {tm / TARGET_BYTES:.2f}x, anon {anon / TARGET_BYTES:.2f}x, "
              f"total {rss / TARGET_BYTES:.2f}x)")
        print(f"(under tracemalloc the analysis took {m['seconds']:.2f} s; 1-min load average "
              f"during the timed run: {res['time']['load']:.2f} on {os.cpu_count()} CPUs)")
        print("seconds per phase (the tasks after 'load records' run two at a time, "
              "so their sum exceeds the elapsed time):")
        for k, v in res["time"]["phases"].items():
            print(f"  {k:<28}{v:8.3f}")
    finally:
        if tmp is not None:
            tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
