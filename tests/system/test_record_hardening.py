"""`iowhy record` / `attach` as a root tool facing hostile or unusual conditions: what it
writes (never through a symlink, never into a non-regular file, renamed into place, the
previous trace kept as .old, owned by the sudo user), how it stops (signals, the front
end killed, --duration), what the trailer claims about the workload's exit, and which
targets and values it refuses in one line.
"""

from __future__ import annotations

import json
import os
import re
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import recorder_path, run
from recording import wait_attached
from iowhy.traceformat import read_trace

pytestmark = pytest.mark.bpf

PY = sys.executable


def one_line_error(p, pattern: str, code: int | None = None) -> str:
    assert p.returncode != 0, p.stderr
    if code is not None:
        assert p.returncode == code, (p.returncode, p.stderr)
    lines = [ln for ln in p.stderr.splitlines() if ln.strip() and not ln.startswith(
        "iowhy: mounted tracefs")]
    assert len(lines) == 1, p.stderr
    assert "Traceback" not in p.stderr
    assert re.match(r"iowhy(-record)?: ", lines[0]), lines[0]
    assert re.search(pattern, lines[0], re.I), lines[0]
    return lines[0]


def rec(*args, **kw) -> subprocess.CompletedProcess:
    kw.setdefault("timeout", 60)
    return run([str(recorder_path()), *args], check=False, **kw)


def front(iowhy_bin, *args, **kw) -> subprocess.CompletedProcess:
    kw.setdefault("timeout", 60)
    return run([*iowhy_bin, *args], check=False, **kw)


def trailer(path) -> dict:
    tr = read_trace(str(path))
    assert tr.trailer is not None, f"{path}: no trailer"
    return tr.trailer


def alive(pid: int) -> bool:
    """Running, not a zombie."""
    try:
        st = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return st[st.rfind(")") + 2] not in "ZX"


