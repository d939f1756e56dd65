"""iowhy.lab.workloads without a disk, a child process or a real sync: the command line
(every workload's arguments and defaults, and every command the scenarios give it),
and the pure parts of the workloads (which call goes where, the commands handed to
sqlite3 and fio, the cached tarball, the fsync-per-file extraction), with the system
calls that would make a process or a sync replaced. (The names `--help` lists and the
cache's symlink refusal are in test_lab_tools.py and test_labstate.py.)"""

from __future__ import annotations

import argparse
import io
import os
import tarfile
from pathlib import Path
from typing import Any

import pytest

from clirun import Parsed

from iowhy.lab import scenarios, workloads as wl

FUNCS = ("fsyncmix", "callmix", "wait_then_fsync", "fsync_loop", "fsync_tasks", "rmtree",
         "sqlite", "fio_seq", "fio_rand", "untar", "untar_fsync", "untar_eatmydata", "prepare")


@pytest.fixture
def parsed(monkeypatch) -> Parsed:
    """main() with every workload replaced by one that notes its arguments."""
    return Parsed(monkeypatch, wl, FUNCS)


def test_every_workload_and_its_defaults(parsed):
    assert parsed(["fsyncmix", "/d", "2", "3"]) == (
        "fsyncmix", {"name": "fsyncmix", "dir": "/d", "fsync": 2, "fdatasync": 3,
                     "bytes": 8192})
    assert parsed(["callmix", "/d"])[1]["k"] == 3
    assert parsed(["wait-then-fsync", "/d", "/go", "/pid"])[1] == {
        "name": "wait-then-fsync", "dir": "/d", "go_file": "/go", "pidfile": "/pid", "k": 3,
        "timeout": 60.0}
    assert parsed(["fsync-loop", "/d", "1.5"])[1] == {
        "name": "fsync-loop", "dir": "/d", "seconds": 1.5, "pidfile": None}
    assert parsed(["fsync-tasks", "/d", "8", "16"])[1] == {
        "name": "fsync-tasks", "dir": "/d", "tasks": 8, "k": 16}
    assert parsed(["rmtree", "/t"]) == ("rmtree", {"name": "rmtree", "tree": "/t"})
    assert parsed(["sqlite", "/d", "0"])[1]["synchronous"] == "FULL"
    for name, fn in (("fio-seq", "fio_seq"), ("fio-rand", "fio_rand")):
        assert parsed([name, "/d"]) == (fn, {
            "name": name, "dir": "/d", "ios": 256, "bs": "4k", "size": "32m",
            "layout": False})
    for name, fn in (("untar", "untar"), ("untar-fsync", "untar_fsync"),
                     ("untar-eatmydata", "untar_eatmydata")):
        assert parsed([name, "/d"]) == (fn, {"name": name, "dir": "/d", "files": 5000})
    assert parsed(["prepare", "--files", "0"]) == (
        "prepare", {"name": "prepare", "files": 0})


@pytest.mark.parametrize("argv", [
    [], ["no-such"], ["fsyncmix", "/d", "2"], ["fsync-tasks", "/d", "many", "1"],
    ["sqlite", "/d", "1", "--synchronous", "SOMETIMES"], ["prepare", "/d"],
])
def test_bad_arguments_exit_2_before_any_workload_runs(parsed, argv, capsys):
    with pytest.raises(SystemExit) as e:
        wl.main(argv)
    assert e.value.code == 2 and parsed.got == []
    assert capsys.readouterr().err.startswith("usage: ")


def test_every_command_the_scenarios_give_it_parses(parsed):
    ctx = {"mnt": "/m", "tree": "/m/tree", "pidfile": "/p", "stats": "/s", "mnt_b": "/b",
           "upper": "/u"}
    seen = set()
    for s in scenarios.SCENARIOS.values():
        for tpl in (*s.setup, *s.measure, s.background):
            if tpl and tpl[0] == "workload":
                argv = [a.format(**ctx, **s.params) for a in tpl[1:]]
                assert parsed(argv)[1]["name"] == argv[0]
                seen.add(argv[0])
    assert {"untar", "untar-fsync", "rmtree", "sqlite", "fio-seq", "fsync-loop"} <= seen


def test_fsyncmix_makes_the_last_call_in_a_child(monkeypatch, tmp_path):
    calls: list[tuple[str, str]] = []
    monkeypatch.setattr(wl, "_write_sync", lambda p, n, c: calls.append((Path(p).name, c)))

    class Exit(Exception):
        pass

    def exit_(code: int) -> None:
        raise Exit(code)
    monkeypatch.setattr(wl.os, "_exit", exit_)
    a = argparse.Namespace(dir=str(tmp_path), fsync=2, fdatasync=1, bytes=10)
    monkeypatch.setattr(wl.os, "fork", lambda: 0)  # this side: the child
    with pytest.raises(Exit):
        wl.fsyncmix(a)
    assert calls == [("f0", "fsync"), ("f1", "fsync"), ("child", "fdatasync")]
    calls.clear()
    monkeypatch.setattr(wl.os, "fork", lambda: 4242)  # the parent: waits for it
    monkeypatch.setattr(wl.os, "waitpid", lambda pid, opt: (pid, 3 << 8))
    assert wl.fsyncmix(a) == 3  # the child's exit status
    assert calls == [("f0", "fsync"), ("f1", "fsync")]
    calls.clear()
    a.fsync = a.fdatasync = 0
    assert wl.fsyncmix(a) == 0 and calls == []


