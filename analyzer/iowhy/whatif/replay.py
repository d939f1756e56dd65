"""The replay: every actor's program (whatif/program.py) run again against a changed
device, as one discrete-event simulation.

* An actor runs its steps one after another from its start: a fixed step takes its
  recorded length; a wait on an actor ends when that actor reaches its recorded waking
  point (a step that starts after that point does not wait); a wait on a request ends
  at the request's completion in the replay.
* A point of an actor's program (a recorded time) is reached, in the replay, at its
  step's start plus its offset into the step: exactly for a fixed step; for a point
  inside a wait (a waker recorded asleep at its own waking, which happens at the edges
  of a helper's recorded stretches), at the same offset or when the wait ends,
  whichever is first.
* A helper's wait for a CPU lasts at most `helper_runq_cap` (program.runq_bound: the
  99th percentile of the workload threads' in the recording), if given: longer ones are
  the machine's load, rare events a run of another length meets elsewhere or not at all.
* A request arrives when its submitter reaches its recorded submission. One with no
  recorded submitter (a kworker outside the recorded stretches, a completion's context)
  arrives as long after the latest request of its device that completed before it
  arrived, in the recording, as it did then (the device's own pace).
* The device serves what arrives in arrival order, `queue_depth` requests at a time,
  each for what the disk model charges (whatif/disk.py) plus the path's per-request
  time; the flush state machine (blk-flush.c) runs above it when the kernel would send
  flushes: a request with PREFLUSH waits for a flush issued after it arrived, a FUA
  write on a device without FUA for one issued after its data completed; one flush is
  in flight at a time and serves every request pending when it was issued. Without
  flushes (nobarrier, or a write cache the kernel sees as write through), PREFLUSH and
  FUA are dropped: an empty PREFLUSH request completes as it arrives, a FUA write is a
  plain write.

The recorded FF flushes are not replayed as such: the state machine makes its own. A
wait the trace links to a recorded FF ends when the replayed flush of the request that
FF served does (without flushes: when the request no longer needs it).

`service="recorded"` serves every request in its recorded service time instead of the
model's: the identity replay, which must give back the recorded elapsed time (the
tests check it).
"""

from __future__ import annotations

import bisect
import heapq
from collections import deque
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from ..kernels import I64
from . import disk
from .program import FIXED, IDLE, POLL, WAIT_ACTOR, WAIT_RQ, Births, Programs
from .requests import POST, PRE, RequestTable, service_times

# event types, in the order simultaneous events are taken
_POINT, _ARRIVE, _DEV_DONE, _STEP_END = 0, 1, 2, 3
# what a point of an actor's program does when reached
_PT_WAKE, _PT_ARRIVE, _PT_BIRTH = 0, 1, 2


@dataclass
class DeviceSpec:
    """How one device serves in the replay."""

    params: disk.DiskParams
    path_ns: dict[str, int]  # read, write, flush: per request on the way to the disk and
    #                          back, for a request without a recorded one (Replay.path)
    queue_depth: int = 1
    flushes: bool = True  # the kernel sends flushes (write back, barriers on)
    fua: bool = False  # the device does FUA itself (no post-flush)


@dataclass
class Result:
    """What the replay found, in replay time (the recording's clock origin)."""

    step_start: np.ndarray  # per step
    step_end: np.ndarray
    birth: np.ndarray  # per actor
    death: np.ndarray
    arrive: np.ndarray  # per request (-1: never arrived)
    svc_start: np.ndarray  # its data stage (or its own service) on the device, -1: none
    svc_end: np.ndarray
    done: np.ndarray  # its completion (-1: never)
    flush_start: list[int] = field(default_factory=list)  # the replay's own flushes
    flush_end: list[int] = field(default_factory=list)
    flush_waits: list[tuple[int, int]] = field(default_factory=list)  # [a, b) a request
    #                                              of a flush sequence waited on flushes
    model_ns: dict[str, int] = field(default_factory=dict)  # per disk kind name, summed
    path_ns: int = 0
    flushes: int = 0
    destage_bytes: int = 0
    stuck: int = 0  # actors that never finished (a wait nothing ended)
    forced: int = 0  # waits ended as long as recorded to break a cycle (break_cycle)
    flush_wait_rq: list[int] = field(default_factory=list)  # the request of each flush_waits
    capped: int = 0  # helpers' waits for a CPU shortened to helper_runq_cap
    capped_ns: int = 0  # ... the time it removed


