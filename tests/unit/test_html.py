"""The HTML report (`iowhy report --html`): self-contained, complete, escaped, and it
renders in a real browser (headless Chromium) without console errors.

Synthetic traces only (tracebuilder.py); a real recording's page is checked in
tests/system/test_html_real.py.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from htmlcheck import (FIG_IDS, assert_complete, assert_renders, assert_self_contained,
                       figures_of, problems_block, render)
from iowhy import abi
from iowhy.analysis import AnalysisConfig, analyze
from iowhy.reports import figures as F
from iowhy.reports import html as H
from iowhy.traceformat import read_trace
from tracebuilder import busy_trace, fsync, jev, meta, off, req, task, write_trace

EVIL = "<script>alert(1)</script>"
LOG0 = 10_000  # start of tracebuilder.LOG_RANGE: a journal write


# -- synthetic traces ------------------------------------------------------------------------

SCATTER_LIMIT = 600  # the sector scatter's points, made fewer than the busy trace's requests


@pytest.fixture(scope="module")
def lossy(tmp_path_factory):
    """A busy trace with events lost, and its page drawn twice with the sector scatter
    downsampled to SCATTER_LIMIT points: (trace, page, the page drawn again). Drawing a
    page takes about a second whatever the trace: the tests below share these two."""
    from iowhy.views import series
    d = tmp_path_factory.mktemp("lossy")
    p = busy_trace(d, counters={"lost_ringbuf_request": 12, "lost_rqmap_full": 1})
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(series, "SCATTER_LIMIT", SCATTER_LIMIT)
        mp.setattr(F, "SCATTER_LIMIT", SCATTER_LIMIT)
        return p, render(p, d / "r.html"), render(p, d / "r2.html")


def test_busy_trace_lossy(lossy):
    p, text, _ = lossy
    assert_self_contained(text)
    assert_complete(text)
    first = read_trace(p).problems()[0]
    assert first.startswith("13 events lost in the kernel")
    probs = problems_block(text)
    assert f"<p>{first}</p>" in probs
    # Every class with requests is a row of the table, every finding an item.
    r = analyze(read_trace(p))
    for name, c in r["requests"].items():
        if c["count"]:
            assert f"{name}</td><td class=\"num\">{c['count']:,}</td>" in text
    for f in r["findings"]:
        assert f"<li>{f['text']}</li>" in text


@pytest.fixture(scope="module")
def truncated(tmp_path_factory):
    """A busy trace without its trailer, and its page drawn with --no-placement: (trace,
    page). One page for the two tests below (placement and the trailer are apart)."""
    d = tmp_path_factory.mktemp("truncated")
    p = busy_trace(d, trailer=False)
    return p, render(p, d / "r.html", "--no-placement")


def test_truncated_trace_says_so_first(truncated):
    _, text = truncated
    assert_self_contained(text)
    assert_complete(text)
    probs = problems_block(text)
    first = re.search(r"<p>(.*?)</p>", probs)
    assert first and first.group(1).startswith("trace is truncated (no trailer")


def test_trace_text_is_escaped(tmp_path):
    m = meta()
    m["devices"][0]["name"] = "sd<b>z"
    m["filesystems"][0]["disk"] = "sd<b>z"
    m["filesystems"][0]["mountpoint"] = "/mnt/<img src=x onerror=alert(2)>"
    comm = b"<script>alert("
    tasks = [{**task(100, 1000), "comm": comm}]
    calls = [{**fsync(100, 1015, 1070, seq=7), "comm": comm}]
    p = write_trace(tmp_path / "evil.iowt", command=(EVIL, "-x"), tasks=tasks, fsyncs=calls,
                    requests=[req(1020, 1060, sector=50_000),
                              req(1061, 1068, sector=LOG0, iflags=abi.F_META, flags=0)],
                    journal=[jev(abi.J_JBD2_START, 1040, 7), jev(abi.J_JBD2_END, 1069, 7)],
                    offcpu=[off(100, 1015, 1070)], meta_obj=m)
    text = render(p, tmp_path / "evil.html")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text  # the command line
    assert "<th>tasks</th><td>&lt;script&gt;alert(</td>" in text  # the task comm
    assert "<script" not in text.lower()
    assert "sd&lt;b&gt;z" in text and "sd<b>z" not in text
    assert "&lt;img src=x onerror=alert(2)&gt;" in text and "<img src=x" not in text
    assert_self_contained(text)
    assert_complete(text)


def test_empty_trace_renders(tmp_path):
    # No request, no call, no commit: every section and figure says so instead of failing.
    p = write_trace(tmp_path / "empty.iowt", offcpu=[off(100, 1010, 1090)])
    text = render(p, tmp_path / "e.html")
    assert_self_contained(text)
    for fid in FIG_IDS:
        assert f'<figure id="{fid}">' in text
    assert "No block requests in the trace." in text
    assert "No fsync-family calls." in text


def test_sector_scatter_downsampled_deterministically(lossy, monkeypatch):
    p, text, again = lossy
    from iowhy.views import series
    tr = read_trace(p)
    full = analyze(tr, AnalysisConfig(figures=True))["_figures"]
    monkeypatch.setattr(series, "SCATTER_LIMIT", SCATTER_LIMIT)
    monkeypatch.setattr(F, "SCATTER_LIMIT", SCATTER_LIMIT)
    d1 = analyze(tr, AnalysisConfig(figures=True))["_figures"]
    d2 = analyze(read_trace(p), AnalysisConfig(figures=True))["_figures"]
    assert d1.scatters and sum(len(s.t_s) for s in d1.scatters) <= SCATTER_LIMIT
    for a, b, whole in zip(d1.scatters, d2.scatters, full.scatters):
        assert a.total == whole.total == len(whole.t_s) > len(a.t_s)
        assert np.array_equal(a.t_s, b.t_s) and np.array_equal(a.sector, b.sector)
        # A sample of the requests themselves, each with its own class.
        every = set(zip(whole.t_s.tolist(), whole.sector.tolist(), whole.cls.tolist()))
        assert set(zip(a.t_s.tolist(), a.sector.tolist(), a.cls.tolist())) <= every
    assert "Downsampled: " in text and "a fixed-seed random sample" in text
    assert text == again  # the same page on every run


def test_figure_data_matches_the_analysis(tmp_path):
    p = busy_trace(tmp_path)
    tr = read_trace(p)
    r = analyze(tr, AnalysisConfig(figures=True))
    d = r["_figures"]
    for name, c in r["requests"].items():
        h = d.latency_hist_us.get(name)
        mx = c["device_ns"]["max"]
        if mx is None:
            assert not h
            continue
        # The largest latency lands in the last log2 slot of the histogram.
        assert len(h) - 1 == int(np.floor(np.log2(max(mx // 1000, 1))))
    assert d.seek_hist == {k: v["seek_hist_log2"] for k, v in r["placement"].items()}
    # Without placement in the result the seeks come from the stages: the same histograms.
    r2 = analyze(tr, AnalysisConfig(placement=False, locality=False, figures=True))
    assert r2["placement"] == {}
    assert r2["_figures"].seek_hist == d.seek_hist
    assert len(d.calls_tid) == r["fsync"]["count"]
    assert d.tasks and all(isinstance(v, str) for v in d.tasks.values())


def test_no_placement_and_result_only(truncated):
    p, text = truncated
    assert_complete(text)
    assert "Placement not computed" in text
    # Without the trace, the figures the result alone gives are drawn, the others explained.
    r = analyze(read_trace(p))
    only = H.render_html(r)
    assert "fig-attribution" in figures_of(only)
    for fid in FIG_IDS[1:]:
        assert f'<figure id="{fid}">' in only and "needs the trace" in only


def test_compare_page_reuses_sections(tmp_path):
    from iowhy.cli import main
    pa = busy_trace(tmp_path)
    (tmp_path / "b").mkdir()
    pb = busy_trace(tmp_path / "b", n=2000, trailer=False)
    out = tmp_path / "c.html"
    assert main(["compare", pa, pb, "--html", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    assert_self_contained(text)
    assert "fig-attribution" in figures_of(text)
    assert 'id="compare-text"' in text and "WHAT CHANGED" in text
    assert 'id="table-where-compare"' in text and 'id="comparison"' in text
    for side in ("a", "b"):
        for sec in ("classes", "fsync", "devices", "findings"):
            assert f'<section id="{side}-{sec}">' in text
    assert "trace is truncated" in text  # B's problems are shown
    ids = re.findall(r'\bid="([^"]+)"', text)
    assert len(ids) == len(set(ids))
    # A comparison the text renderer cannot read still gives a page, escaped.
    a = analyze(read_trace(pa))
    odd = H.render_compare_html(a, a, {"note": EVIL})
    assert_self_contained(odd)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in odd
    assert "could not be rendered" in odd


# -- in a browser (slow: headless Chromium; `--slow` runs them) --------------------------------

@pytest.mark.slow
def test_chromium_synthetic(tmp_path):
    p = busy_trace(tmp_path, counters={"lost_ringbuf_request": 3})
    out = tmp_path / "busy.html"
    render(p, out)
    assert_renders(out, tmp_path)


@pytest.mark.slow
def test_chromium_escaped_page(tmp_path):
    m = meta()
    tasks = [{**task(100, 1000), "comm": b"<script>alert("}]
    p = write_trace(tmp_path / "evil.iowt", command=(EVIL,), tasks=tasks, meta_obj=m,
                    requests=[req(1020, 1060, sector=50_000)], offcpu=[off(100, 1015, 1070)])
    out = tmp_path / "evil.html"
    render(p, out)
    assert_renders(out, tmp_path)


def test_hostile_names_are_drawn_and_escaped(tmp_path):
    """A device name that is not UTF-8 (a lone surrogate once read) is drawn in the
    figures' legends (matplotlib cannot draw a surrogate) and a cgroup path with an ESC
    sequence is shown escaped in the page (`--by cgroup`)."""
    from damaged_traces import hostile_names_trace
    from htmlcheck import render
    text = render(hostile_names_trace(tmp_path / "t.iowt"), tmp_path / "t.html",
                  "--by", "cgroup")
    assert "\x1b" not in text and "/x^[]0;pwned^G/\\xff" in text
