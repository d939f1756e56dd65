"""The categories are declared once (iowhy/categories.py): the causal engine's indices
agree with the registry's code order, every list the views, reports, exports and tests
show is the registry's, and a row added to the registry appears in the terminal report,
the HTML page, the figures and `compare` without another edit."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
import pytest

from iowhy import abi, categories, compare, top
from iowhy.categories import (ATTRIBUTION_CATEGORIES, CORRELATIONAL, DEVICE_CATEGORIES,
                              PART_NAMES, Category)
from iowhy.export import schema
from iowhy.model import classify, wakeups
from iowhy.reports import figures, html, terminal
from iowhy.views import workload
from tracebuilder import CATS, CAUSAL_CATS, LOG_RANGE, off, req, run, write_trace

REPO = Path(__file__).resolve().parents[2]


def test_rows_are_consistent():
    one, two = categories.level_one(), categories.level_two()
    assert len(one) + len(two) == len(categories.CATEGORIES)
    assert len({c.name for c in one}) == len(one) and len({c.name for c in two}) == len(two)
    assert sorted(c.display for c in one) == list(range(len(one)))  # a total order
    assert all(re.fullmatch(r"#[0-9A-F]{6}", c.colour) for c in one)
    assert len({c.colour for c in one}) == len(one)
    names = {c.name for c in one}
    assert all(c.parent in names and c.words for c in two)
    parts = {c.name: c for c in two}
    for c in one:  # a level one's own part counts toward it by itself
        assert c.own is None or parts[c.own].parent == c.name
    by_whose = {c.name for c in two if c.parent in categories.BY_WHOSE}
    assert {c.name for c in two if c.whose} <= by_whose
    assert len(set(categories.TOP_SHORT.values())) == len(categories.TOP_SHORT)


def test_engine_indices_follow_the_code_order():
    """model/wakeups.py's constants are the registry's code order: level one's `L_*`
    indices, the kinds (KIND_NAMES), each kind's own level one (NATURAL_L1), and the
    device kinds (BARRIER + classify.CATEGORY_OF_CLASS)."""
    assert wakeups.CAUSAL_CATEGORIES == ATTRIBUTION_CATEGORIES
    assert wakeups.KIND_NAMES == PART_NAMES
    idx = {k: i for i, k in enumerate(ATTRIBUTION_CATEGORIES)}
    parent = [idx[c.parent] for c in categories.level_two()]  # type: ignore[index]
    assert wakeups.NATURAL_L1.tolist() == parent
    for name, value in (("cpu", wakeups.L_CPU), ("runqueue", wakeups.L_RUNQ),
                        ("barrier", wakeups.L_BARRIER), ("log", wakeups.L_LOG),
                        ("metadata", wakeups.L_METADATA), ("data", wakeups.L_DATA),
                        ("read", wakeups.L_READ), ("throttle", wakeups.L_THROTTLE),
                        ("helper-cpu", wakeups.L_HCPU), ("helper-runqueue", wakeups.L_HRUNQ),
                        ("sleep", wakeups.L_SLEEP), ("external", wakeups.L_EXTERNAL),
                        ("wait-other", wakeups.L_OTHER)):
        assert idx[name] == value, name
    assert classify.CATEGORIES == DEVICE_CATEGORIES
    dev = [ATTRIBUTION_CATEGORIES[wakeups.DEVICE_CAT0 + int(k)]
           for k in np.unique(classify.CATEGORY_OF_CLASS)]
    assert dev == list(DEVICE_CATEGORIES)


def test_every_list_is_the_registry_s():
    assert CAUSAL_CATS == ATTRIBUTION_CATEGORIES and CATS == CORRELATIONAL
    assert workload.WORKLOAD_CATEGORIES == CORRELATIONAL
    assert top.CAUSES == tuple(c for c in ATTRIBUTION_CATEGORIES if c in top.SHORT)
    assert schema.CATEGORY_COLUMNS == tuple(f"{k.replace('-', '_')}_ns"
                                            for k in ATTRIBUTION_CATEGORIES)
    assert all(f"`{k}`" in schema.schema_doc() for k in PART_NAMES)
    assert set(categories.colours()) == set(categories.display_order()) \
        == set(ATTRIBUTION_CATEGORIES)


def test_docs_list_the_categories():
    """docs/report-json.md names level one in code order, and every part of level two;
    README.md's WHERE THE TIME WENT names every level one."""
    doc = " ".join((REPO / "docs" / "report-json.md").read_text(encoding="utf-8").split())
    assert ", ".join(f"`{k}`" for k in ATTRIBUTION_CATEGORIES) in doc
    two = doc.split("**Level two**", 1)[1].split("How a wait gets its level one", 1)[0]
    assert all(f"`{k}`" in two for k in PART_NAMES)
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    where = readme.split("**WHERE THE TIME WENT.**", 1)[1].split("Under each category", 1)[0]
    assert [k for k in ATTRIBUTION_CATEGORIES if f"`{k}`" not in where] == []


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    """A causal result with time in five categories (test_causal_attribution.py's
    test_request_link_per_class: waits on a data write, a log write, a read and a
    flush, 10 ns each; the rest, 60 ns, on CPU)."""
    tmp = tmp_path_factory.mktemp("cats")
    reqs = [req(1005, 1020, sector=50_000, seq=1),
            req(1025, 1040, sector=LOG_RANGE[0] + 8, iflags=abi.F_META | abi.F_SYNC, seq=2),
            req(1045, 1060, op=abi.OP_READ, sector=70_000, seq=3),
            req(1065, 1080, op=abi.OP_FLUSH, seq=4)]
    h, k = abi.WCTX_HARDIRQ, abi.WCTX_SOFTIRQ
    offs = [off(100, 1010, 1020, waker=0, ctx=h, rq_seq=1, syscall=1),
            off(100, 1030, 1040, waker=0, ctx=h, rq_seq=2, syscall=74),
            off(100, 1050, 1060, waker=0, ctx=h, rq_seq=3, syscall=0),
            off(100, 1070, 1080, waker=0, ctx=k, rq_seq=4, syscall=74)]
    r = run(write_trace(tmp / "t.iowt", requests=reqs, offcpu=offs))
    assert {k: v for k, v in r["attribution_ns"].items() if v} == {
        "cpu": 60, "data": 10, "log": 10, "read": 10, "barrier": 10}
    return r


