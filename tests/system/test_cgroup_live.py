"""`iowhy attach --cgroup PATH` records every process of a cgroup v2: one in it from the
start, one that joins a cgroup below it while recording (from the join on, not before),
and none outside it. Each worker's fsyncs are counted independently by strace; a worker
does its fsyncs in phases the test releases, so the trace must hold exactly the phases
that ran while the worker was in the cgroup."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

import numpy as np
import pytest

from conftest import need, run
from iowhy import abi
from iowhy.traceformat import read_trace
from recording import assert_nothing_dropped, attach_running, cgroup_mount

pytestmark = pytest.mark.bpf

PY = "/usr/bin/python3"
# A worker: writes its pid, then for each phase file given waits for it to appear and
# does COUNT 4 KiB append+fsyncs; exits after the last phase.
WORKER = r"""
import os, sys, time
pidfile, path, count, phases = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
open(pidfile + ".tmp", "w").write(str(os.getpid()))
os.rename(pidfile + ".tmp", pidfile)
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
for ph in phases:
    while not os.path.exists(ph):
        time.sleep(0.01)
    for _ in range(count):
        os.write(fd, b"x" * 4096)
        os.fsync(fd)
    open(ph + ".done", "w").close()
"""
K = 12  # fsyncs per phase


@pytest.fixture
def cgroup(root, request):
    """A new cgroup v2 (and one below it), removed at teardown once its processes (all
    the test's own, ended by the test's finalizers first) are gone."""
    base = cgroup_mount()
    need(base is not None and os.access(base, os.W_OK), "needs a writable cgroup2 mount")
    cg = base / f"iowhy-test-{uuid.uuid4().hex[:8]}"
    cg.mkdir()
    (cg / "sub").mkdir()

    def remove():
        for d in (cg / "sub", cg):
            for _ in range(200):  # a killed worker leaves the cgroup when it is reaped
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.05)
    request.addfinalizer(remove)
    return cg


def _worker(tmp_path, request, name, phases, cgroup=None):
    """A worker under strace (fsyncs logged), optionally started inside `cgroup`."""
    pidfile, log = tmp_path / f"{name}.pid", tmp_path / f"{name}.strace"

    def join() -> None:  # the child joins before it execs strace: both start in it
        (cgroup / "cgroup.procs").write_text(str(os.getpid()))
    p = subprocess.Popen(["strace", "-f", "-qq", "-e", "trace=fsync", "-o", str(log),
                          PY, "-c", WORKER, str(pidfile), str(tmp_path / f"{name}.dat"), str(K),
                          *[str(tmp_path / ph) for ph in phases]],
                         preexec_fn=join if cgroup is not None else None,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    request.addfinalizer(lambda: (p.poll() is None and p.kill(), p.wait()))
    deadline = time.monotonic() + 30
    while not pidfile.exists():
        assert p.poll() is None and time.monotonic() < deadline, p.stderr.read()
        time.sleep(0.01)
    return p, int(pidfile.read_text()), log


def _release(tmp_path, phase):
    (tmp_path / phase).touch()
    deadline = time.monotonic() + 60
    while not (tmp_path / f"{phase}.done").exists():
        assert time.monotonic() < deadline, f"phase {phase} did not finish"
        time.sleep(0.01)


def _strace_fsyncs(log: Path) -> int:
    return sum(1 for line in log.read_text().splitlines() if "fsync(" in line and "= 0" in line)


def test_attach_cgroup_follows_joiners_not_outsiders(bpf, cgroup, tmp_path, iowhy_bin, request):
    need(subprocess.run(["which", "strace"], capture_output=True).returncode == 0,
         "needs strace")
    member, mpid, mlog = _worker(tmp_path, request, "member", ["m1"], cgroup=cgroup)
    joiner, jpid, jlog = _worker(tmp_path, request, "joiner", ["j1", "j2"])
    outside, opid, olog = _worker(tmp_path, request, "outside", ["o1"])
    out = tmp_path / "cg.iowt"
    # every probe attached, the cgroup walked
    rec = attach_running(
        request, [*iowhy_bin, "attach", "-q", "--cgroup", str(cgroup), "-o", str(out)], out)
    _release(tmp_path, "j1")              # the joiner, still outside: not recorded
    _release(tmp_path, "o1")              # outside all along: not recorded
    _release(tmp_path, "m1")              # in the cgroup from the start: recorded
    time.sleep(0.2)                       # the joiner asleep a while before it joins
    (cgroup / "sub" / "cgroup.procs").write_text(str(jpid))  # joins a cgroup below
    _release(tmp_path, "j2")              # recorded
    for p in (member, joiner, outside):
        assert p.wait(timeout=60) == 0
    rec.send_signal(signal.SIGINT)
    _, err = rec.communicate(timeout=60)
    assert rec.returncode in (0, 128 + signal.SIGINT), err

    # what the workers did, by strace
    assert _strace_fsyncs(mlog) == K and _strace_fsyncs(olog) == K
    assert _strace_fsyncs(jlog) == 2 * K

    tr = read_trace(str(out))
    assert_nothing_dropped(tr)
    assert tr.meta["cgroup"]["path"] == os.path.realpath(cgroup)
    assert tr.meta["cgroup"]["id"] == os.stat(cgroup).st_ino
    fs = tr.records("fsync")
    calls = fs[fs["call_u16"] == abi.CALL_FSYNC]
    by = {pid: int((calls["tgid"] == pid).sum()) for pid in (mpid, jpid, opid)}
    assert by == {mpid: K, jpid: K, opid: 0}, by  # the joiner's second phase only

    tk = tr.records("task")
    joins = tk[(tk["event_u16"] == abi.TASK_JOIN) & (tk["tgid"] == jpid)]
    assert len(joins) == 1 and int(joins["tid"][0]) == jpid, tk
    roots = set(int(t) for t in tk[tk["event_u16"] == abi.TASK_ROOT]["tgid"])
    assert mpid in roots and jpid not in roots and opid not in roots
    # the joiner's time is the workload's from its join: its first wait starts there
    off = tr.records("offcpu")
    jo = off[off["tgid"] == jpid]
    assert len(jo) and int(jo["start_ns"].min()) >= int(joins["ts_ns"][0])
    assert not len(off[off["tgid"] == opid]) and not len(tk[tk["tgid"] == opid])
    # its joined fsyncs all ran after the join
    assert np.all(calls[calls["tgid"] == jpid]["enter_ns"] >= joins["ts_ns"][0])

    info = json.loads(run([*iowhy_bin, "info", "--json", str(out)]).stdout)
    assert info["cgroup"] == tr.meta["cgroup"]
    run([*iowhy_bin, "report", str(out)])  # reads as any attach trace


def test_cgroup_v1_and_other_paths_are_refused(bpf, tmp_path, iowhy_bin):
    paths = [tmp_path]
    v1 = cgroup_mount("cgroup")
    if v1 is not None:
        paths.append(v1)
    for path in paths:
        for cmd in ([*iowhy_bin, "attach", "--cgroup", str(path), "-o", str(tmp_path / "x.iowt")],
                    [str(Path(__file__).resolve().parents[2] / "probes" / "iowhy-record"),
                     "-o", str(tmp_path / "x.iowt"), "--cgroup", str(path)]):
            p = run(cmd, check=False)
            assert p.returncode == 2, (cmd, p.stderr)
            lines = p.stderr.strip().splitlines()
            assert len(lines) == 1 and "--cgroup" in lines[0], p.stderr
            want = "cgroup v1" if path == v1 else "not a cgroup v2 directory"
            assert want in lines[0], lines
        assert not list(tmp_path.glob("x.iowt*"))
