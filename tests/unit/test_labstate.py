"""lab/labstate.py without a disk: what a ledger's teardown touches (no root)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "lab"))
import workloads  # noqa: E402  (standard library only, run by the system python3)


def test_reap_leaves_a_live_run_alone(tmp_path, monkeypatch):
    """A ledger whose run is alive is not touched; a stale one naming things that are
    not there (a reused PID, a loop device not ours) is dropped without touching them."""
    from iowhy.lab import labstate
    monkeypatch.setenv("IOWHY_LAB_STATE", str(tmp_path))
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        start = labstate.proc_start(sleeper.pid)
        live = tmp_path / "run-1-1.json"
        live.write_text(json.dumps({"owner": {"pid": sleeper.pid, "start": start},
                                    "items": [{"key": "p", "kind": "proc", "pid": sleeper.pid,
                                               "start": start}]}))
        stale = tmp_path / "run-2-2.json"
        stale.write_text(json.dumps({"owner": {"pid": sleeper.pid, "start": start + 1},
                                     "items": [
                                         {"key": "p", "kind": "proc", "pid": sleeper.pid,
                                          "start": start - 1},
                                         {"key": "l", "kind": "loop",
                                          "backing": str(tmp_path / "no-such-image")},
                                         {"key": "m", "kind": "mount", "dev": "7:999",
                                          "target": "/"}]}))
        done = labstate.reap(tmp_path, say=lambda m: None)
        assert done == [stale] and not stale.exists() and live.exists()
        assert sleeper.poll() is None           # same PID, other start time: not signalled
    finally:
        sleeper.kill()
        sleeper.wait()


def test_start_time_names_one_process(tmp_path):
    from iowhy.lab import labstate
    # a comm with spaces and parentheses does not shift the fields
    p = subprocess.Popen(["bash", "-c", "exec -a 'a) b (c' sleep 60"])
    try:
        start = labstate.proc_start(p.pid)
        assert start is not None and labstate.is_alive(p.pid, start)
        assert not labstate.is_alive(p.pid, start + 1)
        p.kill()
        import time
        time.sleep(0.2)
        assert not labstate.is_alive(p.pid, start)     # a zombie is not alive
    finally:
        p.kill()
        p.wait()
    assert not labstate.is_alive(p.pid, start)


def test_ledger_file_and_dir_teardown(tmp_path):
    from iowhy.lab import labstate
    state = tmp_path / "state"
    led = labstate.Ledger(state, guard=False)
    led.open()
    d = tmp_path / "emudisk-x"
    (d / "sub").mkdir(parents=True)
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep").write_text("x")
    link = tmp_path / "link"
    link.symlink_to(victim)
    led.add("dir:a", "dir", path=str(d))
    led.add("dir:b", "dir", path=str(link))
    led.add("loop:a", "loop", backing=str(d / "mnt" / "disk.img"))
    led.restore_setting("loop:a", "write_cache", "write back")
    led.restore_setting("loop:a", "write_cache", "write through")   # the first one stays
    saved = json.loads(led.path.read_text())
    assert [i["key"] for i in saved["items"]] == ["dir:a", "dir:b", "loop:a"]
    assert saved["items"][2]["restore"] == {"write_cache": "write back"}
    assert saved["owner"]["pid"] > 0 and oct(led.path.stat().st_mode)[-3:] == "600"
    assert labstate.teardown(led.path, say=lambda m: None)
    assert not d.exists() and not led.path.exists()
    assert (victim / "keep").read_text() == "x"       # a symlink is never followed
    led.close()


def test_workloads_cache_never_writes_through_a_symlink(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    out = tmp_path / "linux-6.1-5.tar"
    planted = tmp_path / f".{out.name}.{os.getpid()}.tmp"
    planted.symlink_to(victim)
    with pytest.raises(FileExistsError):
        workloads._new_temp(out)
    assert victim.read_text() == "keep me"
    planted.unlink()
    tmp, f = workloads._new_temp(out)
    with f:
        f.write(b"x")
    assert tmp == planted and tmp.read_bytes() == b"x"
