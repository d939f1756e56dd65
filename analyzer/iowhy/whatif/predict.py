"""`iowhy whatif`: replay a recording against changed storage and predict its elapsed
time and attribution (docs/whatif.md has the model in words).

    result = predict(trace, Scenario(nobarrier=True))       # the JSON-ready dict
    profile = fit_profile(trace)                            # `whatif --fit`

The steps: the analysis (iowhy.analysis, with the causal timeline kept); the requests
the analysis kept (whatif/requests.py); a profile of each recorded device, fitted from
its own requests (whatif/fit.py): the model of the device as it was; the target of each
device (the scenario applied to that model, a preset or a profile); the programs of
every actor (whatif/program.py); the replay (whatif/replay.py) twice, once against the
recorded devices' model (the baseline: how well the replay reproduces the recording)
and once against the targets; the replayed timeline attributed by the analysis' own
walk (whatif/timeline.py, views/causal.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from ..analysis import AnalysisConfig, analyze
from ..categories import ATTRIBUTION_CATEGORIES
from ..findings import fmt_ns
from ..model.classify import DATA
from ..names import CLASS_NAMES
from ..views.causal import elapsed_view
from . import disk, fit, program, replay
from . import requests as wreq
from . import timeline as wtl

SCHEMA = "iowhy-whatif/1"
CAUSAL_DEPTH = AnalysisConfig().causal_depth  # the analysis' own, so both walk as deep


class WhatifError(ValueError):
    """A trace or a profile the predictor cannot use; str() is one line, .hint another."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.hint = hint


@dataclass(frozen=True)
class Scenario:
    """What changes: barriers off; the write cache on or off (None: as recorded); the
    disk (None: as recorded; a preset name; or a profile dict, `profile_name` its
    file)."""

    nobarrier: bool = False
    write_cache: str | None = None
    disk: str | None = None
    profile: Mapping[str, Any] | None = None
    profile_name: str | None = None

    def words(self) -> str:
        parts = []
        if self.disk or self.profile is not None:
            parts.append(f"--disk {self.profile_name or self.disk}")
        if self.write_cache:
            parts.append(f"--write-cache {self.write_cache}")
        if self.nobarrier:
            parts.append("--nobarrier")
        return " ".join(parts) or "as recorded"

    def as_dict(self) -> dict[str, Any]:
        return {"nobarrier": self.nobarrier, "write_cache": self.write_cache,
                "disk": self.profile_name if self.profile is not None else self.disk}


def load_profile(path: str) -> dict[str, Any]:
    """A profile file (`whatif --fit`), checked."""
    try:
        raw = Path(path).read_text()
    except OSError as e:
        raise WhatifError(f"cannot read {path}: {e.strerror}",
                          "make one with `iowhy whatif --fit TRACE -o PROFILE.json`") from None
    try:
        prof = json.loads(raw)
        fit.check_profile(prof)
    except (ValueError, TypeError) as e:
        raise WhatifError(f"{path} is not a device profile: {e}",
                          "make one with `iowhy whatif --fit TRACE -o PROFILE.json`") from None
    return dict(prof)


# -- the pipeline ------------------------------------------------------------------------

@dataclass
class Prepared:
    """A trace made ready to replay (analysis, requests, programs, device fits)."""

    result: dict[str, Any]
    cm: Any
    reqs: wreq.RequestTable
    progs: program.Programs
    births: program.Births
    anchor_actor: np.ndarray
    anchor_t: np.ndarray
    fits: list[dict[str, Any] | None]
    arch: str | None
    path: np.ndarray  # per request: its recorded path (fit.py "_path"), -1: none
    baseline: Any = None  # (result, end, attribution) of the replay as recorded, once run
    stacked: list[str] = field(default_factory=list)  # loop devices over recorded ones
    # per request: the PREFLUSH and FUA its filesystem asked for that its bios did not
    # carry (a write-through device's; requests.asked_barriers)
    asked: np.ndarray | None = None


def prepare(trace: Any, config: AnalysisConfig | None = None) -> Prepared:
    """Analyze the trace (its causal timeline kept) and make it ready to replay."""
    cfg = config or AnalysisConfig()
    cfg.keep_causal = True
    return prepare_from(trace, analyze(trace, cfg))


