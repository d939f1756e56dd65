"""Per cgroup v2 (`iowhy report --by cgroup`): the workload's threads grouped by the
cgroup their task records name (format version 9: each task record carries its task's
cgroup id, the TRAILER maps ids to paths), and per group the threads' time (their own
state, and what explains it, as the thread time does), their fsync-family calls and the
syscalls they were blocked in (docs/report-json.md, `cgroups`).

A thread is in the cgroup of its earliest task record that names one (the cgroup it was
in when the recording first saw it; in a flight recorder's dump, whose window may start
after a thread's first records, the cgroup the recorder kept for it, TRAILER
`thread_cgroups`): a thread moved to another cgroup while recording stays in its first,
and is counted (`moved_threads`). A thread no record names a cgroup of is in the group
of id 0, `cgroup` null, counted (`unknown_threads`).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from .. import abi
from ..kernels import I64, percentiles
from ..model.wakeups import CAUSAL_CATEGORIES, CPU, RUNQ, Timeline
from .causal import _sys_name

BLOCKED_IN_MAX = 5  # syscalls listed per cgroup in blocked_in_ns, the longest first
PIDS_MAX = 20  # process ids listed per cgroup


def recorded(version: int, tasks: Mapping[str, Any] | np.ndarray) -> bool:
    """Whether the task records name their tasks' cgroups (format 9 on; an older
    format's records are widened with cgroup id 0)."""
    names = (tasks.dtype.names or ()) if isinstance(tasks, np.ndarray) else tasks
    return version >= abi.CGROUP_VERSION and "cgroup_id" in names


def cgroup_path(paths: Mapping[int, str | None], cgroup_id: int) -> str | None:
    """The name of a cgroup id: its path as the trace names it (paths: Trace.cgroup_paths);
    None for id 0 (unknown) and for a cgroup removed before the recorder named it."""
    return paths.get(cgroup_id) if cgroup_id else None


def not_recorded(version: int) -> dict[str, Any]:
    """The section of a trace whose task records name no cgroup (format before 9)."""
    return {"recorded": False,
            "why": f"trace format version {version} records no task's cgroup (format "
                   f"{abi.CGROUP_VERSION} does)"}


