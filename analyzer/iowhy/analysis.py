"""Analysis entry point: `analyze(trace, config) -> dict`, the JSON-ready result.

Every key is documented in docs/report-json.md. Times are integer nanoseconds, sizes
bytes, shares floats in [0, 1], percentages floats in [0, 100]. Nothing here prints or
plots; the CLI (commands.py) and the renderers (iowhy.reports) do.
"""

from __future__ import annotations

import mmap
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from . import abi, names
from .attribute import (
    WORKLOAD_CATEGORIES, commits_view, dev_codes, device_unions, device_view, fsync_view,
    journal_of, latency_figures, locality, per_class, queue_depth,
    relevant_devices, request_counts, seq_key, workload_covers, workload_filesystems,
    workload_view,
)
from .classify import CLASS_NAMES, DATA, FLUSH, LOG, METADATA, classify
from .match import (
    Requests, Window, device_ns, device_stages, flush_generations, gather_columns, join_calls,
    join_pairs, stage_service,
    latency_ok, load_requests, percentiles, queue_ns, total_ns, trace_window, unique,
)

SCHEMA = "iowhy-report/1"
I64 = np.int64

FSYNC_FIELDS = ("enter_ns", "exit_ns", "tid", "tgid", "call_u16", "fs_u16", "flags_u16",
                "dev_major", "dev_minor", "commit_seq", "ret", "ino")
JOURNAL_FIELDS = ("ts_ns", "seq", "aux0", "aux1", "aux2", "dev_major", "dev_minor", "tid",
                  "event_u16", "fs_u16")
TASK_FIELDS = ("ts_ns", "tid", "tgid", "event_u16")
OFFCPU_FIELDS = ("start_ns", "waking_ns", "end_ns", "tid", "syscall_nr", "flags_u16")


@dataclass
class AnalysisConfig:
    """What to compute. Defaults give the full report."""

    locality_gap_ns: int = 10_000_000  # adjacent writes further apart than this "could have merged"
    queue_depth_buckets: int = 60  # time buckets of the per-device queue-depth series
    placement: bool = True  # seek histograms, sequential share, positioning cost
    locality: bool = True  # adjacent write pairs issued far apart
    max_findings: int = 6
    min_finding_share: float = 0.01  # findings below this share of elapsed are dropped
    threads: int = 2  # load the requests and run the analysis tasks (run_graph) this many
    #                   at a time (numpy releases the GIL); 1 runs everything in the
    #                   calling thread
    timings: bool = False  # record seconds per phase in result["_timings_s"] (benchmarks)


class _Clock:
    """Seconds per phase, when asked for (AnalysisConfig.timings)."""

    def __init__(self, on: bool) -> None:
        self.on = on
        self.spent: dict[str, float] = {}
        self.last: dict[int, float] = {}

    def start(self) -> None:
        if self.on:
            self.last[threading.get_ident()] = time.perf_counter()

    def lap(self, name: str) -> None:
        if self.on:
            now = time.perf_counter()
            me = threading.get_ident()
            self.spent[name] = self.spent.get(name, 0.0) + now - self.last.get(me, now)
            self.last[me] = now

    def add(self, name: str, seconds: float) -> None:
        if self.on:
            self.spent[name] = self.spent.get(name, 0.0) + seconds