def prepare_from(trace: Any, res: dict[str, Any]) -> Prepared:
    """Make a trace ready to replay from its analysis (run with keep_causal)."""
    why = res.get("attribution_unavailable")
    if why:
        # no scheduler data: nothing says what a thread waited for, so nothing to replay
        raise WhatifError(
            f"{getattr(trace, 'path', 'the trace')}: nothing to replay, no attribution: "
            f"{why}",
            "`iowhy report` shows the requests and latencies the trace holds")
    cm = res.get("_causal")
    if cm is None:
        raise WhatifError(
            f"{getattr(trace, 'path', 'the trace')} has no wakeup links: the replay needs "
            "what ended each wait",
            "record it with this iowhy (trace format 4 or later); converted traces have none")
    if cm.root < 0:
        raise WhatifError("the trace has no workload thread to replay",
                          "record a command with `iowhy record -- CMD`")
    w0, w1 = cm.window.start_ns, cm.window.end_ns
    reqs = wreq.load(trace, cm.request_seq, cm.request_class, cm.request_dev,
                     cm.device_names, trace.meta or {}, w0, w1)
    meta = trace.meta or {}
    progs = program.build(trace, cm.timeline, reqs, meta.get("machine"))
    births = program.births(trace, cm.timeline, cm.root)
    aa, at = program.anchors(reqs, cm.timeline)
    fits: list[dict[str, Any] | None] = []
    for d in range(len(reqs.devices)):
        served = int(((reqs.dev == d) & (reqs.kind > 0) & reqs.observed).sum())
        fits.append(fit.fit_device(reqs, d) if served >= fit.MIN_ROWS else None)
    path = np.full(len(reqs), -1, np.int64)
    for f in fits:
        if f is not None:
            idx, pth = f["_path"]
            path[idx] = pth
    from ..views.stack import carrier_devices
    devs = [(int(d.get("major", -1)), int(d.get("minor", -1)))
            for d in meta.get("devices", []) or [] if isinstance(d, Mapping)]
    names = [str(d.get("name")) for d in meta.get("devices", []) or []
             if isinstance(d, Mapping)]
    try:
        carriers = carrier_devices(meta, devs, list(range(len(devs))))
    except (TypeError, ValueError, KeyError):
        carriers = {}
    stacked = sorted(names[u] for u in carriers if u < len(names)
                     and names[u] in cm.device_names)
    asked = wreq.asked_barriers(trace, reqs, meta) & ~reqs.iflags
    return Prepared(res, cm, reqs, progs, births, aa, at, fits, meta.get("machine"), path,
                    stacked=stacked, asked=asked)


def fit_profile(trace: Any) -> dict[str, Any]:
    """The profile of the trace's busiest device (`iowhy whatif --fit`)."""
    res = analyze(trace, AnalysisConfig(keep_causal=True, placement=False, locality=False))
    cm = res.get("_causal")
    if cm is None:
        raise WhatifError(
            f"{getattr(trace, 'path', 'the trace')} has no wakeup links: its requests "
            "cannot be told apart from background I/O",
            "record it with this iowhy (trace format 4 or later)")
    reqs = wreq.load(trace, cm.request_seq, cm.request_class, cm.request_dev,
                     cm.device_names, trace.meta or {}, cm.window.start_ns,
                     cm.window.end_ns)
    try:
        prof = fit.fit(reqs)
    except ValueError as e:
        raise WhatifError(f"cannot fit a profile: {e}",
                          "record a workload that does I/O on the device") from None
    prof["source"] = str(getattr(trace, "path", ""))
    return fit.public(prof)


def _fallback_fit(reqs: wreq.RequestTable, d: int) -> dict[str, Any]:
    """A device with too few requests to fit: the emulated hdd-7200 if the kernel says
    it is rotational, else the ssd, no path."""
    rot = reqs.devices[d].get("rotational")
    p = disk.PRESETS["hdd-7200" if rot else "ssd"]
    size = int(reqs.devices[d].get("size_bytes") or 0) or p.size_bytes
    p = disk.DiskParams(p.name, p.rpm, p.t2t_ns, p.full_stroke_ns, p.media_rate,
                        p.iface_rate, p.cache_bytes, p.flush_ns, size,
                        reqs.devices[d].get("write_cache") == "write back")
    return {"disk": p.as_dict(), "path_ns": {"read": 0, "write": 0, "flush": 0},
            "queue_depth": 1, "measured": [], "assumed": list(fit.COLS),
            "device": reqs.devices[d].get("name"), "fallback": p.name}


