"""The replay as a causal timeline (model/wakeups.py's Timeline), so that the analysis'
own critical-path walk (views/causal.py elapsed_view) attributes the predicted elapsed
time by the same rules as the recorded one.

Each step of an actor's program becomes a segment at its replayed time: a fixed step
keeps its recorded segment's kind, syscall and purpose; a wait on an actor stays a
RECURSE to it; a helper's idle step (its own business) leaves no time at all; a wait on
a request is cut around the request's replayed service as model/wakeups.py cuts a
recorded one (_linked_pieces): before its device stage, its pre-flush (a flush
sequence) or its queue; its stage, its class; after it, its post-flush; a piece while a
flush was in flight on the device, flush; every piece's purpose the request's class. A
wait the trace did not link to a request, which the replay times by a guessed one
(program.build), keeps its recorded kind (wait-other, with its detail), and the fill
names it by the replayed devices' work, as the analysis names the recorded one.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..kernels import I64, Coverage, check_keyed, key_span, union_intervals
from ..names import CLASS_NAMES
from ..model.wakeups import (BARRIER, FLUSH, HELPER_IRQ, OTHER, QUEUE, RECURSE, Timeline,
                             cut_ordered)
from ..views.causal import (device_fill, helper_busy, helper_timers,
                            unrecorded_helper_details)
from .program import IDLE, WAIT_ACTOR, WAIT_RQ, Programs
from .replay import Result
from .requests import RequestTable


def flushing(res: Result) -> tuple[np.ndarray, np.ndarray]:
    """When a flush was in flight in the replay, or a request of a flush sequence waited
    for one: disjoint sorted intervals."""
    s = np.concatenate((np.asarray(res.flush_start, I64),
                        np.asarray([a for a, _ in res.flush_waits], I64)))
    e = np.concatenate((np.asarray(res.flush_end, I64),
                        np.asarray([b for _, b in res.flush_waits], I64)))
    n = min(len(s), len(e))
    return union_intervals(s[:n], e[:n])


def build(tl: Timeline, progs: Programs, res: Result, reqs: RequestTable,
          end: int) -> Timeline:
    """The replayed timeline of every actor over [tl.origin, end]."""
    st, en = res.step_start, res.step_end
    ok = (st >= 0) & (en >= st) & (progs.kind != IDLE)
    k = np.flatnonzero(ok)
    nact = len(tl.tids)
    act = (np.searchsorted(progs.first, k, side="right") - 1).astype(I64)
    seg = progs.seg[k]
    kind = progs.kind[k]
    cat = tl.cat[seg].copy()
    arg = tl.arg[seg].copy()
    sysn = tl.sys[seg].copy()
    pur = tl.pur[seg].copy()
    a, b = st[k], en[k]
    wa = kind == WAIT_ACTOR
    cat[wa], arg[wa] = RECURSE, progs.dep[k[wa]]
    # A wait the trace does not link to a request (wait-other: an I/O completion in an
    # interrupt or another task) waits in the replay for the request program.build
    # guessed, but is named as the analysis names it, by what the devices were doing
    # over it (the fill): the guess times it, it is no evidence of what it was for.
    linked = (kind == WAIT_RQ) & (cat != OTHER)
    rq = np.flatnonzero(linked)
    plain = np.flatnonzero(~linked)
    cols = [act[plain], a[plain], b[plain], cat[plain], arg[plain], sysn[plain], pur[plain]]
    if len(rq):
        r = progs.dep[k[rq]]
        rc = reqs.category[r]
        fseq = reqs.flush_seq[r] & (res.svc_start[r] >= 0)
        sa = np.where(res.svc_start[r] >= 0, res.svc_start[r], b[rq])
        sb = np.where(res.svc_end[r] >= 0, res.svc_end[r], b[rq])
        wa_, wb_ = a[rq], b[rq]
        pre_b = np.clip(sa, wa_, wb_)
        post_a = np.clip(sb, pre_b, wb_)
        pre = np.where(fseq | (rc == BARRIER), FLUSH, QUEUE).astype(np.int8)
        post = np.where(fseq, FLUSH, rc).astype(np.int8)
        qa = np.stack((wa_, pre_b, post_a), axis=1).ravel()
        qb = np.stack((pre_b, post_a, wb_), axis=1).ravel()
        keep = np.flatnonzero(qb > qa)
        gc = np.stack((pre, rc, post), axis=1).ravel()[keep]
        fs, fe = flushing(res)
        qi, pa, pb, pc = cut_ordered(qa[keep], qb[keep], fs, fe,
                                     np.full(len(fs), FLUSH, np.int8), gc)
        w = rq[keep[qi] // 3]
        cols = [np.concatenate((c0, c1)) for c0, c1 in zip(cols, (
            act[w], pa, pb, pc, np.full(len(w), -1, np.int32), sysn[w],
            rc[keep[qi] // 3].astype(np.int8)))]
    sact, sa_, sb_, scat, sarg, ssys, spur = cols
    nz = sb_ > sa_
    sact, sa_, scat, sarg, ssys, spur = (x[nz] for x in (sact, sa_, scat, sarg, ssys, spur))
    o = np.lexsort((sa_, sact))
    # an actor the replay never started has an empty life
    birth = np.where(res.birth >= 0, res.birth, end)
    death = np.where(res.death >= 0, res.death, end)
    w1 = max(int(end), int(death.max()) if nact else int(end))
    span = key_span(tl.origin, w1)
    check_keyed(nact, span)
    sact = sact[o]
    out = Timeline(origin=tl.origin, span=span, tids=tl.tids, helper=tl.helper,
                   birth=np.clip(birth, tl.origin, w1), death=np.clip(death, tl.origin, w1),
                   actor=sact.astype(np.int32), kstart=sact * span + (sa_[o] - tl.origin),
                   cat=scat[o].astype(np.int8), arg=sarg[o].astype(np.int32),
                   sys=ssys[o].astype(np.int32), pur=spur[o].astype(np.int8),
                   details=list(tl.details), unseen=tl.unseen, unseen_ns=tl.unseen_ns,
                   intervals=tl.intervals, devices=tl.devices)
    return out


Waits = tuple[np.ndarray, np.ndarray]


def covers(res: Result, reqs: RequestTable) -> tuple[list[Coverage], Waits]:
    """The replayed devices' coverages by category (views/workload.py's covers: V_k is
    the time something of category BARRIER + k or better was in service) and the flush
    waits, for the fill of waits nothing names."""
    ok = (res.svc_start >= 0) & (res.svc_end > res.svc_start)
    cat = reqs.category - BARRIER
    out = []
    fs, fe = (np.asarray(res.flush_start, I64), np.asarray(res.flush_end, I64))
    n = min(len(fs), len(fe))
    for lvl in range(5):
        m = ok & (cat <= lvl)
        s = np.concatenate((fs[:n], res.svc_start[m]))
        e = np.concatenate((fe[:n], res.svc_end[m]))
        out.append(Coverage(*union_intervals(s, e)))
    ws = np.asarray([a for a, _ in res.flush_waits], I64)
    we = np.asarray([b for _, b in res.flush_waits], I64)
    return out, (ws, we)


def log_waits(res: Result, reqs: RequestTable, waits: Waits) -> Waits:
    """Of the replay's flush waits (covers()), those of its log writes (device_fill's
    log_waits)."""
    rq = np.asarray(res.flush_wait_rq, np.int64)
    log = np.asarray(reqs.cls)[rq] == CLASS_NAMES.index("log")
    return waits[0][log], waits[1][log]


def fill_of(tl: Timeline, res: Result, reqs: RequestTable) -> Any:
    """The replay's fill (analysis.py builds the recorded one the same way)."""
    cv, waits = covers(res, reqs)
    return helper_timers(device_fill(cv, waits,
                                     [*unrecorded_helper_details(tl), HELPER_IRQ],
                                     helper_busy(tl), log_waits(res, reqs, waits)))
