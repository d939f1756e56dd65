"""What the replay keeps of the recording: each actor's life as a program of steps.

The causal timeline (model/wakeups.py) tiles every actor's recorded time (each workload
thread's life, each helper's recorded stretches) with segments. A program is those
segments in order, each one a step:

* a **fixed** step keeps its recorded length: on a CPU, waiting for one, a sleep on a
  timer, a wait on something outside the workload, a throttle, a stretch of a helper
  that was not recorded;
* a **wait on an actor** (a RECURSE segment: the actor whose wakeup ended it) ends when
  that actor reaches, in the replay, the point of its own program where it woke this
  one (the recorded waking time, in its timeline);
* a **wait on a request** (the pieces of a wait the trace links to a request's
  completion: an off-CPU or helper record with WAKER_RQ) ends when the replayed device
  completes that request.

A helper's stretch opened at its waking (docs/trace-format.md, helper: a helper asleep
with no interval open when a tracked thread wakes it gets one opened at that waking)
has an empty wait, which the timeline leaves out; its program gets a wait on the waker
of no recorded length there (a *gate*: _stretch_gates), so that the work the waker handed
it starts, in the replay, when the waker hands it over.

Requests are anchored the same way: a request submitted by an actor arrives when that
actor reaches its recorded submission; a workload thread starts when the thread that
forked it reaches the fork.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from .. import abi
from ..kernels import I64
from ..model.wakeups import (BARRIER, CPU, DATA, HCPU, HELPER_IRQ, HRUNQ, IRQ_NO_RQ,
                             LOG, METADATA, OTHER, QUEUE, READ, RECURSE, RUNQ, SLEEP,
                             SLEEP_SYSCALLS, TASK_IO, TIMER, Timeline, syscalls_in)
from .requests import RequestTable

FIXED, WAIT_ACTOR, WAIT_RQ, IDLE, POLL = 0, 1, 2, 3, 4
POLL_MIN = 3  # timer sleeps of a workload thread that make it a polling loop
GUESS_NS = 2_000_000  # a completion this close before an unlinked I/O wakeup ended it
# Kinds of the pieces of a wait cut around its request (model/wakeups.py _linked_pieces).
LINKED_KINDS = (QUEUE, BARRIER, LOG, METADATA, DATA, READ)
RUNQ_BOUND_PCT = 99  # the percentile of the workload's waits for a CPU that bounds a
#                      helper's (runq_bound)


@dataclass
class Programs:
    """Steps of every actor, concatenated in (actor, start) order: actor `a`'s steps
    are first[a]:first[a + 1]."""

    first: np.ndarray  # int64, len actors + 1
    kind: np.ndarray  # FIXED, WAIT_ACTOR, WAIT_RQ
    ra: np.ndarray  # recorded start
    rb: np.ndarray  # recorded end
    dep: np.ndarray  # WAIT_ACTOR: the actor; WAIT_RQ: the request; else -1
    seg: np.ndarray  # the timeline segment it comes from (the first piece of a wait)
    linked_waits: int = 0  # waits on a request found in the records
    linked_unplaced: int = 0  # ... whose pieces the timeline did not have
    guessed: int = 0  # I/O waits without a link, given the request that completed last
    wake: "WakeLatency | None" = None  # the machine's wait for a CPU after a sleep
    runq: np.ndarray | None = None  # bool per step: a wait for a CPU (fixed)
    helper_step: np.ndarray | None = None  # bool per step: a helper's
    blocked: np.ndarray | None = None  # bool per step: a fixed step off a CPU
    gate: np.ndarray | None = None  # bool per step: a helper's stretch opened at its
    #                                 waking waits there for its waker (_stretch_gates)
    episodes: int = 0  # helper jobs (_helper_episodes)
    kept_episodes: int = 0  # ... the replay keeps
    runq_bound: int = -1  # the bound of a helper's wait for a CPU: the workload threads'
    #                       99th percentile in the recording (runq_bound), -1: none
    runq_waits: int = 0  # ... of how many
    lag: np.ndarray | None = None  # int64 per step: a guessed WAIT_RQ's recorded end after
    #                                its request's completion (0: ends at the completion)


def _linked(trace: Any, tl: Timeline, reqs: RequestTable
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(actor, start, waking, request) of every wait the records link to a request's
    completion, on the requests the analysis kept."""
    parts = []
    for name in ("offcpu", "helper"):
        r = trace.records(name)
        m = (r["flags_u16"] & abi.OFF_WAKER_RQ) != 0
        m &= (r["waking_ns"] > 0) & ((r["flags_u16"] & abi.OFF_PREEMPT) == 0)
        if not m.any():
            continue
        ri = reqs.find(r["waker_rq_seq"][m].astype(I64))
        act, found = tl.actor_of(r["tid"][m].astype(I64))
        ok = (ri >= 0) & found
        parts.append((act[ok], r["start_ns"][m][ok].astype(I64),
                      r["waking_ns"][m][ok].astype(I64), ri[ok]))
    if not parts:
        z = np.zeros(0, I64)
        return z, z, z, z
    return tuple(np.concatenate(x) for x in zip(*parts))  # type: ignore[return-value]