def _spec(base: Mapping[str, Any], reqs: wreq.RequestTable, d: int, sc: Scenario | None
          ) -> tuple[replay.DeviceSpec, dict[str, Any]]:
    """The device spec of device d: as recorded (sc None) or as the scenario makes it;
    and what it is, for the output."""
    dv = reqs.devices[d]
    recorded = fit.params_of(base)
    path = dict(base.get("path_ns") or {})
    qd = int(base.get("queue_depth") or 1)
    kernel_wb = dv.get("write_cache") == "write back"
    params = recorded
    source = "fitted from this trace" if base.get("measured") else \
        f"assumed ({base.get('fallback') or base.get('prior')}: too few requests to fit)"
    if sc is not None:
        if sc.profile is not None:
            params = fit.params_of(sc.profile)
            path = dict(sc.profile.get("path_ns") or {})
            qd = int(sc.profile.get("queue_depth") or 1)
            source = f"profile {sc.profile_name}"
        elif sc.disk:
            pre = disk.PRESETS[sc.disk]
            params = disk.DiskParams(pre.name, pre.rpm, pre.t2t_ns, pre.full_stroke_ns,
                                     pre.media_rate, pre.iface_rate, pre.cache_bytes,
                                     pre.flush_ns, recorded.size_bytes, recorded.cache_on)
            qd = 1
            source = f"preset {sc.disk} (emudisk's model), the recorded path"
        cache = recorded.cache_on if sc.write_cache is None else sc.write_cache == "on"
        params = params.with_cache(cache)
        if sc.write_cache is not None:
            kernel_wb = sc.write_cache == "on"
        flushes = kernel_wb and cache and not sc.nobarrier
    else:
        flushes = kernel_wb
    spec = replay.DeviceSpec(params, {k: int(v) for k, v in path.items()}, qd, flushes,
                             bool(dv.get("fua")))
    info = {"device": dv.get("name"), "model": source, "disk": params.as_dict(),
            "path_ns": spec.path_ns, "queue_depth": qd,
            "kernel_flushes": flushes}
    return spec, info


def _attribute(prep: Prepared, res: replay.Result, end: int,
               reqs: wreq.RequestTable | None = None) -> dict[str, Any]:
    cm = prep.cm
    reqs = reqs if reqs is not None else prep.reqs
    stl = wtl.build(cm.timeline, prep.progs, res, reqs, end)
    ev, _ = elapsed_view(stl, cm.root, CAUSAL_DEPTH, prep.arch, wtl.fill_of(stl, res, reqs))
    return ev


def _with_asked(prep: Prepared, specs: list[replay.DeviceSpec]) -> wreq.RequestTable:
    """The requests as the replay sends them: on a device recorded write-through that
    the replay gives a write cache the kernel flushes, each request also asks for the
    PREFLUSH and FUA its filesystem asked for and the block layer dropped (prep.asked)."""
    t = prep.reqs
    if prep.asked is None or not prep.asked.any():
        return t
    wt = np.asarray([s.flushes and t.devices[d].get("write_cache") != "write back"
                     for d, s in enumerate(specs)], bool)
    add = np.where(wt[t.dev], prep.asked, 0) if len(wt) else np.zeros(len(t), np.int64)
    if not add.any():
        return t
    return replace(t, iflags=t.iflags | add,
                   flush_seq=t.flush_seq | ((add != 0) & (t.kind > 0)))


