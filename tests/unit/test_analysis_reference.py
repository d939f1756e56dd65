"""The vectorised attribution against a brute-force reference, nanosecond by nanosecond,
on many small random traces (several tasks, two disks, overlapping flushes, flush
sequences, empty PREFLUSHes, idle gaps, tasks born and exiting mid-trace, requests whose
final completion was lost)."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from iowhy import abi
from tracebuilder import LOG_RANGE, meta, off, req, run, task, write_trace

DEV_A, DEV_B = (8, 0), (8, 16)
W0, W1 = 1000, 1240
CAT_OF = {"flush": "barrier", "log": "log", "metadata": "metadata", "data": "data",
          "discard": "data", "read": "read", "readahead": "read"}
PRIO = ("barrier", "log", "metadata", "data", "read")


def random_trace(rng: random.Random):
    reqs = []  # (record dict, class, device)
    for _ in range(rng.randint(0, 14)):
        dev = DEV_A if rng.random() < 0.75 else DEV_B
        kind = rng.choice(["data", "metadata", "log", "read", "readahead", "ff", "seq", "empty",
                           "discard"])
        tracked = abi.RQ_TRACKED if rng.random() < 0.7 else 0
        a = rng.randint(W0 - 20, W1 - 5)
        b = a + rng.randint(1, 60)
        if kind == "ff":
            reqs.append((req(a, b, op=abi.OP_FLUSH, dev=dev, flags=abi.RQ_FLUSH_SEQ), "flush", dev))
        elif kind == "empty":
            sub = rng.randint(W0 - 10, W1 - 5)
            reqs.append((req(0, sub + rng.randint(1, 60), submit=sub, nbytes=0, dev=dev,
                             iflags=abi.F_PREFLUSH,
                             flags=tracked | abi.RQ_FLUSH_SEQ | abi.RQ_NO_ISSUE),
                         "flush", dev))
        elif kind == "seq":
            sub = a - rng.randint(0, 30)
            dd = rng.randint(a, b)
            reqs.append((req(a, b, submit=sub, data_done=dd, dev=dev, sector=LOG_RANGE[0] + 8,
                             iflags=abi.F_PREFLUSH | abi.F_FUA | abi.F_META,
                             flags=tracked | abi.RQ_FLUSH_SEQ),
                         "log" if dev == DEV_A else "metadata", dev))
        else:
            op = {"read": abi.OP_READ, "readahead": abi.OP_READ, "discard": abi.OP_DISCARD}.get(
                kind, abi.OP_WRITE)
            ifl = {"metadata": abi.F_META, "log": abi.F_META,
                   "readahead": abi.F_RAHEAD}.get(kind, 0)
            sector = LOG_RANGE[0] + rng.randint(0, 100) if kind == "log" else rng.randint(0, 9000)
            cls = kind if not (kind == "log" and dev == DEV_B) else "metadata"
            ins = a - rng.randint(0, 5) if rng.random() < 0.5 else 0
            reqs.append((req(a, b, op=op, sector=sector, dev=dev, iflags=ifl, flags=tracked,
                             insert=ins, submit=ins or a), cls, dev))
    tids = [100, 101, 102][: rng.randint(1, 3)]
    tasks, offs, life = [], [], {}
    for i, tid in enumerate(tids):
        birth = W0 if i == 0 else rng.randint(W0, W1 - 10)
        tasks.append(task(tid, birth, abi.TASK_ROOT if i == 0 else abi.TASK_FORK))
        death = W1
        if rng.random() < 0.3:
            death = rng.randint(birth, W1)
            tasks.append(task(tid, death, abi.TASK_EXIT))
        life[tid] = (birth, death)
        t = birth
        while True:
            s = t + rng.randint(0, 40)
            e = s + rng.randint(1, 80)
            if e > death:
                break
            preempt = rng.random() < 0.2
            w = rng.randint(s, e)
            offs.append(off(tid, s, e, waking=w, preempt=preempt,
                            syscall=rng.choice([1, 74, 74, 35, -1])))
            t = e
    return reqs, tasks, offs, life


def lost_requests(rng: random.Random):
    """A few requests whose final completion was never seen (RQ_LOST_DONE): a data write,
    a flush-sequenced log write, an FF."""
    out = []
    for _ in range(rng.randint(0, 3)):
        dev = DEV_A if rng.random() < 0.75 else DEV_B
        a = rng.randint(W0, W1 - 5)
        kind = rng.choice(["data", "seq", "ff"])
        lost = abi.RQ_LOST_DONE
        if kind == "ff":
            r = req(a, 0, op=abi.OP_FLUSH, dev=dev, data_done=0, flags=abi.RQ_FLUSH_SEQ | lost)
            out.append(({**r, "ts_ns": W1}, "flush", dev))
        elif kind == "seq":
            r = req(a, 0, submit=a - rng.randint(0, 30), data_done=0, dev=dev,
                    sector=LOG_RANGE[0] + 8, iflags=abi.F_PREFLUSH | abi.F_FUA | abi.F_META,
                    flags=abi.RQ_TRACKED | abi.RQ_FLUSH_SEQ | lost)
            out.append(({**r, "ts_ns": W1}, "log" if dev == DEV_A else "metadata", dev))
        else:
            r = req(a, 0, sector=rng.randint(0, 9000), dev=dev, data_done=0,
                    flags=abi.RQ_TRACKED | lost)
            out.append(({**r, "ts_ns": W1}, "data", dev))
    return out


def reference(reqs, offs, life):
    """Per-ns attribution, device busy by priority, max depth."""
    devices = sorted({d for _, _, d in reqs})
    tracked = [(r, d) for r, _, d in reqs if r["flags_u16"] & abi.RQ_TRACKED]
    writes = {d for r, d in tracked if r["op"] != abi.OP_READ}
    reads = {d for r, d in tracked if r["op"] == abi.OP_READ}
    relevant = writes or reads or set(devices)

    def stage(r, cls):
        # A request whose final completion was lost is in no interval (definition added
        # with RQ_LOST_DONE).
        if r["issue_ns"] == 0 or r["flags_u16"] & abi.RQ_LOST_DONE:
            return None
        end = r["done_ns"] if r["op"] == abi.OP_FLUSH else r["data_done_ns"]
        return max(r["issue_ns"], W0), min(end, W1)

    def waits(r):
        if not (r["flags_u16"] & abi.RQ_FLUSH_SEQ) or r["op"] == abi.OP_FLUSH \
                or r["flags_u16"] & abi.RQ_LOST_DONE:
            return []
        st = r["submit_ns"] or r["insert_ns"] or r["issue_ns"]
        if r["issue_ns"]:
            return [(st, r["issue_ns"]), (r["data_done_ns"], r["done_ns"])]
        return [(st, r["done_ns"])]

    att = Counter()
    wait_sys = Counter()
    busy = {d: Counter() for d in devices}
    depth = {d: 0 for d in devices}
    area = Counter()
    for t in range(W0, W1):
        cats = {d: set() for d in devices}
        for r, cls, d in reqs:
            sg = stage(r, cls)
            if sg and sg[0] <= t < sg[1]:
                cats[d].add(CAT_OF[cls])
        for d in devices:
            n = sum(1 for r, c, dd in reqs if dd == d and stage(r, c)
                    and stage(r, c)[0] <= t < stage(r, c)[1])
            depth[d] = max(depth[d], n)
            area[d] += n
            top = next((p for p in PRIO if p in cats[d]), None)
            if top:
                busy[d][top] += 1
        oncpu = runq = 0
        blocked = Counter()
        for tid, (b, dth) in life.items():
            if not b <= t < dth:
                continue
            cur = [o for o in offs if o["tid"] == tid and o["start_ns"] <= t < o["end_ns"]]
            if not cur:
                oncpu += 1
                continue
            o = cur[0]
            w = o["waking_ns"] or o["start_ns"]
            if t >= w:
                runq += 1
            else:
                blocked[o["syscall_nr"]] += 1
        if oncpu:
            att["cpu"] += 1
        elif runq:
            att["runqueue"] += 1
        elif blocked:
            present = set()
            for d in relevant:
                present |= cats[d]
            if any(a <= t < b for r, _, d in reqs if d in relevant for a, b in waits(r)):
                present.add("barrier")
            top = next((p for p in PRIO if p in present), None)
            if top:
                att[top] += 1
            else:
                att["wait-other"] += 1
                best = max(blocked.values())
                cands = sorted(k for k, v in blocked.items() if v == best)
                pick = next((k for k in cands if k >= 0), cands[0])
                name = {1: "write", 74: "fsync", 35: "nanosleep", -1: "none"}[pick]
                wait_sys[name] += 1
        else:
            att["wait-other"] += 1
            wait_sys["(no task)"] += 1
    return att, wait_sys, busy, depth, area


@pytest.mark.parametrize("seed", range(60))
def test_random_traces_match_reference(tmp_path, seed):
    rng = random.Random(seed)
    reqs, tasks, offs, life = random_trace(rng)
    # Lost completions from a separate stream, in every other trace (the other traces
    # stay as they were).
    if seed % 2:
        reqs += lost_requests(random.Random(10_000 + seed))
    m = meta()
    m["devices"].append({"name": "sdy", "major": DEV_B[0], "minor": DEV_B[1],
                         "write_cache": "write back", "fua": 0, "rotational": 0})
    p = write_trace(tmp_path / "r.iowt", start=W0, end=W1, requests=[r for r, _, _ in reqs],
                    offcpu=offs, tasks=tasks, meta_obj=m)
    r = run(p)
    att, wait_sys, busy, depth, area = reference(reqs, offs, life)
    got = r["attribution_ns"]
    assert sum(got.values()) == W1 - W0
    assert got == {k: att.get(k, 0) for k in got}, (seed, got, dict(att))
    assert r["wait_other_by_syscall_ns"] == dict(wait_sys), seed
    byname = {(d["major"], d["minor"]): d for d in r["devices"]}
    for dev, c in busy.items():
        d = byname[dev]
        assert d["busy_by_category_ns"] == {k: c.get(k, 0) for k in PRIO}, (seed, dev)
        assert d["busy_ns"] == sum(c.values())
        assert d["queue_depth"]["max"] == depth[dev], (seed, dev)
        assert d["queue_depth"]["mean"] == round(area[dev] / (W1 - W0), 4)
    # A flush is counted as the FF issued: an empty PREFLUSH request is merged into one.
    counts = Counter(c for q, c, _ in reqs if c != "flush" or q["op"] == abi.OP_FLUSH)
    assert {k: v["count"] for k, v in r["requests"].items() if v["count"]} == dict(counts)
    empty = sum(1 for q, c, _ in reqs if c == "flush" and q["op"] != abi.OP_FLUSH)
    assert r["flushes"]["empty_preflush"] == empty
    lost = Counter(c for q, c, _ in reqs if q["flags_u16"] & abi.RQ_LOST_DONE)
    assert {k: v["lost"] for k, v in r["requests"].items() if v["lost"]} == dict(lost)
