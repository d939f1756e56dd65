"""Findings: a few statements in plain words, largest first, each with its evidence;
and the duration format shared by the findings and the reports.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from .categories import BY_WHOSE, OWN_PART, PART_WORDS, WHOSE_WORDS


def fmt_ns(ns: float | None) -> str:
    """A duration in the unit that suits it: 16 ns, 850 us, 9.6 ms, 12.3 s."""
    if ns is None:
        return "-"
    a = abs(ns)
    if a >= 100e9:
        return f"{ns / 1e9:,.0f} s"
    # a value that rounds up to 1000 of a unit is 1 of the next (999,600 ns: 1 ms, not
    # "1e+03 us"); 999.5 ns and up is 1 us
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if a >= scale * 0.9995:
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


def served_text(cat: str, parts: Mapping[str, int] | None, whole: int, limit: int = 4) -> str:
    """'served by: ...' of one level one's parts (level two) in words, in shares of
    whole, largest first ('which thread: ...', whose time it is, for cpu and runqueue); ''
    when its own part is all of it or no part reaches 0.5%."""
    shown = [(p, v) for p, v in sorted((parts or {}).items(), key=lambda kv: -kv[1])
             if whole and v >= 0.005 * whole]
    if not shown or [p for p, _ in shown] == [OWN_PART.get(cat)]:
        return ""
    words, head = ((WHOSE_WORDS, "which thread: ") if cat in BY_WHOSE
                   else (PART_WORDS, "served by: "))
    return head + ", ".join(f"{words.get(p, p)} {100.0 * v / whole:.0f}%"
                            for p, v in shown[:limit])


def findings(r: Mapping[str, Any], max_findings: int, min_share: float
             ) -> list[dict[str, Any]]:
    """A few statements in plain words, largest first, each with its evidence; each
    causal one names what served it (level two) when that is not its own kind. At most
    max_findings, none below min_share of the elapsed time."""
    el = r["elapsed_ns"]
    att = r["attribution_ns"]
    pct = r["attribution_pct"]
    detail = r.get("attribution_detail_ns") or {}
    out: list[dict[str, Any]] = []

    def add(key: str, weight: int, text: str, **evidence: Any) -> None:
        served = served_text(key, detail.get(key), el, 3) if key in detail else ""
        if served:
            text += f"; {served}"
            evidence["served_by_ns"] = dict(sorted(detail[key].items(), key=lambda kv: -kv[1]))
        out.append({"key": key, "weight_ns": int(weight), "text": text, "evidence": evidence})

    if att is not None:  # None: the trace holds no off-CPU data (attribution_unavailable)
        _attribution_findings(r, att, pct, add)
    _placement_findings(r, add)
    floor = min_share * el
    out = [f for f in out if f["weight_ns"] >= floor and f["weight_ns"] > 0]
    out.sort(key=lambda f: -f["weight_ns"])
    return out[:max_findings]


# fsync-family calls that never send a cache flush (docs/report-json.md, `fsync`).
NO_FLUSH_CALLS = frozenset({"sync_file_range"})
# A device's FUA writes are named as a cause of its flushes from this share of them on.
POST_FLUSH_SHARE = 0.1


def _post_flush_clause(r: Mapping[str, Any]) -> str:
    """"; DEV has a volatile write cache without FUA: ..." for the workload's devices
    whose FUA writes each cost a post-flush (fua_writes) and are at least
    POST_FLUSH_SHARE of their flushes; "" for none (a few FUA writes among many explicit
    flushes are not why the flushes cost)."""
    mine = set(r["workload"]["devices"])
    parts = []
    for d in r["devices"]:
        nf, nw = int(d["flush"]["count"] or 0), int(d.get("fua_writes") or 0)
        if (d.get("write_cache") == "write back" and not d.get("fua") and d["name"] in mine
                and nf and nw and nw >= POST_FLUSH_SHARE * nf):
            parts.append(f"{d['name']} has a volatile write cache without FUA: its FUA "
                         f"writes ({nw:,}) each waited for a post-flush "
                         f"({plural(nf, 'flush', 'flushes')} in all)")
    return "".join(f"; {p}" for p in parts)


def _attribution_findings(r: Mapping[str, Any], att: Mapping[str, int],
                          pct: Mapping[str, float], add: Callable[..., None]) -> None:
    """The findings on where the elapsed time went (through `add`, as in findings())."""
    el = r["elapsed_ns"]
    req = r["requests"]
    com = r["commits"]
    if att["barrier"]:
        wfl = r["workload"]["flushes"]
        fc = wfl["count"]
        p50 = wfl["device_ns"]["p50"]
        text = (f"{pct['barrier']:.0f}% of elapsed is waiting on cache flushes (barrier): "
                f"{plural(fc, 'cache flush', 'cache flushes')}, median {_ms(p50)}; ")
        # The calls that can send a cache flush: sync_file_range(2) only starts or waits
        # for writeback, it never flushes.
        by_call = {k: int(v.get("count") or 0) for k, v in
                   (r["fsync"].get("by_call") or {}).items() if k not in NO_FLUSH_CALLS}
        n_calls = sum(by_call.values())
        calls = ", ".join(sorted(k for k, v in by_call.items() if v)) or "fsync"
        if n_calls:
            text += f"{plural(n_calls, 'fsync-family call')} ({calls}) caused them"
        else:
            text += ("no fsync calls" if not r["fsync"]["count"] else
                     "no fsync-family call that flushes (sync_file_range only writes back)")
            text += ": FUA/PREFLUSH writes (journal commits, O_SYNC, O_DIRECT) caused them"
        text += _post_flush_clause(r)
        add("barrier", att["barrier"], text, flushes=fc, flush_p50_ns=p50, fsync_calls=n_calls)
    if att["log"]:
        n = com["count"]
        text = f"{pct['log']:.0f}% of elapsed is waiting on journal/log commits: " \
               f"{plural(n, 'commit')}"
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
            # the classes by name when both have requests, as the class table shows them,
            # each with its own median (a class without requests has none)
            has = [c for c in cls_names if req[c]["count"]] or [cls_names[0]]
            by = [f"{req[c]['count']:,} {c}" for c in has]
            of = f" ({', '.join(by)})" if len(by) > 1 else ""
            med = [_ms(req[c]["device_ns"]["p50"]) for c in has]
            median = (med[0] if len(has) == 1 else
                      ", ".join(f"{m} {c}" for m, c in zip(med, has)))
            add(key, att[key], f"{pct[key]:.0f}% of elapsed is waiting on {what}: "
                               f"{plural(cnt, 'request')}{of}, {mib:,.1f} MiB, device median "
                               f"{median}",
                requests=cnt)
    if att.get("throttle"):
        add("throttle", att["throttle"],
            f"{pct['throttle']:.0f}% of elapsed the workload was throttled by the kernel "
            f"({_s(att['throttle'])}): it wrote faster than its devices took the data")
    if att["cpu"]:
        add("cpu", att["cpu"], f"{pct['cpu']:.0f}% of elapsed the workload was on CPU "
                               f"({_s(att['cpu'])})")
    if att["runqueue"]:
        add("runqueue", att["runqueue"], f"{pct['runqueue']:.0f}% of elapsed the workload was "
                                         "runnable but waiting for a CPU")
    helper = att.get("helper-cpu", 0) + att.get("helper-runqueue", 0)
    if helper:
        add("helper", helper, f"{100 * helper / el:.0f}% of elapsed the workload waited on "
                              f"kernel helper threads (kworkers) for work no wait of its own "
                              f"names: running ({_s(att.get('helper-cpu', 0))}) or waiting "
                              f"for a CPU ({_s(att.get('helper-runqueue', 0))})")
    if att.get("sleep"):
        add("sleep", att["sleep"], _sleep_text(pct["sleep"], r.get("sleep_by_syscall_ns")))
    if att.get("external"):
        ext = r.get("external_by_comm_ns") or {}
        top = next(iter(ext.items()), None)
        text = f"{pct['external']:.0f}% of elapsed the workload waited on other processes"
        if top:
            text += f", mostly {top[0]} ({_s(top[1])})"
        add("external", att["external"], text, by_comm=dict(list(ext.items())[:5]))
    if att["wait-other"]:
        wo = r["wait_other_by_syscall_ns"]
        top = next(iter(wo.items()), None)
        causal = "sleep" in att
        text = (f"{pct['wait-other']:.0f}% of elapsed is blocked with nothing that explains "
                "it" if causal else f"{pct['wait-other']:.0f}% of elapsed is blocked with no "
                "I/O in flight on its devices")
        if top:
            text += f", mostly in {top[0]} ({_s(top[1])})"
        wk = next(iter((r.get("wait_other_by_waker_ns") or {}).items()), None)
        if causal and wk:
            text += f", woken by {wk[0]}"
        add("wait-other", att["wait-other"], text, by_syscall=dict(list(wo.items())[:5]))


def _sleep_text(pct: float, by_sys: Mapping[str, int] | None) -> str:
    """The sleep finding: where the workload slept, when known (sleep_by_syscall_ns); a
    sleep inside a call that is not a sleeping one is a timer in the kernel (the thread's
    own, or a kernel helper's it waited on, such as btrfs's space reclaim polling)."""
    from .model.wakeups import SLEEP_SYSCALLS
    top = next(iter((by_sys or {}).items()), None)
    if top is None:
        return f"{pct:.0f}% of elapsed the workload slept (timers, timeouts: nanosleep, " \
               "poll, epoll, select)"
    text = f"{pct:.0f}% of elapsed the workload slept on timers, mostly in {top[0]} " \
           f"({_s(top[1])})"
    if top[0] not in SLEEP_SYSCALLS:
        text += ": not a sleeping call, a timer inside the kernel (its own or that of a " \
                "kernel helper it waited on)"
    return text


def _placement_findings(r: Mapping[str, Any], add: Callable[..., None]) -> None:
    """The findings on placement: positioning cost per class, writes that could have
    merged, the metadata:data ratio (through `add`, as in findings())."""
    req = r["requests"]
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
        # Why they were apart is not in the pairs: fsync calls send each file's writes
        # out on their own, so with them a missed merge is not the workload's to make.
        calls = int((r.get("fsync") or {}).get("count") or 0)
        why = (f"; the run's {_n(calls)} fsync-family calls send writes out one file at a "
               "time" if calls else ": a larger batch of writes would have merged them")
        # With fsync calls the merges were not the workload's to make: no time is claimed,
        # so no finding (the placement section still shows the pairs).
        add("locality", 0 if calls else min(loc["late_pairs"] * per_pair, pos),
            f"{loc['late_share']:.0%} of {_n(loc['adjacent_pairs'])} write pairs adjacent on "
            f"disk were issued more than {loc['gap_ns'] / 1e6:g} ms apart, too far apart to "
            f"merge{why}", late_pairs=loc["late_pairs"],
            adjacent_pairs=loc["adjacent_pairs"])
    ratio = r.get("metadata_data_ratio")
    if ratio is not None and ratio >= 0.5:
        md = r["metadata_data"]
        add("metadata-ratio", req["metadata"]["device_total_ns"],
            f"{md['metadata_bytes'] / 2**20:,.1f} MiB of metadata written for "
            f"{md['data_bytes'] / 2**20:,.1f} MiB of data (ratio {ratio:.2f})",
            ratio=ratio)
