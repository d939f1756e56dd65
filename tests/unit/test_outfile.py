"""Output files and standard output (iowhy.outfile, and the commands that write).

Every file iowhy writes from Python: never through a symlink, never into a non-regular
file, atomically by rename, mode 0600; a bad output ends in one line before the
analysis starts, a failing write in one line after it, a closed pipe quietly. No root
needed (the read-only and full filesystems are in tests/system/test_outfile_root.py).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import resource
import signal
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

from iowhy import outfile
import synthtrace
from tracebuilder import Trace, off, req, trailer, write_trace

REPO = Path(__file__).resolve().parents[2]
PY = sys.executable


def iowhy(*args: str, **kw: Any) -> subprocess.CompletedProcess:
    if "stdout" not in kw:
        kw.setdefault("capture_output", True)
    else:
        kw.setdefault("stderr", subprocess.PIPE)
    kw.setdefault("text", True)
    return subprocess.run([PY, "-m", "iowhy", *args], timeout=120, **kw)


def one_line_error(stderr: str, start: str) -> None:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith(start), stderr
    assert "Traceback" not in stderr


def busy_trace(d: Path) -> str:
    """A few thousand requests of every kind with fsyncs and commits (synthtrace.synth)."""
    s = synthtrace.synth(4000, seed=3)
    t = Trace(d / "busy.iowt", {"devices": [], "filesystems": []},
              {"start_ns": int(s["start_ns"]), "pid": 1000,
               "command": ["star", "-x", "-f", "linux.tar"]})
    for name in ("task", "fsync", "journal", "offcpu", "request"):
        t.add(name, s[name])
    return t.close(trailer(int(s["end_ns"]), stop_reason="workload-exit"))


def small_trace(d: Path) -> str:
    """One request and the wait for it: a page with every figure, drawn in a fraction
    of the busy trace's time, and like every output here far over 4 KiB."""
    return write_trace(d / "small.iowt", requests=[req(1020, 1060, sector=50_000)],
                       offcpu=[off(100, 1015, 1070)])


@pytest.fixture(scope="module")
def trace(tmp_path_factory) -> str:
    return busy_trace(tmp_path_factory.mktemp("trace"))


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> str:
    """For the tests of how a page or a figure is written (not of what it shows)."""
    return small_trace(tmp_path_factory.mktemp("small"))


# -- the helper ------------------------------------------------------------------------------

def test_new_file_is_0600_whatever_the_umask(tmp_path):
    old = os.umask(0)
    try:
        outfile.write_output(tmp_path / "a.html", "<p>é</p>")
    finally:
        os.umask(old)
    st = os.stat(tmp_path / "a.html")
    assert stat.S_IMODE(st.st_mode) == 0o600
    assert (tmp_path / "a.html").read_text(encoding="utf-8") == "<p>é</p>"
    assert os.listdir(tmp_path) == ["a.html"]      # no temporary file left


def test_existing_regular_file_is_replaced_by_rename(tmp_path):
    p = tmp_path / "r.html"
    p.write_text("old")
    os.chmod(p, 0o644)
    held = open(p)                  # a reader holding the old file keeps reading it
    ino = os.stat(p).st_ino
    outfile.write_output(p, "new")
    assert p.read_text() == "new"
    assert os.stat(p).st_ino != ino
    assert stat.S_IMODE(os.stat(p).st_mode) == 0o600
    assert held.read() == "old"
    held.close()
    assert sorted(os.listdir(tmp_path)) == ["r.html"]