class Replay:
    def __init__(self, progs: Programs, births: Births, reqs: RequestTable,
                 anchor_actor: np.ndarray, anchor_t: np.ndarray,
                 specs: Sequence[DeviceSpec], service: str = "model",
                 path: np.ndarray | None = None, workload: np.ndarray | None = None,
                 helper_runq_cap: int | None = None) -> None:
        """path: per request, its recorded path time (-1: none recorded, the device's
        path_ns then); workload: per actor, whether it is a workload thread (not a
        helper), for the polling loops (default: all); helper_runq_cap: the longest a
        helper's wait for a CPU lasts (None: as long as it comes)."""
        self.p, self.reqs, self.specs = progs, reqs, specs
        self.path = path.tolist() if path is not None else [-1] * len(reqs)
        self.service = service
        nact = len(progs.first) - 1
        nst = len(progs.kind)
        nrq = len(reqs)
        self.kind = progs.kind.tolist()
        self.dur = (progs.rb - progs.ra).tolist()
        # a wait for a CPU right after a wait: its length follows the replayed wait's
        # (program.WakeLatency: the same percentile of the machine's waits for a CPU
        # after a sleep as long as the replayed one); None: as recorded
        self.wake = progs.wake
        self.after_wait = [False] * len(self.dur)
        if progs.wake is not None and progs.runq is not None:
            blocked = (progs.kind == WAIT_ACTOR) | (progs.kind == WAIT_RQ) | \
                (progs.kind == POLL) | progs.blocked
            aw = np.zeros(len(progs.kind), bool)
            aw[1:] = progs.runq[1:] & blocked[:-1]
            aw[progs.first[:-1][progs.first[:-1] < len(aw)]] = False  # an actor's first
            self.after_wait = aw.tolist()
        self.helper_step = (progs.helper_step.tolist() if progs.helper_step is not None
                            else [False] * len(self.dur))
        self.cap = helper_runq_cap
        self.capped, self.capped_ns = 0, 0
        self.cap_step = [False] * len(self.dur)
        if helper_runq_cap is not None and progs.runq is not None \
                and progs.helper_step is not None:
            self.cap_step = (progs.runq & progs.helper_step).tolist()
        self.ra = progs.ra.tolist()
        self.rb = progs.rb.tolist()
        self.dep = progs.dep.tolist()
        # a wait on a request ends this long after its completion (a guessed one's
        # recorded lag: program.build)
        self.lag = progs.lag.tolist() if progs.lag is not None else [0] * nst
        self.first = progs.first.tolist()
        self.is_workload = ([True] * nact if workload is None
                            else [bool(x) for x in workload.tolist()])
        self.cur = [-1] * nact  # each actor's current step; -2 once dead
        self.polling: dict[int, int] = {}  # actor -> its POLL step under way
        # per step: the recorded start of its actor's next polling sleep (none: the
        # largest time), which bounds the work a poller does after the sleep
        pk = np.flatnonzero(progs.kind == POLL)
        nxt = np.searchsorted(pk, np.arange(nst), side="right")
        owner = np.searchsorted(progs.first, np.arange(nst), side="right") - 1
        ok = nxt < len(pk)
        nk = pk[np.minimum(nxt, max(len(pk) - 1, 0))] if len(pk) else np.zeros(nst, I64)
        same = ok & (np.searchsorted(progs.first, nk, side="right") - 1 == owner)
        self.next_poll = np.where(same, progs.ra[nk] if len(pk) else 0,
                                  np.iinfo(np.int64).max).tolist()
        self.s_start = [-1] * nst
        self.s_end = [-1] * nst
        self.birth = [-1] * nact
        self.death = [-1] * nact
        self.arrive = [-1] * nrq
        self.svc_a = [-1] * nrq
        self.svc_b = [-1] * nrq
        self.done = [-1] * nrq
        self.heap: list[tuple[int, int, int, int, int]] = []
        self.order = 0
        # points: sorted per actor by recorded time
        pts: list[tuple[int, int, int, int]] = []  # (actor, t, type, id)
        wait_pt = [-1] * nst
        kind, dep, rb = self.kind, self.dep, self.rb
        for a in range(nact):
            for k in range(self.first[a], self.first[a + 1]):
                if kind[k] == WAIT_ACTOR and 0 <= dep[k] < nact:
                    pts.append((dep[k], rb[k], _PT_WAKE, k))
        self.unanchored: list[int] = []
        aa, at = anchor_actor.tolist(), anchor_t.tolist()
        for r in range(nrq):
            if not self._takes_part(r):
                continue
            if aa[r] >= 0:
                pts.append((aa[r], at[r], _PT_ARRIVE, r))
            else:
                self.unanchored.append(r)
        self.root_births: list[int] = []
        for a in range(nact):
            par = int(births.parent[a])
            if par >= 0:
                pts.append((par, int(births.at[a]), _PT_BIRTH, a))
            else:
                self.root_births.append(a)
        self.bat = births.at.tolist()
        pts.sort(key=lambda x: (x[0], x[1]))
        self.pt_actor = [x[0] for x in pts]
        self.pt_t = [x[1] for x in pts]
        self.pt_type = [x[2] for x in pts]
        self.pt_id = [x[3] for x in pts]
        self.pt_time = [-1] * len(pts)  # when reached (replay time)
        for j, (_, _, typ, i) in enumerate(pts):
            if typ == _PT_WAKE:
                wait_pt[i] = j
        self.wait_pt = wait_pt
        self.pt_next = [0] * (nact + 1)  # per actor: its first point not yet placed
        self.pt_first = [0] * (nact + 1)
        j = 0
        for a in range(nact + 1):
            while j < len(pts) and self.pt_actor[j] < a:
                j += 1
            self.pt_first[a] = j
            self.pt_next[a] = j
        self.pt_waiter = [-1] * len(pts)  # a WAIT_ACTOR step waiting for this point
        self.rq_waiters: dict[int, list[int]] = {}  # request -> steps waiting for it
        self.placed_in: dict[int, list[int]] = {}  # wait step -> its points not reached
        # every wait registered, by its start (break_cycle takes the first still open)
        self.open_waits: list[tuple[int, int, bool, int]] = []
        self._device_clock(reqs)
        self._devices()
        self.res_model: dict[str, int] = {}
        self.path_total = 0
        self.destaged = 0
        self.flush_start: list[int] = []
        self.flush_end: list[int] = []
        self.flush_waits: list[tuple[int, int]] = []
        self.flush_wait_rq: list[int] = []
        self.forced = 0

    # -- set up ------------------------------------------------------------------------

    def _takes_part(self, r: int) -> bool:
        """Whether request r arrives in the replay: every request but the recorded FFs
        (the replay's state machine makes its own), which arrive only when no request
        of the trace is known to have needed them (then as a flush of their own)."""
        t = self.reqs
        if t.is_ff[r]:
            return r not in t.ff_served
        return True

    def _device_clock(self, t: RequestTable) -> None:
        """For each unanchored request: the latest request of its device (observed, not
        an FF) that completed before it arrived, in the recording, or -1."""
        self.clock_of = {}
        self.clock_waiters: dict[int, list[int]] = {}
        for d in np.unique(t.dev).tolist():
            cand = np.flatnonzero((t.dev == d) & t.observed & ~t.is_ff & (t.done > 0))
            dn = t.done[cand]
            o = np.argsort(dn, kind="stable")
            cand, dn = cand[o], dn[o]
            for r in self.unanchored:
                if t.dev[r] != d:
                    continue
                k = int(np.searchsorted(dn, t.arrive[r], side="right")) - 1
                c = int(cand[k]) if k >= 0 else -1
                self.clock_of[r] = c
                if c >= 0:
                    self.clock_waiters.setdefault(c, []).append(r)

    def _devices(self) -> None:
        t = self.reqs
        self.disks = [disk.Disk(s.params) for s in self.specs]
        self.queue: list[deque] = [deque() for _ in self.specs]
        self.busy = [0] * len(self.specs)
        self.fl_pending: list[list[tuple[int, int]]] = [[] for _ in self.specs]
        self.fl_running = [False] * len(self.specs)
        self.fl_batch: list[list[tuple[int, int]]] = [[] for _ in self.specs]
        self._wait_start: dict[tuple[int, int], int] = {}  # (request, stage) -> since
        self.needs = [0] * len(t)
        for r in range(len(t)):
            d = int(t.dev[r])
            if self.specs[d].flushes:
                self.needs[r] = t.needs(r, self.specs[d].fua)
                if t.is_ff[r]:
                    self.needs[r] = PRE
        # recorded FF -> the (request, stage) it served, and back
        self.ff_alias: dict[tuple[int, int], list[int]] = {}
        for f, served in t.ff_served.items():
            for rs in served:
                self.ff_alias.setdefault(rs, []).append(f)
        self.rec_svc: dict[int, int] = {}
        self._ffq: dict[int, deque] = {}
        if self.service == "recorded":
            for d in range(len(self.specs)):
                idx, _, svc = service_times(t, d)
                for i, s in zip(idx.tolist(), svc.tolist()):
                    self.rec_svc[i] = max(0, s)
                self._ffq[d] = deque(max(0, s) for i, s in zip(idx.tolist(), svc.tolist())
                                     if t.is_ff[i])

    # -- the event loop ----------------------------------------------------------------

    def push(self, time: int, etype: int, a: int, b: int = 0) -> None:
        self.order += 1
        heapq.heappush(self.heap, (time, etype, self.order, a, b))

    def run(self, start: int) -> Result:
        for a in self.root_births:
            self.push(max(start, self.bat[a]), _STEP_END, a, -1)
        for r in self.unanchored:
            if self.clock_of.get(r, -1) < 0:
                self.push(int(self.reqs.arrive[r]), _ARRIVE, r)
        heap = self.heap
        while True:
            while heap:
                time, etype, _, a, b = heapq.heappop(heap)
                if etype == _STEP_END:
                    if b < 0:  # the actor's start
                        self.birth[a] = time
                        self.start_step(a, self.first[a], time)
                    else:
                        self.end_step(a, b, time)
                elif etype == _POINT:
                    self.reach(a, time)
                elif etype == _ARRIVE:
                    self.arrival(a, time)
                else:
                    self.dev_done(a, b, time)
            if not self.break_cycle():
                break
        stuck = sum(1 for x in self.death if x < 0)
        st = np.array(self.s_start, I64)
        return Result(st, np.array(self.s_end, I64), np.array(self.birth, I64),
                      np.array(self.death, I64), np.array(self.arrive, I64),
                      np.array(self.svc_a, I64), np.array(self.svc_b, I64),
                      np.array(self.done, I64), self.flush_start, self.flush_end,
                      self.flush_waits, self.res_model, self.path_total,
                      len(self.flush_start), self.destaged, stuck, self.forced,
                      self.flush_wait_rq, self.capped, self.capped_ns)

    def break_cycle(self) -> bool:
        """When nothing is left to happen but waits are still open (each waits, through
        the others, on itself: the recording's order of events did not hold in the
        replay), end the one that started first after its recorded length. False when
        no wait is open."""
        while self.open_waits:
            _, k, is_pt, x = heapq.heappop(self.open_waits)
            if is_pt and self.pt_waiter[x] == k:
                self.pt_waiter[x] = -1
                break
            if not is_pt and k in self.rq_waiters.get(x, ()):
                self.rq_waiters[x].remove(k)
                break
        else:
            return False
        self.forced += 1
        self.push(self.s_start[k] + (self.rb[k] - self.ra[k]), _STEP_END, self._owner(k), k)
        return True

    # -- actors ------------------------------------------------------------------------

    def start_step(self, a: int, k: int, time: int) -> None:
        if k >= self.first[a + 1]:
            self.death[a] = time
            self.cur[a] = -2
            self.place_points(a, -1, time, time)
            if self.polling and self.is_workload[a]:
                self.polls(time)
            return
        self.s_start[k] = time
        self.cur[a] = k
        kind = self.kind[k]
        if kind == FIXED or kind == IDLE or kind == POLL:
            d = self.dur[k]
            if self.after_wait[k] and self.wake is not None:
                j = k - 1
                w_rec, w_sim = self.rb[j] - self.ra[j], max(0, time - self.s_start[j])
                if self.helper_step[k]:
                    w_sim = min(w_sim, w_rec)
                d = self.wake.moved(d, w_rec, w_sim)
            cap = self.cap
            if cap is not None and self.cap_step[k] and kind == FIXED and d > cap:
                self.capped += 1
                self.capped_ns += d - cap
                d = cap
            end = time + d if kind != IDLE else time
            self.place_points(a, k, time, end)
            self.push(end, _STEP_END, a, k)
            if kind == POLL:
                self.polling[a] = k
                self.polls(time)
            return
        # a wait: its own points are reached at their offset or when it ends
        self.place_points(a, k, time, -1)
        if self.polling and kind == WAIT_ACTOR and self.is_workload[a]:
            self.polls(time)
        if kind == WAIT_ACTOR:
            pt = self.wait_pt[k]
            if pt < 0:  # a target outside the actors: as recorded
                self.push(time + (self.rb[k] - self.ra[k]), _STEP_END, a, k)
            elif self.pt_time[pt] >= 0:
                self.push(max(time, self.pt_time[pt]), _STEP_END, a, k)
            else:
                self.pt_waiter[pt] = k
                heapq.heappush(self.open_waits, (time, k, True, pt))
        else:
            r = self.dep[k]
            if self.done[r] >= 0:
                self.push(max(time, self.done[r] + self.lag[k]), _STEP_END, a, k)
            else:
                self.rq_waiters.setdefault(r, []).append(k)
                heapq.heappush(self.open_waits, (time, k, False, r))

    def polls(self, time: int) -> None:
        """End the polling sleeps of the threads whose polling is over: every other
        workload thread is dead, itself polling, or waiting for another workload thread
        (none of them has work of its own left that the poller could be waiting for). A
        thread not started yet has all of its work ahead, and one the poller woke, in
        the recording, right after this sleep (before its next one) waits for this
        sleep's end: fio's jobs, created, wait for its main thread, which starts them
        after its polling sleep. (A wait for the poller's exit, wait4 on it, does not.)"""
        for a, k in list(self.polling.items()):
            done = True
            for b in range(len(self.cur)):
                if b == a or not self.is_workload[b] or b in self.polling:
                    continue
                c = self.cur[b]
                if c == -2:  # dead
                    continue
                if c == -1:  # not started yet: its work is ahead
                    done = False
                    break
                if self.kind[c] == WAIT_ACTOR and 0 <= self.dep[c] < len(self.cur) \
                        and self.is_workload[self.dep[c]] \
                        and not (self.dep[c] == a
                                 and self.rb[k] <= self.rb[c] < self.next_poll[k]):
                    continue
                done = False
                break
            if done:
                del self.polling[a]
                self.push(time, _STEP_END, a, k)

    def end_step(self, a: int, k: int, time: int) -> None:
        if self.s_end[k] >= 0:
            return
        self.s_end[k] = time
        if self.polling.get(a) == k:
            del self.polling[a]
        for j in self.placed_in.pop(k, ()):
            if self.pt_time[j] < 0:
                self.reach(j, time)
        self.start_step(a, k + 1, time)

    def place_points(self, a: int, k: int, start: int, end: int) -> None:
        """Schedule the points of actor a recorded before the end of its step k, which
        starts at `start`: at their offset into the step (points recorded before it: at
        its start), no later than `end` for a fixed step; a wait's points are reached
        when it ends, too. k = -1: the actor's death, every point left at `start`."""
        j = self.pt_next[a]
        stop = self.pt_first[a + 1]
        if k < 0:
            while j < stop:
                self.push(start, _POINT, j)
                j += 1
            self.pt_next[a] = j
            return
        pt_t = self.pt_t
        until, ra = self.rb[k], self.ra[k]
        wait = self.kind[k] in (WAIT_ACTOR, WAIT_RQ)
        placed = []
        while j < stop and pt_t[j] < until:
            t = start + max(0, pt_t[j] - ra)
            if wait:
                placed.append(j)
            else:
                t = min(t, end)
            self.push(t, _POINT, j)
            j += 1
        self.pt_next[a] = j
        if placed:
            self.placed_in[k] = placed

    def reach(self, j: int, time: int) -> None:
        """Point j of some actor's program is reached at `time`."""
        if self.pt_time[j] >= 0:
            return
        self.pt_time[j] = time
        typ, i = self.pt_type[j], self.pt_id[j]
        if typ == _PT_WAKE:
            k = self.pt_waiter[j]
            if k >= 0:
                self.pt_waiter[j] = -1
                owner = self._owner(k)
                self.push(max(time, self.s_start[k]), _STEP_END, owner, k)
        elif typ == _PT_ARRIVE:
            self.arrival(i, time)
        else:
            self.push(time, _STEP_END, i, -1)

    def _owner(self, k: int) -> int:
        return bisect.bisect_right(self.first, k) - 1

    # -- requests and devices ------------------------------------------------------------

    def arrival(self, r: int, time: int) -> None:
        if self.arrive[r] >= 0:
            return
        self.arrive[r] = time
        t, d = self.reqs, int(self.reqs.dev[r])
        need = self.needs[r]
        if not self.specs[d].flushes:
            for f in self.ff_alias.get((r, PRE), ()):
                self.complete(f, time)
        if need & PRE:
            self.flush_need(d, r, PRE, time)
        elif t.kind[r] == 0 or t.is_ff[r]:
            self.complete(r, time)
        else:
            self.enqueue(d, r, time)

    def enqueue(self, d: int, r: int, time: int) -> None:
        self.queue[d].append(r)
        self.dev_start(d, time)

    def dev_start(self, d: int, time: int) -> None:
        spec = self.specs[d]
        q = self.queue[d]
        while q and self.busy[d] < spec.queue_depth:
            r = q.popleft()
            self.busy[d] += 1
            if r < 0:  # a flush of the state machine
                cost = self.cost(d, disk.FLUSH, 0, 0, -1)
                self.flush_start.append(time)
            else:
                self.svc_a[r] = time
                t = self.reqs
                cost = self.cost(d, int(t.kind[r]), int(t.offset[r]), int(t.nbytes[r]), r)
            self.push(time + cost, _DEV_DONE, d, r)

    def cost(self, d: int, kind: int, off: int, n: int, r: int) -> int:
        spec = self.specs[d]
        if self.service == "recorded":
            if r >= 0:
                return int(self.rec_svc.get(r, 0))
            return self._recorded_ff(d)
        c = self.disks[d].serve(kind, off, n)
        path = self.path[r] if r >= 0 else -1
        if path < 0:
            path = spec.path_ns.get("read" if kind == disk.READ else
                                    "flush" if kind == disk.FLUSH else "write", 0)
        name = disk.KIND_NAMES.get(kind, "other")
        self.res_model[name] = self.res_model.get(name, 0) + c.model_ns
        self.path_total += path
        self.destaged += c.destage_bytes
        return c.model_ns + path

    def _recorded_ff(self, d: int) -> int:
        """The identity replay's flush: the recorded FFs' service times in order."""
        q = self._ffq[d]
        return q.popleft() if q else 0

    def dev_done(self, d: int, r: int, time: int) -> None:
        self.busy[d] -= 1
        if r < 0:
            self.flush_end.append(time)
            self.flush_done(d, time)
        else:
            self.svc_b[r] = time
            if self.needs[r] & POST:
                self.flush_need(d, r, POST, time)
            else:
                self.complete(r, time)
                if not self.specs[d].flushes:
                    for f in self.ff_alias.get((r, POST), ()):
                        self.complete(f, time)
        self.dev_start(d, time)

    def flush_need(self, d: int, r: int, stage: int, time: int) -> None:
        self.fl_pending[d].append((r, stage))
        self._wait_start[(r, stage)] = time
        if not self.fl_running[d]:
            self.issue_flush(d, time)

    def issue_flush(self, d: int, time: int) -> None:
        self.fl_batch[d] = self.fl_pending[d]
        self.fl_pending[d] = []
        self.fl_running[d] = True
        self.queue[d].append(-1)
        self.dev_start(d, time)

    def flush_done(self, d: int, time: int) -> None:
        batch = self.fl_batch[d]
        self.fl_batch[d] = []
        self.fl_running[d] = False
        t = self.reqs
        for r, stage in batch:
            self.flush_waits.append((self._wait_start.pop((r, stage), time), time))
            self.flush_wait_rq.append(r)
            for f in self.ff_alias.get((r, stage), ()):
                self.complete(f, time)
            if stage == PRE and t.kind[r] > 0 and not t.is_ff[r]:
                self.enqueue(d, r, time)
            else:
                self.complete(r, time)
        if self.fl_pending[d]:
            self.issue_flush(d, time)

    def complete(self, r: int, time: int) -> None:
        if self.done[r] >= 0:
            return
        self.done[r] = time
        if self.arrive[r] < 0:
            self.arrive[r] = time
        for k in self.rq_waiters.pop(r, ()):
            self.push(max(time + self.lag[k], self.s_start[k]), _STEP_END, self._owner(k), k)
        t = self.reqs
        for u in self.clock_waiters.pop(r, ()):
            self.push(time + max(0, int(t.arrive[u] - t.done[r])), _ARRIVE, u)