def run(prep: Prepared, sc: Scenario | None, service: str = "model"
        ) -> tuple[replay.Result, int, list[dict[str, Any]], wreq.RequestTable]:
    """One replay: (its result, the predicted window end, the devices as replayed, the
    requests as sent: _with_asked)."""
    cm = prep.cm
    specs, infos = [], []
    for d in range(len(prep.reqs.devices)):
        base = prep.fits[d] or _fallback_fit(prep.reqs, d)
        s, i = _spec(base, prep.reqs, d, sc)
        specs.append(s)
        infos.append(i)
    reqs = _with_asked(prep, specs)
    # each request keeps its recorded path on the device it was recorded on; another
    # disk has its own (its typical path: the fit's median, or the profile's)
    other_disk = sc is not None and (sc.disk is not None or sc.profile is not None)
    # a helper's wait for a CPU: at most the workload threads' 99th percentile
    # (program.runq_bound);
    # the identity replay (service "recorded") keeps every wait as recorded
    bound = prep.progs.runq_bound
    cap = bound if service == "model" and bound >= 0 else None
    rp = replay.Replay(prep.progs, prep.births, reqs, prep.anchor_actor, prep.anchor_t,
                       specs, service=service, path=None if other_disk else prep.path,
                       workload=~cm.timeline.helper, helper_runq_cap=cap)
    res = rp.run(cm.window.start_ns)
    tl = cm.timeline
    root = cm.root
    if res.death[root] < 0:
        raise WhatifError("the replay did not finish: the recorded process waits on "
                          "something nothing ends", "report this trace as a bug")
    end = int(res.death[root] + (cm.window.end_ns - tl.death[root]))
    return res, end, infos, reqs


def predict(trace: Any, sc: Scenario, prep: Prepared | None = None) -> dict[str, Any]:
    """The prediction (docs/whatif.md, the JSON keys)."""
    prep = prep or prepare(trace)
    cm, reqs = prep.cm, prep.reqs
    w0, w1 = cm.window.start_ns, cm.window.end_ns
    measured = w1 - w0
    if prep.baseline is None:
        base_res, base_end, _, base_reqs = run(prep, None)
        prep.baseline = (base_res, base_end, _attribute(prep, base_res, base_end, base_reqs))
    base_res, base_end, bev = prep.baseline
    res, end, infos, sent = run(prep, sc)
    ev = _attribute(prep, res, end, sent)
    rec = prep.result
    out: dict[str, Any] = {
        "schema": SCHEMA,
        "trace": str(getattr(trace, "path", "")),
        "problems": list(rec.get("problems") or []),
        "scenario": sc.as_dict(),
        "measured_elapsed_ns": int(measured),
        "predicted_elapsed_ns": int(end - w0),
        "baseline_elapsed_ns": int(base_end - w0),
        "attribution_ns": {k: int(v) for k, v in rec["attribution_ns"].items()},
        "predicted_attribution_ns": {k: int(ev["attribution_ns"].get(k, 0))
                                     for k in ATTRIBUTION_CATEGORIES},
        "predicted_attribution_detail_ns": ev["attribution_detail_ns"],
        "baseline_attribution_ns": {k: int(bev["attribution_ns"].get(k, 0))
                                    for k in ATTRIBUTION_CATEGORIES},
        "devices": infos,
        "recorded_devices": [_recorded_device(prep, d) for d in range(len(reqs.devices))],
        "replay": _replay_stats(prep, base_res, res),
    }
    out["replay"]["asked_barriers"] = int((sent.iflags != reqs.iflags).sum())
    out["changes"] = changes(prep, out, base_res, res)
    out["assumptions"] = assumptions(prep, sc, infos, out["replay"])
    out["cannot_tell"] = cannot_tell(prep, sc, out)
    return out


def _recorded_device(prep: Prepared, d: int) -> dict[str, Any]:
    f = prep.fits[d]
    dv = prep.reqs.devices[d]
    if f is None:
        return {"device": dv.get("name"), "fitted": False}
    return {"device": dv.get("name"), "fitted": True, "disk": f["disk"],
            "path_ns": f["path_ns"], "queue_depth": f["queue_depth"],
            "measured": f["measured"], "assumed": f["assumed"], "fit": f.get("fit")}


