"""`make install DESTDIR=... PREFIX=/usr/local` and `make uninstall`, then the installed
command used as a user would: `iowhy --version`, `man -l` of its page, `record --dry-run`
(probes loaded by the installed recorder), a report read with the installed numpy.

The launcher finds the package and the recorder from its own path, so under DESTDIR it
runs exactly the code a real install runs: nothing is overridden for the test. It runs
with an empty environment but PATH, as `sudo` (secure_path) would start it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))
from conftest import need  # noqa: E402

PREFIX = "/usr/local"
FILES = ["bin/iowhy", "libexec/iowhy/iowhy-record", "libexec/iowhy/emudisk",
         "share/man/man1/iowhy.1", "share/bash-completion/completions/iowhy",
         "share/zsh/site-functions/_iowhy"]


def make(*args: str) -> subprocess.CompletedProcess:
    p = subprocess.run(["make", "-C", str(REPO), "--no-print-directory", *args],
                       capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, f"make {' '.join(args)}: {p.stdout[-2000:]}{p.stderr[-2000:]}"
    return p


@pytest.fixture(scope="module")
def dest(tmp_path_factory, request):
    need(os.geteuid() == 0, "needs root")
    d = tmp_path_factory.mktemp("destdir")
    make("install", f"DESTDIR={d}", f"PREFIX={PREFIX}")
    request.addfinalizer(lambda: subprocess.run(
        ["make", "-C", str(REPO), "--no-print-directory", "uninstall", f"DESTDIR={d}",
         f"PREFIX={PREFIX}"], capture_output=True))
    return d


def env_for(dest: Path) -> dict[str, str]:
    # what sudo leaves: no IOWHY_*, no PYTHONPATH, no virtualenv; the DESTDIR bin first
    return {"PATH": f"{dest}{PREFIX}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:"
                    "/sbin:/bin", "LANG": "C.UTF-8", "HOME": "/root"}


def run(cmd, dest: Path, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, env=env_for(dest),
                          cwd=kw.pop("cwd", "/"), timeout=kw.pop("timeout", 120), **kw)


def test_installed_files(dest):
    root = dest / PREFIX.lstrip("/")
    for f in FILES:
        assert (root / f).is_file(), f
    assert os.access(root / "bin/iowhy", os.X_OK)
    assert (root / "libexec/iowhy/iowhy-record").stat().st_mode & 0o777 == 0o755
    pkg = root / "lib/iowhy/python"
    for mod in ("iowhy/cli.py", "iowhy/syscall_table.py", "iowhy/reports", "iowhy/lab",
                "numpy", "matplotlib"):
        assert (pkg / mod).exists(), mod
    # no path of the staging directory in any installed text file
    leaked = subprocess.run(["grep", "-rlI", "--", str(dest), str(root)],
                            capture_output=True, text=True).stdout.split()
    assert leaked == []


def test_version_through_path(dest):
    p = run(["iowhy", "--version"], dest)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == f"iowhy {version()}"
    # it is the staged launcher that ran, with the Python the install was built for
    p = run(["sh", "-c", "command -v iowhy"], dest)
    assert p.stdout.strip() == f"{dest}{PREFIX}/bin/iowhy"


def version() -> str:
    text = (REPO / "analyzer/iowhy/__init__.py").read_text()
    return text.split('__version__ = "')[1].split('"')[0]


def test_man_page_renders(dest):
    need(subprocess.run(["sh", "-c", "command -v man && command -v groff"],
                        capture_output=True).returncode == 0, "needs man-db and groff-base")
    page = dest / PREFIX.lstrip("/") / "share/man/man1/iowhy.1"
    p = run(["man", "--warnings", "-l", str(page)], dest)
    assert p.returncode == 0 and p.stderr == "", p.stderr
    assert "iowhy record" in p.stdout and "OVERHEAD" in p.stdout
    # MANPATH lookup as `man iowhy` does it on a real install
    p = run(["man", "-M", f"{dest}{PREFIX}/share/man", "-w", "iowhy"], dest)
    assert p.stdout.strip() == str(page)


def test_report_with_the_installed_python_packages(dest, tmp_path):
    """The analysis (numpy) and a PNG (matplotlib) from the install, not the checkout."""
    sys.path.insert(0, str(REPO / "tests" / "unit"))
    from test_syscalls import _trace
    trace = _trace(tmp_path / "t.iowt", "x86_64")
    p = run(["iowhy", "info", "--json", trace], dest)
    assert p.returncode == 0, p.stderr
    assert '"name": "rename"' in p.stdout
    probe = ("import numpy, matplotlib, iowhy; print(numpy.__file__); "
             "print(matplotlib.__file__); print(iowhy.__file__)")
    launcher = dest / PREFIX.lstrip("/") / "bin/iowhy"
    text = launcher.read_text()
    p = run(["sh", "-c", text.replace('-m iowhy "$@"', f'-c "{probe}"'), str(launcher)], dest)
    assert p.returncode == 0, p.stderr
    for line in p.stdout.split():
        assert line.startswith(f"{dest}{PREFIX}/lib/iowhy/python/"), line


def test_export_and_query_with_the_installed_launcher(dest, tmp_path):
    """`make install` puts pyarrow, duckdb and perfetto into its private tree (EXTRAS
    defaults to export): the installed launcher exports a trace, adds it to a dataset
    and queries both with them, and they come from that tree."""
    sys.path.insert(0, str(REPO / "tests" / "unit"))
    from synth_runs import synth_run
    s = synth_run(tmp_path / "r.iowt", n_fsync=6, n_reads=3)
    for args in (["--format", "parquet", "-o", str(tmp_path / "pq")],
                 ["--format", "parquet", "--dataset", str(tmp_path / "ds")],
                 ["--format", "perfetto", "-o", str(tmp_path / "t.pftrace")]):
        p = run(["iowhy", "export", s.path, *args], dest)
        assert p.returncode == 0, p.stderr
    sql = "SELECT class, count(*) AS n FROM requests WHERE counted GROUP BY class ORDER BY class"
    from iowhy.analysis import AnalysisConfig, analyze
    from iowhy.traceformat import read_trace
    r = analyze(read_trace(s.path), AnalysisConfig())
    want = {c: v["count"] for c, v in r["requests"].items() if v["count"]}
    for where in ("pq", "ds"):
        p = run(["iowhy", "query", sql, str(tmp_path / where), "--csv"], dest)
        assert p.returncode == 0, p.stderr
        rows = [line.split(",") for line in p.stdout.splitlines()[1:]]
        assert {c: int(n) for c, n in rows} == want, where
    pkg = dest / PREFIX.lstrip("/") / "lib/iowhy/python"
    probe = ("import pyarrow, duckdb, perfetto; print(pyarrow.__file__); "
             "print(duckdb.__file__); print(perfetto.__file__)")
    launcher = dest / PREFIX.lstrip("/") / "bin/iowhy"
    p = run(["sh", "-c", launcher.read_text().replace('-m iowhy "$@"', f'-c "{probe}"'),
             str(launcher)], dest)
    assert p.returncode == 0, p.stderr
    for line in p.stdout.split():
        assert line.startswith(f"{pkg}/"), line


def test_install_without_extras_says_how_to_add_them(tmp_path):
    """`make install EXTRAS=` installs no export packages; export then says in one line
    how to add them to that install (pip cannot reach its tree)."""
    need(os.geteuid() == 0, "needs root")
    d = tmp_path / "destdir"
    make("install", f"DESTDIR={d}", f"PREFIX={PREFIX}", "EXTRAS=")
    try:
        assert not (d / PREFIX.lstrip("/") / "lib/iowhy/python/pyarrow").exists()
        sys.path.insert(0, str(REPO / "tests" / "unit"))
        from synth_runs import synth_run
        s = synth_run(tmp_path / "r.iowt", n_fsync=2, n_reads=0)
        p = run(["iowhy", "export", s.path, "--format", "parquet", "-o",
                 str(tmp_path / "pq")], d)
        assert p.returncode == 1 and p.stderr.count("\n") == 1, p.stderr
        assert p.stderr.startswith("iowhy: this needs the Python package pyarrow")
        assert "make install" in p.stderr and "EXTRAS=export" in p.stderr
        assert not (tmp_path / "pq").exists()
    finally:
        make("uninstall", f"DESTDIR={d}", f"PREFIX={PREFIX}")


def test_record_dry_run_through_the_launcher(dest, bpf):
    """`record --dry-run` loads and attaches every probe with the installed recorder: the
    package alone (PYTHONPATH, no launcher) cannot find one, which shows that the
    launcher's pointer is what finds it."""
    assert not Path("/usr/libexec/iowhy/iowhy-record").exists(), \
        "a system-wide recorder would hide what this test checks"
    pylib = f"{dest}{PREFIX}/lib/iowhy/python"
    script = ("mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing"
              " && iowhy record --dry-run; echo \"launcher=$?\";"
              f" PYTHONPATH={pylib} /usr/bin/python3 -m iowhy record --dry-run;"
              " echo \"bare=$?\"")
    p = run(["unshare", "-m", "--propagation", "private", "bash", "-c", script], dest,
            timeout=300)
    assert "launcher=0" in p.stdout, p.stdout + p.stderr
    assert "attached" in p.stdout + p.stderr
    assert "bare=1" in p.stdout, p.stdout + p.stderr
    lines = [x for x in p.stderr.splitlines() if x.startswith("iowhy:")]
    assert lines == ["iowhy: the recorder iowhy-record is not installed (run `make install` "
                     "from the iowhy source, or `make` there and set IOWHY_RECORDER to its "
                     "probes/iowhy-record)"], p.stderr


def test_uninstall_leaves_nothing(tmp_path):
    need(os.geteuid() == 0, "needs root")
    d = tmp_path / "destdir"
    make("install", f"DESTDIR={d}", f"PREFIX={PREFIX}")
    assert (d / PREFIX.lstrip("/") / "bin/iowhy").is_file()
    make("uninstall", f"DESTDIR={d}", f"PREFIX={PREFIX}")
    left = [str(p.relative_to(d)) for p in d.rglob("*") if not p.is_dir() or p.name == "iowhy"]
    assert left == []
    # only the standard directories install -D made remain, all empty
    assert {str(p.relative_to(d)) for p in d.rglob("*")} <= {
        "usr", "usr/local", "usr/local/bin", "usr/local/lib", "usr/local/libexec",
        "usr/local/share", "usr/local/share/man", "usr/local/share/man/man1",
        "usr/local/share/bash-completion", "usr/local/share/bash-completion/completions",
        "usr/local/share/zsh", "usr/local/share/zsh/site-functions"}
