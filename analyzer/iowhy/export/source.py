"""The one place the exporters read iowhy's model of a run.

Everything the exporters need beyond the raw records (each request's class, latency
parts, seek distance and fsync-family call; the attribution of the elapsed time) is
taken here from the analysis (analysis.request_roles); only the requests of a device
the analysis set apart get theirs from the model's functions, here. When the analysis
modules move, only this file changes.

All arrays are aligned with the trace's records in file order (`Trace.records(name)`):
request i of `RunModel.requests` is record i of `trace.records("request")`.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import abi
from ..categories import ATTRIBUTION_CATEGORIES
from ..names import CLASS_NAMES, utf8_text
from ..memory import release_freed
from ..traceformat import recording

I64 = np.int64
# The attribution categories (a trace without wakeup links has no value for some).
CATEGORIES: tuple[str, ...] = ATTRIBUTION_CATEGORIES
OP_NAMES = {abi.OP_READ: "read", abi.OP_WRITE: "write", abi.OP_FLUSH: "flush",
            abi.OP_DISCARD: "discard", abi.OP_OTHER: "other"}
FS_NAMES = dict(abi.FS_NAMES)


@dataclass
class Names:
    """A name per request, coded: codes[i] indexes table, -1 for none (None). Reads as a
    sequence of names for the exporters that take a request at a time; the tables take
    the codes as they are."""

    codes: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    table: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.codes)

    def __getitem__(self, i: int) -> str | None:
        c = int(self.codes[i])
        return None if c < 0 else self.table[c]


@dataclass
class RequestModel:
    """Per request, aligned with trace.records("request") then trace.records("bio")
    (the bios of bio-based devices, which the analysis counts as requests:
    model/bios.py); `n_requests` are request records."""

    cls: np.ndarray  # int8, index into CLASS_NAMES
    queue_ns: np.ndarray  # int64, -1 when not observed
    device_ns: np.ndarray  # int64, -1 when not observed
    total_ns: np.ndarray  # int64, -1 when not observed
    seek_sectors: np.ndarray  # int64 signed seek from the previous request's end
    has_seek: np.ndarray  # bool: seek_sectors is meaningful
    call_index: np.ndarray  # int64 index into trace.records("fsync"), -1 when none
    n_requests: int = 0
    flags: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint16))  # RQ_*
    # What the analysis made of each (analysis.request_roles): in the class tables'
    # counts; not the workload's; the device name whose I/O it carried (None: none);
    # its level one and level two (None: on a device set apart) by name.
    counted: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))
    background: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))
    carried_for: Names = field(default_factory=Names)
    category: Names = field(default_factory=Names)
    served_by: Names = field(default_factory=Names)
    device: Names = field(default_factory=Names)  # the report's name of its device


def no_requests() -> RequestModel:
    """The model of no request."""
    z = np.zeros(0, I64)
    return RequestModel(cls=np.zeros(0, np.int8), queue_ns=z, device_ns=z, total_ns=z,
                        seek_sectors=z, has_seek=np.zeros(0, bool), call_index=z)


@dataclass
class RunModel:
    uuid: str
    info: dict[str, Any]  # host, kernel, command, devices, filesystems, elapsed_ns, ...
    attribution_ns: dict[str, int] | None  # None when the source cannot attribute
    requests: RequestModel
    class_names: tuple[str, ...] = CLASS_NAMES
    source_limits: list[str] = field(default_factory=list)
    # Device name -> (bucket width ns, mean queue depth per bucket from the window start).
    queue_depth: dict[str, tuple[int, list[float]]] = field(default_factory=dict)
    # Level two of the attribution, {basis: {level one: {served by: ns}}}, basis
    # "elapsed" (attribution_detail_ns) and "thread_time"; empty when it has none.
    detail: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)
    attribution: str | None = None  # "causal", "correlational"; None: cannot attribute


def run_uuid(trace: Any) -> str:
    """A stable id for a recording: the importer's or recorder's `run_uuid` if the trace
    has one, else a name-based UUID of what identifies the recording (host, creation
    time, start, command, pid), so exporting one file twice gives the same id."""
    for src in (trace.meta or {}, trace.recorder or {}):
        if isinstance(src.get("run_uuid"), str):
            return utf8_text(src["run_uuid"])
    rec = recording(trace)
    h = hashlib.sha256()
    for part in (rec["host"], trace.created_realtime_ns, trace.start_ns, rec["command"],
                 rec["pid"], trace.end_ns):
        h.update(repr(part).encode())
        h.update(b"\0")
    return str(uuid.UUID(bytes=h.digest()[:16], version=5))


def source_limits(trace: Any) -> list[str]:
    """What the trace's source could not provide (imported traces say so in META)."""
    src = (trace.meta or {}).get("import")
    if isinstance(src, dict) and isinstance(src.get("missing"), list):
        return [utf8_text(x) for x in src["missing"]]
    return []


