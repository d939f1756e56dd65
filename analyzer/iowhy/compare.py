"""`iowhy compare`: two runs side by side, and their difference explained in plain lines.

`compare(a, b, meta_a=None, meta_b=None) -> dict` is a pure function over two results of
iowhy.analysis.analyze() (and, optionally, each trace's META chunk, for the kernel release
and the I/O scheduler, which the analysis result does not carry). It reads nothing, prints
nothing; the result is JSON-ready (integer ns, plain types). Every key is documented in
docs/compare-json.md. A is the baseline: every delta is B - A and `speed_ratio` is
B elapsed / A elapsed.

The explanation rules, in order (the plain lines of `explanations`):

1. **Speed line**, always first: which run is slower and by how much. The runs are
   "within 2%" when the longer elapsed is at most 2% above the shorter; "no difference"
   when the elapsed times are equal. A factor of 2 or more is stated as "6.3x slower",
   a smaller one as a percentage ("15% slower").
2. **One line per attribution category** whose delta (B - A ns) is non-zero and at least
   1% of the longer elapsed, largest |delta| first. Each states the category's share of
   the elapsed difference (delta / (B elapsed - A elapsed); the shares of all eight
   categories sum to 1 because both attributions sum to their elapsed), the time in A
   and in B, and the evidence that fits the category:
   barrier: cache flushes on the workload's devices (count, median device time), fsync
   calls; log: commits, log bytes, fsyncs per commit; metadata: metadata bytes written,
   metadata requests, metadata seek p50, metadata:data ratio; data: data bytes written,
   data seek p50, sequential share; read: read requests and bytes, read device p50;
   wait-other: the syscalls whose wait-other time changed most; cpu, runqueue: the times
   alone. A category that moved against the difference (negative share) is said to
   offset it. Within 2% the share is not quoted in words (it is still in the JSON).
3. **Configuration differences**, stated as facts, after the categories: the workload
   command, the kernel (with META), the filesystem type, mount options, log size, and per
   workload device the write cache mode, FUA, rotational and I/O scheduler (with META).
   A write cache difference says what it did to the cache flushes.
"""

from __future__ import annotations

import shlex
from itertools import zip_longest
from typing import Any, Callable, Mapping, Sequence

from .categories import OWN_PART, PART_WORDS, display_order  # the order: read at each use
from .findings import fmt_ns
from .names import CLASS_NAMES
from .traceformat import recording

SCHEMA = "iowhy-compare/1"
WITHIN = 0.02  # runs whose longer elapsed is at most 2% above the shorter are "within 2%"
MIN_CATEGORY_SHARE = 0.01  # a category is explained when |delta| >= 1% of the longer elapsed
BIG_FACTOR = 2.0  # from this factor on, "6.3x slower"; below it, "15% slower"
SAME_DURATION = 0.05  # runs within 5% of each other's elapsed: a fixed-duration benchmark,
#                       compared by thread time, unless they did the same work (SAME_WORK)
SAME_WORK = 0.05  # fsync calls and bytes written within 5%: the same job (a fixed amount of
#                   work that happened to take as long), compared by elapsed
TOP_SYSCALLS = 3  # wait-other evidence: the syscalls whose time changed most
COMMAND_CHARS = 70  # commands quoted in a configuration line are cut to this length


# -- small readers -------------------------------------------------------------------------

def _get(d: Any, *path: str) -> Any:
    """d[path[0]][path[1]]..., or None when any step is missing."""
    for k in path:
        if not isinstance(d, Mapping):
            return None
        d = d.get(k)
    return d


def _command_str(cmd: Any) -> str | None:
    if isinstance(cmd, (list, tuple)):
        return shlex.join(str(c) for c in cmd)
    return str(cmd) if cmd else None


def _workload_devices(r: Mapping[str, Any], meta: Mapping[str, Any] | None) -> list[dict]:
    """Configuration of the workload's disks: from the analysis, completed by META."""
    names = list(_get(r, "workload", "devices") or [])
    by_name = {d.get("name"): d for d in r.get("devices") or []}
    meta_devs = {d.get("name"): d for d in recording(None, meta or {})["devices"]}
    out = []
    for n in names:
        d = by_name.get(n) or meta_devs.get(n) or {}
        m = meta_devs.get(n) or {}
        out.append({"name": n, "write_cache": d.get("write_cache"), "fua": d.get("fua"),
                    "rotational": d.get("rotational"), "scheduler": m.get("scheduler")})
    return out