def thread_cgroups(tasks: Mapping[str, np.ndarray], known: Sequence[Sequence[int]] = ()
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(the tids of the task records and of `known` ascending, each one's cgroup id: that
    of its earliest task record naming one, 0 when none does; whether its records name
    more than one cgroup). known: [tid, cgroup id] pairs that come before every record
    (a flight dump's TRAILER `thread_cgroups`: each live thread's cgroup when first
    seen, before the window)."""
    tid = np.asarray(tasks["tid"]).astype(I64)
    ts = np.asarray(tasks["ts_ns"]).astype(I64)
    cg = np.asarray(tasks.get("cgroup_id", np.zeros(len(tid), np.uint64))).astype(np.uint64)
    if len(known):
        k = np.asarray(known, dtype=np.int64).reshape(-1, 2)
        tid = np.concatenate((k[:, 0], tid))
        ts = np.concatenate((np.full(len(k), -1, I64), ts))
        cg = np.concatenate((k[:, 1].astype(np.uint64), cg))
    tids = np.unique(tid)
    named = cg != 0
    t, c, s = tid[named], cg[named], ts[named]
    order = np.lexsort((s, t))  # by tid, then time
    t, c = t[order], c[order]
    first = np.ones(len(t), bool)
    first[1:] = t[1:] != t[:-1]
    ids = np.zeros(len(tids), np.uint64)
    ids[np.searchsorted(tids, t[first])] = c[first]
    other = np.zeros(len(t), bool)
    other[1:] = (t[1:] == t[:-1]) & (c[1:] != c[:-1])
    moved = np.zeros(len(tids), bool)
    moved[np.searchsorted(tids, t[other])] = True
    return tids, ids, moved


def _lookup(keys: np.ndarray, values: np.ndarray, q: np.ndarray, default: Any = 0
            ) -> np.ndarray:
    """values[i] where keys[i] == q (keys ascending), else default."""
    q = np.asarray(q).astype(I64)
    if not len(keys):
        return np.full(len(q), default, dtype=values.dtype)
    i = np.minimum(np.searchsorted(keys, q), len(keys) - 1)
    return np.where(keys[i] == q, values[i], default).astype(values.dtype)


def workload_groups(tasks: Mapping[str, np.ndarray], workload_tids: np.ndarray,
                    other_tids: np.ndarray, known: Sequence[Sequence[int]] = ()
                    ) -> dict[str, Any]:
    """The groups: `ids` (the cgroup ids, ascending; 0 for unknown), `of_workload` (the
    group of each workload thread), `moved` (per workload thread), and `lookup` (a
    function: tids -> group index) for the records of other tables (other_tids: all
    the tids they name, so that every group is listed); known: as thread_cgroups."""
    tids, ids, moved = thread_cgroups(tasks, known)
    wid = _lookup(tids, ids, workload_tids)
    oid = _lookup(tids, ids, other_tids)
    keys = np.unique(np.concatenate((wid, oid)))

    def lookup(q: np.ndarray) -> np.ndarray:
        return np.searchsorted(keys, _lookup(tids, ids, q)).astype(I64)
    return {"ids": keys, "of_workload": np.searchsorted(keys, wid).astype(I64),
            "moved": _lookup(tids, moved, workload_tids, False), "lookup": lookup}


def _own_sums(tl: Timeline, nw: int, arch: str | None, grp: np.ndarray, ng: int
              ) -> tuple[np.ndarray, list[dict[str, int]]]:
    """Per group: (on CPU, runnable, blocked) ns of its threads' own segments (ng x 3),
    and the syscalls their blocked time was in, the longest BLOCKED_IN_MAX first."""
    end = int(np.searchsorted(tl.actor, nw))  # the workload threads' segments come first
    j = np.arange(end)
    out = np.zeros((ng, 3), I64)
    if not end:
        return out, [{} for _ in range(ng)]
    ln = (tl.key_ends(j) - tl.kstart[j]).astype(np.float64)
    g = grp[tl.actor[j].astype(I64)]
    k = tl.cat[j]
    which = np.where(k == CPU, 0, np.where(k == RUNQ, 1, 2))
    out += np.bincount(g * 3 + which, weights=ln, minlength=ng * 3).round().astype(
        I64).reshape(ng, 3)
    blocked = which == 2
    sys = tl.sys[j][blocked].astype(I64)
    gb = g[blocked]
    lo = int(sys.min()) if len(sys) else 0
    span = (int(sys.max()) - lo + 1) if len(sys) else 1
    key = gb * span + (sys - lo)
    u, inv = np.unique(key, return_inverse=True)
    sums = np.bincount(inv, weights=ln[blocked], minlength=len(u)).round().astype(I64)
    name = _sys_name(arch)
    per: list[dict[str, int]] = [{} for _ in range(ng)]
    for kk, v in zip(u.tolist(), sums.tolist()):
        nm = name(kk % span + lo)
        d = per[kk // span]
        d[nm] = d.get(nm, 0) + v
    return out, [dict(sorted(d.items(), key=lambda kv: (-kv[1], kv[0]))[:BLOCKED_IN_MAX])
                 for d in per]


def cgroup_view(groups: Mapping[str, Any], paths: Mapping[int, str | None],
                tasks: Mapping[str, np.ndarray], fs: Mapping[str, np.ndarray],
                tl: Timeline | None = None, explained: np.ndarray | None = None,
                arch: str | None = None) -> dict[str, Any]:
    """The `cgroups` section: one row per group (workload_groups), the most blocked
    first. tl: the causal timeline (None: no time per group, only the calls);
    explained: its thread time per group (ng x level one, thread_time_view's
    `_by_group`)."""
    ids, grp = groups["ids"], groups["of_workload"]
    ng = len(ids)
    if explained is not None and len(explained) < ng:  # groups of no workload thread
        explained = np.concatenate((explained, np.zeros((ng - len(explained),
                                                         explained.shape[1]), I64)))
    nthreads = np.bincount(grp, minlength=ng)
    fg = groups["lookup"](np.asarray(fs["tid"]))
    # the processes of its threads' task records and calls (a flight dump's threads older
    # than its window have calls but no task record)
    tgid = np.concatenate((np.asarray(tasks["tgid"]), np.asarray(fs["tgid"]))).astype(I64)
    tg_grp = np.concatenate((groups["lookup"](np.asarray(tasks["tid"])), fg))
    pids: list[list[int]] = [sorted(set(tgid[tg_grp == g].tolist())) for g in range(ng)]
    own, blocked_in = (None, None)
    life = None
    if tl is not None:
        nw = len(grp)
        own, blocked_in = _own_sums(tl, nw, arch, grp, ng)
        life = np.bincount(grp, weights=(tl.death[:nw] - tl.birth[:nw]).astype(np.float64),
                           minlength=ng).round().astype(I64)
    calls = np.asarray(fs["call_u16"]).astype(I64)
    took = (np.asarray(fs["exit_ns"]).astype(I64) - np.asarray(fs["enter_ns"]).astype(I64))
    took = np.maximum(took, 0)
    rows = []
    for g in range(ng):
        cid = int(ids[g])
        by_call: dict[str, Any] = {}
        mine = fg == g
        for code in np.unique(calls[mine]).tolist():
            v = took[mine & (calls == code)]
            pct = percentiles(v, (99,))
            by_call[abi.CALL_NAMES.get(code, f"call_{code}")] = {
                "count": int(len(v)), "total_ns": int(v.sum()), "p99_ns": pct["p99"],
                "max_ns": pct["max"]}
        row: dict[str, Any] = {
            "cgroup": cgroup_path(paths, cid), "id": cid,
            "processes": len(pids[g]), "pids": pids[g][:PIDS_MAX],
            "threads": int(nthreads[g]), "calls": by_call,
        }
        if own is not None and life is not None and blocked_in is not None:
            row.update({"thread_ns": int(life[g]), "on_cpu_ns": int(own[g, 0]),
                        "runqueue_ns": int(own[g, 1]), "blocked_ns": int(own[g, 2]),
                        "blocked_in_ns": blocked_in[g]})
        if explained is not None:
            row["attribution_ns"] = {k: int(v) for k, v in
                                     zip(CAUSAL_CATEGORIES, explained[g].tolist()) if v}
        rows.append(row)
    rows.sort(key=lambda r: (-r.get("blocked_ns", 0), -r["threads"], r["cgroup"] or "",
                             r["id"]))
    moved = np.asarray(groups["moved"])
    unknown = int(nthreads[ids == 0].sum()) if len(ids) else 0
    return {"recorded": True, "groups": rows, "unknown_threads": unknown,
            "unnamed_cgroups": int(sum(1 for i in ids.tolist()
                                       if i and cgroup_path(paths, i) is None)),
            "moved_threads": int(moved.sum())}
