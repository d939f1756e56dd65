"""reports/figures.py: the figures' labels and axis texts, the colour of every class,
and one figure drawn: a PNG of the size asked for."""

from __future__ import annotations

import struct

from iowhy.names import CLASS_NAMES
from iowhy.reports import figures as FIG


def test_every_class_and_call_has_a_colour():
    assert set(FIG.CLASS_COLORS) == set(CLASS_NAMES)
    assert len(set(FIG.CLASS_COLORS.values())) == len(CLASS_NAMES)
    assert {"fsync", "fdatasync", "sync", "syncfs"} <= set(FIG.CALL_COLORS)


def test_text_from_the_trace_is_literal():
    assert FIG.mpl_text("cost $5 a\\b") == "cost \\$5 a\\\\b"
    assert "\x1b" not in FIG.mpl_text("a\x1b[0m")


def test_axis_and_label_texts():
    assert [FIG._si(x) for x in (0, 512, 4000, 1_500_000, 2e9, -3000)] == \
        ["0", "512", "4k", "1.5M", "2G", "-3k"]
    assert [FIG._dur(x) for x in (500, 850_000, 5_030_000, 1.4e9)] == \
        ["500 ns", "850 us", "5.03 ms", "1.4 s"]
    assert FIG._fmt_us(None) == "-" and FIG._fmt_us(123_800) == "123.8 us"
    # seek slots: [2^(i-1), 2^i) sectors, exact labels
    assert [FIG.seek_slot_label(i) for i in (0, 1, 2, 13, 14, 21, 31)] == \
        ["0", "1", "2", "4096", "8Ki", "1Mi", "1Gi"]


def test_task_summary():
    tasks = {1: "make", 2: "cc1", 3: "cc1", 4: "", 5: "as", 6: "cc1", 7: "as"}
    assert FIG.task_summary(tasks) == [("cc1", 3), ("as", 2), ("(unnamed)", 1), ("make", 1)]
    assert FIG.task_summary(tasks, limit=1) == [("cc1", 3)]
    assert FIG.task_summary({}) == []


def test_one_figure_is_a_png_of_its_size():
    r = {"attribution_ns": {"cpu": 60, "data": 30, "barrier": 10}, "elapsed_ns": 100}
    png = FIG.attribution_figure([("run", r)])
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", png[16:24])
    assert width == round(FIG.WIDTH_IN * FIG.DPI)
    assert abs(height - (0.9 + 0.65) * FIG.DPI) <= 1