@pytest.mark.parametrize("call, synced", [("fsync", ["fsync"]), ("fdatasync", ["fdatasync"]),
                                          ("none", [])])
def test_write_sync_writes_the_bytes_then_the_call_it_names(monkeypatch, tmp_path, call,
                                                            synced):
    did: list[str] = []
    monkeypatch.setattr(wl.os, "fsync", lambda fd: did.append("fsync"))
    monkeypatch.setattr(wl.os, "fdatasync", lambda fd: did.append("fdatasync"))
    p = tmp_path / "f"
    p.write_bytes(b"old content, longer")
    wl._write_sync(str(p), 5, call)
    assert p.read_bytes() == b"xxxxx" and did == synced


class _Ran:
    def __init__(self) -> None:
        self.calls: list[tuple[list[str], Any]] = []

    def __call__(self, cmd, input=None, text=None):
        self.calls.append((cmd, input))
        return argparse.Namespace(returncode=5)


def test_sqlite_is_one_transaction_per_insert(monkeypatch):
    ran = _Ran()
    monkeypatch.setattr(wl.subprocess, "run", ran)
    assert wl.sqlite(argparse.Namespace(dir="/d", k=3, synchronous="OFF")) == 5
    [(cmd, text)] = ran.calls
    assert cmd == ["sqlite3", "-bail", "/d/lab.db"]
    lines = text.splitlines()
    assert lines[0] == "PRAGMA synchronous=OFF;" and lines[1].startswith("CREATE TABLE")
    assert len(lines) == 5 and all(ln.startswith("INSERT INTO t(v) VALUES('row 00000")
                                   for ln in lines[2:])
    wl.sqlite(argparse.Namespace(dir="/d", k=0, synchronous="FULL"))
    assert len(ran.calls[-1][1].splitlines()) == 2  # k=0: the table only


@pytest.mark.parametrize("fn, rw", [(wl.fio_seq, "write"), (wl.fio_rand, "randwrite")])
def test_fio_lays_the_file_out_or_writes_ios(monkeypatch, fn, rw):
    ran = _Ran()
    monkeypatch.setattr(wl.subprocess, "run", lambda cmd: ran(cmd))
    a = argparse.Namespace(dir="/d", ios=7, bs="64k", size="64m", layout=True)
    assert fn(a) == 5
    a.layout = False
    fn(a)
    (layout, _), (measure, _) = ran.calls
    for cmd in (layout, measure):
        assert cmd[0] == "fio" and f"--rw={rw}" in cmd and "--direct=1" in cmd
        assert "--bs=64k" in cmd and "--size=64m" in cmd and "--directory=/d" in cmd
    assert "--create_only=1" in layout and not any(c.startswith("--number_ios") for c in layout)
    assert "--number_ios=7" in measure and "--create_only=1" not in measure


def test_the_generated_tarball_is_made_once_and_is_the_same_every_time(monkeypatch, tmp_path):
    monkeypatch.setattr(wl, "KERNEL_TARBALL", tmp_path / "no-linux-source.tar.xz")
    monkeypatch.setattr(wl, "CACHE", tmp_path / "a")
    out = wl.kernel_tar(3)
    assert out == tmp_path / "a" / "generated-3.tar"
    with tarfile.open(out) as t:
        members = t.getmembers()
    assert [m.name for m in members] == [f"linux/dir0000/file{i:06d}.c" for i in range(3)]
    assert all(m.isreg() and 0 < m.size <= 2 << 20 for m in members)
    made = out.stat().st_mtime_ns
    monkeypatch.setattr(wl, "_new_temp", lambda o: pytest.fail("made again"))
    assert wl.kernel_tar(3) == out and out.stat().st_mtime_ns == made
    monkeypatch.undo()
    monkeypatch.setattr(wl, "KERNEL_TARBALL", tmp_path / "no-linux-source.tar.xz")
    monkeypatch.setattr(wl, "CACHE", tmp_path / "b")
    assert wl.kernel_tar(3).read_bytes() == out.read_bytes()  # seeded: the same tree
    assert list((tmp_path / "b").iterdir()) == [tmp_path / "b" / "generated-3.tar"]


def test_untar_fsync_writes_and_fsyncs_every_file(monkeypatch, tmp_path):
    src = tmp_path / "src.tar"
    with tarfile.open(src, "w") as t:
        for name, data in (("a/b/one", b"1"), ("a/two", b"22"), ("a/b/three", b"")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
        d = tarfile.TarInfo("a/empty")
        d.type = tarfile.DIRTYPE
        t.addfile(d)
    monkeypatch.setattr(wl, "kernel_tar", lambda n: src)
    synced: list[str] = []
    monkeypatch.setattr(wl.os, "fsync",
                        lambda fd: synced.append(os.readlink(f"/proc/self/fd/{fd}")))
    out = tmp_path / "out"
    out.mkdir()
    assert wl.untar_fsync(argparse.Namespace(dir=str(out), files=3)) == 0
    assert (out / "a/b/one").read_bytes() == b"1" and (out / "a/two").read_bytes() == b"22"
    assert (out / "a/b/three").read_bytes() == b"" and (out / "a/empty").is_dir()
    assert sorted(synced) == sorted(str(out / n) for n in ("a/b/one", "a/two", "a/b/three"))