def syscall_name(nr: int, arch: str | None = None) -> str:
    from ..syscalls import syscall_name as name
    return name(int(nr), arch)


def model_requests(trace: Any) -> tuple[Any, Any]:
    """(window, the requests as analyze() loads them: the request records in file
    order, then the bios of bio-based devices as requests of theirs, model/bios.py)."""
    from ..analysis import columns
    from ..model.bios import BIO_FIELDS, append_bios
    from ..model.requests import load_requests, trace_window
    win = trace_window(trace)
    rq = load_requests(trace, win)
    tgids = np.unique(np.asarray(trace.column("task", "tgid")))
    return win, append_bios(rq, columns(trace, "bio", BIO_FIELDS), trace.meta or {}, tgids)


def request_model(trace: Any, roles: dict[str, Any] | None = None) -> RequestModel:
    """Class, latency parts, seek and fsync-family call of every request (and bio); with
    `roles` (analysis.request_roles, of the same trace) the analysis' figures and what
    it made of each request, the model's one definition (the same the report's tables
    use) giving only those of a device the analysis set apart."""
    if roles is not None and (roles["cls"] >= 0).all():
        return _analyzed_model(trace, roles)  # every request analyzed: nothing to load
    win, rq = model_requests(trace)
    n = len(rq)
    if roles is None:
        own = _model_figures(trace, rq, win)
        out = _request_model(trace, rq, own)
        from ..model.devices import device_names as names_of
        names = [utf8_text(x) for x in names_of(trace.meta or {}, rq.devices)]
        _named(out, own["cls"], None, rq.dev, names)
        return out
    if len(roles["counted"]) != n:  # the analysis loaded other requests: a bug
        raise RuntimeError(f"the analysis has {len(roles['counted'])} requests, the "
                           f"export {n}")
    # The analysis' figures; those of the requests of a device it set apart (not
    # analyzed) by the same definitions, computed here for those requests alone (each
    # figure is the request's own, or its device's: the seeks).
    apart = roles["cls"] < 0
    own = _model_figures(trace, rq.take(apart), win)
    fig = {"cls": roles["cls"].astype(np.int8), "has_seek": roles["has_seek"].copy()}
    for k in ("seek", "queue_ns", "device_ns", "total_ns", "call"):
        fig[k] = roles[k].astype(I64)
    for k, v in own.items():
        fig[k][apart] = v
    out = _request_model(trace, rq, fig)
    _named(out, fig["cls"], roles, rq.dev, [utf8_text(x) for x in roles["device_names"]])
    return out


