"""iowhy's figures against the emulated disk's ground truth.

A lab run records a workload on an emulated disk (lab/emudisk.c): the FUSE daemon logs,
for every read, write and flush the loop device sends it, when the disk model started
serving it, when it ended, and what the model charged (positioning, transfer, destage).
This module turns those records into the figures iowhy claims to measure and sets them
side by side with iowhy's own.

The window. Every truth interval is clipped to the recording window, `[trace start_ns,
trace end_ns]` of the report: the truth and the trace share CLOCK_MONOTONIC, so nothing
needs aligning. Setup I/O (mkfs, extracting the tree for rmtree, laying out fio's file)
falls before the window and is left out on both sides.

Device side, not workload side. The truth knows what the *disk* did, not what the
workload waited for, so every pair below compares a device-side truth figure with
iowhy's *device view* (`devices[]` of the emulated disk), never with
`attribution_ns`: a flush that ran while tar was busy on the CPU is barrier time for
the disk but not for the workload, and the truth cannot tell the two apart. (The
attribution is checked by the lab tests through the seeds' conclusions instead.)

The loop device sits between the block layer and the daemon: iowhy's device stage of a
request runs from `block_rq_issue` to `block_rq_complete`, which adds the loop worker,
the VFS write into the FUSE file and the FUSE round trip (tens of microseconds) to the
daemon's service time, and a request queued inside the loop worker behind another one
already counts as in flight for iowhy. So iowhy's device times are expected to be a
little larger than the truth's, by about (requests x loop overhead): small against
the 5%-of-elapsed tolerance, and visible in the sign of `error_ns`.

The figures (name: truth definition -> iowhy figure it is compared with):

``device_busy``
    union of the service intervals `[start_ns, end_ns)` of every read, write, flush and
    discard record -> `devices[disk].busy_ns` (union of device stages).
``barrier``
    sum of the service time of the flush records (the disk serving a cache flush: its
    destage of the dirty extents plus the fixed flush overhead; flushes never overlap,
    the disk serves one request at a time) -> `devices[disk].flush.total_ns` (sum of
    the device time of every `FF` request; one flush in flight per queue, so it is also
    `busy_by_category_ns.barrier`).
``log``
    sum of the service time of the write records whose first sector lies in a log
    region of a filesystem on this disk, as the trace metadata recorded it
    (`filesystems[].log.ranges` and `.fc_ranges`, whole-disk sectors; the emulated
    disk's byte offset / 512 is the same whole-disk sector) ->
    `devices[disk].busy_by_category_ns.log` (time a log write's data stage was in flight
    and no flush was: the post-flush of a FUA commit block is barrier on both sides).
    btrfs has no log region: the metadata lists its superblock copies, and iowhy also
    classifies the log-tree writes a task makes inside its own fsync as log, which no
    offset can identify. So for btrfs the figure is compared only when the workload
    made no fsync-family calls that write a log tree (fsync, fdatasync, O_SYNC,
    sync_file_range, msync): then both sides count exactly the superblock writes.
    Otherwise the entry is reported with ``comparable: false``.
``positioning``
    sum over read and write records of `positioning_ns` (the request's own seek +
    rotation) + `destage_positioning_ns` (positioning of dirty extents the disk had to
    destage inside that request because its cache was full) -> the sum over classes of
    `placement.<class>.positioning_ns` (a seeking request's service time beyond the
    contiguous-request baseline of its size bucket; docs/report-json.md). Destage
    positioning inside *flushes* is left out on purpose:
    iowhy sees it as flush time (it is inside `barrier` on both sides), and no
    request-level estimate can see a seek the disk makes inside a cache flush. With the
    write cache on, writes are absorbed and both figures are near zero; the figure is
    meaningful with the cache off, for reads (a cold rm -rf) and for fio's writes.

The instrument's own noise. Matching each trace request to its truth record gives the
latency the emulation adds per request (`emulation_latency`): a fixed cost (~0.1 ms)
plus, on a loaded machine, jitter -- a loop worker or a completion waiting for a CPU,
which iowhy cannot tell from device time (it inflates stages, hence busy time and the
positioning estimate). A time figure (barrier, log, device_busy) is judged only when all
of that latency (its sum over the matched requests) is within the figure's allowed error:
under load the fixed cost grows too, as every request waits for a CPU. Positioning is
judged when the jitter above the run's median is (its baseline absorbs the fixed cost).
Otherwise the entry says ``comparable: false`` and why.

Tolerances (`TOLERANCE_PCT_OF_ELAPSED`, `POSITIONING_TOLERANCE_PCT`): the time figures
must agree within 5% of elapsed; positioning within 20% of the truth. A relative error
means nothing when the truth is near zero (write cache on: every write absorbed), so
positioning is also accepted within 1% of elapsed (`POSITIONING_FLOOR_PCT_OF_ELAPSED`):
that is exactly 20% of a positioning cost of 5% of elapsed, so the relative rule governs
every run where positioning is a visible part of the time, and below that both sides
only have to agree that it is negligible.

When iowhy says its positioning figure is a lower bound (a device with no contiguous
request at all: baseline "fastest decile" for most of the measured requests), the figure
is judged as one (``bound: "lower"``): it must not exceed the truth by more than the
allowed error, and it must not be 0 when the truth is above the floor.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from . import emudisk

TOLERANCE_PCT_OF_ELAPSED = 5.0
POSITIONING_TOLERANCE_PCT = 20.0
POSITIONING_FLOOR_PCT_OF_ELAPSED = 1.0

# fsync-family calls after which btrfs log-tree writes may appear (not sync/syncfs:
# those commit the transaction, whose tree writes iowhy classifies as metadata)
BTRFS_LOG_CALLS = ("fsync", "fdatasync", "osync_write", "sync_file_range", "msync")

DEFINITIONS = {
    "device_busy": ("union of the disk's service intervals (read, write, flush, discard)",
                    "devices[disk].busy_ns"),
    "barrier": ("the disk's time serving cache flushes (destage + flush overhead)",
                "devices[disk].flush.total_ns"),
    "log": ("the disk's time serving writes whose first sector is in a log region of the "
            "trace metadata", "devices[disk].busy_by_category_ns.log"),
    "positioning": ("seek + rotation of reads and writes, incl. destage positioning inside "
                    "them (not inside flushes)", "sum of placement.<class>.positioning_ns"),
}


def union_ns(start: np.ndarray, end: np.ndarray) -> int:
    """Length of the union of half-open intervals [start, end)."""
    keep = end > start
    s, e = start[keep], end[keep]
    if not len(s):
        return 0
    order = np.argsort(s, kind="stable")
    s, e = s[order], e[order]
    reach = np.maximum.accumulate(e)
    # a new piece starts where an interval begins after everything before it ended
    new = np.ones(len(s), bool)
    new[1:] = s[1:] > reach[:-1]
    first = np.flatnonzero(new)
    last = np.r_[first[1:] - 1, len(s) - 1]
    return int((reach[last] - s[first]).sum())


def log_ranges(meta: Mapping[str, Any], disk: str) -> list[tuple[int, int]]:
    """Log regions (whole-disk sectors, half-open) of the filesystems on DISK."""
    out: list[tuple[int, int]] = []
    for f in meta.get("filesystems", []) or []:
        if f.get("disk") != disk:
            continue
        lg = f.get("log") or {}
        for key in ("ranges", "fc_ranges"):
            for r in lg.get(key) or []:
                if len(r) >= 2:
                    out.append((int(r[0]), int(r[1])))
    return out


def fs_types(meta: Mapping[str, Any], disk: str) -> list[str]:
    return [str(f.get("fstype")) for f in meta.get("filesystems", []) or []
            if f.get("disk") == disk]


def truth_figures(truth: np.ndarray, start_ns: int, end_ns: int,
                  ranges: Iterable[tuple[int, int]]) -> dict[str, int]:
    """The truth side of every figure (module docstring), clipped to [start_ns, end_ns]."""
    t = truth[truth["kind"] != emudisk.KIND_MARK]
    s = np.clip(t["start_ns"].astype(np.int64), start_ns, end_ns)
    e = np.clip(t["end_ns"].astype(np.int64), start_ns, end_ns)
    inside = e > s
    # a record fully outside the window contributes nothing, even its positioning
    served = np.where(inside, e - s, 0)
    kind = t["kind"]
    flush = kind == emudisk.KIND_FLUSH
    write = kind == emudisk.KIND_WRITE
    rw = (kind == emudisk.KIND_READ) | write
    sector = (t["offset_bytes"] // 512).astype(np.int64)
    in_log = np.zeros(len(t), bool)
    for lo, hi in ranges:
        in_log |= (sector >= lo) & (sector < hi)
    # Positioning: requests served wholly inside the window (iowhy leaves out requests
    # issued before the recording or still in flight at its end), except the first read
    # or write: its seek starts from a head position set before the recording, which
    # iowhy never saw (it has no seek distance there either).
    whole = rw & (t["start_ns"].astype(np.int64) >= start_ns) & \
        (t["end_ns"].astype(np.int64) <= end_ns)
    first = np.flatnonzero(whole)
    if len(first):
        whole[first[np.argmin(t["start_ns"][first])]] = False
    pos = (t["positioning_ns"] + t["destage_positioning_ns"]).astype(np.int64)
    return {
        "device_busy": union_ns(s, e),
        "barrier": int(served[flush].sum()),
        "log": int(served[write & in_log].sum()),
        "positioning": int(pos[whole].sum()),
        # counts, for the run's figures
        "flushes": int((flush & inside).sum()),
        "writes": int((write & inside).sum()),
        "reads": int(((kind == emudisk.KIND_READ) & inside).sum()),
        "log_writes": int((write & in_log & inside).sum()),
        "late_ns": int(np.maximum(
            (t["end_ns"] - t["start_ns"]).astype(np.int64) - t["model_ns"].astype(np.int64),
            0)[inside].sum()),
    }


def find_device(report: Mapping[str, Any], major: int, minor: int) -> dict[str, Any] | None:
    for d in report.get("devices", []) or []:
        if d.get("major") == major and d.get("minor") == minor:
            return dict(d)
    return None


def iowhy_figures(report: Mapping[str, Any], major: int, minor: int) -> dict[str, int]:
    """iowhy's side of every figure, from the report of the run (docs/report-json.md)."""
    d = find_device(report, major, minor)
    if d is None:  # no request at all reached the disk in the window
        return {"device_busy": 0, "barrier": 0, "log": 0, "positioning": 0, "flushes": 0,
                "positioning_lower_bound": 0}
    place = report.get("placement") or {}
    # iowhy's own word that its estimate is a lower bound (docs/report-json.md, placement)
    measured = {k: sum(int(p.get("baseline_requests", {}).get(k) or 0) for p in place.values())
                for k in ("zero-seek bucket", "device fit", "fastest decile")}
    lower = measured["fastest decile"] > max(measured["zero-seek bucket"], measured["device fit"])
    return {
        "positioning_lower_bound": int(lower),
        "device_busy": int(d["busy_ns"]),
        "barrier": int(d["flush"]["total_ns"]),
        "log": int(d["busy_by_category_ns"]["log"]),
        "positioning": int(sum(int(p.get("positioning_ns") or 0) for p in place.values())),
        "flushes": int(d["flush"]["count"]),
    }


