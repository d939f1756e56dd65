"""How outputs name a workload: its label (`--label`), else its command made short
(iowhy.cmdline); the answer before the metadata; the recording machine's paths only in
the metadata block."""

from __future__ import annotations

import json

import pytest

from htmlcheck import machine_paths, render
from iowhy import cmdline
from iowhy.analysis import analyze
from iowhy.cli import main
from iowhy.compare import compare
from iowhy.reports.compare_text import render_compare
from iowhy.reports.terminal import render_report
from iowhy.traceformat import read_trace
from tracebuilder import fsync, meta, off, req, write_trace

SCRATCH = "/var/tmp/lab/emudisk-3fk2x9/fs"
VENV = "/home/ci/checkout/.venv/lib/python3.11/site-packages"
TAR_CMD = ["sh", "-c",
           f"/usr/bin/python3 {VENV}/iowhy/lab/workloads.py untar {SCRATCH}/tree --files 20 "
           f"&& sync -f {SCRATCH}"]


@pytest.mark.parametrize("command, short", [
    (TAR_CMD, "sh -c 'python3 workloads.py untar <fs>/tree --files 20 && sync -f <fs>'"),
    (["/usr/bin/python3", "/home/me/load.py", "/data/a b", "-o", SCRATCH],
     "python3 load.py '/data/a b' -o <fs>"),
    (["dd", "if=/dev/zero", f"of={SCRATCH}/x", "oflag=dsync"],
     "dd if=/dev/zero of=<fs>/x oflag=dsync"),
    (["/usr/lib/postgresql/15/bin/postgres", "-D", "/var/lib/postgresql/15/main"],
     "postgres -D /var/lib/postgresql/15/main"),
    ("pgbench -c 4 -T 60", "pgbench -c 4 -T 60"),
    (["sh", "-c", "echo 'unbalanced"], "sh -c 'echo '\"'\"'unbalanced'"),
    ([], None),
])
def test_short_command(command, short):
    assert cmdline.short_command(command, ["/", SCRATCH, "/boot"]) == short


def test_deepest_mount_owns_a_path():
    mounts = ["/", "/srv", "/srv/db"]
    assert cmdline.short_command(["cp", "/srv/db/a", "/srv/b"], mounts) == "cp <db>/a <srv>/b"


def test_title_prefers_the_label():
    assert cmdline.title({"label": "nightly import", "command_short": "x"}) == "nightly import"
    assert cmdline.title({"command_short": "cp a b", "command": ["/bin/cp", "a", "b"]}) == \
        "cp a b"
    assert cmdline.title({"command": None, "pid": 42}) == "(attached process, pid 42)"


@pytest.mark.parametrize("label, ok", [
    ("wc-barrier: untar 2000 files, syncfs, rm -rf", True), ("", False), ("  ", False),
    ("x" * 121, False), ("a\tb", False), ("a\x1b[31mred", False)])
def test_check_label(label, ok):
    assert (cmdline.check_label(label) is None) == ok


def _trace(tmp_path, name, mount, label=None, command=None):
    m = meta()
    m["filesystems"][0]["mountpoint"] = mount
    if label is not None:
        m["label"] = label
    cmd = command or ["sh", "-c", f"/usr/bin/python3 {VENV}/w.py untar {mount}/tree && "
                                  f"sync -f {mount}"]
    return write_trace(tmp_path / f"{name}.iowt", command=cmd, meta_obj=m,
                       fsyncs=[fsync(100, 1010, 1090)],
                       requests=[req(1020, 1080, sector=50_000)],
                       offcpu=[off(100, 1010, 1090)])