def _per_class(prep: Prepared, res: replay.Result | None) -> dict[str, dict[str, int]]:
    """Per class: requests served and their summed service time, recorded (res None) or
    replayed (the replay's own flushes under "flush")."""
    t = prep.reqs
    out: dict[str, dict[str, int]] = {}
    if res is None:
        for d in range(len(t.devices)):
            idx, _, svc = wreq.service_times(t, d)
            for c, s in zip(t.cls[idx].tolist(), svc.tolist()):
                o = out.setdefault(CLASS_NAMES[c], {"requests": 0, "service_ns": 0})
                o["requests"] += 1
                o["service_ns"] += max(0, s)
        return out
    ok = (res.svc_start >= 0) & (res.svc_end >= res.svc_start)
    for c, a, b in zip(t.cls[ok].tolist(), res.svc_start[ok].tolist(), res.svc_end[ok].tolist()):
        o = out.setdefault(CLASS_NAMES[c], {"requests": 0, "service_ns": 0})
        o["requests"] += 1
        o["service_ns"] += b - a
    if res.flush_start:
        n = min(len(res.flush_start), len(res.flush_end))
        out["flush"] = {"requests": n, "service_ns": int(sum(
            e - s for s, e in zip(res.flush_start[:n], res.flush_end[:n])))}
    return out


def _replay_stats(prep: Prepared, base: replay.Result, res: replay.Result) -> dict[str, Any]:
    p = prep.progs
    t = prep.reqs
    return {
        "actors": int(len(p.first) - 1),
        "steps": program.summary(p),
        "request_links": {"recorded": p.linked_waits, "unplaced": p.linked_unplaced,
                          "guessed": p.guessed},
        "requests": int(len(t)),
        "requests_anchored": int((prep.anchor_actor >= 0).sum()),
        "recorded_flushes": int(t.is_ff.sum()),
        "flushes": res.flushes,
        "baseline_flushes": base.flushes,
        "destaged_bytes": res.destage_bytes,
        "by_class_recorded": _per_class(prep, None),
        "by_class_baseline": _per_class(prep, base),
        "by_class": _per_class(prep, res),
        "model_ns": res.model_ns,
        "path_ns": res.path_ns,
        "forced_waits": res.forced,
        "actors_unfinished": res.stuck,
        "helper_runqueue_cap": {"bound_ns": p.runq_bound, "workload_waits": p.runq_waits,
                                "shortened": res.capped, "removed_ns": res.capped_ns,
                                "baseline_shortened": base.capped,
                                "baseline_removed_ns": base.capped_ns},
    }


_CAT_CLASSES = {"barrier": ("flush",), "log": ("log",), "metadata": ("metadata",),
                "data": ("data", "discard"), "read": ("read", "readahead")}