def _workload_filesystems(r: Mapping[str, Any]) -> list[dict]:
    """Filesystems on the workload's disks (all of them when none is known)."""
    names = set(_get(r, "workload", "devices") or [])
    fss = list(r.get("filesystems") or [])
    mine = [f for f in fss if f.get("disk") in names]
    keys = ("fstype", "source", "mountpoint", "options", "log_kind", "log_bytes")
    return [{k: f.get(k) for k in keys} for f in (mine or fss)]


def _summary(r: Mapping[str, Any], meta: Mapping[str, Any] | None) -> dict[str, Any]:
    """One side of the comparison: the recording as the analysis' `trace` describes it
    (and the kernel, from META as traceformat.recording reads it), its attribution and
    the configuration of its workload's devices and filesystems."""
    tr = r.get("trace") or {}
    wfl = _get(r, "workload", "flushes") or {}
    return {
        "path": tr.get("path"),
        "command": tr.get("command"),
        "command_short": tr.get("command_short"),
        "label": tr.get("label"),
        "kernel": recording(None, meta or {})["kernel"],
        "truncated": bool(tr.get("truncated")),
        "problems": list(r.get("problems") or []),
        "elapsed_ns": int(r["elapsed_ns"]),
        "attribution_ns": ({k: int(v) for k, v in r["attribution_ns"].items()}
                           if r["attribution_ns"] is not None else None),
        **({"attribution_unavailable": r["attribution_unavailable"]}
           if r.get("attribution_unavailable") else {}),
        "attribution_pct": dict(r.get("attribution_pct") or {}),
        **({"attribution_detail_ns": r["attribution_detail_ns"]}
           if r.get("attribution_detail_ns") is not None else {}),
        "fsync_calls": int(_get(r, "fsync", "count") or 0),
        "commits": int(_get(r, "commits", "count") or 0),
        "flushes": int(wfl.get("count") or 0),
        "devices": _workload_devices(r, meta),
        "filesystems": _workload_filesystems(r),
    }


# -- value formatting for the plain lines ----------------------------------------------------

def _count(x: Any) -> str:
    return f"{int(x):,}"


def _mib(x: Any) -> str:
    return "0" if not x else f"{x / 2**20:,.1f} MiB"


def _ratio2(x: Any) -> str:
    return f"{x:.2f}"


def _pct(x: Any) -> str:
    return f"{100 * x:.0f}%"


def _sectors(x: Any) -> str:
    return f"{int(x):,} sectors"


def _share_words(s: float) -> str:
    """A share of the difference in words: 91%, <1%, 120%."""
    a = abs(s)
    return "<1%" if 0 < a < 0.005 else f"{a:.0%}"


def _signed_ns(d: int) -> str:
    return ("+" if d > 0 else "") + fmt_ns(d)


def _ab(a: Any, b: Any, fmt: Callable[[Any], str], delta: bool = False) -> str:
    """'12 -> 5,000 (+4,988)', '5,000 in both', 'n/a -> 30 ms'."""
    if a == b:
        return f"{fmt(a)} in both" if a is not None else "n/a"
    fa = "n/a" if a is None else fmt(a)
    fb = "n/a" if b is None else fmt(b)
    out = f"{fa} -> {fb}"
    if delta and a is not None and b is not None:
        out += f" ({int(b) - int(a):+,})"
    return out