def _btrfs_log_comparable(report: Mapping[str, Any]) -> bool:
    by_call = (report.get("fsync") or {}).get("by_call") or {}
    return not any(int((by_call.get(c) or {}).get("count") or 0) for c in BTRFS_LOG_CALLS)


def compare(report: Mapping[str, Any], truth: np.ndarray, meta: Mapping[str, Any],
            disk: str, major: int, minor: int, jitter_ns: int = 0,
            delay_ns: int = 0) -> list[dict[str, Any]]:
    """One entry per compared figure: figure, truth_ns, iowhy_ns, error_ns (iowhy - truth),
    error_pct_of_elapsed, tolerance, allowed_ns, ok, comparable (and error_pct_of_truth
    for positioning), plus both definitions.

    The emulation's own latency (emulation_latency) is the instrument's error, and a
    figure whose allowed error it can exceed is not judged. delay_ns, all of it (its
    fixed cost and the jitter above it), counts against the time figures (barrier, log,
    device_busy): each request is in flight for it and iowhy cannot tell it from device
    time; under load the fixed cost itself grows (the loop worker and the FUSE daemon wait
    for a CPU at every request), so the jitter above the run's own median undercounts
    it. jitter_ns counts against positioning, whose contiguous-request baseline absorbs
    the fixed cost."""
    el = int(report["elapsed_ns"])
    w0, w1 = int(report["trace"]["start_ns"]), int(report["trace"]["end_ns"])
    tf = truth_figures(truth, w0, w1, log_ranges(meta, disk))
    iw = iowhy_figures(report, major, minor)
    btrfs = "btrfs" in fs_types(meta, disk)
    out = []
    for fig in ("barrier", "log", "device_busy", "positioning"):
        tv, iv = tf[fig], iw[fig]
        err = iv - tv
        e: dict[str, Any] = {
            "figure": fig, "truth_ns": tv, "iowhy_ns": iv, "error_ns": err,
            "error_pct_of_elapsed": round(100.0 * abs(err) / el, 3) if el else None,
            "comparable": True,
            "truth": DEFINITIONS[fig][0], "iowhy": DEFINITIONS[fig][1],
        }
        if fig == "positioning":
            floor = el * POSITIONING_FLOOR_PCT_OF_ELAPSED / 100.0
            allowed = max(POSITIONING_TOLERANCE_PCT / 100.0 * tv, floor)
            e["error_pct_of_truth"] = round(100.0 * abs(err) / tv, 2) if tv else None
            e["allowed_ns"] = int(allowed)
            e["tolerance"] = (f"{POSITIONING_TOLERANCE_PCT:g}% of truth, at least "
                              f"{POSITIONING_FLOOR_PCT_OF_ELAPSED:g}% of elapsed")
            e["ok"] = abs(err) <= allowed
            if iw["positioning_lower_bound"]:
                e["bound"] = "lower"
                e["tolerance"] += "; iowhy's figure is a lower bound: at most truth + allowed"
                e["ok"] = err <= allowed and (iv > 0 or tv <= floor)
        else:
            e["tolerance"] = f"{TOLERANCE_PCT_OF_ELAPSED:g}% of elapsed"
            e["allowed_ns"] = int(TOLERANCE_PCT_OF_ELAPSED / 100.0 * el)
            e["ok"] = abs(err) <= e["allowed_ns"]
        if fig == "positioning":
            noise = jitter_ns
            what = (f"latency jitter ({jitter_ns / 1e6:.1f} ms: loop worker and FUSE "
                    "completions waiting for a CPU)")
        else:
            noise = delay_ns
            what = (f"latency ({delay_ns / 1e6:.1f} ms, {jitter_ns / 1e6:.1f} ms of it "
                    "jitter: the loop worker and the FUSE round trip, in flight for iowhy)")
        if noise > e["allowed_ns"]:
            e["comparable"] = False
            e["ok"] = None
            e["note"] = (f"the emulated disk's own {what} exceeds the allowed error "
                         f"({e['allowed_ns'] / 1e6:.1f} ms): machine too busy for this check")
        if fig == "log" and btrfs and not _btrfs_log_comparable(report):
            e["comparable"] = False
            e["ok"] = None
            e["note"] = ("btrfs log-tree writes (inside fsync) have no fixed region: the "
                         "truth cannot identify them by offset")
        out.append(e)
    return out