def test_terminal_report_opens_with_the_answer(tmp_path):
    p = _trace(tmp_path, "a", SCRATCH, label="tar: untar 20 files, syncfs")
    r = analyze(read_trace(p))
    assert r["trace"]["label"] == "tar: untar 20 files, syncfs"
    assert r["trace"]["command_short"] == "sh -c 'python3 w.py untar <fs>/tree && sync -f <fs>'"
    lines = render_report(r).splitlines()
    assert lines[0] == "iowhy report  tar: untar 20 files, syncfs"
    where = next(i for i, ln in enumerate(lines) if ln.startswith("WHERE THE TIME WENT"))
    rec = lines.index("RECORDED")
    assert where < rec
    assert f"  trace       {p}" in lines[rec:rec + 3]
    assert "  label       tar: untar 20 files, syncfs" in lines


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> str:
    """The page of a labelled trace whose command names a scratch mount (for the two
    tests below: a page is drawn once)."""
    d = tmp_path_factory.mktemp("page")
    return render(_trace(d, "a", SCRATCH, label="tar: untar 20 files, syncfs"), d / "a.html")


def test_html_report_answer_first_and_paths_only_in_the_metadata(page):
    text = page
    h1 = text[text.index("<h1>"):text.index("</h1>")]
    assert "tar: untar 20 files, syncfs" in h1 and SCRATCH not in h1
    assert text.index('<section id="where"') < text.index('id="header"')
    assert text.index('<div id="problems"') < text.index('<section id="where"')
    # the exact command is kept, folded, in the metadata block
    assert f"{SCRATCH}/tree" in text[text.index('id="header"'):]
    assert machine_paths(text) == []


def test_html_checker_sees_a_path_outside_the_metadata(page):
    assert machine_paths(page) == []
    leaked = page.replace("</main>", f"<p title=\"{SCRATCH}\">x</p><p>in {SCRATCH}/y</p></main>")
    assert machine_paths(leaked) == [SCRATCH, f"{SCRATCH}/y"]


def test_same_workload_on_two_scratch_mounts_is_no_configuration_difference(tmp_path):
    a = _trace(tmp_path, "a", "/var/tmp/lab/emudisk-aaaa/fs")
    b = _trace(tmp_path, "b", "/var/tmp/lab/emudisk-bbbb/fs")
    ta, tb = read_trace(a), read_trace(b)
    c = compare(analyze(ta), analyze(tb), ta.meta, tb.meta)
    assert [d["key"] for d in c["config_differences"]] == []
    other = _trace(tmp_path, "c", "/var/tmp/lab/emudisk-cccc/fs",
                   command=["sh", "-c", "/usr/bin/python3 w.py untar-fsync /var/tmp/lab/"
                                        "emudisk-cccc/fs/tree"])
    tc = read_trace(other)
    c2 = compare(analyze(ta), analyze(tc), ta.meta, tc.meta)
    assert [d["key"] for d in c2["config_differences"]] == ["command"]
    text = render_compare(c2).splitlines()
    assert text[0].startswith("iowhy compare  A: sh -c 'python3 w.py untar <fs>/tree")
    assert text.index("WHAT CHANGED") < text.index("RUNS")


def test_a_label_too_long_in_a_trace_is_dropped_and_counted(tmp_path):
    p = _trace(tmp_path, "a", SCRATCH, label="x" * 500)
    tr = read_trace(p)
    r = analyze(tr)
    assert r["trace"]["label"] is None
    assert any("label" in q for q in tr.problems()), tr.problems()


@pytest.mark.parametrize("label", ["", "x" * 121, "a\nb"])
def test_record_refuses_a_bad_label_in_one_line(capsys, label):
    assert main(["record", "--label", label, "-o", "/nonexistent/x.iowt", "--", "true"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0].startswith("iowhy: --label: "), err
    assert "Traceback" not in "\n".join(err)


def test_report_json_has_the_label_and_short_command(tmp_path, capsys):
    p = _trace(tmp_path, "a", SCRATCH, label="tar: untar 20 files, syncfs")
    assert main(["report", p, "--json"]) == 0
    tr = json.loads(capsys.readouterr().out)["trace"]
    assert tr["label"] == "tar: untar 20 files, syncfs"
    assert tr["command"] == ["sh", "-c", f"/usr/bin/python3 {VENV}/w.py untar {SCRATCH}/tree "
                                         f"&& sync -f {SCRATCH}"]
    assert tr["command_short"].startswith("sh -c 'python3 w.py untar <fs>/tree")
