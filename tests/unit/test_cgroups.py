"""--cgroup without the kernel: which paths are a cgroup v2 (a mount table fixture says
what filesystem a directory is on), the one-line refusals, META `cgroup` in `iowhy info`
and through the reader's checks, and a joined thread's wait starting at its JOIN."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from iowhy import abi, cli
from iowhy.cgroups import cgroup_target
from iowhy.errors import EXIT_USAGE, UserError
from iowhy.model.wakeups import asleep_at_start
from iowhy.traceformat import read_trace
from iowhy.model.tasks import task_lifetimes
from iowhy.model.requests import Window
from tracebuilder import meta, records, task, write_trace


def _mountinfo(tmp_path, path, fstype: str) -> str:
    st = os.stat(path)
    mi = tmp_path / "mountinfo"
    mi.write_text(f"30 1 {os.major(st.st_dev)}:{os.minor(st.st_dev)} / /x rw - {fstype} "
                  f"{fstype} rw\n")
    return str(mi)


def test_a_cgroup2_directory_is_named_by_path_and_id(tmp_path):
    d = tmp_path / "app.service"
    d.mkdir()
    got = cgroup_target(str(d), mountinfo=_mountinfo(tmp_path, d, "cgroup2"))
    assert got == {"path": os.path.realpath(d), "id": os.stat(d).st_ino}


@pytest.mark.parametrize("fstype,words", [
    ("cgroup", "cgroup v1 hierarchy"), ("ext4", "not a cgroup v2 directory"),
    (None, "No such file")])
def test_other_paths_are_refused_in_one_line(tmp_path, fstype, words):
    d = tmp_path / "g"
    if fstype is not None:
        d.mkdir()
    mi = _mountinfo(tmp_path, tmp_path, fstype or "cgroup2")
    with pytest.raises(UserError) as e:
        cgroup_target(str(d), mountinfo=mi)
    assert words in str(e.value) and e.value.code == EXIT_USAGE
    assert "\n" not in str(e.value) + e.value.hint


def test_a_file_of_a_cgroup_is_not_a_cgroup(tmp_path):
    f = tmp_path / "cgroup.procs"
    f.write_text("")
    with pytest.raises(UserError, match="not a cgroup v2 directory"):
        cgroup_target(str(f), mountinfo=_mountinfo(tmp_path, f, "cgroup2"))


def test_the_root_cgroup_needs_force(tmp_path, monkeypatch):
    d = tmp_path / "root"
    d.mkdir()
    mi = _mountinfo(tmp_path, d, "cgroup2")
    real = os.stat

    def fake(p, *a, **k):
        st = real(p, *a, **k)
        if str(p) != str(d):
            return st
        return os.stat_result((st.st_mode, 1, *st[2:10]))
    monkeypatch.setattr(os, "stat", fake)
    with pytest.raises(UserError, match="root of the cgroup hierarchy"):
        cgroup_target(str(d), mountinfo=mi)
    assert cgroup_target(str(d), force=True, mountinfo=mi)["id"] == 1


@pytest.mark.parametrize("argv,words", [
    (["attach"], "one target: -p PID, --cgroup PATH or -a"),
    (["attach", "-p", "1", "--cgroup", "/"], "one target: -p PID, --cgroup PATH or -a"),
    (["attach", "-a", "-p", "7"], "one target: -p PID, --cgroup PATH or -a"),
    (["attach", "--cgroup", "/nonexistent/iowhy-cgroup"], "--cgroup /nonexistent"),
    (["record", "--cgroup", "/nonexistent/iowhy-cgroup", "--", "true"], "--cgroup /nonexistent"),
])
def test_attach_target_errors_are_one_line(argv, words, tmp_path, capsys):
    assert cli.main([*argv[:1], "-o", str(tmp_path / "t.iowt"), *argv[1:]]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith("iowhy: ") and words in err and err.count("\n") == 1, err
    assert not list(tmp_path.iterdir())


def _joined_trace(tmp_path, cg) -> str:
    m = meta()
    if cg is not None:
        m["cgroup"] = cg
    return write_trace(tmp_path / "cg.iowt", meta_obj=m, tasks=[
        task(100, 1000), {**task(200, 1040, abi.TASK_JOIN), "tgid": 200},
        {**task(201, 1040, abi.TASK_JOIN), "tgid": 200}])


def test_info_names_the_cgroup_only_when_recorded_with_one(tmp_path, capsys):
    cg = {"path": "/sys/fs/cgroup/app.slice", "id": 4242}
    path = _joined_trace(tmp_path, cg)
    assert cli.main(["info", "--json", path]) == 0
    assert json.loads(capsys.readouterr().out)["cgroup"] == cg
    assert cli.main(["info", path]) == 0
    out = capsys.readouterr().out
    assert "cgroup:               /sys/fs/cgroup/app.slice (id 4242)" in out.splitlines()
    (tmp_path / "cg.iowt").unlink()
    path = _joined_trace(tmp_path, None)
    assert cli.main(["info", "--json", path]) == 0
    assert "cgroup" not in json.loads(capsys.readouterr().out)


def test_a_bad_cgroup_value_is_dropped_and_counted(tmp_path):
    path = _joined_trace(tmp_path, {"path": "/sys/fs/cgroup/x", "id": "seven"})
    tr = read_trace(path)
    assert "cgroup" not in tr.meta
    assert any("cgroup" in p for p in tr.problems()), tr.problems()


def test_a_joined_thread_lives_and_sleeps_from_its_join(tmp_path):
    tr = read_trace(_joined_trace(tmp_path, {"path": "/sys/fs/cgroup/x", "id": 7}))
    tasks = {f: tr.records("task")[f] for f in ("ts_ns", "tid", "tgid", "event_u16")}
    off = {f: np.zeros(0, abi.OFFCPU_DTYPE[f]) for f in abi.OFFCPU_DTYPE.names}
    win = Window(1000, 1100)
    tids, birth, _ = task_lifetimes(tasks, off, win)
    assert dict(zip(tids.tolist(), birth.tolist())) == {100: 1000, 200: 1040, 201: 1040}
    # asleep when read (a thread record each): the whole window, or from the join on
    threads = records(abi.THREAD_DTYPE, [{"tid": t, "tgid": g, "state_u8": ord("S"),
                                          "syscall_nr": 7} for t, g in
                                         ((100, 100), (200, 200), (201, 200))])
    got = asleep_at_start(off, {f: threads[f] for f in threads.dtype.names}, win, tasks)
    assert dict(zip(got["tid"].tolist(), got["start_ns"].tolist())) == \
        {100: 1000, 200: 1040, 201: 1040}
