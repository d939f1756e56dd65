"""Device profiles fitted from a trace's requests (analyzer/iowhy/whatif/fit.py): on a
request stream served by a known disk (the emulated disk's model plus a path time and
a scheduling noise), the fit finds the disk back."""

from __future__ import annotations

import numpy as np
import pytest

from iowhy.whatif import disk, fit
from iowhy.whatif.requests import RequestTable


def served_stream(p: disk.DiskParams, n: int = 1500, seed: int = 1, path: int = 80_000,
                  reads: bool = True) -> RequestTable:
    """n requests (writes in runs, reads, a flush every 40) served one at a time by p,
    each taking the model's cost, a path and, now and then, a scheduling delay."""
    rng = np.random.default_rng(seed)
    d = disk.Disk(p)
    kind, off, nb = [], [], []
    cursor = 0
    for i in range(n):
        if i % 40 == 39:
            k, o, ln = disk.FLUSH, 0, 0
        else:
            k = disk.READ if reads and rng.random() < 0.2 else disk.WRITE
            ln = int(rng.choice([4096, 16384, 65536]))
            o = cursor if rng.random() < 0.5 else int(rng.integers(0, 4000)) * (256 << 10)
            cursor = o + ln
        kind.append(k)
        off.append(o)
        nb.append(ln)
    t, issue, dd = 1_000_000, [], []
    for k, o, ln in zip(kind, off, nb):
        c = d.serve(k, o, ln)
        noise = int(rng.exponential(400_000)) if rng.random() < 0.05 else 0
        issue.append(t)
        t += c.model_ns + path + noise
        dd.append(t)
        t += 1000
    kind_a = np.array(kind, np.int8)
    cls = np.where(kind_a == disk.FLUSH, 0, np.where(kind_a == disk.READ, 4, 3))
    iss, done = np.array(issue, np.int64), np.array(dd, np.int64)
    return RequestTable(
        seq=np.arange(n, dtype=np.int64), dev=np.zeros(n, np.int64),
        devices=[{"name": "emu", "write_cache": "write back" if p.cache_on else
                  "write through", "fua": False, "size_bytes": p.size_bytes}],
        cls=cls.astype(np.int8), kind=kind_a, offset=np.array(off, np.int64),
        nbytes=np.array(nb, np.int64), iflags=np.zeros(n, np.int64),
        flush_seq=kind_a == disk.FLUSH, is_ff=kind_a == disk.FLUSH, arrive=iss, issue=iss,
        data_done=done, done=done, tid=np.zeros(n, np.int64), origin=np.zeros(n, bool),
        observed=np.ones(n, bool))


@pytest.mark.parametrize("cache_on", [True, False])
def test_the_fit_finds_the_emulated_hdd(cache_on):
    p = disk.PRESETS["hdd-7200"].with_cache(cache_on)
    prof = fit.fit(served_stream(p))
    got = fit.params_of(prof)
    assert got.cache_on is cache_on
    # positioning: t2t + rotation, and the full stroke (rotation folded in)
    assert got.t2t_ns == pytest.approx(p.t2t_ns + p.rot_ns, rel=0.05)
    assert got.full_stroke_ns == pytest.approx(p.full_stroke_ns + p.rot_ns, rel=0.05)
    assert got.media_rate == pytest.approx(p.media_rate, rel=0.05)
    if cache_on:
        assert got.iface_rate == pytest.approx(p.iface_rate, rel=0.1)
    assert prof["path_ns"]["write"] == pytest.approx(80_000, abs=15_000)
    assert prof["queue_depth"] == 1
    assert prof["assumed"] == ([] if cache_on else ["iface_ns_per_byte"])
    fit.check_profile(fit.public(prof))
    assert "_path" not in fit.public(prof)


def test_the_fit_finds_the_emulated_ssd_and_says_what_it_assumed():
    p = disk.PRESETS["ssd"]
    prof = fit.fit(served_stream(p, reads=False, path=50_000))
    got = fit.params_of(prof)
    assert got.t2t_ns + got.full_stroke_ns < 200_000  # no positioning to speak of
    assert got.flush_ns == pytest.approx(p.flush_ns, rel=0.2)
    assert "path_read_ns" in prof["assumed"]
    assert prof["path_ns"]["read"] == prof["path_ns"]["write"]


def test_each_request_keeps_its_own_path():
    p = disk.PRESETS["hdd-7200"]
    t = served_stream(p, n=400)
    prof = fit.fit(t)
    idx, path = prof["_path"]
    assert len(idx) == len(t) and (path >= 0).all()
    # most requests: the path they were given; a few, a scheduling delay on top
    assert np.median(path) == pytest.approx(80_000, abs=10_000)