def run_graph(graph: Sequence[tuple[str, str, tuple[str, ...], Callable[[], Any]]],
              results: dict[str, Any], threads: int, clock: _Clock,
              releases: Sequence[tuple[tuple[str, ...], Callable[[], None]]] = ()) -> None:
    """Run tasks (name, key, dependencies, function) on `threads` threads (the calling
    one and threads - 1 more): each free thread takes the first task, in list order,
    whose dependencies are done, and stores its result in results[key]. numpy releases
    the GIL in its loops, so two tasks progress side by side. The first error is
    raised once every started task has finished.

    releases: (keys, function) called once every task of `keys` is done, to drop data
    no later task needs (lower peak memory)."""
    lock = threading.Condition()
    pending = list(releases)
    started: set[str] = set()
    running = [0]
    errors: list[BaseException] = []
    keys = [g[1] for g in graph]

    def worker() -> None:
        while True:
            with lock:
                while True:
                    if errors or len(started) == len(graph):
                        return
                    task = next((g for g in graph if g[1] not in started
                                 and all(d in results for d in g[2])), None)
                    if task is not None:
                        break
                    if not running[0]:  # nothing can make a task ready any more
                        return
                    lock.wait()
                started.add(task[1])
                running[0] += 1
            name, key, _, fn = task
            t0 = time.perf_counter()
            try:
                value = fn()
            except BaseException as e:  # re-raised by the caller
                with lock:
                    errors.append(e)
                    running[0] -= 1
                    lock.notify_all()
                return
            dt = time.perf_counter() - t0
            with lock:
                results[key] = value
                del value
                running[0] -= 1
                clock.add(name, dt)
                for rel in [p for p in pending if all(k in results for k in p[0])]:
                    pending.remove(rel)
                    rel[1]()
                lock.notify_all()

    if threads > 1:
        with ThreadPoolExecutor(max_workers=threads - 1) as pool:
            futs = [pool.submit(worker) for _ in range(threads - 1)]
            worker()
            for f in futs:
                f.result()
    else:
        worker()
    if errors:
        raise errors[0]
    missing = [k for k in keys if k not in results]
    if missing:
        raise RuntimeError(f"analysis tasks never ran: {missing}")


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


def columns(trace: Any, name: str, fields: Sequence[str]) -> dict[str, np.ndarray]:
    """Fields of one record type, copied a cache-sized slice at a time."""
    dtype = abi.RECORD_TYPES[abi.RECORD_NAMES[name]][1]
    return gather_columns(trace.chunks(name), fields, dtype)


def _pct_of(part: int, whole: int) -> float:
    return round(100.0 * part / whole, 3) if whole else 0.0


def flush_wait_by_class(cls: np.ndarray, fl: Any) -> np.ndarray:
    if not len(fl.waiter_idx):
        return np.zeros(len(CLASS_NAMES), I64)
    return np.bincount(cls[fl.waiter_idx], weights=fl.waiter_flush_ns,
                       minlength=len(CLASS_NAMES)).round().astype(I64)


def _fs_summary(meta: Mapping[str, Any]) -> list[dict[str, Any]]:
    out = []
    for f in meta.get("filesystems", []) or []:
        lg = f.get("log") or {}
        ranges = list(lg.get("ranges") or []) if isinstance(lg, Mapping) else []
        out.append({
            "fstype": f.get("fstype"), "source": f.get("source"),
            "mountpoint": f.get("mountpoint"), "options": f.get("options"),
            "disk": f.get("disk"),
            "log_kind": lg.get("kind") if isinstance(lg, Mapping) else None,
            "log_bytes": int(sum(int(r[1]) - int(r[0]) for r in ranges if len(r) >= 2) * 512),
        })
    return out


def analyze(trace: Any, config: AnalysisConfig | None = None) -> dict[str, Any]:
    """Analyze a trace (traceformat.Trace); returns the report dict (docs/report-json.md)."""
    cfg = config or AnalysisConfig()
    clock = _Clock(cfg.timings)
    clock.start()
    win = trace_window(trace)
    meta = trace.meta or {}
    n = trace.count("request") if _HEAP_KEPT else 0
    prefault = prefault_heap(min(PREFAULT_BYTES * n, PREFAULT_MAX)) if n >= PREFAULT_MIN else None
    other: list[dict[str, np.ndarray]] = []

    def load_other() -> None:
        other.extend(columns(trace, name, fields) for name, fields in (
            ("fsync", FSYNC_FIELDS), ("journal", JOURNAL_FIELDS), ("task", TASK_FIELDS),
            ("offcpu", OFFCPU_FIELDS)))

    def alongside(arrays: Sequence[np.ndarray]) -> list[Callable[[], Any]]:
        # The other record types are copied beside the requests too, after the faulting
        # in (their columns are carved from the block).
        return [*(prefault(arrays) if prefault else []), load_other]
    rq = load_requests(trace, win, threads=cfg.threads, alongside=alongside)
    fs, jr, tasks, off = other
    clock.lap("load records")
    return analyze_columns(win, meta, rq, fs, jr, tasks, off, cfg, trace=trace, clock=clock)