class _Evidence:
    """Figures quoted for one category: the words and the numbers behind them."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.figures: dict[str, Any] = {}

    def add(self, key: str, label: str, a: Any, b: Any, fmt: Callable[[Any], str],
            delta: bool = False) -> None:
        if not a and not b:  # nothing to say on either side (None or 0)
            return
        self.figures[key] = {"a": a, "b": b}
        self.parts.append(f"{label} {_ab(a, b, fmt, delta)}")

    def text(self) -> str:
        return "; ".join(self.parts)


def _evidence(cat: str, a: Mapping[str, Any], b: Mapping[str, Any]) -> _Evidence:
    ev = _Evidence()

    def both(*path: str) -> tuple[Any, Any]:
        return _get(a, *path), _get(b, *path)

    if cat == "barrier":
        ev.add("flushes", "cache flushes", *both("workload", "flushes", "count"), _count, True)
        ev.add("flush_p50_ns", "median flush",
               *both("workload", "flushes", "device_ns", "p50"), fmt_ns)
        ev.add("fsync_calls", "fsync calls", *both("fsync", "count"), _count, True)
    elif cat == "log":
        ev.add("commits", "commits", *both("commits", "count"), _count, True)
        ev.add("log_bytes", "log written", *both("commits", "log_bytes"), _mib)
        ev.add("fsyncs_per_commit", "fsyncs per commit",
               *both("commits", "fsyncs_per_commit"), _ratio2)
    elif cat == "metadata":
        ev.add("metadata_bytes", "metadata written",
               *both("metadata_data", "metadata_bytes"), _mib)
        ev.add("metadata_requests", "metadata requests",
               *both("requests", "metadata", "count"), _count, True)
        ev.add("metadata_seek_p50", "seek p50",
               *both("requests", "metadata", "seek_sectors", "p50"), _sectors)
        ev.add("metadata_data_ratio", "metadata:data", *both("metadata_data_ratio"), _ratio2)
    elif cat == "data":
        ev.add("data_bytes", "data written", *both("metadata_data", "data_bytes"), _mib)
        ev.add("data_seek_p50", "seek p50",
               *both("requests", "data", "seek_sectors", "p50"), _sectors)
        ev.add("sequential_share", "sequential",
               *both("placement", "data", "sequential_share"), _pct)
    elif cat == "read":
        def reads(r: Mapping[str, Any], key: str) -> int:
            return sum(int(_get(r, "requests", c, key) or 0) for c in ("read", "readahead"))
        ev.add("read_requests", "read requests", reads(a, "count"), reads(b, "count"),
               _count, True)
        ev.add("read_bytes", "read", reads(a, "bytes"), reads(b, "bytes"), _mib)
        ev.add("read_p50_ns", "device p50", *both("requests", "read", "device_ns", "p50"),
               fmt_ns)
    elif cat == "wait-other":
        wa = a.get("wait_other_by_syscall_ns") or {}
        wb = b.get("wait_other_by_syscall_ns") or {}
        moved = {k: int(wb.get(k, 0)) - int(wa.get(k, 0)) for k in set(wa) | set(wb)}
        floor = MIN_CATEGORY_SHARE * max(int(a["elapsed_ns"]), int(b["elapsed_ns"]))
        top = sorted((k for k, d in moved.items() if d and abs(d) >= floor),
                     key=lambda k: (-abs(moved[k]), k))
        top = top[:TOP_SYSCALLS]
        if top:
            ev.figures["by_syscall_ns"] = {k: {"a": int(wa.get(k, 0)), "b": int(wb.get(k, 0))}
                                           for k in top}
            ev.parts.append("by syscall: " + ", ".join(f"{k} {_signed_ns(moved[k])}"
                                                       for k in top))
    return ev


# -- the three kinds of explanation ------------------------------------------------------------

def _speed(ea: int, eb: int) -> tuple[dict[str, Any], float | None, str | None]:
    """The speed line, the factor (longer / shorter) and which run is slower."""
    diff = eb - ea
    factor = max(ea, eb) / min(ea, eb) if min(ea, eb) > 0 else None
    slower: str | None = None
    if diff == 0:
        text = f"no difference: A and B both took {fmt_ns(ea)}"
    elif factor is None:
        empty = "A" if ea == 0 else "B"
        text = (f"speeds cannot be compared: {empty} covers no time "
                f"(A {fmt_ns(ea)}, B {fmt_ns(eb)})")
    elif factor <= 1 + WITHIN:
        text = (f"A and B are within {WITHIN:.0%} of each other: {fmt_ns(ea)} vs "
                f"{fmt_ns(eb)} ({_signed_ns(diff)} in B)")
    else:
        slower = "b" if diff > 0 else "a"
        s, f = ("B", "A") if diff > 0 else ("A", "B")
        how = (f"{factor:.1f}x" if factor >= BIG_FACTOR else
               f"{100 * (factor - 1):.0f}%" if factor >= 1.1 else f"{100 * (factor - 1):.1f}%")
        text = (f"{s} is {how} slower than {f}: {fmt_ns(max(ea, eb))} vs {fmt_ns(min(ea, eb))} "
                f"({_signed_ns(abs(diff))})")
    line = {"text": text, "category": "elapsed", "delta_ns": int(diff),
            "share_of_difference": 1.0 if diff else None,
            "evidence": {"elapsed_ns": {"a": int(ea), "b": int(eb)}}}
    return line, (round(factor, 4) if factor is not None else None), slower


def _category_lines(a: Mapping[str, Any], b: Mapping[str, Any],
                    delta: Mapping[str, int], slower: str | None) -> list[dict[str, Any]]:
    ea, eb = int(a["elapsed_ns"]), int(b["elapsed_ns"])
    diff = eb - ea
    floor = MIN_CATEGORY_SHARE * max(ea, eb)
    cats = [k for k in display_order() if delta.get(k) and abs(delta[k]) >= floor]
    cats.sort(key=lambda k: -abs(delta[k]))  # stable: ties keep the display order
    noun = "added time" if diff > 0 else "time B saves"
    out = []
    for k in cats:
        d = int(delta[k])
        share = round(d / diff, 4) if diff else None
        va, vb = int(a["attribution_ns"].get(k, 0)), int(b["attribution_ns"].get(k, 0))
        pa = 100.0 * va / ea if ea else 0.0
        pb = 100.0 * vb / eb if eb else 0.0
        body = (f"{fmt_ns(va) if va else '0'} ({pa:.1f}%) in A, "
                f"{fmt_ns(vb) if vb else '0'} ({pb:.1f}%) in B ({_signed_ns(d)})")
        if slower is None or share is None:
            text = f"{k} {_signed_ns(d)} in B: {body}"
        elif share > 0:
            text = f"{_share_words(share)} of the {noun} is {k}: {body}"
        else:
            text = f"{k} went the other way, offsetting {_share_words(share)} of the {noun}: {body}"
        ev = _evidence(k, a, b)
        _served_delta(ev, k, a.get("attribution_detail_ns"), b.get("attribution_detail_ns"),
                      floor)
        if ev.parts:
            text += "; " + ev.text()
        out.append({"text": text, "category": k, "delta_ns": d, "share_of_difference": share,
                    "evidence": ev.figures})
    return out


def _served_delta(ev: _Evidence, cat: str, da: Mapping[str, Any] | None,
                  db: Mapping[str, Any] | None, floor: float) -> None:
    """What served a level one in each run (level two): the parts that moved by at least
    `floor` ns, largest move first (at most TOP_SYSCALLS), as 'served by: cache flushes
    +1.2 s, ...'."""
    if da is None or db is None:
        return
    pa, pb = da.get(cat) or {}, db.get(cat) or {}
    moved = {k: int(pb.get(k, 0)) - int(pa.get(k, 0)) for k in set(pa) | set(pb)}
    top = sorted((k for k, d in moved.items() if d and abs(d) >= floor),
                 key=lambda k: (-abs(moved[k]), k))[:TOP_SYSCALLS]
    if not top or top == [OWN_PART.get(cat)]:
        return
    ev.figures["served_by_ns"] = {k: {"a": int(pa.get(k, 0)), "b": int(pb.get(k, 0))}
                                  for k in top}
    ev.parts.append("served by: " + ", ".join(f"{PART_WORDS.get(k, k)} {_signed_ns(moved[k])}"
                                              for k in top))