def changes(prep: Prepared, out: Mapping[str, Any], base: replay.Result,
            res: replay.Result) -> list[dict[str, Any]]:
    """The difference explained, one line per level-one category that moves by 1% of
    the measured elapsed time or more, largest first: the category's recorded and
    predicted time and, for a device category, what its requests cost then and now.
    Where the baseline (the replay with nothing changed, on the recorded device's
    model) already moves the category by 1% of elapsed or more, the line says by how
    much (`baseline_delta_ns`): that part of the move is the replay's, not the
    scenario's (docs/whatif.md, "How good it is")."""
    rec, pred = out["attribution_ns"], out["predicted_attribution_ns"]
    b_att = out.get("baseline_attribution_ns") or {}
    el = max(1, out["measured_elapsed_ns"])
    st = out["replay"]
    lines: list[dict[str, Any]] = []
    for cat in ATTRIBUTION_CATEGORIES:
        d = pred[cat] - rec[cat]
        if abs(d) < 0.01 * el:
            continue
        why = ""
        classes = _CAT_CLASSES.get(cat)
        if classes:
            r0 = [st["by_class_recorded"].get(c) for c in classes]
            r1 = [st["by_class"].get(c) for c in classes]
            n0 = sum(x["requests"] for x in r0 if x)
            s0 = sum(x["service_ns"] for x in r0 if x)
            n1 = sum(x["requests"] for x in r1 if x)
            s1 = sum(x["service_ns"] for x in r1 if x)
            noun = "cache flushes" if cat == "barrier" else f"{'/'.join(classes)} requests"
            if n0 and not n1:
                why = f"{n0:,} {noun} x {fmt_ns(s0 / n0)} no longer sent"
            elif n0 or n1:
                a = fmt_ns(s0 / n0) if n0 else "-"
                b = fmt_ns(s1 / n1) if n1 else "-"
                why = f"{n0:,} -> {n1:,} {noun}, device {a} -> {b} each"
            f0 = st["by_class_recorded"].get("flush") or {}
            f1 = st["by_class"].get("flush") or {}
            nf0, nf1 = f0.get("requests", 0), f1.get("requests", 0)
            if cat == "log" and nf1 != nf0:
                # a flush a log write waits for is the log's time (model/wakeups.py)
                why += f"; cache flushes {nf0:,} -> {nf1:,}"
                if nf1:
                    why += f", {fmt_ns(f1.get('service_ns', 0) / nf1)} each"
        verb = "would go" if pred[cat] == 0 else "would grow" if d > 0 else "would shrink"
        text = f"{cat} {fmt_ns(rec[cat]) if rec[cat] else '0'} {verb}"
        if pred[cat]:
            text += f" to {fmt_ns(pred[cat])}"
        if why:
            text += f": {why}"
        bd = int(b_att[cat] - rec[cat]) if cat in b_att else 0
        if abs(bd) >= 0.01 * el:
            text += (f" (with nothing changed, the replay moves it "
                     f"{'+' if bd > 0 else '-'}{fmt_ns(abs(bd))})")
        lines.append({"category": cat, "recorded_ns": int(rec[cat]),
                      "predicted_ns": int(pred[cat]), "delta_ns": int(d),
                      "baseline_delta_ns": bd, "text": text})
    lines.sort(key=lambda x: -abs(int(x["delta_ns"])))
    return lines


def assumptions(prep: Prepared, sc: Scenario, infos: list[dict[str, Any]],
                st: Mapping[str, Any]) -> list[str]:
    """What the model assumes, in words (the same in every prediction, with this
    trace's figures; st: the prediction's `replay`)."""
    out = [
        "each thread keeps its recorded order of syscalls and CPU bursts; a wait for a "
        "CPU keeps its place in the distribution of the machine's waits for a CPU after "
        "a sleep as long as the one before it (measured on the trace's wakeups: the "
        "machine as loaded as when recorded)",
        "a thread that sleeps on its timer in a sleeping syscall (nanosleep, poll, "
        "select, epoll...) again and again (a polling loop, fio's main thread) stops "
        "once the other threads of the workload are done or waiting for each other; a "
        "single sleep, a timer inside another call keep their length",
        "a wait ends when what ended it in the recording does in the replay: the "
        "request whose completion woke it, or the thread whose wakeup did; a sleep on a "
        "timer, a wait on a process outside the workload keep their recorded length",
        "requests keep their size, place and submitter; they reach the device when "
        "their submitter reaches its recorded submission, are served in arrival order "
        "and stay concurrent up to the device's queue depth",
        "kernel helper threads (kworkers) do the workload's recorded work for it; their "
        "other work costs the workload nothing, nor does a wait of theirs that nothing "
        "of the workload ended, but a sleep on their own timer while the workload "
        "waited for them",
        _runq_cap_words(st["helper_runqueue_cap"]),
        "the device is served by the emulated disk's model (lab/emudisk.c): seek, "
        "rotation, media and interface transfer, a write cache that absorbs writes and "
        "destages them at a flush or when full, a fixed flush overhead; plus the "
        "recorded path's per-request time (the loop device and FUSE round trip of the "
        "lab's disk, a real disk's controller and bus): each request's own as recorded on "
        "the recorded disk, the typical one (median) on another",
        "the write cache starts empty and the head at sector 0",
    ]
    for i in infos:
        d = i["disk"]
        wc = d["write_cache"]
        out.append(f"{i['device']}: {i['model']}; write cache {wc}, "
                   f"{'flushes sent' if i['kernel_flushes'] else 'no flushes sent'}, "
                   f"queue depth {i['queue_depth']}, path "
                   f"{fmt_ns(i['path_ns'].get('write', 0))} per request")
    if sc.nobarrier:
        out.append("--nobarrier: no cache flush reaches the device; PREFLUSH is dropped "
                   "and a FUA write is a plain write")
    if sc.write_cache == "off":
        out.append("--write-cache off: the kernel sees a write-through device and sends "
                   "no flush; every write pays its positioning and media transfer")
    return out