def truth_summary(truth: np.ndarray, report: Mapping[str, Any], meta: Mapping[str, Any],
                  disk: str) -> dict[str, int]:
    """Truth counts and times in the window (flushes, writes, reads, log writes, ...)."""
    w0, w1 = int(report["trace"]["start_ns"]), int(report["trace"]["end_ns"])
    return truth_figures(truth, w0, w1, log_ranges(meta, disk))


def request_counts(truth: np.ndarray, requests: np.ndarray, start_ns: int, end_ns: int,
                   major: int, minor: int) -> dict[str, Any]:
    """Reads, writes and flushes served wholly inside the window: by the disk (truth) and
    in the trace (request records of the disk, issue to final completion inside). The
    loop device turns each request into one FUSE call (direct I/O, requests below the
    FUSE write size), so the two should be equal: a difference is a request the trace
    lost, or one the disk never saw."""
    t = truth[(truth["start_ns"] >= start_ns) & (truth["end_ns"] <= end_ns)]
    r = requests[(requests["dev_major"] == major) & (requests["dev_minor"] == minor)]
    r = r[(r["issue_ns"] > 0) & (r["issue_ns"] >= start_ns) & (r["done_ns"] <= end_ns)]
    kinds = (("reads", emudisk.KIND_READ, 0), ("writes", emudisk.KIND_WRITE, 1),
             ("flushes", emudisk.KIND_FLUSH, 2))
    return {"truth": {n: int((t["kind"] == k).sum()) for n, k, _ in kinds},
            "trace": {n: int((r["op"] == op).sum()) for n, _, op in kinds},
            "missing": missing_requests(truth, requests, start_ns, end_ns, major, minor)}