def _model_figures(trace: Any, rq: Any, win: Any) -> dict[str, np.ndarray]:
    """The model's figures of requests `rq` (model_requests' or some of them): `call`
    (model/calls.py), `cls` (model/classify.py), `device_ns`, `queue_ns`, `total_ns`
    (views/latency.py; -1 where not observed) and `seek`, `has_seek` (model/stages.py,
    per device: `rq` holds every request of its devices)."""
    from ..model.calls import join_requests_to_calls
    from ..model.classify import request_classes
    from ..model.stages import device_stages
    from ..views.latency import latency_values
    n = len(rq)
    fs = trace.records("fsync")
    call = np.full(n, -1, I64)
    if n and len(fs):
        call = np.asarray(join_requests_to_calls(rq, fs, win)).astype(I64)
    fs_type = np.asarray(fs["fs_u16"]) if len(fs) else np.zeros(0, np.uint16)
    cls = np.asarray(request_classes(rq, trace.meta or {}, fs_type, call), np.int8)
    out: dict[str, np.ndarray] = {"call": call, "cls": cls}
    for m, k in enumerate(("device_ns", "queue_ns", "total_ns")):
        grp, v = latency_values(rq, cls, m)
        out[k] = np.where(grp < len(CLASS_NAMES), v, -1).astype(I64)
    seek = np.zeros(n, I64)
    has = np.zeros(n, bool)
    if n:
        st = device_stages(rq, win)
        si = np.asarray(st.seek_idx).astype(I64)
        seek[si] = np.asarray(st.seek).astype(I64)
        has[si] = True
    out["seek"], out["has_seek"] = seek, has
    return out


def _request_model(trace: Any, rq: Any, fig: dict[str, np.ndarray]) -> RequestModel:
    return RequestModel(cls=fig["cls"], queue_ns=fig["queue_ns"], device_ns=fig["device_ns"],
                        total_ns=fig["total_ns"], seek_sectors=fig["seek"],
                        has_seek=fig["has_seek"], call_index=fig["call"],
                        n_requests=trace.count("request"), flags=np.asarray(rq.flags))


def _analyzed_model(trace: Any, roles: dict[str, Any]) -> RequestModel:
    """request_model() when the analysis analyzed every request: its figures of each
    (request_roles), the same the model computes, without loading the requests again."""
    cls = roles["cls"].astype(np.int8)
    out = RequestModel(cls=cls, queue_ns=roles["queue_ns"], device_ns=roles["device_ns"],
                       total_ns=roles["total_ns"], seek_sectors=roles["seek"],
                       has_seek=roles["has_seek"], call_index=roles["call"],
                       n_requests=trace.count("request"), flags=roles["flags"])
    _named(out, cls, roles, roles["dev"], [utf8_text(x) for x in roles["device_names"]])
    return out


def _named(out: RequestModel, cls: np.ndarray, roles: dict[str, Any] | None,
           dev: np.ndarray, names: list[str]) -> None:
    """The model's names of each request: category, served by, device and (with
    `roles`) carried for, counted and background."""
    from ..model.classify import CATEGORY_OF_CLASS
    from ..model.wakeups import DEVICE_CAT0, KIND_NAMES
    cat = (CATEGORY_OF_CLASS[cls.astype(I64)] if len(cls) else np.zeros(0, np.int8)
           ).astype(np.int32)
    nk = int(cat.max()) + 1 if len(cat) else 0
    out.category = Names(cat, [ATTRIBUTION_CATEGORIES[DEVICE_CAT0 + k] for k in range(nk)])
    kinds = [KIND_NAMES[DEVICE_CAT0 + k] for k in range(nk)]
    out.device = Names(np.asarray(dev).astype(np.int32), names)
    if roles is None:
        out.served_by = Names(cat, kinds)
        return
    out.counted, out.background = roles["counted"], roles["background"]
    out.carried_for = Names(np.asarray(roles["carried_for"]).astype(np.int32), names)
    # No level two for a request the analysis set apart.
    out.served_by = Names(np.where(roles["cls"] < 0, -1, cat).astype(np.int32), kinds)