def _runq_cap_words(c: Mapping[str, Any]) -> str:
    """The assumption on helpers' waits for a CPU, with this prediction's figures."""
    if c["bound_ns"] < 0:
        return ("a kernel helper's wait for a CPU keeps its recorded length (the "
                f"workload's threads waited for a CPU {c['workload_waits']:,} times in the "
                f"recording, fewer than {program.WAKE_MIN} to bound it by)")
    n, rm = c["shortened"], c["removed_ns"]
    bn, brm = c["baseline_shortened"], c["baseline_removed_ns"]
    return ("a kernel helper's wait for a CPU is the machine's load, not the work: it "
            "lasts at most as long as 99% of the workload's threads' waits for a CPU in "
            f"the recording ({fmt_ns(c['bound_ns'])}, of {c['workload_waits']:,} waits; "
            "under 100, their longest); a longer one is a rare event of a loaded machine, "
            "which a run of another length meets elsewhere or not at all. "
            + (f"{n:,} shortened, {fmt_ns(rm)} in all" if n else "none shortened")
            + " (baseline: "
            + (f"{bn:,}, {fmt_ns(brm)})" if bn else "none)"))


def _delalloc_ext4_on_write_back(prep: Prepared) -> list[str]:
    """The replayed devices, recorded with their write cache on, that carry an ext4
    mounted with delayed allocation (its default) and that were written data: there the
    data's place on the disk is decided at writeback, by the CPU the writeback runs on
    (mballoc's per-CPU locality groups for small files)."""
    t = prep.reqs
    wrote = (t.cls == DATA) & (t.kind == disk.WRITE)
    wb = {t.devices[d]["name"] for d in np.unique(t.dev[wrote]).tolist()
          if t.devices[d].get("write_cache") == "write back"}
    out = []
    for f in prep.result.get("filesystems") or []:
        if not isinstance(f, Mapping) or f.get("fstype") != "ext4":
            continue
        if "nodelalloc" in str(f.get("options") or "").split(","):
            continue
        d = f.get("disk")
        if d in wb and d not in out:
            out.append(str(d))
    return out