EDGE_NS = 50_000_000  # truth served this close to the window's ends is not judged


def missing_requests(truth: np.ndarray, requests: np.ndarray, start_ns: int, end_ns: int,
                     major: int, minor: int, edge_ns: int = EDGE_NS) -> int:
    """Operations the disk served well inside the window (EDGE_NS from either end) that
    have no request in the trace: reads and writes matched by (kind, offset, length) against
    every request of the disk, so the window's edges (issue time vs service time) cannot
    shift a request from one side to the other; flushes, which all look alike, by count
    against the trace's flushes issued in the whole window."""
    from collections import Counter
    t = truth[(truth["start_ns"] >= start_ns + edge_ns) & (truth["end_ns"] <= end_ns - edge_ns)]
    r = requests[(requests["dev_major"] == major) & (requests["dev_minor"] == minor)]
    op_of_kind = {emudisk.KIND_READ: 0, emudisk.KIND_WRITE: 1}
    have = Counter(zip(r["op"].tolist(), (r["start_sector"] * 512).tolist(),
                       r["len_bytes"].tolist()))
    want = Counter((op_of_kind[int(k)], int(o), int(n)) for k, o, n in
                   zip(t["kind"], t["offset_bytes"], t["len_bytes"]) if int(k) in op_of_kind)
    missing = sum(max(0, c - have.get(key, 0)) for key, c in want.items())
    ff = r[(r["op"] == 2) & (r["issue_ns"] >= start_ns) & (r["issue_ns"] <= end_ns)]
    missing += max(0, int((t["kind"] == emudisk.KIND_FLUSH).sum()) - len(ff))
    return int(missing)


