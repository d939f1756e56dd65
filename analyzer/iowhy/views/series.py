"""What the HTML report's figures draw, computed by the analysis (AnalysisConfig.figures):
per-class latency and seek histograms, the sector-vs-time scatter of the busiest
workload disks (a fixed-seed sample above SCATTER_LIMIT requests), the throughput
series, the fsync-family calls and the commit-side events. iowhy.reports.figures only
draws it. Times are seconds since the start of the window.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from .. import abi
from ..filesystems import BY_NAME as FS_BY_NAME
from ..filesystems import FILESYSTEMS
from ..kernels import log2_hist
from ..model.calls import call_exit
from ..model.classify import log_ranges
from ..model.devices import device_names
from ..model.requests import Requests, Window
from ..names import CLASS_NAMES
from .placement import seek_slots

# Above this many requests the sector scatter shows a fixed-seed random sample.
SCATTER_LIMIT = 200_000
SCATTER_SEED = 0
THROUGHPUT_BUCKETS = 150
MAX_SCATTER_DEVICES = 3
# Commit-side events drawn as marks under the fsync calls: (label, journal event).
COMMIT_MARKS = tuple((label, abi.JOURNAL_EVENT_CODES[ev]) for f in FILESYSTEMS
                     for label, ev in f.commit_marks)


@dataclass
class Scatter:
    """Requests of one disk for the sector-vs-time scatter (already downsampled)."""

    name: str
    t_s: np.ndarray  # issue time, s since the window start
    sector: np.ndarray
    cls: np.ndarray  # class code (index into CLASS_NAMES)
    total: int  # requests before downsampling
    log_ranges: list[tuple[int, int]]  # the filesystem log on this disk, whole-disk sectors
    log_label: str


@dataclass
class FigureData:
    """What the figures draw (figure_data)."""

    origin_ns: int
    elapsed_ns: int
    latency_hist_us: dict[str, list[int]]  # class -> log2 hist of device time in us
    seek_hist: dict[str, list[int]]  # class -> seek_hist_log2 (placement's slots)
    scatters: list[Scatter]
    scatter_devices_total: int  # disks with requests that could have been drawn
    tput_step_ns: int
    tput_read: np.ndarray  # bytes completed per bucket
    tput_write: np.ndarray
    calls_enter_s: np.ndarray  # fsync-family calls of workload tasks
    calls_exit_s: np.ndarray
    calls_tid: np.ndarray
    calls_type: np.ndarray  # call name per call
    marks: dict[str, np.ndarray] = field(default_factory=dict)  # label -> times (s)
    tasks: dict[int, str] = field(default_factory=dict)  # tid -> last known comm
    # The elapsed attribution per interval (views.causal.interval_view), when causal.
    attribution_series: list[dict[str, Any]] = field(default_factory=list)


def comm_text(raw: Any) -> str:
    """A task name as recorded (bytes up to the first NUL) as text."""
    if isinstance(raw, (bytes, np.bytes_)):
        return bytes(raw).split(b"\0", 1)[0].decode("utf-8", errors="replace")
    return str(raw)


def task_comms(trace: Any) -> dict[int, str]:
    """tid -> comm of its last task record (comm changes at exec), then of its fsync calls."""
    out: dict[int, str] = {}
    if trace is None:
        return out
    for name, ts_field in (("fsync", "enter_ns"), ("task", "ts_ns")):
        views = trace.chunks(name)
        if not views:
            continue
        tid = np.concatenate([v["tid"] for v in views])
        order = np.argsort(np.concatenate([v[ts_field] for v in views]), kind="stable")
        comm = np.concatenate([v["comm"] for v in views])[order]
        tid = tid[order]
        # The last record of each thread.
        u, first = np.unique(tid[::-1], return_index=True)
        for t, c in zip(u.tolist(), comm[len(tid) - 1 - first].tolist()):
            out[int(t)] = comm_text(c)
    return out


def _log_labels(meta: Mapping[str, Any]) -> dict[tuple[int, int], str]:
    """Disk -> a label for its log region ("xfs log", "ext4 journal")."""
    out: dict[tuple[int, int], str] = {}
    for f in meta.get("filesystems", []) or []:
        if f.get("disk_major") is None or f.get("disk_minor") is None:
            continue
        lg = f.get("log") or {}
        kind = lg.get("kind") if isinstance(lg, Mapping) else None
        known = FS_BY_NAME.get(f["fstype"]) if isinstance(f.get("fstype"), str) else None
        what = known.log_word if known else "log"
        out[(int(f["disk_major"]), int(f["disk_minor"]))] = \
            f"{f.get('fstype') or kind or 'fs'} {what}"
    return out


def _scatters(rq: Requests, cls: np.ndarray, win: Window, meta: Mapping[str, Any],
              names: list[str], workload: Sequence[int]) -> tuple[list[Scatter], int]:
    """Sector scatter: data-bearing issued requests of the workload's busiest disks
    (else of any disk); (scatters, disks that had requests to draw)."""
    drawable = (rq.issue > 0) & (rq.nbytes > 0) & (rq.op != abi.OP_FLUSH)
    per_dev = np.bincount(rq.dev[drawable], minlength=len(rq.devices))
    cand = [g for g in range(len(rq.devices)) if per_dev[g] and g in workload]
    if not cand:
        cand = [g for g in range(len(rq.devices)) if per_dev[g]]
    cand.sort(key=lambda g: -int(per_dev[g]))
    shown = cand[:MAX_SCATTER_DEVICES]
    ranges = log_ranges(meta)
    labels = _log_labels(meta)
    scatters = []
    budget = SCATTER_LIMIT // max(len(shown), 1)
    for g in shown:
        idx = np.flatnonzero(drawable & (rq.dev == g))
        total = len(idx)
        if total > budget:
            rng = np.random.default_rng(SCATTER_SEED)
            idx = np.sort(idx[rng.choice(total, size=budget, replace=False)])
        scatters.append(Scatter(
            name=names[g], t_s=((rq.issue[idx] - win.start_ns) / 1e9).astype(np.float64),
            sector=rq.sector[idx].copy(), cls=cls[idx].copy(), total=total,
            log_ranges=sorted(ranges.get(rq.devices[g], [])),
            log_label=labels.get(rq.devices[g], "log")))
    return scatters, len(cand)


def _throughput(rq: Requests, win: Window, workload: Sequence[int]
                ) -> tuple[int, dict[int, np.ndarray]]:
    """Bytes completed per time bucket on the workload's disks (else all), per op."""
    wl_idx = list(workload) or list(range(len(rq.devices)))
    step = max(1, -(-win.elapsed_ns // THROUGHPUT_BUCKETS))
    nb = max(1, -(-win.elapsed_ns // step))
    tput = {}
    on_wl = np.isin(rq.dev, np.asarray(wl_idx, dtype=np.int32))
    for op in (abi.OP_READ, abi.OP_WRITE):
        m = on_wl & (rq.op == op) & (rq.nbytes > 0) & (rq.issue > 0)
        b = np.clip((rq.data_done[m] - win.start_ns) // step, 0, nb - 1)
        tput[op] = np.bincount(b, weights=rq.nbytes[m], minlength=nb)[:nb]
    return int(step), tput


def figure_data(win: Window, meta: Mapping[str, Any], rq: Requests, cls: np.ndarray,
                workload: Sequence[int], values: Mapping[str, Any],
                placement: Mapping[str, Any], fs: Mapping[str, np.ndarray],
                jr: Mapping[str, np.ndarray], trace: Any = None) -> FigureData:
    """Everything the figures draw. workload: the workload's device indices; values: the
    per-class values (views.latency.values_by_class, with "seek"); placement: the
    placement view (its seek histograms, when computed)."""
    names = device_names(meta, rq.devices)
    lat_hist = {c: log2_hist(v // 1000) for c, v in values["device"].items() if len(v)}
    # Seek histograms: the placement view's when it was computed, else from the seeks.
    seek_hist = {c: list(p["seek_hist_log2"]) for c, p in placement.items()
                 if p.get("seek_hist_log2")}
    if not placement:
        for c in CLASS_NAMES:
            v = values["seek"][c]
            if len(v):
                seek_hist[c] = np.bincount(seek_slots(v)).tolist()
    scatters, ndev = _scatters(rq, cls, win, meta, names, workload)
    step, tput = _throughput(rq, win, workload)
    # fsync-family calls; a call still running is drawn to the end of the window.
    enter = np.asarray(fs["enter_ns"]).astype(np.int64)
    ex = call_exit(fs, win.end_ns)
    call = np.asarray(fs["call_u16"])
    call_names = np.array([abi.CALL_NAMES.get(int(c), f"call {int(c)}") for c in range(8)])
    ctype = call_names[np.minimum(call, 7)] if len(call) else np.zeros(0, dtype=str)
    ev = np.asarray(jr["event_u16"])
    ts = np.asarray(jr["ts_ns"]).astype(np.int64)
    marks = {}
    for label, code in COMMIT_MARKS:
        t = ts[ev == code]
        if len(t):
            marks[label] = (t - win.start_ns) / 1e9
    return FigureData(
        origin_ns=win.start_ns, elapsed_ns=win.elapsed_ns, latency_hist_us=lat_hist,
        seek_hist=seek_hist, scatters=scatters, scatter_devices_total=ndev,
        tput_step_ns=step, tput_read=tput[abi.OP_READ], tput_write=tput[abi.OP_WRITE],
        calls_enter_s=(enter - win.start_ns) / 1e9, calls_exit_s=(ex - win.start_ns) / 1e9,
        calls_tid=np.asarray(fs["tid"]).astype(np.int64), calls_type=ctype,
        marks=marks, tasks=task_comms(trace))