def cannot_tell(prep: Prepared, sc: Scenario, out: Mapping[str, Any]) -> list[str]:
    """What the trace cannot tell about this prediction."""
    lines = []
    if sc.nobarrier or sc.write_cache or sc.disk or sc.profile is not None:
        lines.append("the filesystem and the kernel may issue other requests on other "
                     "storage: without flushes a journal commits as often and writes as "
                     "much, and writeback batches as it did; the replay sends the recorded "
                     "requests (faster commits can group fewer fsyncs each, slower ones "
                     "more)")
    if sc.write_cache == "off":
        seeks = {i["device"] for i in out.get("devices") or []
                 if i["disk"].get("t2t_ns") or i["disk"].get("full_stroke_ns")
                 or i["disk"].get("rpm")}
        ext4 = [d for d in _delalloc_ext4_on_write_back(prep) if d in seeks]
        if ext4:
            lines.append(
                f"where ext4 would place the data on {', '.join(ext4)}: it allocates small "
                "files' blocks at writeback, in a group per CPU; on a write-through disk "
                "the writeback waits for its earlier writes to complete and may resume "
                "on another CPU, and the files it writes next then land elsewhere, a "
                "seek apart. The replay keeps the recorded placement, so the prediction "
                "can be short by a seek per move")
    lines.append("CPU bursts keep their recorded length: a thread that waits less wakes "
                 "on a warmer CPU and often runs faster than recorded (a shorter "
                 "prediction would then still be long)")
    if sc.disk:
        lines.append("each request's path beyond the disk (the loop device or driver, the "
                     "threads that serve it) is the recorded device's typical one, "
                     "measured while those threads slept through its service: on a faster "
                     "disk they sleep less and the path is shorter (the lab's emulated hdd "
                     "against its ssd: 1.4 to 4 times), so a prediction onto a faster disk "
                     "can be long by that much per request; a profile fitted on the target "
                     "disk (`iowhy whatif --fit`) carries its own path")
    lines.append("the machine's load: waits for a CPU follow the recording's, so the "
                 "prediction is for a machine as busy as it was then; on a busier or "
                 "quieter one the same run takes longer or shorter")
    lines.append("a workload that runs for a fixed time (a benchmark's --time, a loop "
                 "until a deadline) would do more work instead of finishing sooner: the "
                 "prediction is how long the recorded work takes")
    st = out["replay"]
    g = st["request_links"]["guessed"]
    if g:
        lines.append(f"{g:,} waits ended by an I/O completion the trace does not link to a "
                     "request wait for the request that completed last before them")
    if st["forced_waits"]:
        lines.append(f"{st['forced_waits']:,} waits formed a cycle in the replay and were "
                     "ended after their recorded length")
    un = st["requests"] - st["requests_anchored"] - st["recorded_flushes"]
    if un > 0:
        lines.append(f"{un:,} requests with no recorded submitter arrive at the pace of "
                     "the device's completions, as recorded")
    if prep.stacked:
        lines.append(f"{', '.join(prep.stacked)}: a loop device over a file on a recorded "
                     "device is replayed as a disk of its own, its service fitted from "
                     "what its requests took (the I/O below it included), and changed "
                     "like the others")
    if sc.write_cache == "on" and any(d.get("write_cache") != "write back"
                                      for d in prep.reqs.devices):
        n = st.get("asked_barriers", 0)
        lines.append("the recording sent no flush: the kernel saw a write-through device "
                     "and dropped PREFLUSH and FUA from every bio. The replay sends those "
                     f"the filesystem's records say it asked for ({n:,} requests: XFS's "
                     "iclog writes, ext4's journal commit blocks, btrfs's superblock "
                     "writes) and no other: an fsync's own flush when there was nothing "
                     "to commit is not recorded (a filesystem mounted without barriers "
                     "asks for none)")
    return lines


def render(r: Mapping[str, Any]) -> str:
    """The text output of `iowhy whatif`."""
    from .render import render_text
    return render_text(r)


# What the HTML report shows, and up to which size it replays a trace for it.
REPORT_SCENARIOS = (("barriers off", Scenario(nobarrier=True)),
                    ("write cache off", Scenario(write_cache="off")),
                    ("the emulated ssd", Scenario(disk="ssd")))
# a recording whose devices were all write-through: turning the cache off or the barriers
# off changes nothing there; the question is what a write cache would do, with barriers
# and without
REPORT_SCENARIOS_WRITE_THROUGH = (("write cache on", Scenario(write_cache="on")),
                                  ("write cache on, barriers off",
                                   Scenario(write_cache="on", nobarrier=True)),
                                  ("the emulated ssd", Scenario(disk="ssd")))
REPORT_MAX_STEPS = 500_000


def for_report(trace: Any, result: dict[str, Any]) -> dict[str, Any]:
    """The report's "what if" (reports/html.py section_whatif): the predictions of
    REPORT_SCENARIOS (REPORT_SCENARIOS_WRITE_THROUGH when every device was recorded
    write-through) from an analysis run with keep_causal, or why there are none ({} for
    a trace without wakeup links or without an attribution: no section)."""
    cm = result.get("_causal")
    if cm is None or result.get("attribution_unavailable"):
        return {}  # the page says why there is no attribution; no replay without it
    n = len(cm.timeline.kstart)
    if n > REPORT_MAX_STEPS:
        return {"note": f"not replayed for the report ({n:,} timeline segments): "
                        "run `iowhy whatif TRACE`"}
    try:
        prep = prepare_from(trace, result)
        out = []
        wt = bool(prep.reqs.devices) and all(d.get("write_cache") != "write back"
                                             for d in prep.reqs.devices)
        for name, sc in REPORT_SCENARIOS_WRITE_THROUGH if wt else REPORT_SCENARIOS:
            r = predict(trace, sc, prep)
            r["name"] = name
            out.append(r)
    except WhatifError as e:
        return {"note": str(e)}
    return {"predictions": out}