def emulation_latency(truth: np.ndarray, requests: np.ndarray, start_ns: int, end_ns: int,
                      major: int, minor: int) -> dict[str, int]:
    """How far the emulated disk is from a real one: the latency the loop worker and the
    FUSE round trip add to each request, measured by matching every trace request of the
    disk to its truth record (same kind, offset and length, in order).

    delay = (service start - max(issue, end of the disk's previous service)) + (completion
    - service end): the time the request spent neither served by the disk nor queued
    behind another request it was serving. Its median is the emulation's fixed cost;
    `jitter_ns` sums what exceeds that median (a loop worker or a completion waiting for
    a CPU on a loaded machine). iowhy cannot tell jitter from device time, so a run whose
    jitter is a visible part of the window cannot validate timing estimates such as
    positioning."""
    t = truth[(truth["kind"] >= emudisk.KIND_READ) & (truth["kind"] <= emudisk.KIND_FLUSH)]
    t = t[np.argsort(t["start_ns"], kind="stable")]
    r = requests[(requests["dev_major"] == major) & (requests["dev_minor"] == minor)]
    r = r[(r["issue_ns"] > 0) & (r["issue_ns"] >= start_ns) & (r["done_ns"] <= end_ns)]
    r = r[np.argsort(r["issue_ns"], kind="stable")]
    op_kind = {0: emudisk.KIND_READ, 1: emudisk.KIND_WRITE, 2: emudisk.KIND_FLUSH}
    pending: dict[tuple[int, int, int], list[int]] = {}
    for i in range(len(t)):
        k = int(t["kind"][i])
        key = (k, 0, 0) if k == emudisk.KIND_FLUSH else \
            (k, int(t["offset_bytes"][i]), int(t["len_bytes"][i]))
        pending.setdefault(key, []).append(i)
    prev_end = np.r_[0, t["end_ns"][:-1].astype(np.int64)]
    delays = []
    cursor: dict[tuple[int, int, int], int] = {}
    for q in r:
        qk = op_kind.get(int(q["op"]))
        if qk is None:
            continue
        key = (qk, 0, 0) if qk == emudisk.KIND_FLUSH else \
            (qk, int(q["start_sector"]) * 512, int(q["len_bytes"]))
        cand = pending.get(key, [])
        j = cursor.get(key, 0)
        issue = int(q["issue_ns"])
        # the first record of that shape the disk started serving at or after the issue
        while j < len(cand) and int(t["start_ns"][cand[j]]) < issue:
            j += 1
        if j >= len(cand):
            continue
        i = cand[j]
        cursor[key] = j + 1
        done = int(q["done_ns"] if qk == emudisk.KIND_FLUSH else q["data_done_ns"])
        before = int(t["start_ns"][i]) - max(issue, int(prev_end[i]))
        after = done - int(t["end_ns"][i])
        delays.append(max(before, 0) + max(after, 0))
    if not delays:
        return {"matched": 0, "median_ns": 0, "total_ns": 0, "jitter_ns": 0}
    d = np.asarray(delays, np.int64)
    med = int(np.median(d))
    return {"matched": len(d), "median_ns": med, "total_ns": int(d.sum()),
            "jitter_ns": int(np.maximum(d - med, 0).sum())}


def render_table(entries: Sequence[Mapping[str, Any]]) -> str:
    """The validation entries as a small text table."""
    def ms(v: Any) -> str:
        return "-" if v is None else f"{v / 1e6:,.1f}"
    lines = [f"{'figure':<12} {'truth ms':>11} {'iowhy ms':>11} {'error ms':>10} "
             f"{'% elapsed':>9}  check"]
    for e in entries:
        if not e.get("comparable", True):
            verdict = "n/a: " + str(e.get("note", ""))
        else:
            verdict = ("ok" if e["ok"] else "FAIL") + f" ({e['tolerance']}"
            if e["figure"] == "positioning" and e.get("error_pct_of_truth") is not None:
                verdict += f"; {e['error_pct_of_truth']}% of truth"
            verdict += ")"
        pct = e.get("error_pct_of_elapsed")
        lines.append(f"{e['figure']:<12} {ms(e['truth_ns']):>11} {ms(e['iowhy_ns']):>11} "
                     f"{ms(e['error_ns']):>10} {'-' if pct is None else f'{pct:.2f}':>9}  "
                     f"{verdict}")
    return "\n".join(lines)
