"""The text output of `iowhy whatif` and `iowhy whatif --fit`."""

from __future__ import annotations

import textwrap
from typing import Any, Mapping

from ..findings import fmt_ns
from ..categories import ATTRIBUTION_CATEGORIES

WIDTH = 100


def _wrap(text: str, first: str = "  ", rest: str = "    ") -> list[str]:
    return textwrap.wrap(text, WIDTH, initial_indent=first, subsequent_indent=rest,
                         break_on_hyphens=False) or [first.rstrip()]


def _t(ns: int) -> str:
    return fmt_ns(ns) if ns else "0"


def _signed(ns: int) -> str:
    if not ns:
        return "0"
    return ("+" if ns > 0 else "-") + fmt_ns(abs(ns))


def _pct(part: int, whole: int) -> str:
    return f"{100.0 * part / whole:+.1f}%" if whole else "-"


def render_text(r: Mapping[str, Any]) -> str:
    m, p, b = r["measured_elapsed_ns"], r["predicted_elapsed_ns"], r["baseline_elapsed_ns"]
    sc = r["scenario"]
    what = []
    if sc.get("disk"):
        what.append(f"--disk {sc['disk']}")
    if sc.get("write_cache"):
        what.append(f"--write-cache {sc['write_cache']}")
    if sc.get("nobarrier"):
        what.append("--nobarrier")
    lines = [f"iowhy whatif  {r['trace']}"]
    for prob in r.get("problems") or []:  # what was lost, first, as in `iowhy report`
        lines += _wrap(prob, "! ", "  ")
    lines += [f"scenario    {' '.join(what) or 'as recorded'}",
              f"measured    {fmt_ns(m)} elapsed",
              f"predicted   {fmt_ns(p)} elapsed ({_pct(p - m, m)})",
              f"baseline    {fmt_ns(b)}: the replay against the recorded devices' model "
              f"({_pct(b - m, m)} from measured)",
              ""]
    rec, pred = r["attribution_ns"], r["predicted_attribution_ns"]
    lines.append(f"{'WHERE THE TIME WOULD GO':<28}{'recorded':>14}{'predicted':>14}"
                 f"{'change':>14}")
    for k in ATTRIBUTION_CATEGORIES:
        if rec.get(k) or pred.get(k):
            lines.append(f"  {k:<26}{_t(rec.get(k, 0)):>14}{_t(pred.get(k, 0)):>14}"
                         f"{_signed(pred.get(k, 0) - rec.get(k, 0)):>14}")
    lines.append(f"  {'elapsed':<26}{_t(m):>14}{_t(p):>14}{_signed(p - m):>14}")
    lines.append("")
    lines.append("WHAT CHANGES")
    if not r["changes"]:
        lines.append("  no category moves by 1% of the elapsed time or more")
    for c in r["changes"]:
        lines += _wrap(c["text"])
    lines.append("")
    lines.append("DEVICES")
    for d, rd in zip(r["devices"], r["recorded_devices"]):
        dk = rd.get("disk")
        if dk:
            lines += _wrap(f"{d['device']} as recorded (fitted): {_disk(dk)}, path "
                           f"{_t(rd['path_ns'].get('write', 0))} per request, queue depth "
                           f"{rd['queue_depth']}")
        lines += _wrap(f"{d['device']} in this scenario: {d['model']}: {_disk(d['disk'])}; "
                       f"{'flushes sent' if d['kernel_flushes'] else 'no flush sent'}")
    st = r["replay"]
    lines += _wrap(f"replayed: {st['actors']:,} threads and helpers, "
                   f"{st['requests']:,} requests ({st['requests_anchored']:,} at their "
                   f"submitter's point), {st['flushes']:,} flushes (recorded "
                   f"{st['recorded_flushes']:,})")
    lines.append("")
    lines.append("ASSUMPTIONS")
    for a in r["assumptions"]:
        lines += _wrap(a, "  - ", "    ")
    lines.append("")
    lines.append("WHAT THE TRACE CANNOT TELL")
    for a in r["cannot_tell"]:
        lines += _wrap(a, "  - ", "    ")
    return "\n".join(lines)


def _disk(d: Mapping[str, Any]) -> str:
    pos = d["t2t_ns"] + d["rot_ns"]
    parts = []
    if pos or d["full_stroke_ns"]:
        parts.append(f"positioning {fmt_ns(pos)} to {fmt_ns(d['full_stroke_ns'] + d['rot_ns'])}")
    else:
        parts.append("no positioning")
    parts.append(f"media {d['media_rate'] / (1 << 20):,.0f} MiB/s")
    parts.append(f"interface {d['iface_rate'] / (1 << 20):,.0f} MiB/s")
    parts.append(f"write cache {d['write_cache']} ({d['cache_bytes'] / (1 << 20):g} MiB)")
    parts.append(f"flush overhead {_t(d['flush_ns'])}")
    return ", ".join(parts)


def render_profile(p: Mapping[str, Any], path: str) -> str:
    d = p["disk"]
    lines = [f"iowhy whatif --fit  {p.get('source', '')}",
             f"device      {p.get('device')}: {p.get('requests', 0):,} requests served",
             *_wrap(_disk(d), "model       ", " " * 12),
             f"path        {_t(p['path_ns'].get('read', 0))} per read, "
             f"{_t(p['path_ns'].get('write', 0))} per write or flush",
             f"queue depth {p.get('queue_depth', 1)}"]
    if p.get("assumed"):
        lines += _wrap(f"assumed (no request of the trace exercises them): "
                       f"{', '.join(p['assumed'])}", "", "            ")
    fitq = p.get("fit") or {}
    if fitq:
        lines.append(f"{'FIT':<14}{'requests':>10}{'measured':>14}{'model':>14}"
                     f"{'median error':>16}")
        for c, q in fitq.items():
            lines.append(f"  {c:<12}{q['requests']:>10,}{_t(q['measured_ns']):>14}"
                         f"{_t(q['model_ns']):>14}{_t(q['median_abs_error_ns']):>16}")
    lines.append(f"wrote {path}")
    return "\n".join(lines)