def build(trace: Any, tl: Timeline, reqs: RequestTable, arch: str | None = None) -> Programs:
    """The programs of every actor of tl (see the module doc); arch names the trace's
    syscalls (META `machine`)."""
    n = len(tl.kstart)
    starts = tl.starts(np.arange(n))
    ends = tl.ends(np.arange(n))
    kind = np.where(tl.cat == RECURSE, WAIT_ACTOR, FIXED).astype(np.int8)
    dep = np.where(tl.cat == RECURSE, tl.arg, -1).astype(I64)
    rb = ends.copy()
    absorbed = np.zeros(n, bool)
    act, s, w, ri = _linked(trace, tl, reqs)
    placed = 0
    if len(act):
        s = np.clip(s, tl.birth[act], tl.death[act])
        w = np.clip(w, s, tl.death[act])
        j0 = np.searchsorted(tl.kstart, tl.keys(act, s), side="left")
        j1 = np.searchsorted(tl.kstart, tl.keys(act, w), side="left")
        linked = np.isin(tl.cat, LINKED_KINDS)
        for a0, a1, r in zip(j0.tolist(), j1.tolist(), ri.tolist()):
            while a0 < a1 and not linked[a0]:
                a0 += 1
            if a0 >= a1 or not linked[a0:a1].all() or absorbed[a0] or kind[a0] == WAIT_RQ:
                continue
            kind[a0], dep[a0], rb[a0] = WAIT_RQ, r, ends[a1 - 1]
            absorbed[a0 + 1:a1] = True
            placed += 1
    # A wait the trace does not link, ended by an I/O completion (an interrupt with the
    # thread in iowait, a completion run in another task's context, a helper out of an
    # interrupt): the request of its devices that completed last before it ended, if
    # one did within GUESS_NS (never a later one: what the waiter does next may be what
    # that request needs; but see the helpers' below).
    io = (kind == FIXED) & (tl.cat == OTHER) & np.isin(tl.arg, (IRQ_NO_RQ, TASK_IO,
                                                                HELPER_IRQ))
    guessed = 0
    # How long after its request's completion a guessed wait ended (the completion's
    # way to the waiter: a softirq, a worker, another task); the replay keeps it.
    lag = np.zeros(n, I64)
    j = np.flatnonzero(io & ~absorbed)
    if len(j):
        done = np.flatnonzero(reqs.done > 0)
        dn = reqs.done[done]
        o = np.argsort(dn, kind="stable")
        done, dn = done[o], dn[o]
        k = np.searchsorted(dn, ends[j], side="right") - 1
        ok = (k >= 0) & (dn[np.maximum(k, 0)] >= ends[j] - GUESS_NS)
        kind[j[ok]], dep[j[ok]] = WAIT_RQ, done[k[ok]]
        lag[j[ok]] = ends[j[ok]] - dn[k[ok]]
        guessed = int(ok.sum())
        # A helper's wait ended from another task (TASK_IO) that no completion just
        # before explains, under a request issued before the wait began and completed
        # just after it ended: the helper served that request, as a loop device's
        # worker waits for the process serving its backing file (the lab's FUSE daemon)
        # and then completes the request itself. The wait is the request's service.
        srv = np.flatnonzero(~ok & tl.helper[tl.actor[j].astype(I64)] & (tl.arg[j] == TASK_IO))
        if len(srv):
            js = j[srv]
            nx = np.minimum(np.searchsorted(dn, ends[js], side="left"), len(dn) - 1)
            served = done[nx]
            hit = (dn[nx] >= ends[js]) & (dn[nx] <= ends[js] + GUESS_NS) & \
                (reqs.issue[served] > 0) & (reqs.issue[served] <= starts[js])
            kind[js[hit]], dep[js[hit]] = WAIT_RQ, served[hit]
            guessed += int(hit.sum())
    # A workload thread sleeping on its timer in a sleeping syscall (SLEEP_SYSCALLS, as
    # the causal view's polling loops) again and again (POLL_MIN times or more) is
    # polling: fio's main thread checking on its jobs in clock_nanosleep. Its sleeps end,
    # in the replay, once the other threads are done (replay.py); a single sleep keeps
    # its length, and so does a timer inside another call (a filesystem's timed wait in
    # openat: the work's own, which the replay meets again).
    tsleep = (kind == FIXED) & ~tl.helper[tl.actor.astype(I64)] & (tl.cat == SLEEP) & \
        (tl.arg == TIMER)
    j = np.flatnonzero(tsleep)
    tsleep[j] = syscalls_in(tl.sys[j], SLEEP_SYSCALLS, arch)
    per = np.bincount(tl.actor[tsleep].astype(I64), minlength=len(tl.tids))
    kind[tsleep & (per[tl.actor.astype(I64)] >= POLL_MIN)] = POLL
    keep = np.flatnonzero(~absorbed)
    kind, ra, rb, dep, seg = kind[keep], starts[keep], rb[keep], dep[keep], keep.astype(I64)
    lag = lag[keep]
    gate = np.zeros(len(keep), bool)
    ga, gt, gw = _stretch_gates(trace, tl)
    if len(ga):
        # each gate goes before the step its stretch starts with (the wait for a CPU at
        # the waking); it takes that step's segment (the helper's, for its syscall and
        # purpose). A gate of a job the workload does not need becomes IDLE like any
        # other wait of it (_helper_episodes); the wait for a CPU after a kept one keeps
        # its recorded length (a helper's moves only after a shorter sleep: replay.py)
        gk = tl.keys(ga, gt)
        pos = np.searchsorted(tl.kstart[keep], gk, side="left")
        gseg = np.maximum(np.searchsorted(tl.kstart, gk, side="right") - 1, 0)
        kind = np.insert(kind, pos, WAIT_ACTOR)
        ra, rb = np.insert(ra, pos, gt), np.insert(rb, pos, gt)
        dep, seg = np.insert(dep, pos, gw), np.insert(seg, pos, gseg)
        gate = np.insert(gate, pos, True)
        lag = np.insert(lag, pos, 0)
    owner = tl.actor[seg].astype(I64)
    first = np.searchsorted(owner, np.arange(len(tl.tids) + 1), side="left")
    p = Programs(first=first.astype(I64), kind=kind, ra=ra, rb=rb, dep=dep, seg=seg,
                 linked_waits=len(act), linked_unplaced=len(act) - placed, guessed=guessed,
                 gate=gate, lag=lag)
    aa, at = anchors(reqs, tl)
    _helper_episodes(p, tl, aa[aa >= 0], at[aa >= 0])
    p.wake = wake_latency(trace)
    cat = tl.cat[p.seg]
    p.runq = (p.kind == FIXED) & np.isin(cat, (RUNQ, HRUNQ))
    # a helper's replayed wait is longer than it would be (its other jobs are gone):
    # only a shorter one moves its wait for a CPU (replay.py)
    p.helper_step = tl.helper[tl.actor[p.seg].astype(I64)]
    p.blocked = (p.kind == FIXED) & ~np.isin(cat, (RUNQ, HRUNQ, HCPU, CPU))
    p.runq_bound, p.runq_waits = runq_bound(tl, starts, ends)
    return p


