"""The HTML report of a real recording: self-contained, complete, naming the workload
and its devices, and drawn by headless Chromium.

The recording is out/untar-xfs.iowt (`make demo`) when it is present, else a small untar
recorded by the test itself (root and BPF).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import REPO, run
from htmlcheck import assert_complete, assert_renders, assert_self_contained, problems_block, render
from iowhy.analysis import analyze
from iowhy.traceformat import read_trace

REAL = REPO / "out" / "untar-xfs.iowt"


# -- the real recording ----------------------------------------------------------------------

@pytest.fixture
def real_trace(request, tmp_path) -> Path:
    """`make demo`'s recording when it is there; else GNU tar extracting 300 kernel files
    onto XFS on a loop device, then syncfs, recorded now (needs root and BPF)."""
    if REAL.exists():
        return REAL
    request.getfixturevalue("bpf")
    make_fs = request.getfixturevalue("make_fs")
    iowhy_bin = request.getfixturevalue("iowhy_bin")
    tar = run(["/usr/bin/python3", str(REPO / "lab" / "workloads.py"), "prepare",
               "--files", "300"]).stdout.strip().splitlines()[-1]
    _loop, mnt = make_fs("xfs")
    out = tmp_path / "untar-xfs.iowt"
    # syncfs: the extracted files' writeback happens inside the recording (coloured figures)
    run([*iowhy_bin, "record", "-q", "-o", str(out), "--", "sh", "-c",
         f'tar -xf "{tar}" -C "{mnt}" && sync -f "{mnt}"'])
    return out


@pytest.fixture
def real_html(real_trace, tmp_path) -> Path:
    out = tmp_path / "untar-xfs.html"
    render(real_trace, out)
    return out


def test_real_trace(real_trace, real_html):
    text = real_html.read_text(encoding="utf-8")
    assert_self_contained(text)
    assert_complete(text)
    tr = read_trace(str(real_trace))
    probs = problems_block(text)
    if tr.problems():
        assert f"<p>{tr.problems()[0]}</p>" in probs
    else:
        assert "No events lost, trace complete." in probs
    r = analyze(tr)
    import html
    from iowhy.reports.fmt import command_text, short_command
    # the workload row: its short form in view, the command as recorded folded inside
    row = text.split("<th>workload</th><td>", 1)[1].split("</td>", 1)[0]
    assert f"<summary><code>{html.escape(short_command(r))}</code></summary>" in row
    assert f"<code>{html.escape(command_text(r))}</code>" in row
    for dev in r["workload"]["devices"]:
        assert f"<td>{html.escape(dev)}</td>" in text  # a row of the device table


def test_chromium_real_trace(real_html, tmp_path):
    assert_renders(real_html, tmp_path)