def _join_requests_to_calls(rq: Requests, fs: Mapping[str, np.ndarray],
                            win: Window, pairs: bool = False) -> Any:
    """join_calls() of the tracked writes (or join_pairs(), with pairs=True)."""
    fl = np.asarray(fs["flags_u16"])
    ex = np.asarray(fs["exit_ns"]).astype(I64)
    exit_ = np.where((ex > 0) & ((fl & abi.FS_F_INCOMPLETE) == 0), ex, win.end_ns)
    tracked = ((rq.flags & abi.RQ_TRACKED) != 0) & (rq.op != abi.OP_READ)
    return (join_pairs if pairs else join_calls)(
        rq.tid, rq.submit, np.asarray(fs["tid"]).astype(I64),
        np.asarray(fs["enter_ns"]).astype(I64), exit_, sel=tracked)


def _call_devices(fs: Mapping[str, np.ndarray]) -> set[tuple[int, int]]:
    """Devices of the fsync-family calls: distinct (major, minor) pairs, found in numpy."""
    pairs = unique((np.asarray(fs["dev_major"]).astype(np.uint64) << np.uint64(32))
                   | np.asarray(fs["dev_minor"]).astype(np.uint64))
    return {(int(p >> 32), int(p & 0xFFFFFFFF)) for p in pairs.tolist()}


