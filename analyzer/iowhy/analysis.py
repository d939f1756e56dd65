"""Analysis entry point: `analyze(trace, config) -> dict`, the JSON-ready result.

Every key is documented in docs/report-json.md. Times are integer nanoseconds, sizes
bytes, shares floats in [0, 1], percentages floats in [0, 100]. Nothing here prints or
plots; the CLI (commands.py) and the renderers (iowhy.reports) do.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from . import abi, cmdline, memory, names
from .findings import findings
from .kernels import I64, percentiles, unique
from .model.bios import BIO_FIELDS, append_bios
from .model.calls import covered_devices, join_requests_to_calls, sync_coverage, sync_pairs
from .model.classify import (CLASS_NAMES, DATA, FLUSH, LOG, METADATA, log_in_calls,
                             request_classes)
from .model.flush import flush_generations
from .model.requests import (Requests, Window, data_stage_unseen, gather_columns, load_requests,
                             trace_window)
from .model.stages import device_stages, stage_service
from .views.classes import per_class, request_counts
from .views.commits import commits_view, journal_of, workload_filesystems
from .views.device import device_unions, device_view, relevant_devices
from .views.fsync import call_sleeps, fsync_values, fsync_view
from .views.latency import latency_figures, latency_split, latency_values, values_by_class
from .views.locality import locality
from .views.placement import remapped_devices, seek_split, seek_values_by_class
from .views.queue import queue_depth
from .views.requests import request_flag_codes
from .model.devices import device_meta, device_names
from .views.series import figure_data, task_comms
from .model.wakeups import WAKE_FIELDS, asleep_at_start, has_wakers
from .views.background import (bio_based_warnings, comms_at, set_apart, submitter_tids,
                               table_requests, user_submitters, workload_scope)
from .views.stack import carried_service, carrying_edges
from .views.causal import cpu_to_stop, elapsed_view, root_event_wait, thread_time_view
from .views.causal_inputs import causal_inputs
from .views.workload import workload_covers, workload_view
from .traceformat import recording
from .views.cgroups import cgroup_view, not_recorded, workload_groups
from .views.cgroups import recorded as cgroups_recorded


SCHEMA = "iowhy-report/1"
FIGURE_INTERVALS = 120  # intervals of the HTML's attribution over time

FSYNC_FIELDS = ("enter_ns", "exit_ns", "tid", "tgid", "call_u16", "fs_u16", "flags_u16",
                "dev_major", "dev_minor", "commit_seq", "seq_span_u16", "ret", "ino")
JOURNAL_FIELDS = ("ts_ns", "seq", "aux0", "aux1", "aux2", "dev_major", "dev_minor", "tid",
                  "event_u16", "fs_u16")
TASK_FIELDS = ("ts_ns", "tid", "tgid", "event_u16", "cgroup_id")
OFFCPU_FIELDS = WAKE_FIELDS
THREAD_FIELDS = ("tid", "tgid", "state_u8", "syscall_nr")
# Record types analyze() reads once, whose decoded records it then releases: all of them
# at once, so that their memory is one free stretch the analysis' large arrays fit in.
RELEASED = tuple(abi.RECORD_NAMES)


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
    values: tuple[str, ...] = ()  # the metrics (names.METRICS) whose values `iowhy hist`
    #                               plots to keep in result["_values"]
    figures: bool = False  # compute what the HTML figures draw: result["_figures"]
    split: str | None = None  # with `values`: also by "disk" or "flags" (`iowhy hist -D`,
    #                           `--flags`) into result["_split"]
    split_class: str | None = None  # ... of the requests of this class only
    progress: Callable[[str], None] | None = None  # told the name of each task as it
    #                                                starts (progress.progress's line)
    # Wakeup chains followed at most this many threads deep: a lock handed along a convoy
    # of tens of threads (32 fsync tasks' openat in one directory) is as deep as it is
    # long; each level costs only the pieces still recursing.
    causal_depth: int = 64
    interval_ns: int = 0  # > 0: the elapsed attribution per interval of this length
    requests: bool = False  # what the analysis made of each request (the export's
    #                         columns): result["_requests"] (request_roles)
    keep_causal: bool = False  # keep the causal timeline and the request classes in
    #                            result["_causal"] (CausalModel; `iowhy whatif`)
    by_cgroup: bool = False  # the workload's threads per cgroup v2: result["cgroups"]
    #                          (views/cgroups.py; `iowhy report --by cgroup`)


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
              releases: Sequence[tuple[tuple[str, ...], Callable[[], None]]] = (),
              on_start: Callable[[str], None] | None = None) -> None:
    """Run tasks (name, key, dependencies, function) on `threads` threads (the calling
    one and threads - 1 more): each free thread takes the first task, in list order,
    whose dependencies are done, and stores its result in results[key]. numpy releases
    the GIL in its loops, so two tasks progress side by side. The first error is
    raised once every started task has finished.

    releases: (keys, function) called once every task of `keys` is done, to drop data
    no later task needs (lower peak memory). on_start: called with each task's name as
    it starts (progress on a terminal)."""
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
            if on_start is not None:
                on_start(name)
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
    n = trace.count("request") if memory.heap_kept() else 0
    prefault = (memory.prefault_heap(min(memory.PREFAULT_BYTES * n, memory.PREFAULT_MAX))
                if n >= memory.PREFAULT_MIN else None)
    other: list[dict[str, np.ndarray]] = []

    def load_other() -> None:
        other.extend(columns(trace, name, fields) for name, fields in (
            ("fsync", FSYNC_FIELDS), ("journal", JOURNAL_FIELDS), ("task", TASK_FIELDS),
            ("offcpu", OFFCPU_FIELDS), ("helper", OFFCPU_FIELDS),
            ("thread", THREAD_FIELDS), ("bio", BIO_FIELDS)))
        # Request numbers, in load_requests' order: what a wakeup's request link names.
        other.append(columns(trace, "request", ("seq",)))

    def alongside(arrays: Sequence[np.ndarray]) -> list[Callable[[], Any]]:
        # The other record types are copied beside the requests too, after the faulting
        # in (their columns are carved from the block).
        return [*(prefault(arrays) if prefault else []), load_other]
    if cfg.progress is not None:
        cfg.progress("load records")
    rq = load_requests(trace, win, threads=cfg.threads, alongside=alongside)
    # The names of the submitters outside the workload (one request each), read before
    # the records are released: which are other user processes (background).
    sub = submitter_tids(rq.flags, rq.tid)
    sub_tids, sub_comms = rq.tid[sub].astype(np.int64), comms_at(trace.chunks("request"), sub)
    # The decoded records of the large types are not read again here: their memory goes
    # to the analysis (a later reader decodes them again, Trace.release).
    if hasattr(trace, "release"):
        trace.release(*RELEASED)
    fs, jr, tasks, off, helper, threads, bio, seq = other
    rq.extra["seq"] = seq["seq"]
    # The bios of bio-based devices, as requests of their devices (model/bios.py).
    nrq = len(rq)
    rq = append_bios(rq, bio, meta, unique(np.asarray(tasks["tgid"])))
    if len(rq) > nrq:
        more = nrq + submitter_tids(rq.flags[nrq:], rq.tid[nrq:])
        sub_tids = np.concatenate((sub_tids, rq.tid[more].astype(np.int64)))
        sub_comms += [bytes(c) for c in np.asarray(bio["comm"])[more - nrq]]
    # Other user processes' requests are background only where the trace knows the
    # workload (task records; an imported trace may name none).
    users = (user_submitters(sub_tids, sub_comms, unique(np.asarray(helper["tid"])))
             if len(tasks["tid"]) else np.zeros(0, I64))
    offcpu = asleep_at_start(off, threads, win, tasks)
    bg = None
    rows = len(rq)
    if cfg.requests:  # each request's place among the records and bios, through set_apart
        rq.extra["row"] = np.arange(rows, dtype=I64)
    if causal_trace(trace, offcpu):
        # Other devices' I/O set apart: the analysis covers the workload's devices.
        scope, rq.extra["waited"] = workload_scope(rq, sorted(covered_devices(fs, meta)),
                                                   meta, offcpu, helper)
        if scope is not None:
            rq, bg = set_apart(rq, scope, device_names(meta, rq.devices))
    clock.lap("load records")
    return analyze_columns(win, meta, rq, fs, jr, tasks, offcpu, cfg, trace=trace,
                           clock=clock, helper=helper, background=bg, users=users,
                           rows=rows)


def causal_trace(trace: Any, off: Mapping[str, np.ndarray]) -> bool:
    """Whether the trace records what woke each wait: format 4 or later, and either made
    by the recorder (RECORDER attach_mode: it names every waker it saw, even when
    nothing was woken) or with some interval naming its waker (another source)."""
    if trace is not None and int(getattr(trace, "version", abi.FORMAT_VERSION)) < 4:
        return False
    rec = getattr(trace, "recorder", None) or {}
    return "attach_mode" in rec or has_wakers(off)


def analyze_columns(win: Window, meta: Mapping[str, Any], rq: Requests,
                    fs: Mapping[str, np.ndarray], jr: Mapping[str, np.ndarray],
                    tasks: Mapping[str, np.ndarray], off: Mapping[str, np.ndarray],
                    cfg: AnalysisConfig, trace: Any = None,
                    clock: _Clock | None = None,
                    helper: Mapping[str, np.ndarray] | None = None,
                    background: dict[str, Any] | None = None,
                    users: np.ndarray | None = None, rows: int | None = None
                    ) -> dict[str, Any]:
    """The analysis of loaded columns: its tasks (_Tasks) run as a graph (run_graph),
    then the result is assembled from theirs (_result). helper: the helper records'
    columns (OFFCPU_FIELDS); background: the other devices' I/O set apart
    (views/background.py), for the result; users: the tids of the user processes
    outside the workload that submitted requests (views/background.py,
    user_submitters); rows: the requests before the other devices' were set apart
    (rq.extra["row"] numbers them), for AnalysisConfig.requests."""
    clock = clock or _Clock(cfg.timings)
    clock.start()
    t = _Tasks(win, meta, rq, fs, jr, tasks, off, cfg, trace)
    t.helper = helper
    t.background = background
    t.rows = len(rq) if rows is None else rows
    if users is not None:
        t.users = users
    run_graph(t.graph(), t.r, max(1, cfg.threads), clock, t.releases(), cfg.progress)
    res = _result(t)
    if cfg.timings:
        res["_timings_s"] = {k: round(v, 4) for k, v in clock.spent.items()}
    return res


Task = tuple[str, str, tuple[str, ...], Callable[[], Any]]


def _needs(graph: list[Task], key: str, *deps: str) -> None:
    """Task `key` of graph waits for deps too (an optional task that must run before a
    task drops the data it reads)."""
    i = [g[1] for g in graph].index(key)
    name, k, before, fn = graph[i]
    graph[i] = (name, k, (*before, *deps), fn)


class _Tasks:
    """The tasks of one analysis, each a method whose result run_graph stores in r under
    its key, and the data each drops once its last reader is done."""

    def __init__(self, win: Window, meta: Mapping[str, Any], rq: Requests,
                 fs: Mapping[str, np.ndarray], jr: Mapping[str, np.ndarray],
                 tasks: Mapping[str, np.ndarray], off: Mapping[str, np.ndarray],
                 cfg: AnalysisConfig, trace: Any) -> None:
        self.win, self.meta, self.rq, self.fs, self.jr = win, meta, rq, fs, jr
        self.tasks, self.off, self.cfg, self.trace = tasks, off, cfg, trace
        self.fs_type = np.asarray(fs["fs_u16"])
        self.btrfs = log_in_calls(self.fs_type)  # btrfs: classes need the call join
        self.r: dict[str, Any] = {}  # results by task key
        self.helper: Mapping[str, np.ndarray] | None = None
        self.background: dict[str, Any] | None = None
        self.users = np.zeros(0, I64)
        self.causal = causal_trace(trace, off)
        self.rows = len(rq)  # the requests before any device was set apart
        self.groups: dict[str, Any] | None = None  # --by cgroup (cgroup_groups)
        self.explained: np.ndarray | None = None  # its thread time per group

    def graph(self) -> list[Task]:
        """(name, result key, dependencies, function) in priority order: a free thread
        takes the first task whose dependencies are done. The order is by the longest
        chain of work left after each task (device stages, service times, per-class
        figures first), short tasks last. On more than one thread the causal timeline,
        whose chain (the elapsed and thread time, then the workload view) is the longest
        of a traced workload, as soon as its inputs are: the short tasks go on beside it.
        On one thread the order saves no time, and the short tasks first drop the data
        only they read (releases) before the timeline's peak of memory."""
        cfg, btrfs = self.cfg, self.btrfs
        causal: list[Task] = [
            ("causal timeline", "timeline",
             ("stages", "unions", "flush", "counts", "classify"), self.timeline),
            ("elapsed time", "elapsed", ("timeline",), self.elapsed),
            ("thread time", "thread time", ("timeline",), self.thread_time),
        ] if self.causal else []
        graph: list[Task] = [
            # What the fsync view reads of the off-CPU intervals, before they are dropped.
            ("sleeps of the fsync calls", "call sleeps", (),
             lambda: call_sleeps(self.off, self.fs, self.jr, self.win)),
            ("classify", "classify", ("join",) if btrfs else (), self.classes),
            ("device stages and seeks", "stages", () if btrfs else ("classify",),
             self.stages),
            ("service times", "service", ("stages",), self.service),
            ("request counts", "counts", ("classify",), self.counts),
            ("latency", "latency", ("classify", "once"), self.latency),
            ("join requests to calls", "join", (), self.join),
            ("flush generations", "flush", (), self.flush),
            ("device unions", "unions", ("stages", "classify"), self.unions),
            *(causal if cfg.threads > 1 else []),
            ("counts once per stack", "once", ("classify", "counts"), self.once),
            ("per class and placement", "per class",
             ("service", "classify", "once", "latency"), self.classes_view),
            ("queue depth", "queue depth", ("service",), self.qdepth),
            ("fsync and commits", "fsync", ("join", "classify", "counts", "call sleeps"),
             self.fsync_commits),
            ("locality", "locality", ("stages", "classify", "once"),
             self.local if cfg.locality else (lambda: None)),
            *(causal if cfg.threads <= 1 else []),
            ("workload view", "workload",
             ("elapsed", "thread time") if self.causal
             else ("stages", "unions", "flush", "counts", "classify"), self.workload),
            ("device view", "devices", ("stages", "classify", "flush", "unions", "counts",
                                        "queue depth"), self.devview),
            ("service below loop devices", "stack service", ("stages", "unions", "flush"),
             self.stack_service),
            ("data stages not delivered", "data unseen", (), self.data_unseen),
        ]
        if cfg.by_cgroup:  # with the timeline (dropped after it and the workload view)
            graph.append(("per cgroup", "cgroups", ("thread time",) if self.causal else (),
                          self.cgroup_section))
        if cfg.values or cfg.figures:
            # Before the per-class figures, which drop the seeks once read.
            graph.append(("values", "values", ("stages", "classify", "once"), self.values))
            _needs(graph, "per class", "values")
        if cfg.requests:
            # Each request's seek (request_roles), before the per-class figures drop them.
            graph.append(("request seeks", "seeks", ("stages",), self.seeks))
            _needs(graph, "per class", "seeks")
            # Each request's call, before the fsync view drops the join.
            graph.append(("request calls", "calls", ("join",), self.calls))
            _needs(graph, "fsync", "calls")
        if cfg.split:
            # Before the per-class figures too (the seeks).
            graph.append(("split values", "split", ("stages", "classify"), self.split))
            _needs(graph, "per class", "split")
        if cfg.figures:
            graph.append(("figure data", "figures",
                          ("classify", "counts", "values", "per class"), self.figure_data))
        if btrfs:  # the join first: classify, first of the chain, waits for it
            graph.sort(key=lambda g: g[1] != "join")  # stable: the rest keep their order
        return graph

    # -- the tasks

    def join(self) -> Any:
        # The call of every request where btrfs classes need it, else (request, call)
        # pairs (the fsync view needs no more).
        return join_requests_to_calls(self.rq, self.fs, self.win, pairs=not self.btrfs)

    def classes(self) -> np.ndarray:
        # btrfs log writes are classified by the fsync call they were submitted in.
        return request_classes(self.rq, self.meta, self.fs_type,
                               self.r["join"] if self.btrfs else None)

    def counts(self) -> Any:
        rc = request_counts(self.rq, self.r["classify"])
        return rc, relevant_devices(self.rq, sorted(covered_devices(self.fs, self.meta)),
                                    self.meta, rc)

    def once(self) -> Any:
        """The class tables' requests (views/background.py, TableRequests): the request
        counts with a loop device's carried I/O and flushes on the device below
        (views/stack.py), other processes' requests and the empty PREFLUSH requests
        (merged into the flushes counted) left out; what was carried; the background
        requests (a mask, None if none) and their summary. The full counts when none is
        left out."""
        return table_requests(self.rq, self.r["classify"], self.meta,
                              sorted(covered_devices(self.fs, self.meta)), self.users,
                              self.r["counts"][0])

    def table_classes(self) -> np.ndarray:
        """The classes, with the requests the class tables do not count (once: the
        background requests, a loop device's carried I/O and flushes on the device
        below, the empty PREFLUSH requests) out of every class (code len(CLASS_NAMES)):
        what the class tables' percentiles and the histograms take, so a row's count and
        its percentiles describe the same requests."""
        cls, drop = self.r["classify"], self.r["once"].dropped
        if drop is None:
            return cls
        out = cls.copy()
        out[drop] = len(CLASS_NAMES)
        return out

    def stages(self) -> Any:
        # With the classes (when they do not wait for the join: no btrfs calls), the
        # stage pass keeps what the unions, locality and per-class figures need of them.
        return device_stages(self.rq, self.win, False,
                             None if self.btrfs else self.r["classify"])

    def seeks(self) -> tuple[np.ndarray, np.ndarray]:
        """(the requests with a seek distance, their distances): copies of the stages'."""
        st = self.r["stages"]
        return (np.asarray(st.seek_idx).astype(I64, copy=True),
                np.asarray(st.seek).astype(I64, copy=True))

    def calls(self) -> np.ndarray:
        """Each request's fsync-family call (index into the fsync records, -1 for none):
        the join's (request, call) pairs spread out (on btrfs the join is that already)."""
        j = self.r["join"]
        if not isinstance(j, tuple):
            return np.asarray(j).astype(I64)
        out = np.full(len(self.rq), -1, I64)
        out[j[0]] = j[1]
        return out

    def service(self) -> Any:
        stage_service(self.r["stages"])
        return True

    def latency(self) -> Any:
        return latency_figures(self.rq, self.table_classes())

    def flush(self) -> Any:
        return flush_generations(self.rq, self.win)

    def qdepth(self) -> Any:
        # From the sorted ends of the service times (then dropped: no other task needs
        # them).
        st = self.r["stages"]
        qd = queue_depth(st, len(self.rq.devices), self.win.elapsed_ns,
                         self.cfg.queue_depth_buckets)
        st.ends_sorted = None
        return qd

    def unions(self) -> Any:
        return device_unions(self.rq, self.r["stages"], self.r["classify"])[1]

    def devview(self) -> Any:
        r = self.r
        return device_view(self.rq, r["stages"], r["classify"], self.win, r["flush"],
                           self.meta, r["unions"], self.cfg.queue_depth_buckets,
                           r["counts"][0], qd=r["queue depth"])

    def data_unseen(self) -> int:
        """The FUA writes whose data-stage completion the kernel did not deliver
        (model/requests.py data_stage_unseen): a loss the probes cannot count."""
        emulated = np.array([d.get("write_cache") == "write back" and d.get("fua") == 0
                             for d in device_meta(self.meta, self.rq.devices)],
                            dtype=np.bool_)
        return int(data_stage_unseen(self.rq, emulated).sum())

    def stack_service(self) -> Any:
        r = self.r
        return carried_service(self.rq, r["stages"], r["unions"], r["flush"], self.meta)

    def workload(self) -> Any:
        r = self.r
        arch = self.meta.get("machine")
        if self.causal:
            return self.causal_views()
        # Without a device of its own, the correlational attribution takes every disk's
        # activity (docs/report-json.md).
        covers, waits = workload_covers(self.rq, r["stages"], r["unions"], r["flush"],
                                        r["counts"][1] or list(range(len(self.rq.devices))))
        wv = workload_view(self.win, self.tasks, self.off, covers, waits, arch=arch)
        wv["wait_other_by_waker_ns"] = {}
        return wv

    def timeline(self) -> Any:
        """The causal timeline, its fill and root (views/causal_inputs.py)."""
        cfg, win, r = self.cfg, self.win, self.r
        rec = getattr(self.trace, "recorder", None) or {}
        tl, fill, root, names = causal_inputs(
            win, self.meta, self.rq, r["stages"], r["unions"], r["flush"], r["counts"][1],
            r["classify"], self.tasks, self.off, self.helper, self.fs, rec.get("pid"),
            cfg.threads)
        # The HTML's stacked area: about FIGURE_INTERVALS intervals.
        fig_step = max(1, -(-win.elapsed_ns // FIGURE_INTERVALS)) if cfg.figures else 0
        comms = task_comms(self.trace)
        for tid, name in names.items():
            comms.setdefault(tid, name)
        return tl, fill, root, fig_step, comms

    def elapsed(self) -> Any:
        cfg = self.cfg
        tl, fill, root, fig_step, _ = self.r["timeline"]
        steps = [s for s in (cfg.interval_ns, fig_step) if s > 0]
        return elapsed_view(tl, root, cfg.causal_depth, self.meta.get("machine"), fill, steps,
                            cfg.threads)

    def cgroup_groups(self, tl: Any) -> dict[str, Any] | None:
        """--by cgroup: the groups of the workload's threads (views/cgroups.py), made
        once (the thread time sums its time per group with them)."""
        if not self.cfg.by_cgroup or not self.cgroups_recorded():
            return None
        if self.groups is None:
            wt = (tl.tids[:int((~tl.helper).sum())] if tl is not None
                  else np.unique(np.asarray(self.tasks["tid"])))
            tc = (getattr(self.trace, "trailer", None) or {}).get("thread_cgroups") or {}
            self.groups = workload_groups(self.tasks, np.asarray(wt),
                                          np.asarray(self.fs["tid"]), tc.get("threads") or ())
        return self.groups

    def cgroups_recorded(self) -> bool:
        """Whether the task records name their tasks' cgroups (format 9 on)."""
        return cgroups_recorded(int(getattr(self.trace, "version", abi.FORMAT_VERSION)),
                                self.tasks)

    def thread_time(self) -> Any:
        tl, fill, _, _, comms = self.r["timeline"]
        groups = self.cgroup_groups(tl)
        out = thread_time_view(tl, self.cfg.causal_depth, self.meta.get("machine"), fill,
                               comms, None if groups is None else groups["of_workload"])
        self.explained = out.pop("_by_group", None)
        return out

    def cgroup_section(self) -> dict[str, Any]:
        """result["cgroups"] (--by cgroup): per cgroup, the threads' time and calls."""
        if not self.cgroups_recorded():
            return not_recorded(int(getattr(self.trace, "version", 0)))
        timeline = self.r.get("timeline") if self.causal else None
        tl = timeline[0] if timeline else None
        groups = self.cgroup_groups(tl)
        assert groups is not None
        return cgroup_view(groups, getattr(self.trace, "cgroup_paths", {}) or {}, self.tasks,
                           self.fs, tl, self.explained, self.meta.get("machine"))

    def causal_views(self) -> dict[str, Any]:
        """The elapsed time along the critical path, the thread time and, when asked,
        the elapsed time per interval (views/causal.py)."""
        cfg, r = self.cfg, self.r
        tl, _, root, fig_step, comms = r["timeline"]
        ev, per_step = r["elapsed"]
        ev["threads"] = int((~tl.helper).sum())
        ev["helpers"] = int(tl.helper.sum())
        ev["offcpu_intervals"] = tl.intervals
        ev["unseen_wakers"] = {"count": tl.unseen, "blocked_ns": tl.unseen_ns}
        ev["thread_time"] = r["thread time"]
        ev["root_event_wait"] = root_event_wait(tl, root, self.meta.get("machine"), comms)
        rec = getattr(self.trace, "recorder", None) or {}
        if (int(getattr(self.trace, "version", abi.FORMAT_VERSION)) < abi.OPEN_END_VERSION
                and rec.get("attach_mode") and not rec.get("imported")):
            tail = cpu_to_stop(tl, self.win.end_ns)
            if tail:
                ev["cpu_to_stop"] = tail
        if cfg.interval_ns > 0:
            ev["intervals"] = per_step[cfg.interval_ns]
        if cfg.figures:
            ev["_series"] = per_step[fig_step]
        return ev

    def local(self) -> Any:
        bg = self.r["once"].background
        return locality(self.rq, self.r["classify"], self.cfg.locality_gap_ns,
                        self.r["stages"], None if bg is None else ~bg)

    def classes_view(self) -> Any:
        r = self.r
        # Another process's requests add no seek or positioning; a loop device's carried
        # I/O on the disk below does (its positioning is the disk's, for the workload).
        bg = r["once"].background
        return per_class(self.rq, r["stages"], r["classify"], self.cfg.placement,
                         r["once"].counts, r["latency"], release=True,
                         remapped=remapped_devices(self.rq.devices, self.meta),
                         counted=None if bg is None else ~bg)

    def fsync_commits(self) -> Any:
        rq, fs, jr, cls = self.rq, self.fs, self.jr, self.r["classify"]
        rc, rel = self.r["counts"]
        # sync(2) and syncfs(2): the filesystems each covers and their writeback.
        cov = sync_coverage(fs, self.meta)
        wb = sync_pairs(rq, cls, fs, self.win, cov, self.users, (DATA, FLUSH))
        fsv = fsync_view(self.win, fs, jr, rq, cls, self.r["join"], cov, wb,
                         self.r["call sleeps"])
        # Commits and log bytes of the workload's filesystems and devices only.
        mine = journal_of(jr, workload_filesystems(self.meta, rq.devices, rel, fs))
        log_bytes = int(round(rc.dev_bytes[rel][:, LOG].sum())) if rel else 0
        return fsv, commits_view(self.win, mine, fsv, fs, log_bytes)

    def values(self) -> dict[str, Any]:
        # Those hist asks for; the figures draw the device times and the seeks.
        want = set(self.cfg.values) | ({"device", "seek"} if self.cfg.figures else set())
        cls = self.r["classify"]
        out: dict[str, Any] = values_by_class(self.rq, self.table_classes(), tuple(want))
        if "seek" in want:
            out["seek"] = seek_values_by_class(self.r["stages"], cls)
        return out

    def split(self) -> dict[str, Any]:
        # The values of the metrics hist asks for, by disk or by flag combination.
        cfg, rq, cls = self.cfg, self.rq, self.r["classify"]
        if cfg.split == "disk":
            group, names_ = rq.dev, device_names(self.meta, rq.devices)
        else:
            group, names_ = request_flag_codes(rq)
        k = None if cfg.split_class is None else CLASS_NAMES.index(cfg.split_class)
        out: dict[str, Any] = {}
        for m in cfg.values:
            if m == "seek":
                out[m] = seek_split(self.r["stages"], cls, group, names_, k)
            else:
                out[m] = latency_split(rq, cls, m, group, names_, k)
        return out

    def figure_data(self) -> Any:
        r = self.r
        return figure_data(self.win, self.meta, self.rq, r["classify"], r["counts"][1],
                           r["values"], r["per class"][1], self.fs, self.jr, self.trace)

    # -- what the tasks drop

    def releases(self) -> list[tuple[tuple[str, ...], Callable[[], None]]]:
        """Data the remaining tasks no longer need, dropped as soon as its last user is
        done: (the keys of its users, the function that drops it)."""
        r, rq = self.r, self.rq

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

        def drop_call_sleeps() -> None:
            r["call sleeps"] = None

        # Request columns read by early tasks only (rq is the caller's, which reads none
        # of them afterwards).
        def drop_thread_ids() -> None:
            rq.tid = np.zeros(0, rq.tid.dtype)

        def drop_iflags() -> None:
            rq.iflags = np.zeros(0, rq.iflags.dtype)

        def drop_intervals() -> None:
            self.off, self.helper = {}, None

        def drop_timeline() -> None:
            r["timeline"] = None

        tl_users = ("workload", "cgroups") if self.cfg.by_cgroup else ("workload",)
        causal = [((("timeline", "call sleeps"), drop_intervals)),
                  *([] if self.cfg.keep_causal else [(tl_users, drop_timeline)])] \
            if self.causal else []
        return [*causal, (("unions", "queue depth"), drop_stage_times),
                (("unions", "locality"), drop_stage_order),
                (("per class",), drop_seeks),
                (("fsync", "classify"), drop_join),
                (("fsync",), drop_call_sleeps),
                (("join", "classify", "once", "fsync"), drop_thread_ids),
                (("classify", "counts", "once", "data unseen", "devices",
                  *(("split",) if self.cfg.split else ())), drop_iflags)]


def _result(t: _Tasks) -> dict[str, Any]:
    """The report dict (docs/report-json.md) from the tasks' results."""
    r, rq, win, meta, cfg, trace = t.r, t.rq, t.win, t.meta, t.cfg, t.trace
    elapsed = win.elapsed_ns
    fl, devices, wv = r["flush"], r["devices"], r["workload"]
    requests, pl, dev_op, dev_bytes = r["per class"]
    fsv, commits = r["fsync"]
    commit_durations = commits.pop("_durations")
    rc, relevant = r["counts"]
    once = r["once"]
    att = wv["attribution_ns"]
    for k, w in zip(CLASS_NAMES, flush_wait_by_class(r["classify"], fl).tolist()):
        requests[k]["flush_wait_ns"] = int(w)
    rel = list(relevant) if relevant else []
    md = _metadata_data(rel, dev_op, dev_bytes)
    # The flushes counted once per stack, as the class tables count them: the FFs not
    # carried for a device above (views/stack.py) nor background (views/background.py).
    ff_once = np.ones(len(fl.ff_idx), bool) if once.dropped is None \
        else ~once.dropped[fl.ff_idx]
    ff_all = fl.ff_ns[ff_once]
    ff_rel = fl.ff_ns[ff_once & np.isin(rq.dev[fl.ff_idx], np.asarray(rel, dtype=np.int32))]
    res: dict[str, Any] = {
        "schema": SCHEMA,
        "trace": _trace_summary(trace, win, meta),
        "problems": trace.problems() if trace is not None else [],
        "lost_events": int(getattr(trace, "lost_events", 0)) if trace is not None else 0,
        "elapsed_ns": int(elapsed),
        "attribution_ns": {k: int(v) for k, v in att.items()},
        "attribution_pct": {k: _pct_of(int(v), elapsed) for k, v in att.items()},
        **({"attribution_detail_ns": wv["attribution_detail_ns"]}
           if "attribution_detail_ns" in wv else {}),
        "wait_other_by_syscall_ns": wv["wait_other_by_syscall_ns"],
        "wait_other_by_waker_ns": wv["wait_other_by_waker_ns"],
        "blocked_by_syscall_ns": wv["blocked_by_syscall_ns"],
        "workload": {"threads": wv["threads"], "offcpu_intervals": wv["offcpu_intervals"],
                     "devices": [devices[i]["name"] for i in relevant],
                     "flushes": {"count": int(len(ff_rel)),
                                 "device_ns": percentiles(ff_rel, (50, 90, 99))}},
        "filesystems": _fs_summary(meta),
        "requests": requests,
        "flushes": {
            "count": int(len(ff_all)),
            "device_ns": percentiles(ff_all, (50, 90, 99)),
            "total_ns": int(ff_all.sum()),
            "empty_preflush": once.empty_preflush,
        },
        "devices": devices,
        "fsync": {k: v for k, v in fsv.items() if not k.startswith("_")},
        "commits": commits,
        "metadata_data_ratio": (round(md["metadata_bytes"] / md["data_bytes"], 4)
                                if md["data_bytes"] else None),
        "metadata_data": md,
        "placement": pl,
        "locality": r["locality"],
    }
    remapped = remapped_devices(rq.devices, meta) if pl else None
    if remapped is not None:  # left out of the positioning figures (views/placement.py)
        names = device_names(meta, rq.devices)
        res["placement_remapped"] = [names[i] for i in np.flatnonzero(remapped).tolist()]
    for k in ("external_by_comm_ns", "sleep_by_syscall_ns", "unseen_wakers",
              "root_event_wait", "cpu_to_stop", "thread_time", "intervals"):
        if k in wv:
            res[k] = wv[k]
    if cfg.figures and "_series" in wv:
        r["figures"].attribution_series = wv["_series"]
    if "root_tid" in wv:
        res["workload"]["root_tid"] = wv["root_tid"]
        res["workload"]["helpers"] = wv["helpers"]
    res["workload"]["attribution"] = "causal" if "root_tid" in wv else "correlational"
    why = attribution_unavailable(trace, meta)
    if why:
        # No scheduler data: nothing says where the elapsed time went. The requests,
        # latencies, classes, flushes and fsync calls stand as they are.
        res["workload"]["attribution"] = None
        res["attribution_unavailable"] = why
        res["attribution_ns"] = res["attribution_pct"] = None
        for k in ("attribution_detail_ns", "thread_time", "intervals", "root_event_wait",
                  "cpu_to_stop", "unseen_wakers", "external_by_comm_ns", "sleep_by_syscall_ns"):
            res.pop(k, None)
        res["wait_other_by_syscall_ns"] = res["wait_other_by_waker_ns"] = {}
        res["blocked_by_syscall_ns"] = {}
    if cfg.by_cgroup:
        res["cgroups"] = r["cgroups"]
    if once.carried is not None:
        res["stack_carried"] = once.carried
    if r["stack service"]:
        res["stack_service"] = r["stack service"]
    # Background: other devices set apart (causal traces) and other processes' requests
    # on the workload's devices, left out of the class tables.
    bgr = once.background_summary
    if t.causal or bgr:
        bg = t.background or {"devices": [], "requests": 0}
        apart = {d["name"] for d in bg["devices"]}
        res["devices"] = [d for d in res["devices"] if d["name"] not in apart]
        res["background"] = {"devices": sorted(bg["devices"] + bgr,
                                               key=lambda x: -x["requests"]),
                             "requests": int(bg["requests"]) + sum(x["requests"] for x in bgr)}
    probes = (getattr(trace, "recorder", None) or {}).get("probes") or {}
    bios_seen = str(probes.get("block_bio_complete", "")) in ("tp_btf", "raw_tp")
    # With the bio probe attached, a bio-based device without bio records did no I/O.
    if trace is not None and meta.get("bio_based_devices") and not bios_seen:
        b = columns(trace, "bio", ("dev_major", "dev_minor"))
        res["problems"] = [*res["problems"], *bio_based_warnings(
            meta, set(zip(b["dev_major"].tolist(), b["dev_minor"].tolist())))]
    if "root_tid" not in wv and int(getattr(trace, "version", abi.FORMAT_VERSION)) < 4:
        res["problems"] = [*res["problems"], (
            f"trace format version {trace.version} records no wakeups: the attribution is "
            "correlational (the best state among the threads; blocked time charged to what "
            "the workload's devices were doing)")]
    if r["data unseen"]:
        n = r["data unseen"]
        res["problems"] = [*res["problems"], (
            f"{n} FUA write{'s' if n > 1 else ''} whose data-stage completion the kernel "
            "did not deliver (only the last completion was seen: the device stage runs "
            "to the end of the post-flush)")]
    res["findings"] = findings(res, cfg.max_findings, cfg.min_finding_share)
    if trace is not None and getattr(trace, "damage", None) and trace.damage.damaged:
        res["damage"] = trace.damage.as_dict()  # only then: a sound trace's output is as before
    if trace is None:
        res.pop("trace")
    if cfg.values:
        every = {**r["values"], "fsync": fsync_values(fsv["_per_call"]),
                 "commit": commit_durations}
        res["_values"] = {m: every[m] for m in cfg.values}
    if cfg.split:
        res["_split"] = r["split"]
    if cfg.figures:
        res["_figures"] = r["figures"]
    if cfg.requests:
        res["_requests"] = request_roles(t)
    if cfg.keep_causal and t.causal and r.get("timeline") is not None:
        tl, fill, root, _, _ = r["timeline"]
        res["_causal"] = CausalModel(
            timeline=tl, root=int(root), fill=fill, window=win,
            request_seq=np.asarray(rq.extra["seq"]).astype(I64),
            request_class=np.asarray(r["classify"]), request_dev=np.asarray(rq.dev),
            device_names=device_names(meta, rq.devices))
    return res


def request_roles(t: _Tasks) -> dict[str, Any]:
    """What the analysis made of each request, for the export (AnalysisConfig.requests):
    arrays over the requests as analyze() loads them (the request records in file
    order, then the bio records: model/bios.py), before other devices were set apart:

    * `background`: not the workload's I/O (the report's `background`): on a device set
      apart, or left out of the class tables as another process's
      (views/background.py);
    * `counted`: in the class tables' counts and bytes (`requests`): not background and
      not carried (views/stack.py: counted once per stack, at its top device);
    * `carried_for`: the upper device (an index into `device_names`) whose I/O the
      request carried, -1 for none;
    * `cls`: the analysis' class of each request (model/classify.py, the class tables'
      and the attribution's), -1 for one on a device set apart (not analyzed);
    * `seek`, `has_seek`: its seek distance in sectors from the device stages
      (model/stages.py), where it has one;
    * `call`: its fsync-family call (model/calls.py, an index into the fsync records),
      -1 for none or not analyzed;
    * `device_ns`, `queue_ns`, `total_ns`: its times (views/latency.py,
      latency_values), -1 where not observed or not analyzed;
    * `dev`: its device (an index into `device_names`), -1 when not analyzed; `flags`:
      its RQ_* flags (0 when not analyzed);
    * `device_names`: the report's name of each device (model/devices.py)."""
    r, rq, n = t.r, t.rq, t.rows
    row = rq.extra.get("row")
    if row is None:
        row = np.arange(len(rq), dtype=I64)
    once = r["once"]
    bg, drop, owner = once.background, once.dropped, once.owner
    background = np.ones(n, bool)
    background[row] = False
    counted = np.zeros(n, bool)
    counted[row] = True
    if bg is not None:
        background[row[bg]] = True
    if drop is not None:
        counted[row[drop]] = False
    carried_for = np.full(n, -1, np.int32)
    if owner is not None:
        edges = carrying_edges(t.meta, rq)
        upper = np.array([e[0] for e in edges] + [-1], np.int32)
        m = owner >= 0
        carried_for[row[m]] = upper[owner[m]]
    cls = np.full(n, -1, np.int8)
    cls[row] = r["classify"]
    seek = np.zeros(n, I64)
    has_seek = np.zeros(n, bool)
    si, sv = r["seeks"]
    seek[row[si]] = sv
    has_seek[row[si]] = True
    call = np.full(n, -1, I64)
    call[row] = r["calls"]
    times = {}
    for m, k in enumerate(("device_ns", "queue_ns", "total_ns")):
        grp, v = latency_values(rq, r["classify"], m)
        times[k] = np.full(n, -1, I64)
        times[k][row] = np.where(grp < len(CLASS_NAMES), v, -1)
        del grp, v
    dev = np.full(n, -1, np.int32)
    dev[row] = rq.dev
    flags = np.zeros(n, rq.flags.dtype)
    flags[row] = rq.flags
    return {"background": background, "counted": counted, "carried_for": carried_for,
            "cls": cls, "seek": seek, "has_seek": has_seek,
            "call": call, **times, "dev": dev, "flags": flags,
            "device_names": device_names(t.meta, rq.devices)}


@dataclass
class CausalModel:
    """What the causal attribution was computed from, for a reader that replays it
    (`iowhy whatif`, analyzer/iowhy/whatif): the timeline of every actor
    (model/wakeups.py), the actor whose critical path is the elapsed time, the fill of
    the views/causal.py walk, the window, and the requests the analysis kept (the
    workload's devices; background I/O set apart) by their record `seq`, with their
    class (model/classify.py CLASS_NAMES) and device (an index into device_names)."""

    timeline: Any
    root: int
    fill: Any
    window: Window
    request_seq: np.ndarray
    request_class: np.ndarray
    request_dev: np.ndarray
    device_names: list[str]


def _metadata_data(rel: list[int], dev_op: np.ndarray, dev_bytes: np.ndarray
                   ) -> dict[str, Any]:
    """Metadata vs data: writes on the workload's devices `rel` (any submitter: jbd2,
    writeback)."""
    wb = dev_bytes[rel][:, :, abi.OP_WRITE].sum(axis=0) if rel else np.zeros(len(CLASS_NAMES))
    wn = dev_op[rel][:, :, abi.OP_WRITE].sum(axis=0) if rel else np.zeros(len(CLASS_NAMES))
    md_n, data_n = int(wn[METADATA]), int(wn[DATA])
    return {"metadata_bytes": int(round(wb[METADATA])), "data_bytes": int(round(wb[DATA])),
            "metadata_requests": md_n, "data_requests": data_n,
            "log_bytes": int(round(wb[LOG])),
            "request_ratio": round(md_n / data_n, 4) if data_n else None}


def attribution_unavailable(trace: Any, meta: Mapping[str, Any]) -> str | None:
    """Why the trace cannot say where the elapsed time went (no off-CPU data), or None:
    an import whose capture holds no scheduler events of the workload (META `import`
    says so), or a recording whose every off-CPU record was lost."""
    imp = meta.get("import")
    if isinstance(imp, Mapping) and imp.get("attribution") is False:
        fmt = str(imp.get("format") or "another tool")
        why = next((str(m) for m in imp.get("missing") or [] if "attribution" in str(m)),
                   "the capture holds no scheduler events of the workload")
        return f"imported from {fmt}: {why}"
    if trace is None or not hasattr(trace, "count"):
        return None
    lost = int((getattr(trace, "counters", None) or {}).get("lost_ringbuf_offcpu", 0))
    if lost and not trace.count("offcpu"):
        return (f"every off-CPU record was lost ({lost:,} in the kernel): record again with "
                "a bigger ring buffer (-r)")
    return None


def _trace_summary(trace: Any, win: Window, meta: Mapping[str, Any]) -> dict[str, Any]:
    """The report's `trace`: the recording as the trace describes it
    (traceformat.recording), the command shortened and the analysis' window."""
    rec = recording(trace, meta)
    mounts = [str(f["mountpoint"]) for f in rec["filesystems"]
              if isinstance(f, Mapping) and isinstance(f.get("mountpoint"), str)]
    return {
        "path": rec["path"],
        "command": rec["command"],
        "command_short": cmdline.short_command(rec["command"], mounts),
        "label": rec["label"],
        "pid": rec["pid"],
        "start_ns": win.start_ns, "end_ns": win.end_ns,
        "stop_reason": rec["stop_reason"],
        "exit_status": rec["exit_status"],
        "truncated": rec["truncated"],
    }


# -- metrics for histograms --------------------------------------------------------------

METRICS = names.METRICS
COMMIT_KINDS = ("jbd2", "xfs", "fc")


def metric_values(trace: Any, metric: str, klass: str | None = None,
                  progress: Callable[[str], None] | None = None) -> tuple[np.ndarray, str]:
    """Values of one metric for `iowhy hist`, exactly those the report's figures are made
    of: (values, unit) with unit "ns" or "sectors".

    klass: a request class (device/queue/total/seek), a call type (fsync) or a commit
    kind (commit: jbd2, xfs, fc). Raises ValueError for an unknown metric or class.
    """
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r} (one of {', '.join(METRICS)})")
    if klass is not None:
        known: Sequence[str] = {"fsync": tuple(abi.CALL_NAMES.values()),
                                "commit": COMMIT_KINDS}.get(metric, CLASS_NAMES)
        what = {"fsync": "call type", "commit": "commit kind"}.get(metric, "class")
        if klass not in known:
            raise ValueError(f"unknown {what} {klass!r} (one of {', '.join(known)})")
    res = analyze(trace, AnalysisConfig(values=(metric,), placement=False, locality=False,
                                        progress=progress))
    by = res["_values"][metric]
    parts = list(by.values()) if klass is None else [by[klass]] if klass in by else []
    v = np.concatenate(parts) if parts else np.zeros(0, I64)
    return v, "sectors" if metric == "seek" else "ns"


SPLITS = ("disk", "flags")
SPLIT_METRICS = ("device", "queue", "total", "seek")


def metric_split(trace: Any, metric: str, split: str, klass: str | None = None,
                 progress: Callable[[str], None] | None = None
                 ) -> tuple[dict[str, np.ndarray], str]:
    """The values of metric_values() by disk (split "disk": the request's device) or by
    flag combination ("flags": views.requests.flags_name, as biolatency -F): ({group:
    values ascending}, unit), groups with no value left out. Only the request metrics
    (SPLIT_METRICS) split; klass is a request class. Raises ValueError otherwise."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r} (one of {', '.join(SPLITS)})")
    if metric not in SPLIT_METRICS:
        raise ValueError(f"--per-disk and --flags apply to the request metrics "
                         f"({', '.join(SPLIT_METRICS)}), not {metric}")
    if klass is not None and klass not in CLASS_NAMES:
        raise ValueError(f"unknown class {klass!r} (one of {', '.join(CLASS_NAMES)})")
    res = analyze(trace, AnalysisConfig(values=(metric,), placement=False, locality=False,
                                        split=split, split_class=klass, progress=progress))
    return res["_split"][metric], "sectors" if metric == "seek" else "ns"