@pytest.mark.parametrize("kind", ["symlink", "dangling", "fifo", "dir", "device"])
def test_non_regular_paths_are_refused(tmp_path, kind):
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    os.chmod(victim, 0o644)
    p = tmp_path / "out.html"
    if kind == "symlink":
        p.symlink_to(victim)
    elif kind == "dangling":
        p.symlink_to(tmp_path / "nowhere")
    elif kind == "fifo":
        os.mkfifo(p)
    elif kind == "dir":
        p.mkdir()
    else:
        p = Path("/dev/null")
    what = {"symlink": "a symlink", "dangling": "a symlink", "fifo": "a FIFO",
            "dir": "a directory", "device": "a character device"}[kind]
    before = os.lstat(p)
    for call in (lambda: outfile.check_target(p), lambda: outfile.write_output(p, "x")):
        with pytest.raises(outfile.OutputError) as e:
            call()
        assert str(e.value) == f"refusing to write {p}: it is {what}"
        assert e.value.hint
    after = os.lstat(p)
    assert (after.st_mode, after.st_ino, after.st_uid) == \
        (before.st_mode, before.st_ino, before.st_uid)
    assert victim.read_text() == "keep me" and stat.S_IMODE(victim.stat().st_mode) == 0o644
    assert not (tmp_path / "nowhere").exists()
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]


def test_missing_directory(tmp_path):
    with pytest.raises(outfile.OutputError, match="directory .* does not exist"):
        outfile.check_target(tmp_path / "no" / "x.html")
    (tmp_path / "f").write_text("")
    with pytest.raises(outfile.OutputError, match="is not a directory"):
        outfile.check_target(tmp_path / "f" / "x.html")


def test_failed_block_leaves_the_old_file(tmp_path):
    p = tmp_path / "r.html"
    p.write_text("old")
    with pytest.raises(RuntimeError):
        with outfile.open_output(p) as f:
            f.write(b"half")
            raise RuntimeError("renderer failed")
    assert p.read_text() == "old"
    assert os.listdir(tmp_path) == ["r.html"]
    with pytest.raises(RuntimeError):
        with outfile.open_output(tmp_path / "log", binary=False, keep_on_error=True) as f:
            f.write("what happened")
            raise RuntimeError("the run failed")
    assert (tmp_path / "log").read_text() == "what happened"


def test_sudo_owner_parsing(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setenv("SUDO_UID", "1000")
    monkeypatch.setenv("SUDO_GID", "1001")
    assert outfile.sudo_owner() == (1000, 1001)
    monkeypatch.delenv("SUDO_GID")
    assert outfile.sudo_owner() == (1000, -1)
    for bad in ("", "x", "-5", "0", "4294967295", "1e3"):
        monkeypatch.setenv("SUDO_UID", bad)
        assert outfile.sudo_owner() is None, bad
    monkeypatch.setenv("SUDO_UID", "1000")
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert outfile.sudo_owner() is None


# -- the commands ----------------------------------------------------------------------------

@pytest.mark.parametrize("args", [
    ["report", "{t}", "--html", "{o}.html"],
    ["compare", "{t}", "{t}", "--html", "{o}.html"],
    ["hist", "{t}", "--png", "{o}.png"],
])
def test_bad_output_refused_before_the_analysis(trace, tmp_path, monkeypatch, capsys, args):
    import iowhy.analysis
    from iowhy.cli import main

    def boom(*a: Any, **k: Any) -> Any:
        raise AssertionError("the analysis ran before the output was checked")

    for name in ("analyze", "metric_values"):
        monkeypatch.setattr(iowhy.analysis, name, boom)
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    o = tmp_path / "out"
    ext = args[-1].rsplit(".", 1)[1]
    Path(f"{o}.{ext}").symlink_to(victim)
    argv = [a.format(t=trace, o=o) for a in args]
    assert main(argv) == 1
    err = capsys.readouterr().err
    one_line_error(err, f"iowhy: refusing to write {o}.{ext}: it is a symlink")
    assert victim.read_text() == "keep me"


@pytest.mark.parametrize("args", [
    ["report", "{t}", "--html", "{o}.html"],
    ["hist", "{t}", "--png", "{o}.png"],
])
def test_temporary_file_is_new_and_never_followed(small, tmp_path, monkeypatch, capsys,
                                                  args):
    """The report's temporary file is created O_CREAT|O_EXCL|O_NOFOLLOW: a symlink or a
    hard link planted at the temporary names iowhy will try (here: the names made
    predictable) is skipped, never written through, and the victims keep their bytes.
    Without O_EXCL the hard-linked victim would be truncated and written (or, with
    O_NOFOLLOW alone, the symlink would make the write fail); without either, the
    symlinked one; the flags of every such open are checked too."""
    import itertools

    from iowhy.cli import main
    names = itertools.cycle(["aaaa", "bbbb", "cccc"])
    monkeypatch.setattr(outfile.secrets, "token_hex", lambda n: next(names))
    o = tmp_path / "out"
    out = Path(args[-1].format(o=o))
    victim1, victim2 = tmp_path / "victim1", tmp_path / "victim2"
    victim1.write_text("keep me")
    victim2.write_text("keep me too")
    (tmp_path / f".{out.name}.aaaa.tmp").symlink_to(victim1)
    os.link(victim2, tmp_path / f".{out.name}.bbbb.tmp")
    flags: list[int] = []
    real_open = os.open

    def spy(path: Any, fl: int, *a: Any, **k: Any) -> int:
        if str(path).endswith(".tmp"):
            flags.append(fl)
        return real_open(path, fl, *a, **k)
    monkeypatch.setattr(outfile.os, "open", spy)
    assert main([a.format(t=small, o=o) for a in args]) == 0, capsys.readouterr().err
    assert victim1.read_text() == "keep me" and victim2.read_text() == "keep me too"
    assert out.stat().st_size > 1000 and not out.is_symlink()
    assert out.stat().st_ino not in (victim1.stat().st_ino, victim2.stat().st_ino)
    want = os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
    assert flags and all(f & want == want for f in flags), [hex(f) for f in flags]
    # the planted names were skipped, and left as they were; no temporary is left
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == \
        [f".{out.name}.aaaa.tmp", f".{out.name}.bbbb.tmp"]


@contextlib.contextmanager
def file_size_limit(nbytes: int = 4096) -> Iterator[None]:
    """While the block runs, no write of this process may take a file past `nbytes`
    (RLIMIT_FSIZE, the soft limit): such a write fails with EFBIG (SIGXFSZ ignored), as
    it would on a file-size limit or quota. The limit and the signal's disposition are
    restored after it."""
    old_limit = resource.getrlimit(resource.RLIMIT_FSIZE)
    old_handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (nbytes, old_limit[1]))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, old_limit)
        signal.signal(signal.SIGXFSZ, old_handler)


