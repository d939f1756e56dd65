"""iowhy/cells.py: a value in each cell `iowhy query` writes, and the aligned line the
reports' tables share."""

from __future__ import annotations

import math

from iowhy.cells import aligned, csv_cell, json_value, list_text, text_cell
from iowhy.reports import fmt


def test_text_cell():
    assert text_cell(None) == "NULL"
    assert text_cell(0.1 + 0.2) == "0.3"
    assert text_cell(1 / 3) == "0.333333333333333"
    assert text_cell(12) == "12"
    assert text_cell(True) == "True"
    assert text_cell(["a b", "c"]) == '["a b", "c"]'
    assert text_cell("na\udcffme") == "na\\xffme"  # a byte that is not UTF-8


def test_csv_cell():
    assert csv_cell(None) == ""
    assert csv_cell(0.1 + 0.2) == "0.30000000000000004"  # reads back to the same double
    assert csv_cell("a\nb\x1b") == "a\\x0ab\\x1b"  # one line per row
    assert csv_cell(("x",)) == '["x"]'


def test_json_value():
    assert json_value([1, math.nan, math.inf, "n\udc80", {"k\udc81": None}]) == \
        [1, None, None, "n\\x80", {"k\\x81": None}]
    assert list_text(["ü", "\n"]) == '["ü", "\\n"]'  # not ASCII-escaped


def test_aligned():
    assert aligned(["a", "12"], [3, 4], [False, True]) == "a      12"
    assert aligned(["a", ""], [3, 4], [False, False], indent=2) == "  a"  # no trailing blanks
    assert fmt.aligned is aligned  # the reports read the same one