def analysis_figures(trace: Any, depth_buckets: int = 200) -> dict[str, Any]:
    """The analysis' figures the exporters take: `elapsed_ns`, `attribution_ns` (None
    when the source cannot attribute), `queue_depth` (series per device), `detail`
    (level two by basis, empty without one), `attribution` (its kind, None without
    one), `workload_devices`, `command_short` and `roles` (analysis.request_roles)."""
    from ..analysis import AnalysisConfig, analyze
    from ..progress import phase
    r = analyze(trace, AnalysisConfig(placement=False, locality=False, threads=1,
                                      queue_depth_buckets=depth_buckets, progress=phase,
                                      requests=True))
    # the analysis decides whether the trace can be attributed (attribution_unavailable)
    att = ({k: int(v) for k, v in r["attribution_ns"].items()}
           if r["attribution_ns"] is not None else None)
    qd = {}
    for d in r.get("devices", []):
        q = d.get("queue_depth") or {}
        if q.get("series") is not None and q.get("step_ns"):
            series = [float(x) for x in q["series"]]
            qd[utf8_text(d.get("name"))] = (int(q["step_ns"]), series)
    detail: dict[str, dict[str, dict[str, int]]] = {}
    if att is not None:
        for basis, src in (("elapsed", r), ("thread_time", r.get("thread_time") or {})):
            if src.get("attribution_detail_ns"):
                detail[basis] = {utf8_text(cat): {utf8_text(k): v for k, v in parts.items()}
                                 for cat, parts in src["attribution_detail_ns"].items()}
    return {"elapsed_ns": int(r["elapsed_ns"]), "attribution_ns": att,
            "queue_depth": qd, "detail": detail,
            "attribution": r["workload"].get("attribution"),
            "workload_devices": [utf8_text(d) for d in r["workload"].get("devices", [])],
            "command_short": _text(r.get("trace", {}).get("command_short")),
            "roles": r["_requests"]}


def _text(v: Any) -> str | None:
    return None if v is None else utf8_text(v)


def device_names(meta: Any) -> dict[tuple[int, int], str]:
    """(major, minor) -> the device's name from META (utf8_text), as the report names
    it: the recorded devices and those below them (model/devices.py)."""
    from ..model.devices import described_devices
    out: dict[tuple[int, int], str] = {}
    for d in described_devices(meta or {}):
        if isinstance(d, dict) and isinstance(d.get("major"), int) \
                and isinstance(d.get("minor"), int):
            out[(d["major"], d["minor"])] = utf8_text(d.get("name"))
    return out


def run_info(trace: Any) -> dict[str, Any]:
    """The run's description (the recording as traceformat.recording reads it); every
    name as utf8_text writes it (names are bytes)."""
    meta = trace.meta or {}
    rec = recording(trace)
    cmd = rec["command"] or []
    imp: dict[str, Any] = meta["import"] if isinstance(meta.get("import"), dict) else {}
    return {
        "host": _text(rec["host"]),
        "kernel": _text(rec["kernel"]),
        "machine": _text(rec["machine"]),
        "iowhy_version": _text(rec["iowhy_version"]),
        "argv": ([utf8_text(c) for c in cmd] if isinstance(cmd, list) and cmd
                 else [utf8_text(cmd)] if cmd else None),
        "pid": rec["pid"] or None,  # 0: not known (an import)
        "devices": [utf8_text(d.get("name")) for d in rec["devices"]],
        "filesystems": sorted({utf8_text(f.get("fstype"))
                               for f in rec["filesystems"] if f.get("fstype")}),
        "start_ns": int(trace.start_ns),
        "end_ns": int(trace.end_ns),
        "realtime_minus_monotonic_ns": (meta.get("clock") or {}).get(
            "realtime_minus_monotonic_ns"),
        "created_realtime_ns": int(trace.created_realtime_ns),
        "source": utf8_text(imp.get("format") or "iowhy record"),
        "lost_events": rec["lost_events"],
        "truncated": rec["truncated"],
    }


def load_run(trace: Any) -> RunModel:
    from ..progress import phase
    a = analysis_figures(trace)
    info = run_info(trace)
    info["elapsed_ns"] = a["elapsed_ns"]
    info["workload_devices"] = a["workload_devices"]
    info["command_short"] = a["command_short"]
    phase("request model")
    m = RunModel(uuid=run_uuid(trace), info=info, attribution_ns=a["attribution_ns"],
                 requests=request_model(trace, a["roles"]),
                 source_limits=source_limits(trace), queue_depth=a["queue_depth"],
                 detail=a["detail"], attribution=a["attribution"])
    del a
    # The analysis' temporaries are gone: the memory glibc kept goes back before the
    # exporters import pyarrow (export.available) and build their tables.
    release_freed()
    return m