def main_limited(argv: list[str], capsys: Any) -> tuple[int, str]:
    """`iowhy ARGV` in-process under file_size_limit(): (exit status, stderr)."""
    from iowhy.cli import main
    capsys.readouterr()
    with file_size_limit():
        rc = main(argv)
    return rc, capsys.readouterr().err


@pytest.mark.parametrize("args", [
    ["report", "{t}", "--html", "{o}.html"],
    ["hist", "{t}", "--png", "{o}.png"],
])
def test_failing_file_write_is_one_line_and_keeps_the_old_file(small, tmp_path, capsys,
                                                               args):
    o = tmp_path / "out"
    out = Path(args[-1].format(o=o))
    out.write_text("old")
    rc, err = main_limited([a.format(t=small, o=o) for a in args], capsys)
    assert rc == 1
    one_line_error(err, f"iowhy: cannot write {out}: File too large")
    assert out.read_text() == "old"
    assert os.listdir(tmp_path) == [out.name]


@pytest.mark.parametrize("args", [
    ["report", "{t}"], ["report", "{t}", "--json"], ["hist", "{t}"],
    ["compare", "{t}", "{t}"], ["info", "{t}"], ["info", "{t}", "--json"],
])
def test_full_stdout_is_one_line(trace, args):
    with open("/dev/full", "w") as full:
        p = iowhy(*[a.format(t=trace) for a in args], stdout=full)
    assert p.returncode == 1
    one_line_error(p.stderr, "iowhy: cannot write to standard output: No space left on device")


@pytest.mark.parametrize("args", [["report", "{t}"], ["report", "{t}", "--json"],
                                  ["hist", "{t}"]])
def test_closed_stdout_is_one_line(trace, args):
    p = subprocess.run([PY, "-m", "iowhy", *[a.format(t=trace) for a in args]],
                       stderr=subprocess.PIPE, text=True, timeout=120,
                       preexec_fn=lambda: os.close(1))
    assert p.returncode == 1
    one_line_error(p.stderr, "iowhy: cannot write to standard output: Bad file descriptor")


