"""Output files on a read-only and on a full filesystem, and under sudo (root).

Each test mounts what it needs under its own tmp_path (a read-only bind mount, a
tiny tmpfs) and unmounts it in a finalizer, even on failure.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import need, run

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))
from test_outfile import busy_trace, iowhy, one_line_error  # noqa: E402


@pytest.fixture
def mounts(root, request):
    """mount(*args, target) -> target; every mount is undone at teardown, last first."""
    made: list[Path] = []

    def _mount(*args: str) -> Path:
        target = Path(args[-1])
        run(["mount", *args])
        made.append(target)
        return target

    def _teardown() -> None:
        for m in reversed(made):
            if subprocess.run(["umount", str(m)], capture_output=True).returncode != 0:
                subprocess.run(["umount", "-l", str(m)], capture_output=True)

    request.addfinalizer(_teardown)
    return _mount


@pytest.fixture(scope="module")
def trace(tmp_path_factory) -> str:
    return busy_trace(tmp_path_factory.mktemp("trace"))


def _no_analysis(monkeypatch) -> None:
    import iowhy.analysis

    def boom(*a: Any, **k: Any) -> Any:
        raise AssertionError("the analysis ran before the output was checked")

    for name in ("analyze", "metric_values"):
        monkeypatch.setattr(iowhy.analysis, name, boom)


@pytest.mark.parametrize("args", [
    ["report", "{t}", "--html", "{o}.html"],
    ["compare", "{t}", "{t}", "--html", "{o}.html"],
    ["hist", "{t}", "--png", "{o}.png"],
])
def test_read_only_directory_refused_before_the_analysis(trace, tmp_path, mounts, monkeypatch,
                                                         capsys, args):
    from iowhy.cli import main
    ro = tmp_path / "ro"
    ro.mkdir()
    mounts("--bind", str(ro), str(ro))
    run(["mount", "-o", "remount,bind,ro", str(ro)])
    _no_analysis(monkeypatch)
    o = ro / "out"
    assert main([a.format(t=trace, o=o) for a in args]) == 1
    out = args[-1].format(o=o)
    one_line_error(capsys.readouterr().err,
                   f"iowhy: cannot write {out}: Read-only file system")
    assert os.listdir(ro) == []


@pytest.mark.parametrize("args", [
    ["report", "{t}", "--html", "{o}.html"],
    ["hist", "{t}", "--png", "{o}.png"],
])
def test_full_filesystem(trace, tmp_path, mounts, monkeypatch, capsys, args):
    from iowhy.cli import main
    (tmp_path / "full").mkdir()
    full = mounts("-t", "tmpfs", "-o", "size=8k,mode=0755", "tiny", str(tmp_path / "full"))
    o = full / "out"
    out = Path(args[-1].format(o=o))
    # room for the check, not for the output: the write fails after the analysis
    p = iowhy(*[a.format(t=trace, o=o) for a in args])
    assert p.returncode == 1
    one_line_error(p.stderr, f"iowhy: cannot write {out}: No space left on device")
    assert os.listdir(full) == []
    # a filesystem with no free block at all is refused before the analysis
    with open(full / "filler", "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 4096)
        except OSError:
            pass
    assert os.statvfs(full).f_bfree == 0
    _no_analysis(monkeypatch)
    assert main([a.format(t=trace, o=o) for a in args]) == 1
    one_line_error(capsys.readouterr().err,
                   f"iowhy: cannot write {out}: No space left on device")
    assert sorted(os.listdir(full)) == ["filler"]


@pytest.mark.parametrize("args", [
    ["report", "{t}", "--html", "{o}.html"],
    ["compare", "{t}", "{t}", "--html", "{o}.html"],
    ["hist", "{t}", "--png", "{o}.png"],
])
def test_sudo_user_owns_the_output(trace, tmp_path, root, args):
    need(os.geteuid() == 0, "needs root")
    o = tmp_path / "out"
    out = Path(args[-1].format(o=o))
    out.write_text("an older one, root's")
    env = dict(os.environ, SUDO_UID="4242", SUDO_GID="4343", SUDO_USER="someone")
    p = iowhy(*[a.format(t=trace, o=o) for a in args], env=env)
    assert p.returncode == 0, p.stderr
    st = out.stat()
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (4242, 4343, 0o600)
    # without sudo's variables the file is root's
    env = {k: v for k, v in os.environ.items() if not k.startswith("SUDO_")}
    p = iowhy(*[a.format(t=trace, o=o) for a in args], env=env)
    assert p.returncode == 0, p.stderr
    st = out.stat()
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (0, 0, 0o600)


# -- export, import, query -o ----------------------------------------------------------------

from test_outfile import EXPORTS, ftrace_capture  # noqa: E402


@pytest.mark.parametrize("args", EXPORTS)
def test_export_and_import_on_a_full_filesystem(trace, tmp_path, mounts, args):
    """A full disk under export, import or query -o: one line, exit 1, and nothing left
    on the full filesystem (no partial file under the output's name, no temporary)."""
    cap = ftrace_capture(tmp_path)
    (tmp_path / "full").mkdir()
    full = mounts("-t", "tmpfs", "-o", "size=16k,mode=0755", "tiny", str(tmp_path / "full"))
    o = full / "out"
    out = args[-1].format(o=o)
    p = iowhy(*[a.format(t=trace, o=o, c=cap) for a in args])
    assert p.returncode == 1, p.stderr
    lines = [x for x in p.stderr.splitlines() if not x.startswith("WARNING: ")]
    one_line_error("\n".join(lines), f"iowhy: cannot write {out}: No space left on device")
    assert os.listdir(full) == []


@pytest.mark.parametrize("args", EXPORTS + [
    ["export", "{t}", "--format", "parquet", "--dataset", "{o}"]])
def test_sudo_user_owns_exports_and_imports(trace, tmp_path, root, args):
    need(os.geteuid() == 0, "needs root")
    cap = ftrace_capture(tmp_path)
    o = tmp_path / "out"
    out = Path(args[-1].format(o=o))
    env = dict(os.environ, SUDO_UID="4242", SUDO_GID="4343", SUDO_USER="someone")
    p = iowhy(*[a.format(t=trace, o=o, c=cap) for a in args], env=env)
    assert p.returncode == 0, p.stderr
    for f in [out, *(out.rglob("*") if out.is_dir() else [])]:
        st = f.stat()
        mode = 0o700 if f.is_dir() else 0o600
        assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (4242, 4343, mode), f