def _lines_order(lines: list[str], names) -> list[str]:
    heads = [ln.split()[0] for ln in lines if ln.startswith("  ") and not ln.startswith("   ")]
    return [h for h in heads if h in names]


def test_reports_show_the_registry_s_order(result):
    present = [k for k in categories.display_order() if k in result["attribution_ns"]]
    assert _lines_order(terminal._bars(result["attribution_ns"], result["elapsed_ns"]),
                        present) == present
    assert [str(r[0]) for r in html.where_rows(result)] == \
        [str(html._label(k, categories.colours()[k])) for k in present]
    c = compare.compare(result, result)
    assert list(c["delta_ns"]) == present
    assert [r["label"] for r in c["rows"] if r["key"].startswith("attribution_ns.")] == present


def test_a_row_added_to_the_registry_appears_everywhere(result, monkeypatch):
    """A copy of the registry with one more level one, shown third: the terminal bars,
    the HTML table, the figures and compare show it there, in its colour."""
    rows = [dataclasses.replace(c, display=2 * c.display) if c.level == 1 else c
            for c in categories.CATEGORIES]
    new = Category("journal-wait", 1, "a test category", display=3, colour="#123456")
    monkeypatch.setattr(categories, "CATEGORIES", (*rows, new))
    order = categories.display_order()
    assert order[:3] == ("barrier", "log", "journal-wait")
    a = dict(result, attribution_ns={**result["attribution_ns"], "journal-wait": 0})
    b = dict(result, attribution_ns={**result["attribution_ns"], "journal-wait": 7},
             elapsed_ns=result["elapsed_ns"] + 7)
    present = [k for k in order if k in b["attribution_ns"]]
    assert _lines_order(terminal._bars(b["attribution_ns"], b["elapsed_ns"]),
                        present) == present
    labels = [str(r[0]) for r in html.where_rows(b)]
    assert labels == [str(html._label(k, categories.colours()[k])) for k in present]
    assert "#123456" in labels[present.index("journal-wait")]
    c = compare.compare(a, b)
    assert list(c["delta_ns"]) == present and c["delta_ns"]["journal-wait"] == 7
    assert any(e.get("category") == "journal-wait" for e in c["explanations"])
    assert figures.attribution_figure([("B", b)])[:8] == b"\x89PNG\r\n\x1a\n"
