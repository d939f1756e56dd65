"""Every text output of report, compare, hist, requests and info on the golden traces
fits 100 columns, and every column label naming a time or a size carries its unit
(`lat (us)`, `seek p50 (sectors)`, `MiB`), with a space before it."""

from __future__ import annotations

import contextlib
import io
import re

import pytest

import golden_traces as gt
import tracebuilder as tb
from iowhy.categories import ATTRIBUTION_CATEGORIES
from iowhy.cli import main

# The big traces take a while to build; their outputs have the same layout.
NAMES = [n for n in gt.TRACES if not n.startswith("big")]
PAIRS = [p for p in gt.COMPARE_PAIRS if not any(x.startswith("big") for x in p)]
HIST_EXTRA = (["-D"], ["--flags"], ["-D", "--metric", "seek"], ["--flags", "--class", "data"])

# Words that make a label name a time or a size.
MEASURE = re.compile(r"\b(p50|p90|p99|max|mean|queue|device|latency|lat|time|seek|positioning|"
                     r"elapsed|duration|bytes|size|written|logged|cpu|cost|total|per run)\b")
# ... and, in compare's rows, the attribution categories (`barrier (us)`).
CATEGORY = re.compile("^(" + "|".join(map(re.escape, ATTRIBUTION_CATEGORIES)) + ")$")
UNIT = re.compile(r" \((ns|us|ms|s|sectors|bytes|KiB|MiB|GiB|%|count)\)")
BARE_UNITS = {"MiB", "KiB", "GiB", "bytes", "sectors", "usecs", "nsecs", "msecs"}


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    d = tmp_path_factory.mktemp("widths")
    gt.build(d, NAMES)
    return d


def run(argv):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(argv)
    return rc, out.getvalue()


def all_outputs(d):
    for n in NAMES:
        t = str(d / f"{n}.iowt")
        yield f"report {n}", run(["report", t])
        yield f"report --unit ms {n}", run(["report", "--unit", "ms", t])
        yield f"info {n}", run(["info", t])
        yield f"requests {n}", run(["requests", t])
        for args in [*gt.HIST_ARGS, *HIST_EXTRA]:
            yield f"hist {' '.join(args)} {n}", run(["hist", *args, t])
    for a, b in PAIRS:
        yield f"compare {a} {b}", run(["compare", str(d / f"{a}.iowt"), str(d / f"{b}.iowt")])


def header_cells(line):
    """The cells of a table header line (cells are separated by 2+ spaces, none starts
    with a digit), else None."""
    cells = [c for c in re.split(r"\s{2,}", line.strip()) if c]
    if len(cells) < 4 or any(c[0].isdigit() or c[0] in "-+." for c in cells):
        return None
    return cells


def bad_labels(text):
    bad = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        cells = header_cells(line)
        # A table's header is followed by a row of figures (a digit or "-" in a cell).
        if not cells or i + 1 >= len(lines) or not re.search(r"\d", lines[i + 1]):
            continue
        for c in cells:
            if c in BARE_UNITS or not MEASURE.search(c):
                continue
            if not UNIT.search(c):
                bad.append(c)
    # compare's side-by-side rows: a label, then figures
    side = text.split("SIDE BY SIDE", 1)
    if len(side) == 2:
        for line in side[1].splitlines()[1:]:
            m = re.match(r"    (\S.*?)\s{2,}[-+\d]", line)
            if not m:
                continue
            lab = m.group(1)
            if (MEASURE.search(lab) or CATEGORY.match(lab)) and not UNIT.search(lab) \
                    and "ratio" not in lab:
                bad.append(lab)
    return bad


def test_every_text_output_fits_and_names_its_units(traces):
    seen = 0
    for what, (rc, text) in all_outputs(traces):
        if rc != 0:
            continue  # a hist with nothing to draw prints nothing
        seen += 1
        long = [ln for ln in text.splitlines() if len(ln) > 100]
        assert not long, f"{what}: {len(long[0])} columns: {long[0]!r}"
        assert not bad_labels(text), f"{what}: labels without a unit {bad_labels(text)}"
        # never a unit glued to its label: `time(s)`
        # (`thread(s)` is a plural, not a unit)
        assert not re.search(r"[a-z]\((ns|us|ms|sectors|MiB|KiB|GiB|count)\)"
                             r"|(time|duration)\(s\)", text), what
    assert seen > 100


def test_the_label_check_catches_a_missing_unit():
    table = ("  class      count     MiB        p50        p99   queue p50\n"
             "  data           1     0.0      0.015      0.015           0\n")
    assert bad_labels(table) == ["p50", "p99", "queue p50"]
    side = ("SIDE BY SIDE   A   B\n  section\n    elapsed            100       225\n"
            "    barrier            100       225\n    barrier (us)       100       225\n")
    assert bad_labels(side) == ["elapsed", "barrier"]


def test_requests_fit_with_long_names(tmp_path):
    rows = [dict(tb.req(1_500_000, 2_500_000 + i, sector=10**11 + i, tid=4_000_000 + i),
                 comm=b"a-very-long-nam", tgid=4_000_000 + i) for i in range(3)]
    t = tb.write_trace(tmp_path / "w.iowt", start=1_000_000, end=30_000_000_000,
                       requests=rows, fsyncs=[tb.fsync(4_000_000, 1_000_000, 3_000_000)])
    rc, text = run(["requests", t])
    assert rc == 0
    assert max(len(ln) for ln in text.splitlines()) <= 100
    rc, text = run(["requests", "--unit", "ns", t])
    assert max(len(ln) for ln in text.splitlines()) <= 100


def test_html_table_labels_name_their_units(traces, tmp_path):
    import html as h
    pages = []
    for argv in (["report", "--html", str(tmp_path / "r.html"), str(traces / "seeks.iowt")],
                 ["compare", "--html", str(tmp_path / "c.html"), str(traces / "pair_a.iowt"),
                  str(traces / "pair_b.iowt")]):
        rc, _ = run(argv)
        assert rc == 0
        pages.append(open(argv[2], encoding="utf-8").read())
    checked = 0
    for page in pages:
        for tid in ("table-classes", "table-placement", "table-where-compare"):
            if f'id="{tid}"' not in page:
                continue
            head = page.split(f'id="{tid}"', 1)[1].split("</thead>", 1)[0]
            for th in re.findall(r"<th[^>]*>(.*?)</th>", head):
                lab = h.unescape(re.sub(r"<[^>]+>", "", th))
                checked += 1
                if lab == "with a seek":  # a count of requests
                    continue
                if MEASURE.search(lab) or lab in ("A", "B", "B - A"):
                    assert UNIT.search(lab), f"{tid}: {lab!r} has no unit"
    assert checked >= 20