@pytest.mark.parametrize("args", [["report", "{t}", "--json"], ["info", "{t}", "--json"]])
def test_closed_pipe_exits_quietly(trace, args):
    r, w = os.pipe()
    fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, 4096)      # smaller than the output: it blocks
    proc = subprocess.Popen([PY, "-m", "iowhy", *[a.format(t=trace) for a in args]],
                            stdout=w, stderr=subprocess.PIPE, text=True)
    os.close(w)
    with os.fdopen(r) as f:
        assert f.readline() == "{\n"               # `| head -1`
    err = proc.stderr.read() if proc.stderr else ""
    assert proc.wait(timeout=120) == 0
    assert err == ""


# -- the exporters and importers -------------------------------------------------------------

def ftrace_capture(d: Path, n: int = 3000) -> str:
    """A tracefs text capture of n requests (issue and completion)."""
    p = d / "cap.txt"
    with open(p, "w") as f:
        for i in range(n):
            t = 1000 + i
            f.write(f"dd-100 [000] d..1. {t}.000001: block_rq_issue: 8,0 WS 4096 () "
                    f"{8 * i} + 8 be,0,4 [dd]\n")
            f.write(f"<idle>-0 [000] d..1. {t}.000101: block_rq_complete: 8,0 WS () "
                    f"{8 * i} + 8 be,0,4 [0]\n")
    return str(p)


EXPORTS = [
    ["export", "{t}", "--format", "parquet", "-o", "{o}"],
    ["export", "{t}", "--format", "perfetto", "-o", "{o}.pftrace"],
    ["export", "{t}", "--format", "chrome-json", "-o", "{o}.json"],
    ["import", "ftrace", "{c}", "-o", "{o}.iowt"],
    ["query", "SELECT * FROM requests", "{t}", "--csv", "-o", "{o}.csv"],
]


@pytest.mark.parametrize("args", EXPORTS)
def test_failing_export_or_import_write_is_one_line(trace, tmp_path, capsys, args):
    """A write that fails (here a file-size limit: EFBIG; a full disk is ENOSPC, in
    tests/system/test_outfile_root.py) is one line, leaves the old output as it was
    and no partial file under the output's name or a temporary one."""
    cap = ftrace_capture(tmp_path)
    o = tmp_path / "out"
    out = Path(args[-1].format(o=o))
    if args[:4] == ["export", "{t}", "--format", "parquet"]:
        out.mkdir()
        (out / "runs.parquet").write_text("old")
    else:
        out.write_text("old")
    before = sorted(os.listdir(tmp_path))
    rc, err = main_limited([a.format(t=trace, o=o, c=cap) for a in args], capsys)
    assert rc == 1
    lines = [x for x in err.splitlines() if not x.startswith("WARNING: ")]
    one_line_error("\n".join(lines), f"iowhy: cannot write {out}: File too large")
    assert sorted(os.listdir(tmp_path)) == before
    if out.is_dir():
        assert os.listdir(out) == ["runs.parquet"]
        out = out / "runs.parquet"
    assert out.read_text() == "old"


def test_new_export_directory_appears_whole(trace, tmp_path, capsys):
    """A Parquet directory that did not exist appears with all its files at once (it is
    made under a temporary name); a failed export leaves no directory at all."""
    from iowhy.cli import main
    o = tmp_path / "pq"
    rc, _ = main_limited(["export", trace, "--format", "parquet", "-o", str(o)], capsys)
    assert rc == 1 and os.listdir(tmp_path) == []
    assert main(["export", trace, "--format", "parquet", "-o", str(o)]) == 0, \
        capsys.readouterr().err
    assert len(os.listdir(o)) == 7 and stat.S_IMODE(o.stat().st_mode) == 0o700
    assert all(stat.S_IMODE((o / f).stat().st_mode) == 0o600 for f in os.listdir(o))
    assert os.listdir(tmp_path) == ["pq"]