def runq_bound(tl: Timeline, starts: np.ndarray, ends: np.ndarray) -> tuple[int, int]:
    """(the bound, of how many waits) of the workload threads' waits for a CPU in the
    recording (their RUNQ segments; starts and ends: every segment's): the shortest
    wait that RUNQ_BOUND_PCT% of them were no longer than (the longest under 100
    waits); (-1, n) when they had fewer than WAKE_MIN, too few to tell the machine's
    load (as for WakeLatency's bins): no bound.

    The replay keeps no helper's wait for a CPU longer than that (replay.py): a helper's
    wait for a CPU is the machine's load, not the work. A kworker bound to a CPU cannot
    move while another task holds that CPU; on a loaded machine it can wait far longer
    than the workload's threads beside it, and a slow device hides it. A wait longer
    than the workload's own meet again and again is a rare event of a loaded machine,
    which a run of another length meets elsewhere or not at all. A percentile, not the
    maximum: the workload's own longest wait can be such an event too (once in about a
    thousand waits, four times the next longest); the replay makes as many wakeups as
    the recording, so a wait the workload met in 1% of them it meets again."""
    m = (tl.cat == RUNQ) & ~tl.helper[tl.actor.astype(I64)]
    if m.sum() < WAKE_MIN:
        return -1, int(m.sum())
    d = ends[m] - starts[m]
    return int(np.percentile(d, RUNQ_BOUND_PCT, method="inverted_cdf")), int(m.sum())