def fsync_stream(seed: int, reads: int, late_log_writes: int, slow_reads: int
                 ) -> RequestTable:
    """A recording shaped like fsync-tar on XFS on the emulated hdd-7200: metadata reads
    in clusters (three that seek, then one next to the last), then per file a log
    write and a flush, the file's data and a flush: every flush destages one extent
    after one seek, so the few reads next to the last are all that tell the positioning
    constant apart from the read path and the flush overhead. Some of those few are
    wrong, as in recordings: a read delayed by the scheduler, and a log write whose data
    stage completion the recording missed (its end is its flush's, so the model serves
    it after that flush: a flush with nothing to destage that took a seek, then one
    that destages it without one)."""
    p = disk.PRESETS["hdd-7200"]
    rng = np.random.default_rng(seed)
    log0, data0 = 3 << 28, 3 << 27
    reqs = []
    for _ in range(reads // 4):
        o = int(rng.integers(0, 1 << 16)) * 4096
        reqs += [(disk.READ, o + 8192, 4096), (disk.READ, o, 4096),
                 (disk.READ, o + 12288, 4096), (disk.READ, o + 16384, 4096)]
    lo, do = log0, data0
    for _ in range(300):
        n = int(rng.choice([4096, 16384, 65536]))
        reqs += [(disk.WRITE, lo, 4608), (disk.FLUSH, 0, 0), (disk.WRITE, do, n),
                 (disk.FLUSH, 0, 0)]
        lo, do = lo + 4608, do + n
    d = disk.Disk(p)
    slow = {4 * c + 3 for c in range(slow_reads)}
    t, issue, end = 1_000_000, [], []
    for i, (k, o, ln) in enumerate(reqs):
        c = d.serve(k, o, ln)
        noise = int(rng.exponential(300_000)) if rng.random() < 0.05 else 0
        issue.append(t)
        t += c.model_ns + 90_000 + noise + (30_000_000 if i in slow else 0)
        end.append(t)
        t += 20_000
    logs = [i for i, r in enumerate(reqs) if r[0] == disk.WRITE and r[1] >= log0]
    for w in logs[150:150 + late_log_writes]:
        end[w] = end[w + 1] + 500  # its end: its flush's
    n = len(reqs)
    kind = np.array([r[0] for r in reqs], np.int8)
    cls = np.where(kind == disk.FLUSH, 0, np.where(kind == disk.READ, 4, 3))
    iss, done = np.array(issue, np.int64), np.array(end, np.int64)
    return RequestTable(
        seq=np.arange(n, dtype=np.int64), dev=np.zeros(n, np.int64),
        devices=[{"name": "emu", "write_cache": "write back", "fua": False,
                  "size_bytes": p.size_bytes}],
        cls=cls.astype(np.int8), kind=kind, offset=np.array([r[1] for r in reqs], np.int64),
        nbytes=np.array([r[2] for r in reqs], np.int64), iflags=np.zeros(n, np.int64),
        flush_seq=kind == disk.FLUSH, is_ff=kind == disk.FLUSH, arrive=iss, issue=iss,
        data_done=done, done=done, tid=np.zeros(n, np.int64), origin=np.zeros(n, bool),
        observed=np.ones(n, bool))


@pytest.mark.parametrize("seed,reads,late,slow", [(1, 12, 1, 1), (1, 16, 1, 2),
                                                  (3, 16, 1, 2)])
def test_a_few_requests_do_not_turn_a_disk_that_seeks_into_an_ssd(seed, reads, late, slow):
    """Where a handful of requests (some of them wrong) are all that tell the positioning
    constant apart from the paths, the ssd's prior (no positioning) must not win on
    them: the seeks grow with distance, and the media rate is the hdd's."""
    p = disk.PRESETS["hdd-7200"]
    prof = fit.fit(fsync_stream(seed, reads, late, slow))
    got = fit.params_of(prof)
    assert prof["prior"] == "hdd-7200"
    assert got.t2t_ns == pytest.approx(p.t2t_ns + p.rot_ns, rel=0.05)
    assert got.full_stroke_ns == pytest.approx(p.full_stroke_ns + p.rot_ns, rel=0.05)
    assert got.media_rate == pytest.approx(p.media_rate, rel=0.05)
    assert got.flush_ns == pytest.approx(p.flush_ns, abs=30_000)
    assert prof["path_ns"]["read"] == pytest.approx(90_000, abs=15_000)
    # and the profile says the trace could not tell
    assert "positioning_ns" in prof["assumed"]


def test_profiles_are_checked():
    good = fit.public(fit.fit(served_stream(disk.PRESETS["ssd"], n=200)))
    fit.check_profile(good)
    for bad in ({}, dict(good, schema="x"), dict(good, queue_depth=0),
                dict(good, path_ns={"write": -1}),
                dict(good, disk=dict(good["disk"], full_stroke_ns=1, t2t_ns=5))):
        with pytest.raises(ValueError):
            fit.check_profile(bad)
