"""Synthetic traces for tests and benchmarks, built with numpy (no per-record loop) and
written with TraceWriter. Importable from every test tier and from bench/ (setup.cfg puts
tests/ on the path; bench/bench_analyze.py adds it): nothing here imports bench/.

* `synth(n, seed)`: an fsync-heavy ext4-like workload on two disks, n requests with
  fsync, journal, off-CPU and task records but no wakeup links, helper or thread
  records (the golden traces `busy`, `big` and `big_blocked` are made from it: its
  output for a given (n, seed) must not change);
  `write_synth(path, n)` writes it with the benchmark's metadata.
"""

from __future__ import annotations

import numpy as np

from iowhy import abi
from iowhy.tracewriter import TraceWriter

NTID = 8
DEV_A, DEV_B, PART_A = (8, 0), (8, 16), (8, 1)
LOG = (2_000_000, 2_262_144)  # 128 MiB journal, whole-disk sectors


def synth(n: int, seed: int = 1) -> dict[str, np.ndarray]:
    """Arrays of every record type for an fsync-heavy ext4-like workload on two disks."""
    rng = np.random.default_rng(seed)
    w0 = 1_000_000_000
    kinds = rng.choice(7, size=n, p=[0.55, 0.10, 0.15, 0.06, 0.02, 0.08, 0.04])
    # 0 data, 1 metadata, 2 log, 3 FF flush, 4 empty preflush, 5 read, 6 readahead
    gap = (rng.exponential(40_000, n) + 2_000).astype(np.int64)
    issue = w0 + 1_000_000 + np.cumsum(gap)
    dev_t = rng.lognormal(np.log(120_000), 0.7, n).astype(np.int64) + 5_000
    dev_t[kinds == 3] = rng.lognormal(np.log(2_000_000), 0.4, int((kinds == 3).sum()))
    done = issue + dev_t
    r = np.zeros(n, dtype=abi.REQUEST_DTYPE)
    nbytes = (4096 << rng.integers(0, 7, n)).astype(np.uint32)
    nbytes[(kinds == 1)] = 4096
    nbytes[(kinds == 3) | (kinds == 4)] = 0
    sect = (nbytes.astype(np.int64) + 511) >> 9
    # data: sequential streams with occasional jumps; metadata random; log sequential.
    jump = rng.random(n) < 0.05
    seq_pos = np.cumsum(np.where(jump, rng.integers(0, 1 << 20, n), sect))
    sector = np.where(kinds == 1, rng.integers(0, 1 << 30, n), (seq_pos % (1 << 30)) + (1 << 22))
    sector = np.where(kinds == 2, LOG[0] + (np.cumsum(np.where(kinds == 2, sect, 0))
                                            % (LOG[1] - LOG[0] - 128)), sector)
    sector[(kinds == 3) | (kinds == 4)] = 0
    op = np.full(n, abi.OP_WRITE, np.uint8)
    op[kinds == 3] = abi.OP_FLUSH
    op[kinds >= 5] = abi.OP_READ
    iflags = np.zeros(n, np.uint16)
    iflags[kinds == 1] = abi.F_META
    iflags[kinds == 2] = abi.F_META | abi.F_SYNC
    iflags[kinds == 4] = abi.F_PREFLUSH | abi.F_SYNC
    iflags[kinds == 6] = abi.F_RAHEAD
    flushseq = (kinds == 3) | (kinds == 4) | ((kinds == 2) & (rng.random(n) < 0.1))
    flags = np.where((kinds == 0) | (kinds >= 4), abi.RQ_TRACKED, 0).astype(np.uint16)
    flags[flushseq] |= abi.RQ_FLUSH_SEQ
    submit = issue - rng.integers(1_000, 60_000, n)
    insert = np.where(rng.random(n) < 0.5, submit + 500, 0)
    data_done = np.where(flushseq & (kinds == 2), issue + dev_t // 2, done)
    empty = kinds == 4
    issue = np.where(empty, 0, issue)
    insert = np.where(empty, 0, insert)
    flags[empty] |= abi.RQ_NO_ISSUE
    devb = rng.random(n) < 0.1
    r["start_sector"] = sector
    r["submit_ns"] = submit
    r["insert_ns"] = insert
    r["issue_ns"] = issue
    r["data_done_ns"] = data_done
    r["done_ns"] = done
    r["ts_ns"] = done
    r["len_bytes"] = nbytes
    r["done_bytes"] = nbytes
    r["dev_major"] = 8
    r["dev_minor"] = np.where(devb & (kinds >= 5), DEV_B[1], DEV_A[1])
    r["tid"] = 1000 + rng.integers(0, NTID, n)
    r["tgid"] = 1000
    r["op"] = op
    r["iflags"] = iflags
    r["flags_u16"] = flags
    r["seq"] = np.arange(n)
    r = r[np.argsort(done, kind="stable")]  # the recorder writes requests when done
    end = int(done.max()) + 1_000_000
    elapsed = end - w0
    # fsync calls: per thread back to back, 5 calls per jbd2 commit.
    nf = max(n // 20, NTID)
    j = np.arange(nf)
    period = elapsed // (nf // NTID + 1)
    f = np.zeros(nf, dtype=abi.FSYNC_DTYPE)
    f["tid"] = 1000 + j % NTID
    f["tgid"] = 1000
    f["enter_ns"] = w0 + (j // NTID) * period + (j % NTID) * (period // (2 * NTID))
    f["exit_ns"] = f["enter_ns"] + period // 3
    f["ts_ns"] = f["exit_ns"]
    f["call_u16"] = np.where(j % 4 == 0, abi.CALL_FDATASYNC, abi.CALL_FSYNC)
    f["fs_u16"] = abi.FS_EXT4
    f["flags_u16"] = abi.FS_F_FSEVENT | abi.FS_F_SEQ
    f["commit_seq"] = 1 + j // 5
    f["dev_major"], f["dev_minor"] = PART_A
    ncom = int(f["commit_seq"].max())
    cs = np.arange(1, ncom + 1)
    t0 = w0 + ((cs - 1) * 5 // NTID) * period + period // 8
    jr = np.zeros(5 * ncom, dtype=abi.JOURNAL_DTYPE)
    for k, (ev, dt) in enumerate(((abi.J_JBD2_START, 0), (abi.J_JBD2_LOCKING, period // 64),
                                  (abi.J_JBD2_FLUSHING, period // 32),
                                  (abi.J_JBD2_LOGGING, period // 16),
                                  (abi.J_JBD2_END, period // 6))):
        jr["event_u16"][k::5] = ev
        jr["seq"][k::5] = cs
        jr["ts_ns"][k::5] = t0 + dt
    jr["dev_major"], jr["dev_minor"] = PART_A
    jr["fs_u16"] = abi.FS_EXT4
    jr["tid"] = 77
    # off-CPU: each fsync blocks most of its duration; plus preemptions.
    no = 2 * nf
    o = np.zeros(no, dtype=abi.OFFCPU_DTYPE)
    o["tid"][:nf] = f["tid"]
    o["start_ns"][:nf] = f["enter_ns"] + period // 50
    o["waking_ns"][:nf] = f["exit_ns"] - period // 100
    o["end_ns"][:nf] = f["exit_ns"] - period // 200
    o["syscall_nr"][:nf] = 74
    o["tid"][nf:] = f["tid"]
    o["start_ns"][nf:] = f["exit_ns"] + period // 10
    o["end_ns"][nf:] = f["exit_ns"] + period // 8
    o["waking_ns"][nf:] = 0
    o["syscall_nr"][nf:] = 1
    o["flags_u16"][nf:] = abi.OFF_PREEMPT
    o = o[np.argsort(o["end_ns"], kind="stable")]
    o["ts_ns"] = o["end_ns"]
    t = np.zeros(NTID, dtype=abi.TASK_DTYPE)
    t["tid"] = 1000 + np.arange(NTID)
    t["tgid"] = 1000
    t["ts_ns"] = w0
    t["event_u16"] = abi.TASK_ROOT
    return {"request": r, "fsync": f, "journal": jr, "offcpu": o, "task": t,
            "start_ns": np.int64(w0), "end_ns": np.int64(end)}


def write_synth(path: str, n: int) -> None:
    """synth(n) in a trace file, with two disks and an ext4 on the first."""
    d = synth(n)
    meta = {
        "devices": [{"name": "sdb", "major": DEV_A[0], "minor": DEV_A[1], "rotational": 1,
                     "write_cache": "write back", "fua": 0, "size_bytes": 1 << 40},
                    {"name": "sdc", "major": DEV_B[0], "minor": DEV_B[1], "rotational": 0,
                     "write_cache": "write through", "fua": 1, "size_bytes": 1 << 40}],
        "filesystems": [{"fstype": "ext4", "source": "/dev/sdb1", "mountpoint": "/mnt/bench",
                         "dev_major": PART_A[0], "dev_minor": PART_A[1],
                         "st_dev_major": PART_A[0], "st_dev_minor": PART_A[1], "disk": "sdb",
                         "disk_major": DEV_A[0], "disk_minor": DEV_A[1],
                         "part_start_sector": 2048,
                         "log": {"kind": "jbd2", "ranges": [list(LOG)], "fc_ranges": []}}],
    }
    w = TraceWriter(path)
    w.write_json(abi.CHUNK_META, meta)
    w.write_json(abi.CHUNK_RECORDER, {"start_ns": int(d["start_ns"]),
                                      "command": ["synthetic", str(n)], "pid": 1000})
    for name in ("task", "fsync", "journal", "offcpu", "request"):
        arr = d.pop(name)
        w.write_records(arr)
        del arr
    w.close({"end_ns": int(d["end_ns"]), "stop_reason": "synthetic"})
