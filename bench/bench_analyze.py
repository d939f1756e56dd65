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

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests"))  # the generator is the tests' (synthtrace)
from synthtrace import write_synth  # noqa: E402

TARGET_RATE = 5_000_000
TARGET_BYTES = 200


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
            write_synth(path, n)
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