def wait_for(cond, timeout: float = 20.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


def children_of(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            out += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            pass
    return out


@pytest.fixture
def reaper(request):
    """kill(pid) at teardown for every pid given to it (processes this test started)."""
    pids: list[int] = []

    def _fin():
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    request.addfinalizer(_fin)
    return pids


# -- the output file -----------------------------------------------------------------------

@pytest.mark.parametrize("via", ["iowhy", "recorder"])
def test_symlink_at_output_is_refused_target_untouched(bpf, iowhy_bin, tmp_path, via):
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    victim.chmod(0o644)
    link = tmp_path / "out.iowt"
    link.symlink_to(victim)
    p = (front(iowhy_bin, "record", "-q", "-o", str(link), "--", "true") if via == "iowhy"
         else rec("-q", "-o", str(link), "--", "true"))
    one_line_error(p, "symbolic link", 1)
    assert victim.read_text() == "precious\n"
    assert stat.S_IMODE(victim.stat().st_mode) == 0o644
    assert link.is_symlink()
    assert sorted(x.name for x in tmp_path.iterdir()) == ["out.iowt", "victim"]


@pytest.mark.parametrize("kind", ["fifo", "dir", "chardev"])
@pytest.mark.parametrize("via", ["iowhy", "recorder"])
def test_non_regular_output_is_refused(bpf, iowhy_bin, tmp_path, kind, via):
    out = tmp_path / "out"
    if kind == "fifo":
        os.mkfifo(out)
    elif kind == "dir":
        out.mkdir()
    else:  # a private /dev/null: the host's one is never put at risk
        os.mknod(out, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        out.chmod(0o666)
    before = out.lstat()
    p = (front(iowhy_bin, "record", "-q", "-o", str(out), "--", "true", timeout=30)
         if via == "iowhy" else rec("-q", "-o", str(out), "--", "true", timeout=30))
    one_line_error(p, "refusing to write|is a directory", 1)
    after = out.lstat()
    assert (after.st_mode, after.st_ino) == (before.st_mode, before.st_ino)
    assert [x.name for x in tmp_path.iterdir()] == ["out"]


def test_existing_trace_is_replaced_and_kept_as_old(bpf, iowhy_bin, tmp_path):
    out = tmp_path / "t.iowt"
    out.write_text("the previous trace\n")
    out.chmod(0o644)
    ino = out.stat().st_ino
    p = front(iowhy_bin, "record", "-q", "-o", str(out), "--", "true")
    assert p.returncode == 0, p.stderr
    st = out.lstat()
    assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600
    assert st.st_ino != ino, "a new file, renamed into place"
    assert trailer(out)["stop_reason"] == "workload-exit"
    old = tmp_path / "t.iowt.old"
    assert old.read_text() == "the previous trace\n"
    assert sorted(x.name for x in tmp_path.iterdir()) == ["t.iowt", "t.iowt.old"]


def test_trace_belongs_to_the_sudo_user(bpf, iowhy_bin, tmp_path):
    out = tmp_path / "t.iowt"
    env = dict(os.environ, SUDO_UID="65534", SUDO_GID="65533", SUDO_USER="nobody")
    p = front(iowhy_bin, "record", "-q", "-o", str(out), "--", "true", env=env)
    assert p.returncode == 0, p.stderr
    st = out.stat()
    assert (st.st_uid, st.st_gid) == (65534, 65533)
    assert stat.S_IMODE(st.st_mode) == 0o600


def test_no_named_metadata_file_even_when_killed(bpf, iowhy_bin, tmp_path, reaper):
    """The metadata goes to the recorder through an inherited descriptor: TMPDIR stays
    empty after a normal run and after the front end is killed with -9."""
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    env = dict(os.environ, TMPDIR=str(tmpdir))
    p = front(iowhy_bin, "record", "-q", "-o", str(tmp_path / "a.iowt"), "--", "true", env=env)
    assert p.returncode == 0, p.stderr
    assert list(tmpdir.iterdir()) == []
    fe = subprocess.Popen([*iowhy_bin, "record", "-q", "-o", str(tmp_path / "b.iowt"), "--",
                           "sleep", "30"], env=env, stderr=subprocess.PIPE)
    reaper.append(fe.pid)
    assert wait_for(lambda: any(alive(c) for c in children_of(fe.pid)))
    time.sleep(1.5)  # loaded and recording
    fe.kill()
    fe.wait()
    assert list(tmpdir.iterdir()) == []


def test_partial_trace_is_left_after_a_crash(bpf, iowhy_bin, tmp_path, reaper):
    out = tmp_path / "t.iowt"
    r = subprocess.Popen([str(recorder_path()), "-q", "-o", str(out), "--", "sleep", "30"],
                         stderr=subprocess.PIPE)
    reaper.append(r.pid)
    partial = tmp_path / f"t.iowt.partial-{r.pid}"
    assert wait_for(lambda: partial.exists() and partial.stat().st_size > 64)
    time.sleep(1.5)
    wl = [c for c in children_of(r.pid)]
    reaper.extend(wl)
    r.kill()
    r.wait()
    assert not out.exists()
    assert stat.S_IMODE(partial.stat().st_mode) == 0o600
    tr = read_trace(str(partial))
    assert tr.truncated and tr.trailer is None
    # asked for the trace, iowhy names the file the recording left
    p = front(iowhy_bin, "info", str(out))
    one_line_error(p, re.escape(f"{partial} is a recording to it that was killed"), 1)


# -- stopping ----------------------------------------------------------------------------

@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_to_front_end_stops_workload_and_records_its_status(bpf, iowhy_bin, tmp_path,
                                                                   reaper, sig):
    """kill -INT / -TERM of `iowhy` stops the recording like Ctrl-C; the workload gets the
    signal, is reaped (not left to PID 1) and its status is in the trailer."""
    out = tmp_path / "t.iowt"
    pidfile = tmp_path / "wl.pid"
    fe = subprocess.Popen([*iowhy_bin, "record", "-q", "-o", str(out), "--", "sh", "-c",
                           f'echo $$ > {pidfile}; exec sleep 60'], stderr=subprocess.PIPE,
                          text=True)
    reaper.append(fe.pid)
    assert wait_for(lambda: pidfile.exists() and pidfile.read_text().strip() != "")
    wl = int(pidfile.read_text())
    reaper.append(wl)
    time.sleep(0.5)
    fe.send_signal(sig)
    try:
        _, err = fe.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        pytest.fail(f"iowhy ignored {sig.name}")
    assert fe.returncode == 128 + sig, err
    assert not alive(wl), "the workload was left running"
    t = trailer(out)
    assert t["stop_reason"] == "signal"
    assert t["exit_status"] == 128 + sig
    assert not list(tmp_path.glob("*.partial-*"))


def test_workload_ignoring_sigterm_is_killed_after_grace(bpf, tmp_path, reaper):
    out = tmp_path / "t.iowt"
    r = subprocess.Popen([str(recorder_path()), "-q", "-o", str(out), "--", "sh", "-c",
                          "trap '' TERM; sleep 30 & wait; wait"], stderr=subprocess.PIPE)
    reaper.append(r.pid)
    assert wait_for(lambda: len(children_of(r.pid)) >= 1)
    time.sleep(1.5)
    reaper.extend(children_of(r.pid))
    t0 = time.monotonic()
    r.send_signal(signal.SIGTERM)
    r.wait(timeout=30)
    took = time.monotonic() - t0
    assert 4 < took < 15, took
    t = trailer(out)
    assert t["stop_reason"] == "signal" and t["exit_status"] == 128 + signal.SIGKILL
    assert r.returncode == 128 + signal.SIGKILL


def test_kill9_of_front_end_stops_the_recorder(bpf, iowhy_bin, tmp_path, reaper):
    out = tmp_path / "t.iowt"
    fe = subprocess.Popen([*iowhy_bin, "record", "-q", "-o", str(out), "--", "sleep", "60"],
                          stderr=subprocess.PIPE)
    reaper.append(fe.pid)
    assert wait_for(lambda: children_of(fe.pid) != [])
    recorder = children_of(fe.pid)[0]
    reaper.append(recorder)
    assert wait_for(lambda: children_of(recorder) != [])
    workload = children_of(recorder)[0]
    reaper.append(workload)
    time.sleep(1.0)
    fe.kill()
    fe.wait()
    assert wait_for(lambda: not alive(recorder), 20), "the recorder went on recording"
    assert not alive(workload)
    t = trailer(out)
    assert t["stop_reason"] == "signal" and t["exit_status"] == 128 + signal.SIGTERM
    assert sorted(x.name for x in tmp_path.iterdir()) == ["t.iowt"]


def test_duration_keeps_the_workload_and_claims_no_status(bpf, iowhy_bin, tmp_path, reaper):
    out = tmp_path / "t.iowt"
    p = front(iowhy_bin, "record", "-q", "-o", str(out), "-d", "0.5", "--", "sh", "-c",
              "exec sleep 20 >/dev/null 2>&1")  # not holding our pipes open
    tr = read_trace(str(out))
    reaper.append(int(tr.recorder["pid"]))
    assert p.returncode == 0, p.stderr
    assert tr.trailer["stop_reason"] == "duration"
    assert tr.trailer["exit_status"] is None
    assert alive(int(tr.recorder["pid"]))
    d = json.loads(front(iowhy_bin, "info", "--json", str(out)).stdout)
    assert d["exit_status"] is None and d["stop_reason"] == "duration"
    text = front(iowhy_bin, "info", str(out))
    assert text.returncode == 0 and "duration" in text.stdout
    rep = front(iowhy_bin, "report", "--json", str(out))
    assert rep.returncode == 0, rep.stderr
    assert json.loads(rep.stdout)["trace"]["exit_status"] is None


def test_attach_never_signals_its_target_and_claims_no_status(bpf, iowhy_bin, tmp_path,
                                                              reaper):
    target = subprocess.Popen(["sleep", "30"])
    reaper.append(target.pid)
    out = tmp_path / "a.iowt"
    fe = subprocess.Popen([*iowhy_bin, "attach", "-q", "-p", str(target.pid), "-o", str(out)],
                          stderr=subprocess.PIPE)
    reaper.append(fe.pid)
    wait_attached(fe, out)  # not a fixed wait: a loaded machine starts it slower
    fe.send_signal(signal.SIGINT)
    fe.wait(timeout=20)
    assert target.poll() is None, "attach signalled its target"
    t = trailer(out)
    assert t["stop_reason"] == "signal" and t["exit_status"] is None


# -- attach targets ------------------------------------------------------------------------

ZOMBIE = """
import os, sys, time
pid = os.fork()
if pid == 0:
    time.sleep(float(sys.argv[1]))
    os._exit(3)
print(pid, flush=True)
time.sleep(60)
"""


@pytest.mark.parametrize("via", ["iowhy", "recorder"])
def test_attach_to_a_zombie_is_refused(bpf, iowhy_bin, tmp_path, reaper, via):
    parent = subprocess.Popen([PY, "-c", ZOMBIE, "0"], stdout=subprocess.PIPE, text=True)
    reaper.append(parent.pid)
    z = int(parent.stdout.readline())
    assert wait_for(lambda: not alive(z))
    out = tmp_path / "z.iowt"
    p = (front(iowhy_bin, "attach", "-p", str(z), "-o", str(out), timeout=20) if via == "iowhy"
         else rec("-o", str(out), "-p", str(z), timeout=20))
    one_line_error(p, "zombie", 1)
    assert not out.exists()


def test_attach_ends_when_the_target_becomes_a_zombie(bpf, iowhy_bin, tmp_path, reaper):
    parent = subprocess.Popen([PY, "-c", ZOMBIE, "3"], stdout=subprocess.PIPE, text=True)
    reaper.append(parent.pid)
    z = int(parent.stdout.readline())
    out = tmp_path / "z.iowt"
    t0 = time.monotonic()
    p = front(iowhy_bin, "attach", "-q", "-p", str(z), "-o", str(out), timeout=30)
    assert p.returncode == 0, p.stderr
    assert time.monotonic() - t0 < 15
    t = trailer(out)
    assert t["stop_reason"] == "target-exit" and t["exit_status"] is None


def a_kernel_thread() -> int:
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and int(d.name) > 2:
            try:
                st = (d / "stat").read_text()
            except OSError:
                continue
            if int(st[st.rfind(")") + 2:].split()[6]) & 0x00200000:
                return int(d.name)
    raise AssertionError("no kernel thread found")


@pytest.mark.parametrize("who", ["1", "2", "kthread"])
@pytest.mark.parametrize("via", ["iowhy", "recorder"])
def test_attach_to_init_or_kernel_threads_needs_force(bpf, iowhy_bin, tmp_path, who, via):
    pid = str(a_kernel_thread()) if who == "kthread" else who
    out = tmp_path / "k.iowt"
    p = (front(iowhy_bin, "attach", "-p", pid, "-o", str(out)) if via == "iowhy"
         else rec("-o", str(out), "-p", pid))
    one_line_error(p, "--force")
    assert not out.exists()


def test_attach_to_a_kernel_thread_with_force(bpf, iowhy_bin, tmp_path):
    out = tmp_path / "k.iowt"
    p = front(iowhy_bin, "attach", "-q", "--force", "-p", str(a_kernel_thread()), "-d", "0.3",
              "-o", str(out))
    assert p.returncode == 0, p.stderr
    assert trailer(out)["stop_reason"] == "duration"
    assert "--force" in front(iowhy_bin, "attach", "--help").stdout


# -- values --------------------------------------------------------------------------------

BAD = [("-d", "1e20"), ("-d", "inf"), ("-d", "-1"), ("-d", "nan"), ("-d", "0"),
       ("-d", "2592001"), ("-r", "4096"), ("-r", "3"), ("-r", "0"), ("-r", "-64")]


@pytest.mark.parametrize("opt,val", BAD)
@pytest.mark.parametrize("via", ["iowhy", "recorder"])
def test_out_of_range_values_are_refused(bpf, iowhy_bin, tmp_path, opt, val, via):
    out = tmp_path / "v.iowt"
    long = {"-d": "--duration", "-r": "--ringbuf"}[opt]
    p = (front(iowhy_bin, "record", "-o", str(out), f"{long}={val}", "--", "true")
         if via == "iowhy" else rec("-o", str(out), f"{opt}{val}", "--", "true"))
    one_line_error(p, "duration|ringbuf", 2)
    assert not out.exists()


def test_largest_ringbuf_works(bpf, iowhy_bin, tmp_path):
    out = tmp_path / "r.iowt"
    p = front(iowhy_bin, "record", "-q", "-r", "2048", "-o", str(out), "--", "true")
    assert p.returncode == 0, p.stderr
    assert read_trace(str(out)).recorder["ringbuf_bytes"] == 2048 << 20
    assert "2048" in front(iowhy_bin, "record", "--help").stdout


@pytest.mark.parametrize("kind,code", [("dir", 126), ("noexec", 126), ("missing", 127)])
@pytest.mark.parametrize("via", ["iowhy", "recorder"])
def test_workload_not_executable_126_missing_127(bpf, iowhy_bin, tmp_path, kind, code, via):
    cmd = tmp_path / "cmd"
    if kind == "dir":
        cmd.mkdir()
    elif kind == "noexec":
        cmd.write_text("#!/bin/sh\nexit 0\n")
        cmd.chmod(0o644)
    out = tmp_path / "w.iowt"
    p = (front(iowhy_bin, "record", "-q", "-o", str(out), "--", str(cmd)) if via == "iowhy"
         else rec("-q", "-o", str(out), "--", str(cmd)))
    one_line_error(p, "cannot run|not found|No such file", code)
    if via == "recorder":
        assert trailer(out)["exit_status"] == code


# -- issue 30: names, the command line, stopping early ------------------------------------------

@pytest.mark.parametrize("out", ["", "sub/", ".", "sub/.."])
@pytest.mark.parametrize("via", ["iowhy", "recorder"])
def test_output_that_names_no_file_is_refused_before_recording(bpf, iowhy_bin, tmp_path,
                                                               out, via):
    """`-o ""` recorded the whole workload, then failed to rename and left
    .partial-PID in the current directory."""
    (tmp_path / "sub").mkdir()
    marker = tmp_path / "ran"
    cmd = ["--", "touch", str(marker)]
    p = (front(iowhy_bin, "record", "-q", "-o", out, *cmd, cwd=tmp_path) if via == "iowhy"
         else rec("-q", "-o", out, *cmd, cwd=tmp_path))
    one_line_error(p, "is not a file name", 2)
    assert not marker.exists()  # the workload never ran
    assert sorted(x.name for x in tmp_path.iterdir()) == ["sub"]
    assert list((tmp_path / "sub").iterdir()) == []


def test_long_arguments_are_cut_and_the_trace_is_sound(bpf, iowhy_bin, tmp_path):
    """One argument of 131,071 bytes (the kernel's largest) and 70,000 arguments: the
    trace's strings and lists hold 65,536 at most, so both writers cut them and say so
    (a reader dropped the whole command line and called the trace damaged)."""
    out = tmp_path / "long.iowt"
    big = "a" + "é" * 65_535  # 131,071 bytes (the cut falls inside a character) and
    # 65,536 characters (what the trace's strings hold: META keeps it whole)
    p = front(iowhy_bin, "record", "-o", str(out), "--", "true", big, "x")
    assert p.returncode == 0, p.stderr
    assert "the command line is longer than a trace keeps" in p.stderr
    tr = read_trace(str(out))
    assert not tr.damage.damaged, tr.damage.summary()
    assert tr.recorder["command"] == ["true", "a" + "é" * 32_499 + "[cut: 131071 bytes in all]",
                                      "x"]
    assert tr.meta["command"] == ["--", "true", big, "x"]
    many = [str(i) for i in range(70_000)]
    p = front(iowhy_bin, "record", "-q", "-o", str(out), "--", "true", *many)
    assert p.returncode == 0, p.stderr
    tr = read_trace(str(out))
    assert not tr.damage.damaged, tr.damage.summary()
    rc = tr.recorder["command"]
    assert len(rc) == 65_536 and rc[-1] == "[cut: 70001 arguments in all]"
    assert len(tr.meta["command"]) == 65_536 and tr.meta["command"][0] == "--"
    info = front(iowhy_bin, "info", str(out))
    assert info.returncode == 0 and "WARNING: trace" not in info.stdout


def test_sigint_while_the_probes_load_says_so(bpf, tmp_path):
    """SIGINT before the workload starts (the probes take a while to load) ended the
    recorder without a word: it says what happened, exits 130, and leaves no file. The
    signal is sent a little later each try until it lands before the start."""
    out = tmp_path / "early.iowt"
    marker = tmp_path / "ran"
    said = None
    for delay_ms in (5, 10, 20, 40, 80, 120, 160, 240):
        r = subprocess.Popen([str(recorder_path()), "-q", "-o", str(out), "--", "touch",
                              str(marker)], stderr=subprocess.PIPE, text=True)
        time.sleep(delay_ms / 1000)
        r.send_signal(signal.SIGINT)
        err = r.communicate(timeout=60)[1]
        if marker.exists():  # too late: the workload ran, the trace was written
            assert r.returncode in (0, 130), err
            break
        assert r.returncode == 130, err
        lines = [x for x in err.splitlines() if not x.startswith("iowhy: mounted tracefs")]
        assert lines == ["iowhy: stopped by SIGINT while loading the probes: nothing was "
                         "recorded and the workload was not started"], err
        assert sorted(x.name for x in tmp_path.iterdir()) == []
        said = delay_ms
    assert said is not None, "the signal never arrived before the start"