def analyze_columns(win: Window, meta: Mapping[str, Any], rq: Requests,
                    fs: Mapping[str, np.ndarray], jr: Mapping[str, np.ndarray],
                    tasks: Mapping[str, np.ndarray], off: Mapping[str, np.ndarray],
                    cfg: AnalysisConfig, trace: Any = None,
                    clock: _Clock | None = None) -> dict[str, Any]:
    elapsed = win.elapsed_ns
    clock = clock or _Clock(cfg.timings)
    clock.start()
    fs_type = np.asarray(fs["fs_u16"])
    btrfs = bool((fs_type == abi.FS_BTRFS).any())
    fsdevs = _call_devices(fs)
    r: dict[str, Any] = {}  # results by task name

    def join() -> Any:
        # The call of every request where btrfs classes need it, else (request, call)
        # pairs (the fsync view needs no more).
        return _join_requests_to_calls(rq, fs, win, pairs=not btrfs)

    def classes() -> np.ndarray:
        btrfs_sync = None
        if btrfs:
            # btrfs log writes are classified by the fsync call they were submitted in.
            call_of_req = r["join"]
            btrfs_sync = np.zeros(len(rq), bool)
            inc = call_of_req >= 0
            btrfs_sync[inc] = fs_type[call_of_req[inc]] == abi.FS_BTRFS
        return classify(rq, meta, btrfs_sync=btrfs_sync, devices=rq.devices)

    def counts() -> Any:
        rc = request_counts(rq, r["classify"])
        return rc, relevant_devices(rq, sorted(fsdevs), meta, rc)

    def stages() -> Any:
        # With the classes (when they do not wait for the join: no btrfs calls), the
        # stage pass keeps what the unions, locality and per-class figures need of them.
        return device_stages(rq, win, False, None if btrfs else r["classify"])

    def service() -> Any:
        stage_service(r["stages"])
        return True

    def qdepth() -> Any:
        # From the sorted ends of the service times (then dropped: no other task needs
        # them).
        st = r["stages"]
        qd = queue_depth(st, len(rq.devices), elapsed, cfg.queue_depth_buckets)
        st.ends_sorted = None
        return qd

    def unions() -> Any:
        return device_unions(rq, r["stages"], r["classify"])[1]

    def devview() -> Any:
        return device_view(rq, r["stages"], r["classify"], win, r["flush"], meta, r["unions"],
                           cfg.queue_depth_buckets, r["counts"][0], qd=r["queue depth"])

    def workload() -> Any:
        covers, waits = workload_covers(rq, r["stages"], r["unions"], r["flush"],
                                        r["counts"][1])
        return workload_view(win, tasks, off, covers, waits)

    def local() -> Any:
        return locality(rq, r["classify"], cfg.locality_gap_ns, r["stages"])

    def classes_view() -> Any:
        return per_class(rq, r["stages"], r["classify"], cfg.placement, r["counts"][0],
                         r["latency"], release=True)

    def fsync_commits() -> Any:
        rc, rel = r["counts"]
        fsv = fsync_view(win, fs, jr, rq, r["classify"], r["join"])
        # Commits and log bytes of the workload's filesystems and devices only.
        mine = journal_of(jr, workload_filesystems(meta, rq.devices, rel, fs))
        log_bytes = int(round(rc.dev_bytes[rel][:, LOG].sum())) if rel else 0
        return fsv, commits_view(win, mine, fsv, fs, log_bytes)

    # (name, result key, dependencies, function) in priority order: a free thread takes
    # the first task whose dependencies are done. The order is by the longest chain of
    # work left after each task (device stages, service times, per-class figures first),
    # short tasks last.
    graph: list[tuple[str, str, tuple[str, ...], Callable[[], Any]]] = [
        ("classify", "classify", ("join",) if btrfs else (), classes),
        ("device stages and seeks", "stages", () if btrfs else ("classify",), stages),
        ("service times", "service", ("stages",), service),
        ("request counts", "counts", ("classify",), counts),
        ("latency", "latency", ("classify",), lambda: latency_figures(rq, r["classify"])),
        ("join requests to calls", "join", (), join),
        ("flush generations", "flush", (), lambda: flush_generations(rq, win)),
        ("device unions", "unions", ("stages", "classify"), unions),
        ("per class and placement", "per class",
         ("service", "classify", "counts", "latency"),
         classes_view),
        ("queue depth", "queue depth", ("service",), qdepth),
        ("fsync and commits", "fsync", ("join", "classify", "counts"), fsync_commits),
        ("locality", "locality", ("stages", "classify"), local if cfg.locality else
         (lambda: None)),
        ("workload view", "workload", ("stages", "unions", "flush", "counts"), workload),
        ("device view", "devices", ("stages", "classify", "flush", "unions", "counts",
                                    "queue depth"), devview),
    ]
    if btrfs:  # the join first: classify waits for it
        graph.insert(0, graph.pop(5))

    def drop_stage_times() -> None:
        st = r["stages"]
        st.ks = st.ke = np.zeros(0, I64)
        st.ends_sorted = None

    def drop_stage_order() -> None:
        st = r["stages"]
        st.idx = np.zeros(0, np.int32)
        st.all_idx = None
        st.stage_cat = st.loc_writes = None

    def drop_seeks() -> None:
        st = r["stages"]
        st.seek_idx = st.seek = st.seek_service = np.zeros(0, I64)
        st.seek_nbytes = st.seek_cls = None

    def drop_join() -> None:
        r["join"] = None

    # Request columns read by early tasks only (rq is the caller's, which reads none of
    # them afterwards).
    def drop_thread_ids() -> None:
        rq.tid = np.zeros(0, rq.tid.dtype)

    def drop_iflags() -> None:
        rq.iflags = np.zeros(0, rq.iflags.dtype)

    # Data the remaining tasks no longer need, dropped as soon as its last user is done.
    releases = [(("unions", "queue depth"), drop_stage_times),
                (("unions", "locality"), drop_stage_order),
                (("per class",), drop_seeks),
                (("fsync", "classify"), drop_join),
                (("join", "classify"), drop_thread_ids),
                (("classify", "counts"), drop_iflags)]
    run_graph(graph, r, max(1, cfg.threads), clock, releases)
    fl, devices, wv, loc = r["flush"], r["devices"], r["workload"], r["locality"]
    requests, pl, dev_op, dev_bytes = r["per class"]
    fsv, commits = r["fsync"]
    rc, relevant = r["counts"]
    cls = r["classify"]
    # Empty PREFLUSHes: class flush without being an FF.
    fl_ops = rc.n[:, FLUSH].sum(axis=(0, 2))
    empty_pf = int(fl_ops.sum() - fl_ops[abi.OP_FLUSH])
    att = wv["attribution_ns"]
    for k, w in zip(CLASS_NAMES, flush_wait_by_class(cls, fl).tolist()):
        requests[k]["flush_wait_ns"] = int(w)
    # Metadata vs data: writes on the workload's devices (any submitter: jbd2, writeback).
    rel = list(relevant) if relevant else []
    wb = dev_bytes[rel][:, :, abi.OP_WRITE].sum(axis=0) if rel else np.zeros(len(CLASS_NAMES))
    wn = dev_op[rel][:, :, abi.OP_WRITE].sum(axis=0) if rel else np.zeros(len(CLASS_NAMES))
    md_bytes = int(round(wb[METADATA]))
    data_bytes = int(round(wb[DATA]))
    md_n = int(wn[METADATA])
    data_n = int(wn[DATA])
    rel_log = int(round(wb[LOG]))
    ff_all = fl.ff_ns
    ff_rel = fl.ff_ns[np.isin(rq.dev[fl.ff_idx], np.asarray(rel, dtype=np.int32))]
    rec = getattr(trace, "recorder", {}) or {}
    trailer = getattr(trace, "trailer", None) or {}
    res: dict[str, Any] = {
        "schema": SCHEMA,
        "trace": {
            "path": getattr(trace, "path", None),
            "command": rec.get("command") or meta.get("command"),
            "pid": rec.get("pid"),
            "start_ns": win.start_ns, "end_ns": win.end_ns,
            "stop_reason": trailer.get("stop_reason"),
            "exit_status": trailer.get("exit_status"),
            "truncated": bool(getattr(trace, "truncated", False)),
        },
        "problems": trace.problems() if trace is not None else [],
        "lost_events": int(getattr(trace, "lost_events", 0)) if trace is not None else 0,
        "elapsed_ns": int(elapsed),
        "attribution_ns": {k: int(att[k]) for k in WORKLOAD_CATEGORIES},
        "attribution_pct": {k: _pct_of(int(att[k]), elapsed) for k in WORKLOAD_CATEGORIES},
        "wait_other_by_syscall_ns": wv["wait_other_by_syscall_ns"],
        "blocked_by_syscall_ns": wv["blocked_by_syscall_ns"],
        "workload": {"threads": wv["threads"], "offcpu_intervals": wv["offcpu_intervals"],
                     "devices": [devices[i]["name"] for i in relevant],
                     "flushes": {"count": int(len(ff_rel)),
                                 "device_ns": percentiles(ff_rel, (50, 90, 99))}},
        "filesystems": _fs_summary(meta),
        "requests": requests,
        "flushes": {
            "count": int(len(fl.ff_idx)),
            "device_ns": percentiles(ff_all, (50, 90, 99)),
            "total_ns": int(ff_all.sum()),
            "empty_preflush": empty_pf,
        },
        "devices": devices,
        "fsync": {k: v for k, v in fsv.items() if not k.startswith("_")},
        "commits": commits,
        "metadata_data_ratio": round(md_bytes / data_bytes, 4) if data_bytes else None,
        "metadata_data": {"metadata_bytes": md_bytes, "data_bytes": data_bytes,
                          "metadata_requests": md_n, "data_requests": data_n,
                          "log_bytes": rel_log,
                          "request_ratio": round(md_n / data_n, 4) if data_n else None},
        "placement": pl,
        "locality": loc,
    }
    res["findings"] = findings(res, cfg)
    if trace is not None and getattr(trace, "damage", None) and trace.damage.damaged:
        res["damage"] = trace.damage.as_dict()  # only then: a sound trace's output is as before
    if trace is None:
        res.pop("trace")
    if cfg.timings:
        res["_timings_s"] = {k: round(v, 4) for k, v in clock.spent.items()}
    return res


