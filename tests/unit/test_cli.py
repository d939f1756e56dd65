"""iowhy.cli: the entry point and what `record`, `attach` and `info` check before they
run anything. Every refusal is one line (`iowhy: ...` and a hint) and its exit code,
before root, the recorder or the workload is needed; nothing here records."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import pytest

import tracebuilder as tb
from iowhy import cli
from clirun import one_line, run
from iowhy.errors import EXIT_FAIL, EXIT_NOT_FOUND, EXIT_USAGE, UserError


def test_no_subcommand_is_usage(capsys):
    rc, out, err = run(capsys)
    assert rc == EXIT_USAGE and out == "" and "usage:" in err


def test_a_user_error_is_one_line_with_its_hint_and_code(capsys, tmp_path):
    rc, _, err = run(capsys, "info", str(tmp_path / "t.iowt"), "--decode-ratio", "0")
    assert rc == EXIT_USAGE
    assert one_line(err) == ("iowhy: --decode-ratio 0 is out of range "
                             "(give N from 1 to 1048576)")


def test_a_name_is_shown_escaped(capsys, tmp_path):
    rc, _, err = run(capsys, "info", str(tmp_path / "a\x1b[2Jb.iowt"))
    assert rc == EXIT_FAIL and "\x1b" not in err and one_line(err)


def test_record_without_a_command(capsys):
    rc, _, err = run(capsys, "record", "-o", "x.iowt")
    assert rc == EXIT_USAGE and "no workload command given" in one_line(err)


def test_check_command(tmp_path, monkeypatch):
    cli._check_command("sh")  # on PATH
    with pytest.raises(UserError) as ei:
        cli._check_command("no-such-command-xyz")
    assert ei.value.code == EXIT_NOT_FOUND
    with pytest.raises(UserError, match="it is a directory") as ei:
        cli._check_command(str(tmp_path))
    assert ei.value.code == cli.EXIT_NOT_EXECUTABLE
    script = tmp_path / "job"
    script.write_text("#!/bin/sh\n")
    with pytest.raises(UserError, match="not executable") as ei:
        cli._check_command(str(script))
    assert ei.value.code == cli.EXIT_NOT_EXECUTABLE and f"chmod +x {script}" in ei.value.hint
    # found on PATH but not executable: as a shell, 126
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(UserError, match="not executable"):
        cli._check_command("job")
    script.chmod(0o755)
    cli._check_command(str(script))


def test_check_output(tmp_path):
    for bad in ("", "somewhere/", "somewhere/.", ".."):
        with pytest.raises(UserError, match="is not a file name") as ei:
            cli._check_output(bad)
        assert ei.value.code == EXIT_USAGE
    cli._check_output(str(tmp_path / "new.iowt"))
    (tmp_path / "old.iowt").write_bytes(b"")
    cli._check_output(str(tmp_path / "old.iowt"))  # a regular file is replaced
    with pytest.raises(UserError, match="does not exist"):
        cli._check_output(str(tmp_path / "no" / "t.iowt"))
    with pytest.raises(UserError, match="is not a directory"):
        cli._check_output(str(tmp_path / "old.iowt" / "t.iowt"))
    os.symlink(tmp_path / "elsewhere", tmp_path / "link.iowt")
    with pytest.raises(UserError, match="it is a symbolic link"):
        cli._check_output(str(tmp_path / "link.iowt"))
    os.mkfifo(tmp_path / "fifo.iowt")
    with pytest.raises(UserError, match="it is a FIFO"):
        cli._check_output(str(tmp_path / "fifo.iowt"))
    (tmp_path / "d.iowt").mkdir()
    with pytest.raises(UserError, match="it is a directory"):
        cli._check_output(str(tmp_path / "d.iowt"))


def limits(ringbuf=64, duration=None, label=None) -> argparse.Namespace:
    return argparse.Namespace(ringbuf=ringbuf, duration=duration, label=label)


@pytest.mark.parametrize("kw", [{}, {"ringbuf": 1}, {"ringbuf": cli.MAX_RINGBUF_MIB},
                                {"duration": 0.5}, {"duration": cli.MAX_DURATION_S},
                                {"label": "nightly"}])
def test_limits_taken(kw):
    cli._check_limits(limits(**kw))


@pytest.mark.parametrize("kw,words", [
    ({"ringbuf": 0}, "--ringbuf 0"), ({"ringbuf": 48}, "--ringbuf 48"),
    ({"ringbuf": 2 * cli.MAX_RINGBUF_MIB}, "power of two"),
    ({"duration": 0.0}, "--duration 0.0"), ({"duration": float("nan")}, "--duration nan"),
    ({"duration": float("inf")}, "--duration inf"),
    ({"duration": cli.MAX_DURATION_S + 1}, "at most"), ({"label": " "}, "--label: "),
])
def test_limits_refused(kw, words):
    with pytest.raises(UserError, match=words.replace("(", r"\(")) as ei:
        cli._check_limits(limits(**kw))
    assert ei.value.code == EXIT_USAGE and ei.value.hint


def test_metadata_fd_holds_the_json(tmp_path):
    fd = cli._metadata_fd({"host": "h", "devices": []})
    try:
        assert os.lseek(fd, 0, os.SEEK_CUR) == 0
        assert json.loads(os.read(fd, 1 << 16)) == {"host": "h", "devices": []}
        assert "memfd:iowhy-meta" in os.readlink(f"/proc/self/fd/{fd}")
    finally:
        os.close(fd)


def test_parse_dev(tmp_path):
    with pytest.raises(UserError, match="no block device 4095:1048575") as ei:
        cli.parse_dev("4095:1048575")
    assert "MAJ:MIN" in ei.value.hint
    with pytest.raises(UserError, match="is not a block device"):
        cli.parse_dev(str(tmp_path))


def kthread_pid() -> int | None:
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and int(d.name) > 2:
            try:
                raw = (d / "stat").read_bytes()
            except OSError:
                continue
            if int(raw[raw.rfind(b")") + 2:].split()[6]) & cli.PF_KTHREAD:
                return int(d.name)
    return None


def test_check_target():
    cli._check_target(os.getpid(), False)
    for pid in (0, -5, 1 << 30):
        with pytest.raises(UserError, match=f"no process with PID {pid}"):
            cli._check_target(pid, False)
    with pytest.raises(UserError, match=r"PID 1 \(init\)") as ei:
        cli._check_target(1, False)
    assert "--force" in ei.value.hint
    cli._check_target(1, True)
    with pytest.raises(UserError, match="kthreadd"):
        cli._check_target(2, False)
    k = kthread_pid()
    if k is not None:
        with pytest.raises(UserError, match="it is a kernel thread"):
            cli._check_target(k, False)
        cli._check_target(k, True)


@pytest.mark.parametrize("argv", [["attach"], ["attach", "-p", "1", "-a"],
                                  ["attach", "-a", "--cgroup", "/sys/fs/cgroup/x"]])
def test_attach_needs_one_target(capsys, argv):
    rc, _, err = run(capsys, *argv)
    assert rc == EXIT_USAGE and "attach needs one target" in one_line(err)


def test_attach_to_no_process(capsys):
    rc, _, err = run(capsys, "attach", "-p", str(1 << 30))
    assert rc == EXIT_FAIL and f"no process with PID {1 << 30}" in one_line(err)


def trace_with_stats(tmp_path) -> str:
    t = tb.Trace(tmp_path / "s.iowt", tb.meta(), {"start_ns": 1000, "command": ["x"],
                                                  "pid": 100})
    t.add("task", [tb.task(100, 1000)])
    t.add("syscall", [{"syscall_nr": 74, "count": 3, "total_ns": 50},
                      {"syscall_nr": 0, "count": 9, "total_ns": 80},
                      {"syscall_nr": 1, "count": 0, "total_ns": 0}])
    return t.close(tb.trailer(1100, probe_stats={"a": {"runs": 5, "run_ns": 10},
                                                 "b": {"runs": 1, "run_ns": 99}}))


def test_syscall_totals_and_probe_stats(tmp_path):
    from iowhy.traceformat import read_trace
    tr = read_trace(trace_with_stats(tmp_path))
    got = cli.syscall_totals(tr)
    assert [(e["nr"], e["count"], e["total_ns"]) for e in got] == [(0, 9, 80), (74, 3, 50)]
    assert got[1]["name"] == "fsync"  # x86_64 numbers unless META says otherwise
    assert [r["program"] for r in cli.probe_stats(tr)] == ["b", "a"]
    assert cli.probe_stats(read_trace(tb.write_trace(tmp_path / "p.iowt"))) is None


def test_info_json(capsys, tmp_path):
    p = tb.write_trace(tmp_path / "t.iowt", requests=[tb.req(1010, 1050)])
    rc, out, err = run(capsys, "info", p, "--json")
    d = json.loads(out)
    assert rc == 0 and d["records"]["request"] == 1 and d["duration_ns"] == 100
    assert d["start_ns"] == 1000 and not d["truncated"] and "damage" not in d
    cut = tb.write_trace(tmp_path / "cut.iowt", trailer=False)
    rc, out, err = run(capsys, "info", cut, "--json")
    assert rc == 0 and json.loads(out)["truncated"]


def test_info_text(capsys, tmp_path):
    p = tb.write_trace(tmp_path / "t.iowt", requests=[tb.req(1010, 1050)])
    rc, out, err = run(capsys, "info", p)
    assert rc == 0 and "star -x" in out


def test_ctrl_c_at_any_moment_of_the_start_prints_no_traceback(tmp_path):
    """SIGINT at delays spread over the imports and the command (0.1 s or more): the
    process ends by the signal (during the imports) or with 130, or it finished first;
    never a traceback (numpy's import turns a KeyboardInterrupt into an ImportError).
    The child signals once Python has started and `run` is imported: what comes before
    (the interpreter's own start) is not iowhy's to handle."""
    import signal
    import subprocess
    import sys
    import time

    import iowhy
    env = dict(os.environ, PYTHONPATH=str(Path(iowhy.__file__).parent.parent))
    code = ("import sys; from iowhy.__main__ import run; sys.stdout.write('go\\n'); "
            "sys.stdout.flush(); sys.argv[0] = 'iowhy'; sys.exit(run())")
    seen = set()
    for ms in range(1, 241, 8):
        p = subprocess.Popen([sys.executable, "-c", code, "info", str(tmp_path / "none.iowt")],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        assert p.stdout is not None and p.stdout.readline() == b"go\n"
        time.sleep(ms / 1000)
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=60)
        assert b"Traceback" not in err and b"Error" not in err, (ms, err.decode()[-400:])
        assert p.returncode in (-signal.SIGINT, 130, EXIT_FAIL), (ms, p.returncode, err)
        seen.add(p.returncode)
    # some signals met the imports or the command, not only a finished process
    assert seen & {-signal.SIGINT, 130}, seen