def _served_shift_lines(a: Mapping[str, Any], b: Mapping[str, Any], basis: str,
                        lines: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A level one that stayed about the same while what served it changed (the same
    commits, served by cache flushes in A and by writes to the media in B): one line per
    such category with no line of its own, whose parts moved by at least
    MIN_CATEGORY_SHARE of elapsed (of thread time, on that basis), largest move first."""
    if basis == "thread_time":
        da = (a.get("thread_time") or {}).get("attribution_detail_ns")
        db = (b.get("thread_time") or {}).get("attribution_detail_ns")
        wa = int(a["thread_time"]["total_ns"]) or 1
        wb = int(b["thread_time"]["total_ns"]) or 1
        unit = "of thread time"
    else:
        da, db = a.get("attribution_detail_ns"), b.get("attribution_detail_ns")
        wa, wb = int(a["elapsed_ns"]) or 1, int(b["elapsed_ns"]) or 1
        unit = "of elapsed"
    if not da or not db:
        return []
    done = {e.get("category") for e in lines}
    out: list[tuple[float, dict[str, Any]]] = []
    for cat in display_order():
        if cat in done:
            continue
        pa, pb = da.get(cat) or {}, db.get(cat) or {}
        move = {k: int(pb.get(k, 0)) / wb - int(pa.get(k, 0)) / wa for k in set(pa) | set(pb)}
        top = sorted((k for k, d in move.items() if abs(d) >= MIN_CATEGORY_SHARE),
                     key=lambda k: (-abs(move[k]), k))[:TOP_SYSCALLS]
        if not top or top == [OWN_PART.get(cat)]:
            continue
        parts = ", ".join(f"{PART_WORDS.get(k, k)} {100 * int(pa.get(k, 0)) / wa:.0f}% -> "
                          f"{100 * int(pb.get(k, 0)) / wb:.0f}%" for k in top)
        out.append((max(abs(move[k]) for k in top), {
            "text": f"{cat} is served differently ({unit}): {parts}", "category": cat,
            "level": 2,
            "delta_ns": int(sum(int(pb.get(k, 0)) - int(pa.get(k, 0)) for k in top)),
            "share_of_difference": None,
            "evidence": {"served_by_ns": {k: {"a": int(pa.get(k, 0)), "b": int(pb.get(k, 0))}
                                          for k in top}}}))
    out.sort(key=lambda x: -x[0])
    return [e for _, e in out]


def _work(r: Mapping[str, Any]) -> tuple[int, int]:
    """What a run did: its fsync-family calls and the bytes its requests wrote."""
    calls = int((r.get("fsync") or {}).get("count") or 0)
    written = sum(int(c.get("write_bytes") or 0) for c in (r.get("requests") or {}).values()
                  if isinstance(c, Mapping))
    return calls, written


def _same_work(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether A and B did the same work (each of _work within SAME_WORK): then a like
    elapsed time is a result (the same job, as fast), not a fixed duration. A
    fixed-duration benchmark does more or less work in its time (pgbench with
    synchronous_commit off: 30 times the fsync calls)."""
    def close(x: int, y: int) -> bool:
        return max(x, y) <= (1 + SAME_WORK) * min(x, y) if min(x, y) > 0 else x == y
    (ca, wa), (cb, wb) = _work(a), _work(b)
    return close(ca, cb) and close(wa, wb)


def _thread_time_lines(a: Mapping[str, Any], b: Mapping[str, Any]
                       ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Runs of about the same elapsed time (a fixed-duration benchmark): what differs is
    how the threads spent it. The note saying so (`basis_note`, not a ranked line), and
    one line per category whose share of thread time moved by at least
    MIN_CATEGORY_SHARE, largest move first."""
    ta, tb = a["thread_time"], b["thread_time"]
    tot_a, tot_b = int(ta["total_ns"]) or 1, int(tb["total_ns"]) or 1
    first = (f"A and B ran about as long (within {SAME_DURATION:.0%}): a fixed-duration run; "
             "compared by thread time (every workload thread's time, "
             f"{fmt_ns(tot_a)} in A, {fmt_ns(tot_b)} in B)")
    note = {"text": first, "evidence": {"total_ns": {"a": tot_a, "b": tot_b}}}
    out: list[dict[str, Any]] = []
    sa = {k: int(ta["attribution_ns"].get(k, 0)) / tot_a for k in display_order()}
    sb = {k: int(tb["attribution_ns"].get(k, 0)) / tot_b for k in display_order()}
    cats = [k for k in display_order() if abs(sb[k] - sa[k]) >= MIN_CATEGORY_SHARE]
    cats.sort(key=lambda k: -abs(sb[k] - sa[k]))
    for k in cats:
        d = sb[k] - sa[k]
        text = (f"{k}: {100 * sa[k]:.1f}% of thread time in A, {100 * sb[k]:.1f}% in B "
                f"({100 * d:+.1f} points)")
        ev = _evidence(k, a, b)
        _served_delta(ev, k, ta.get("attribution_detail_ns"), tb.get("attribution_detail_ns"),
                      MIN_CATEGORY_SHARE * max(tot_a, tot_b))
        if ev.parts:
            text += "; " + ev.text()
        out.append({"text": text, "category": k,
                    "delta_ns": int(tb["attribution_ns"].get(k, 0))
                    - int(ta["attribution_ns"].get(k, 0)),
                    "share_of_difference": None, "thread_time_share": {
                        "a": round(sa[k], 4), "b": round(sb[k], 4)},
                    "evidence": ev.figures})
    return note, out


def _around_difference(x: str, y: str) -> tuple[str, str]:
    """Two long strings cut to COMMAND_CHARS so that where they differ stays visible."""
    if len(x) <= COMMAND_CHARS and len(y) <= COMMAND_CHARS:
        return x, y
    same = 0
    while same < min(len(x), len(y)) and x[same] == y[same]:
        same += 1
    start = max(0, same - COMMAND_CHARS // 3)
    if start:
        space = x.rfind(" ", 0, start + 1)  # begin at a word when one is close
        start = space + 1 if space >= 0 and start - space < 20 else start

    def cut(s: str) -> str:
        head = "..." if start else ""
        part = s[start:start + COMMAND_CHARS - len(head)]
        if start + len(part) < len(s):
            part = part[:-3] + "..."
        return head + part
    return cut(x), cut(y)


def _paired_filesystems(fa: Sequence[Any], fb: Sequence[Any]
                        ) -> list[tuple[Any, Any]]:
    """A's and B's filesystems in pairs: same type first (in their order), then what is
    left side by side by position, then what only one run has (the other None). Pairing
    by position alone read an XFS run against another's ext4 root as "only B has xfs"."""
    left_b = list(fb)
    pairs: list[tuple[Any, Any]] = []
    rest_a = []
    for f in fa:
        same = next((g for g in left_b if _get(g, "fstype") == _get(f, "fstype")), None)
        if same is None:
            rest_a.append(f)
        else:
            left_b.remove(same)
            pairs.append((f, same))
    pairs.extend(zip_longest(rest_a, left_b))
    return pairs


def _config_differences(a: Mapping[str, Any], b: Mapping[str, Any], sa: Mapping[str, Any],
                        sb: Mapping[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []

    def add(key: str, va: Any, vb: Any, text: str) -> None:
        out.append({"key": key, "a": va, "b": vb, "text": text})

    # the short commands: the same workload run on two scratch mounts is no difference
    ca = sa.get("command_short") or _command_str(sa["command"])
    cb = sb.get("command_short") or _command_str(sb["command"])
    if ca != cb:
        qa, qb = _around_difference(ca or "(unknown)", cb or "(unknown)")
        add("command", sa["command"], sb["command"], f"A runs `{qa}`, B runs `{qb}`")
    ka, kb = sa.get("kernel"), sb.get("kernel")
    if ka and kb and ka != kb:
        add("kernel", ka, kb, f"A was recorded on kernel {ka}, B on {kb}")

    for fa, fb in _paired_filesystems(sa["filesystems"], sb["filesystems"]):
        if fa is None or fb is None:
            one, f = ("A", fa) if fb is None else ("B", fb)
            add("filesystem", _get(fa, "fstype"), _get(fb, "fstype"),
                f"only {one} has a {f.get('fstype') or '?'} filesystem on its devices "
                f"({f.get('mountpoint') or '?'})")
            continue
        if fa.get("fstype") != fb.get("fstype"):
            add("filesystem", fa.get("fstype"), fb.get("fstype"),
                f"A runs on {fa.get('fstype') or '?'} ({fa.get('mountpoint') or '?'}), "
                f"B on {fb.get('fstype') or '?'} ({fb.get('mountpoint') or '?'})")
            continue  # options and log sizes of different filesystems are not comparable
        oa = [o for o in (fa.get("options") or "").split(",") if o]
        ob = [o for o in (fb.get("options") or "").split(",") if o]
        only_a = [o for o in oa if o not in ob]
        only_b = [o for o in ob if o not in oa]
        if only_a or only_b:
            parts = []
            if only_a:
                parts.append(f"only A has {','.join(only_a)}")
            if only_b:
                parts.append(f"only B has {','.join(only_b)}")
            add("mount_options", fa.get("options"), fb.get("options"),
                f"{fa.get('fstype')} mount options differ: {'; '.join(parts)}")
        la, lb = fa.get("log_bytes") or 0, fb.get("log_bytes") or 0
        if la and lb and la != lb:
            add("log_bytes", la, lb, f"the {fa.get('fstype')} log is {_mib(la)} in A, "
                                     f"{_mib(lb)} in B")

    fl_a, fl_b = int(sa["flushes"]), int(sb["flushes"])
    for da, db in zip_longest(sa["devices"], sb["devices"]):
        if da is None or db is None:
            continue  # a different number of disks shows in the device rows
        na, nb = da["name"], db["name"]
        same = na == nb
        who_a = f"A's {na}"
        who_b = f"B's {nb}"
        wa, wb = da.get("write_cache"), db.get("write_cache")
        if wa and wb and wa != wb:
            text = (f"A runs with write cache '{wa}', B with '{wb}'" if same else
                    f"A's {na} runs with write cache '{wa}', B's {nb} with '{wb}'")
            thru = "A" if wa == "write through" else "B" if wb == "write through" else None
            if thru is not None:
                n_thru, n_back = (fl_a, fl_b) if thru == "A" else (fl_b, fl_a)
                other = "B" if thru == "A" else "A"
                text += (f": {thru} sends no cache flushes" if not n_thru else
                         f": {thru} still sends {n_thru:,} cache flushes")
                if n_back:
                    text += f" ({other} sends {n_back:,})"
            add("write_cache", wa, wb, text)
        ua, ub = da.get("fua"), db.get("fua")
        if ua is not None and ub is not None and bool(ua) != bool(ub):
            has, hasnt, wc = (who_a, who_b, wb) if ua else (who_b, who_a, wa)
            text = f"{has} honours FUA, {hasnt} does not"
            if wc == "write back":
                text += " (each FUA write there costs a post-flush)"
            add("fua", ua, ub, text)
        ra, rb = da.get("rotational"), db.get("rotational")
        if ra is not None and rb is not None and bool(ra) != bool(rb):
            spin, flat = (who_a, who_b) if ra else (who_b, who_a)
            add("rotational", ra, rb, f"{spin} is a rotational disk, {flat} is not")
        qa, qb = da.get("scheduler"), db.get("scheduler")
        if qa and qb and qa != qb:
            add("scheduler", qa, qb, f"I/O scheduler: {qa} on {who_a}, {qb} on {who_b}")
    return out


# -- the side-by-side table ----------------------------------------------------------------------

def _rows(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []

    def add(section: str, key: str, label: str, unit: str, va: Any, vb: Any,
            **extra: Any) -> None:
        d: Any = None
        ratio = None
        if isinstance(va, (int, float)) and isinstance(vb, (int, float)):
            d = vb - va
            d = round(d, 4) if isinstance(d, float) else int(d)
            ratio = round(vb / va, 4) if va else None
        rows.append({"section": section, "key": key, "label": label, "unit": unit,
                     "a": va, "b": vb, "delta": d, "ratio": ratio, **extra})

    def both(*path: str) -> tuple[Any, Any]:
        return _get(a, *path), _get(b, *path)

    add("time", "elapsed_ns", "elapsed", "ns", *both("elapsed_ns"))
    for k in [k for k in display_order()
              if k in a["attribution_ns"] or k in b["attribution_ns"]]:
        add("time", f"attribution_ns.{k}", k, "ns", *both("attribution_ns", k),
            a_pct=_get(a, "attribution_pct", k), b_pct=_get(b, "attribution_pct", k))

    for c in CLASS_NAMES:
        na, nb = both("requests", c, "count")
        if not na and not nb:
            continue
        add("requests", f"requests.{c}.count", f"{c} requests", "count", na, nb)
        add("requests", f"requests.{c}.device_ns.p50", f"{c} device p50", "ns",
            *both("requests", c, "device_ns", "p50"))
        add("requests", f"requests.{c}.device_ns.p99", f"{c} device p99", "ns",
            *both("requests", c, "device_ns", "p99"))

    add("fsync", "fsync.count", "fsync-family calls", "count", *both("fsync", "count"))
    add("fsync", "fsync.latency_ns.p50", "fsync latency p50", "ns",
        *both("fsync", "latency_ns", "p50"))
    add("fsync", "fsync.latency_ns.p99", "fsync latency p99", "ns",
        *both("fsync", "latency_ns", "p99"))
    add("fsync", "commits.count", "commits", "count", *both("commits", "count"))
    add("fsync", "commits.fsyncs_per_commit", "fsyncs per commit", "ratio",
        *both("commits", "fsyncs_per_commit"))
    add("fsync", "commits.log_bytes", "log written", "bytes", *both("commits", "log_bytes"))

    add("flushes", "workload.flushes.count", "cache flushes", "count",
        *both("workload", "flushes", "count"))
    add("flushes", "workload.flushes.device_ns.p50", "flush device p50", "ns",
        *both("workload", "flushes", "device_ns", "p50"))

    add("placement", "metadata_data_ratio", "metadata:data ratio", "ratio",
        *both("metadata_data_ratio"))
    add("placement", "metadata_data.metadata_bytes", "metadata written", "bytes",
        *both("metadata_data", "metadata_bytes"))
    add("placement", "metadata_data.data_bytes", "data written", "bytes",
        *both("metadata_data", "data_bytes"))
    for c in CLASS_NAMES:
        sa, sb = both("requests", c, "seek_sectors", "p50")
        if sa is None and sb is None:
            continue
        add("placement", f"requests.{c}.seek_sectors.p50", f"{c} seek p50", "sectors", sa, sb)
        qa, qb = both("placement", c, "sequential_share")
        if qa is not None or qb is not None:
            add("placement", f"placement.{c}.sequential_share", f"{c} sequential", "share",
                qa, qb)

    devs_a = {d["name"]: d for d in a.get("devices") or []}
    devs_b = {d["name"]: d for d in b.get("devices") or []}
    wa = list(_get(a, "workload", "devices") or [])
    wb = list(_get(b, "workload", "devices") or [])
    if sorted(wa) == sorted(wb):
        pairs: Sequence[tuple[Any, Any]] = [(n, n) for n in wa]
    else:
        pairs = list(zip_longest(wa, wb))
    for na, nb in pairs:
        name = na if na == nb else f"{na or '-'}/{nb or '-'}"
        ua = _get(devs_a.get(na), "utilisation")
        ub = _get(devs_b.get(nb), "utilisation")
        add("devices", f"devices.{name}.utilisation", f"{name} utilisation", "share", ua, ub)
    return rows


# -- entry point -------------------------------------------------------------------------------

def compare(a: Mapping[str, Any], b: Mapping[str, Any], meta_a: Mapping[str, Any] | None = None,
            meta_b: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Compare two analysis results, A the baseline (docs/compare-json.md)."""
    ea, eb = int(a["elapsed_ns"]), int(b["elapsed_ns"])
    sa, sb = _summary(a, meta_a), _summary(b, meta_b)
    speed, factor, slower = _speed(ea, eb)
    basis = "elapsed"
    basis_note: dict[str, Any] | None = None
    # A run without an attribution (no off-CPU data) has no categories to compare: the
    # difference is stated, and why it is not explained; requests and devices still are.
    missing = [(who, r.get("attribution_unavailable") or "no attribution")
               for who, r in (("A", a), ("B", b)) if r.get("attribution_ns") is None]
    if missing:
        a = {**a, "attribution_ns": {}, "attribution_pct": {}}
        b = {**b, "attribution_ns": {}, "attribution_pct": {}}
    delta = {k: int(b["attribution_ns"].get(k, 0)) - int(a["attribution_ns"].get(k, 0))
             for k in display_order() if k in a["attribution_ns"] or k in b["attribution_ns"]}
    if missing:
        basis = "none"
        explanations = [speed, {
            "text": "; ".join(f"{who} has no attribution ({why})" for who, why in missing)
            + ": the difference is not split by cause",
            "category": "unavailable", "delta_ns": None, "share_of_difference": None,
            "evidence": {"unavailable": dict(missing)}}]
    elif (a.get("thread_time") and b.get("thread_time") and min(ea, eb) > 0
            and max(ea, eb) <= (1 + SAME_DURATION) * min(ea, eb)
            and not _same_work(a, b)):
        basis = "thread_time"
        basis_note, lines = _thread_time_lines(a, b)
        # Elapsed is the run's fixed length, not a result: say so, not "within 2%".
        speed = dict(speed, text=(f"elapsed is the run's fixed length, not a result: "
                                  f"{fmt_ns(ea)} vs {fmt_ns(eb)} ({_signed_ns(eb - ea)} in B)"))
        explanations = [speed] + lines
    else:
        explanations = [speed] + _category_lines(a, b, delta, slower)
    if not missing:
        explanations += _served_shift_lines(a, b, basis, explanations)
    config = _config_differences(a, b, sa, sb)
    for c in config:
        explanations.append({"text": c["text"], "category": "config", "delta_ns": None,
                             "share_of_difference": None,
                             "evidence": {"key": c["key"], "a": c["a"], "b": c["b"]}})
    problems = [f"{who}: {p}" for who, s in (("A", sa), ("B", sb)) for p in s["problems"]]
    return {
        "schema": SCHEMA,
        "a": sa,
        "b": sb,
        "speed_ratio": round(eb / ea, 4) if ea else None,
        "slower": slower,
        "factor": factor,
        "difference_ns": int(eb - ea),
        "delta_ns": delta,
        "basis": basis,
        "basis_note": basis_note,
        "explanations": explanations,
        "config_differences": config,
        "problems": problems,
        "rows": _rows(a, b),
    }