# -- findings ----------------------------------------------------------------------------

def fmt_ns(ns: float | None) -> str:
    """A duration in the unit that suits it: 16 ns, 850 us, 9.6 ms, 12.3 s."""
    if ns is None:
        return "-"
    a = abs(ns)
    if a >= 100e9:
        return f"{ns / 1e9:,.0f} s"
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if a >= scale:
            return f"{ns / scale:.3g} {unit}"
    return f"{int(ns)} ns"


def plural(n: int, word: str, words: str | None = None) -> str:
    return f"{int(n):,} {word if n == 1 else (words or word + 's')}"


def _n(x: float) -> str:
    return f"{int(round(x)):,}"


def _ms(ns: int | None) -> str:
    return fmt_ns(ns)


def _s(ns: int) -> str:
    return fmt_ns(ns)


def findings(r: Mapping[str, Any], cfg: AnalysisConfig) -> list[dict[str, Any]]:
    """A few statements in plain words, largest first, each with its evidence."""
    el = r["elapsed_ns"]
    att = r["attribution_ns"]
    pct = r["attribution_pct"]
    out: list[dict[str, Any]] = []
    fsync_n = r["fsync"]["count"]
    req = r["requests"]
    com = r["commits"]

    def add(key: str, weight: int, text: str, **evidence: Any) -> None:
        out.append({"key": key, "weight_ns": int(weight), "text": text, "evidence": evidence})

    if att["barrier"]:
        wfl = r["workload"]["flushes"]
        fc = wfl["count"]
        p50 = wfl["device_ns"]["p50"]
        text = (f"{pct['barrier']:.0f}% of elapsed is barrier: "
                f"{plural(fc, 'cache flush', 'cache flushes')}, median {_ms(p50)}; ")
        text += (f"{plural(fsync_n, 'fsync call')} caused them" if fsync_n else
                 "no fsync calls: FUA/PREFLUSH writes (journal commits, O_SYNC, O_DIRECT) "
                 "caused them")
        mine = set(r["workload"]["devices"])
        wc = [d["name"] for d in r["devices"] if d.get("write_cache") == "write back"
              and not d.get("fua") and d["flush"]["count"] and d["name"] in mine]
        if wc:
            text += (f"; {', '.join(wc)} {'has' if len(wc) == 1 else 'have'} a volatile write "
                     "cache without FUA, so every FUA write costs a post-flush")
        add("barrier", att["barrier"], text, flushes=fc, flush_p50_ns=p50, fsync_calls=fsync_n)
    if att["log"]:
        n = com["count"]
        text = f"{pct['log']:.0f}% of elapsed is journal/log writes: {plural(n, 'commit')}"
        j = com.get("jbd2")
        if j and j["duration_ns"]["p50"] is not None:
            text += f", median commit {_ms(j['duration_ns']['p50'])}"
        if com.get("fsyncs_per_commit"):
            text += f"; {com['fsyncs_per_commit']:.2f} fsync-family calls per commit"
        if com.get("bytes_logged_per_commit"):
            text += f"; {com['bytes_logged_per_commit'] / 1024:,.1f} KiB logged per commit"
        add("log", att["log"], text, commits=n, fsyncs_per_commit=com.get("fsyncs_per_commit"))
    if att["metadata"]:
        m = req["metadata"]
        ratio = r["metadata_data_ratio"]
        text = (f"{pct['metadata']:.0f}% of elapsed is metadata I/O: "
                f"{plural(m['count'], 'request')}, {m['bytes'] / 2**20:,.1f} MiB, device median "
                f"{_ms(m['device_ns']['p50'])}")
        if ratio is not None:
            text += f"; metadata:data ratio {ratio:.2f} by bytes written"
        add("metadata", att["metadata"], text, requests=m["count"], ratio=ratio)
    for key, cls_names, what in (("data", ("data", "discard"), "data writes"),
                                 ("read", ("read", "readahead"), "reads")):
        if att[key]:
            cnt = sum(req[c]["count"] for c in cls_names)
            mib = sum(req[c]["bytes"] for c in cls_names) / 2**20
            p50 = req[cls_names[0]]["device_ns"]["p50"]
            add(key, att[key], f"{pct[key]:.0f}% of elapsed is waiting on {what}: "
                               f"{plural(cnt, 'request')}, {mib:,.1f} MiB, device median "
                               f"{_ms(p50)}",
                requests=cnt)
    if att["cpu"]:
        add("cpu", att["cpu"], f"{pct['cpu']:.0f}% of elapsed the workload was on CPU "
                               f"({_s(att['cpu'])})")
    if att["runqueue"]:
        add("runqueue", att["runqueue"], f"{pct['runqueue']:.0f}% of elapsed the workload was "
                                         "runnable but waiting for a CPU")
    if att["wait-other"]:
        wo = r["wait_other_by_syscall_ns"]
        top = next(iter(wo.items()), None)
        text = (f"{pct['wait-other']:.0f}% of elapsed is blocked with no I/O in flight on its "
                "devices")
        if top:
            text += f", mostly in {top[0]} ({_s(top[1])})"
        add("wait-other", att["wait-other"], text, by_syscall=dict(list(wo.items())[:5]))
    pl = r.get("placement") or {}
    for cname in ("metadata", "data", "log", "read"):
        p = pl.get(cname)
        if not p or not p["device_ns"] or p["positioning_ns"] <= 0:
            continue
        share = p["positioning_ns"] / p["device_ns"]
        if share < 0.2:
            continue
        seq = p["sequential_share"] or 0.0
        text = (f"{cname} requests spent {_s(p['positioning_ns'])} positioning ({share:.0%} "
                f"of their device time of {_s(p['device_ns'])}); only {seq:.0%} were "
                "sequential")
        if p.get("baseline") == "fastest decile":
            text += ("; at least: no contiguous request on the device to compare with, so "
                     "only the slowest tenth was counted")
        add(f"positioning-{cname}", p["positioning_ns"], text,
            positioning_ns=p["positioning_ns"], device_ns=p["device_ns"],
            baseline=p.get("baseline"))
    loc = r.get("locality")
    if loc and loc["late_pairs"] and (loc["late_share"] or 0) >= 0.1:
        dat = req["data"]["device_ns"]["p50"] or 0
        # A merge that did not happen costs at most one write's positioning: weigh the
        # late pairs by the mean positioning of a positioned write, never more than the
        # time the writes spent at all.
        pos = sum(int((pl.get(c) or {}).get("positioning_ns") or 0)
                  for c in ("data", "metadata", "log"))
        npos = sum(int((pl.get(c) or {}).get("positioned_requests") or 0)
                   for c in ("data", "metadata", "log"))
        per_pair = min(dat, pos // npos) if npos else 0
        add("locality", min(loc["late_pairs"] * per_pair, pos),
            f"{loc['late_share']:.0%} of {_n(loc['adjacent_pairs'])} write pairs adjacent on "
            f"disk were issued more than {loc['gap_ns'] / 1e6:g} ms apart: they could have "
            "merged and did not", late_pairs=loc["late_pairs"],
            adjacent_pairs=loc["adjacent_pairs"])
    ratio = r.get("metadata_data_ratio")
    if ratio is not None and ratio >= 0.5:
        md = r["metadata_data"]
        add("metadata-ratio", req["metadata"]["device_total_ns"],
            f"{md['metadata_bytes'] / 2**20:,.1f} MiB of metadata written for "
            f"{md['data_bytes'] / 2**20:,.1f} MiB of data (ratio {ratio:.2f})",
            ratio=ratio)
    floor = cfg.min_finding_share * el
    out = [f for f in out if f["weight_ns"] >= floor and f["weight_ns"] > 0]
    out.sort(key=lambda f: -f["weight_ns"])
    return out[: cfg.max_findings]


# -- metrics for histograms --------------------------------------------------------------

METRICS = names.METRICS


def metric_values(trace: Any, metric: str, klass: str | None = None) -> tuple[np.ndarray, str]:
    """Values of one metric for `iowhy hist`: (values, unit) with unit "ns" or "sectors".

    klass: a request class (device/queue/total/seek), a call type (fsync) or a commit
    kind (commit: jbd2, xfs, fc). Raises ValueError for an unknown metric or class.
    """
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r} (one of {', '.join(METRICS)})")
    win = trace_window(trace)
    meta = trace.meta or {}
    if metric in ("device", "queue", "total", "seek"):
        if klass is not None and klass not in CLASS_NAMES:
            raise ValueError(f"unknown class {klass!r} (one of {', '.join(CLASS_NAMES)})")
        rq = load_requests(trace, win)
        fs = columns(trace, "fsync", FSYNC_FIELDS)
        call_of_req = _join_requests_to_calls(rq, fs, win)
        bs = np.zeros(len(rq), bool)
        inc = call_of_req >= 0
        bs[inc] = np.asarray(fs["fs_u16"])[call_of_req[inc]] == abi.FS_BTRFS
        cls = classify(rq, meta, btrfs_sync=bs, devices=rq.devices)
        sel = np.ones(len(rq), bool) if klass is None else cls == CLASS_NAMES.index(klass)
        if metric == "seek":
            st = device_stages(rq, win)
            return np.abs(st.seek[sel[st.seek_idx]]), "sectors"
        ok = sel & latency_ok(rq)
        if metric == "total":
            v = total_ns(rq, np.flatnonzero(ok))
        else:
            ok &= rq.issue > 0
            idx = np.flatnonzero(ok)
            v = device_ns(rq, idx) if metric == "device" else queue_ns(rq, idx)
        return v[v >= 0], "ns"
    if metric == "fsync":
        fs = columns(trace, "fsync", FSYNC_FIELDS)
        enter = np.asarray(fs["enter_ns"]).astype(I64)
        ex = np.asarray(fs["exit_ns"]).astype(I64)
        # Only calls seen from entry to exit: a late entry or an unseen exit is a bound.
        partial = abi.FS_F_INCOMPLETE | abi.FS_F_LATE_ENTER | abi.FS_F_EXIT_UNSEEN
        ok = (ex > 0) & ((np.asarray(fs["flags_u16"]) & partial) == 0)
        if klass is not None:
            codes = {v: k for k, v in abi.CALL_NAMES.items()}
            if klass not in codes:
                raise ValueError(f"unknown call type {klass!r} "
                                 f"(one of {', '.join(abi.CALL_NAMES.values())})")
            ok &= np.asarray(fs["call_u16"]) == codes[klass]
        return (ex - enter)[ok], "ns"
    kinds = ("jbd2", "xfs", "fc")
    if klass is not None and klass not in kinds:
        raise ValueError(f"unknown commit kind {klass!r} (one of {', '.join(kinds)})")
    # The commits of the filesystems on the workload's devices, as in the report.
    rq = load_requests(trace, win)
    fs = columns(trace, "fsync", FSYNC_FIELDS)
    rel = relevant_devices(rq, sorted(_call_devices(fs)), meta)
    jr = journal_of(columns(trace, "journal", JOURNAL_FIELDS),
                    workload_filesystems(meta, rq.devices, rel, fs))
    del rq
    ev = np.asarray(jr["event_u16"])
    ts = np.asarray(jr["ts_ns"]).astype(I64)
    key = seq_key(dev_codes((jr["dev_major"], jr["dev_minor"]))[0], jr["seq"])
    vals = []
    pairs = {"jbd2": (abi.J_JBD2_START, abi.J_JBD2_END), "xfs": (abi.J_XLOG_SYNC, abi.J_XLOG_DONE)}
    for kind, (a, b) in pairs.items():
        if klass not in (None, kind):
            continue
        ka, kb = key[ev == a], key[ev == b]
        ta, tb = ts[ev == a], ts[ev == b]
        oa = np.argsort(ka)
        ka, ta = ka[oa], ta[oa]
        p = np.clip(np.searchsorted(ka, kb), 0, max(len(ka) - 1, 0))
        if len(ka):
            hit = ka[p] == kb
            vals.append(tb[hit] - ta[p[hit]])
    if klass in (None, "fc"):
        tid = np.asarray(jr["tid"]).astype(I64)
        m = (ev == abi.J_EXT4_FC_START) | (ev == abi.J_EXT4_FC_STOP)
        o = np.lexsort((ts[m], tid[m]))
        e2, t2, d2 = ev[m][o], ts[m][o], tid[m][o]
        pr = (e2[:-1] == abi.J_EXT4_FC_START) & (e2[1:] == abi.J_EXT4_FC_STOP) & \
            (d2[:-1] == d2[1:])
        vals.append((t2[1:] - t2[:-1])[pr])
    v = np.concatenate(vals) if vals else np.zeros(0, I64)
    return v[v >= 0], "ns"