def _stretch_gates(trace: Any, tl: Timeline) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(helper actor, waking, waker actor) of every helper record whose interval was
    opened at its waking by another actor of the replay, from task context: the
    recorder follows a helper from when a tracked thread (or a helper, handing work on)
    wakes it, so the record's wait is empty and the timeline has no segment of it; but
    the helper had nothing of the workload's to do before that wakeup: the work starts
    there. Sorted by (actor, waking)."""
    r = trace.records("helper")
    z = np.zeros(0, I64)
    if not len(r):
        return z, z, z
    wk = r["waking_ns"].astype(I64)
    m = (wk > 0) & (r["start_ns"].astype(I64) == wk) & \
        ((r["flags_u16"] & abi.OFF_PREEMPT) == 0) & (r["waker_ctx_u16"] == abi.WCTX_TASK) & \
        (r["waker_tid"] > 0)
    if not m.any():
        return z, z, z
    act, found = tl.actor_of(r["tid"][m].astype(I64))
    wa, wf = tl.actor_of(r["waker_tid"][m].astype(I64))
    ok = found & wf
    act, wa, t = act[ok], wa[ok], wk[m][ok]
    ok = tl.helper[act] & (wa != act)
    act, wa, t = act[ok], wa[ok], t[ok]
    t = np.clip(t, tl.birth[act], tl.death[act])
    o = np.lexsort((t, act))
    return act[o].astype(I64), t[o], wa[o].astype(I64)


def _helper_episodes(p: Programs, tl: Timeline, pt_actor: np.ndarray, pt_t: np.ndarray
                     ) -> None:
    """Which of a helper's recorded work the workload's replay needs; the rest becomes
    IDLE (no time at all).

    A helper's program is a run of jobs, each started by a wait (what ended it handed
    the helper its work) and made of the CPU and run-queue time up to its next wait. A
    kworker serves every process on the machine, so most of its jobs are none of the
    workload's. A job is kept when the workload's work is in it: the wait that started
    it ended on a request of the workload's devices, on a workload thread or on a kept
    job of another helper; or a point of it is one the workload needs (a workload thread
    or a kept job woke up there, a request of the workload's devices was submitted
    there). A kept job keeps its CPU and run-queue time. Every other job, and every wait
    of a helper that nothing of the workload ended (a timer, another process, a stretch
    not recorded), costs nothing: the helper is free for the workload's work as soon as
    the replay needs it."""
    nact = len(tl.tids)
    n = len(p.kind)
    if not n or not tl.helper.any():
        return
    owner = (np.searchsorted(p.first, np.arange(n), side="right") - 1).astype(I64)
    hstep = tl.helper[owner]
    hs = np.flatnonzero(hstep)
    if not len(hs):
        return
    cat = tl.cat[p.seg]
    blocked = (p.kind != FIXED) | ~np.isin(cat, (HCPU, HRUNQ))
    idle_wait = hstep & blocked
    newact = np.ones(len(hs), bool)
    newact[1:] = owner[hs[1:]] != owner[hs[:-1]]
    starts = idle_wait[hs] | newact  # a new actor starts a job (opened by nothing recorded)
    job = np.full(n, -1, I64)
    job[hs] = np.cumsum(starts) - 1
    njob = int(job[hs].max()) + 1
    opening = np.full(njob, -1, I64)  # the idle wait that starts it, or -1
    o = hs[starts]
    opening[job[o]] = np.where(idle_wait[o], o, -1)
    # steps are sorted by actor then start: keyed times find an actor's step at a time
    key = owner * tl.span + (p.ra - tl.origin)

    def job_at(actor: np.ndarray, t: np.ndarray) -> np.ndarray:
        """The job of each (actor, recorded time): -1 for a workload thread."""
        k = np.searchsorted(key, actor * tl.span + (np.asarray(t) - tl.origin),
                            side="right") - 1
        k = np.maximum(k, 0)
        ok = tl.helper[actor] & (owner[k] == actor)
        return np.where(ok, job[k], -1)

    wa = np.flatnonzero(p.kind == WAIT_ACTOR)
    tgt = p.dep[wa]
    valid = (tgt >= 0) & (tgt < nact)
    wa, tgt = wa[valid], tgt[valid]
    tgt_job = job_at(tgt, p.rb[wa])  # the job the waker woke it from
    src_job = job[wa]  # the waiting step's job (-1: a workload thread's wait)
    kept = np.zeros(njob, bool)
    seeds: list[int] = []
    rq_jobs = job[(p.kind == WAIT_RQ) & hstep]
    seeds += rq_jobs.tolist()
    for j in range(njob):
        k = opening[j]
        if k >= 0 and p.kind[k] == WAIT_ACTOR and 0 <= p.dep[k] < nact \
                and not tl.helper[p.dep[k]]:
            seeds.append(j)
    seeds += tgt_job[(src_job < 0) & (tgt_job >= 0)].tolist()
    if len(pt_actor):
        pj = job_at(pt_actor.astype(I64), pt_t.astype(I64))
        seeds += pj[pj >= 0].tolist()
    # a kept job needs the jobs its waits were ended from; a job started by a kept one
    # (its opening wait ended there) is the workload's work too
    needs: dict[int, list[int]] = {}
    woken: dict[int, list[int]] = {}
    for s_, t_, k in zip(src_job.tolist(), tgt_job.tolist(), wa.tolist()):
        if s_ >= 0 and t_ >= 0:
            needs.setdefault(s_, []).append(t_)
            if opening[s_] == k:
                woken.setdefault(t_, []).append(s_)
    todo = list(set(seeds))
    kept[todo] = True
    while todo:
        j = todo.pop()
        for f in (*needs.get(j, ()), *woken.get(j, ())):
            if not kept[f]:
                kept[f] = True
                todo.append(f)
    timed = _timed_for_workload(p, tl, owner, wa[src_job < 0])
    drop = hstep & (~kept[np.maximum(job, 0)] | (blocked & (p.kind == FIXED) & ~timed))
    p.kind[drop] = IDLE
    p.kept_episodes = int(kept.sum())
    p.episodes = njob


def _timed_for_workload(p: Programs, tl: Timeline, owner: np.ndarray, waits: np.ndarray
                        ) -> np.ndarray:
    """Per step: a helper's sleep on its own timer (HELPER_IRQ, not taken for an I/O
    wait) that ended while a workload thread was waiting for that helper (`waits`: the
    workload threads' WAIT_ACTOR steps). The helper slept in the middle of the workload's
    work (a timed wait or a retry a tick later: btrfs's metadata reservation, with tar
    in openat waiting for the kworker that flushes for it), not waiting for work: the
    analysis names that time the workload's `sleep`, and the replay keeps its recorded
    length where other helper waits cost nothing (_helper_episodes): from where the
    helper reaches it, as a timer it set itself at the end of the work before. (Cut to
    the part the workload waited out, the sleep would end early by the rest: the
    baseline of a btrfs recording came out 3.5% short instead of 1.3%.)

    Work: the waits' intervals keyed by the helper they wait for, sorted by start, with
    the running maximum of their ends: one searchsorted per timer."""
    out = np.zeros(len(p.kind), bool)
    t = np.flatnonzero(tl.helper[owner] & (p.kind == FIXED) & (tl.cat[p.seg] == OTHER)
                       & (tl.arg[p.seg] == HELPER_IRQ))
    if not len(t) or not len(waits):
        return out
    h = p.dep[waits]
    ws = h * tl.span + (p.ra[waits] - tl.origin)
    we = h * tl.span + (p.rb[waits] - tl.origin)
    o = np.argsort(ws, kind="stable")
    ws, reach = ws[o], np.maximum.accumulate(we[o])
    end = owner[t] * tl.span + (p.rb[t] - tl.origin)
    k = np.searchsorted(ws, end, side="right") - 1
    out[t] = (k >= 0) & (reach[np.maximum(k, 0)] >= end)
    return out


@dataclass
class Births:
    """Where each actor starts in the replay: a workload thread at the point of its
    parent's program where it forked it (parent actor, recorded time), or (parent -1)
    at `at`: its recorded birth (the recorded process itself, a thread whose parent is
    not recorded), the window's start for a helper."""

    parent: np.ndarray
    at: np.ndarray


def births(trace: Any, tl: Timeline, root: int) -> Births:
    tasks = trace.records("task")
    parent = np.full(len(tl.tids), -1, I64)
    at = tl.birth.copy()
    # a helper is there from the start: its recorded stretches begin where the workload
    # first handed it work, which the replay's waits place
    at[tl.helper] = tl.origin
    if not len(tasks):
        return Births(parent, at)
    fork = tasks[tasks["event_u16"] == abi.TASK_FORK]
    tid_act, found = tl.actor_of(fork["tid"].astype(I64))
    # the parent: the thread whose id is the parent process's (its main thread), else
    # the main thread of the child's own process (a new thread)
    pa, pf = tl.actor_of(fork["parent_tgid"].astype(I64))
    ga, gf = tl.actor_of(fork["tgid"].astype(I64))
    same = fork["tgid"] == fork["tid"]
    par = np.where(same & pf, pa, np.where(gf & ~same, ga, np.where(pf, pa, -1)))
    for a, p, ok, ts in zip(tid_act.tolist(), par.tolist(), found.tolist(),
                            fork["ts_ns"].astype(I64).tolist()):
        if not ok or a == root or p < 0 or p == a or tl.helper[a]:
            continue
        if not (tl.birth[p] <= ts <= tl.death[p]):
            continue
        parent[a] = p
        at[a] = ts
    return Births(parent, at)


def anchors(reqs: RequestTable, tl: Timeline) -> tuple[np.ndarray, np.ndarray]:
    """Per request: the actor whose program submits it (-1: none recorded) and when."""
    act, found = tl.actor_of(reqs.tid)
    ok = found & reqs.origin & (reqs.tid > 0)
    ok &= (reqs.arrive >= tl.birth[act]) & (reqs.arrive <= tl.death[act])
    return np.where(ok, act, -1), reqs.arrive.copy()


def summary(p: Programs) -> Mapping[str, int]:
    return {"steps": int(len(p.kind)), "fixed": int((p.kind == FIXED).sum()),
            "waits_on_actors": int((p.kind == WAIT_ACTOR).sum()),
            "waits_on_requests": int((p.kind == WAIT_RQ).sum()),
            "helper_idle": int((p.kind == IDLE).sum()),
            "polling_sleeps": int((p.kind == POLL).sum()),
            "helper_episodes": p.episodes, "helper_episodes_kept": p.kept_episodes}


# Sleep lengths (ns) of the bins of WakeLatency: a wait for a CPU after a sleep is longer
# after a longer sleep (on the lab's VM, after a sleep of 10 ms or more a kworker waited
# 5 to 40 times as long on average as after one under 20 us).
WAKE_EDGES = (0, 20_000, 100_000, 300_000, 1_000_000, 3_000_000, 10_000_000)
WAKE_MIN = 20  # wakeups in a bin for its mean to count


@dataclass
class WakeLatency:
    """The machine's waits for a CPU after a sleep, by the sleep's length: per bin of
    WAKE_EDGES, the distribution (its percentiles 0 to 100) of every such wait of the
    trace, workload threads and helpers alike (how long a thread waits for a CPU does
    not depend on what it will run); None for a bin with fewer than WAKE_MIN."""

    edges: tuple[int, ...]
    pct: list[np.ndarray | None]

    def bin(self, sleep_ns: int) -> int:
        import bisect
        return max(0, bisect.bisect_right(self.edges, sleep_ns) - 1)

    def moved(self, runq_ns: int, recorded_sleep: int, replayed_sleep: int) -> int:
        """A wait for a CPU recorded after a sleep of recorded_sleep, after one of
        replayed_sleep instead: the same percentile of the other bin's distribution (as
        recorded where either bin has too few wakeups)."""
        a, b = self.bin(recorded_sleep), self.bin(replayed_sleep)
        pa, pb = self.pct[a], self.pct[b]
        if a == b or pa is None or pb is None:
            return runq_ns
        q = float(np.interp(runq_ns, pa, np.linspace(0, 100, len(pa))))
        return int(round(float(np.interp(q, np.linspace(0, 100, len(pb)), pb))))


def wake_latency(trace: Any) -> WakeLatency:
    sl, rq = [], []
    for name in ("offcpu", "helper"):
        r = trace.records(name)
        m = (r["waking_ns"] > 0) & ((r["flags_u16"] & abi.OFF_PREEMPT) == 0) & \
            ((r["flags_u16"] & (abi.OFF_LATE_END | abi.OFF_OPEN_END)) == 0) & \
            (r["end_ns"] >= r["waking_ns"]) & \
            (r["waking_ns"] >= r["start_ns"])
        sl.append(r["waking_ns"][m].astype(I64) - r["start_ns"][m].astype(I64))
        rq.append(r["end_ns"][m].astype(I64) - r["waking_ns"][m].astype(I64))
    s, q = np.concatenate(sl), np.concatenate(rq)
    b = np.searchsorted(np.asarray(WAKE_EDGES), s, side="right") - 1
    pct: list[np.ndarray | None] = []
    for i in range(len(WAKE_EDGES)):
        v = q[b == i]
        pct.append(np.percentile(v, np.arange(101)) if len(v) >= WAKE_MIN else None)
    return WakeLatency(WAKE_EDGES, pct)
