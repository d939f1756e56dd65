"""reports/units.py: a time shown in its column's unit (about 4 significant digits,
no suffix), a label naming the unit, and the output width."""

from __future__ import annotations

import pytest

from iowhy.reports import units as U


@pytest.mark.parametrize("ns, unit, text", [
    (0, "us", "0"), (1, "us", "0.001"), (1_500, "us", "1.500"), (99_999, "us", "99.999"),
    (100_000, "us", "100.0"), (9_999_900, "us", "9,999.9"), (10_000_000, "us", "10,000"),
    (123_456_789_012, "us", "123,456,789"), (1_234_567, "ns", "1,234,567"),
    (2_500_000, "ms", "2.500"), (3_000_000_000, "s", "3.000")])
def test_time_text_keeps_about_four_digits(ns, unit, text):
    assert U.time_text(ns, unit) == text


def test_missing_negative_and_signed():
    assert U.time_text(None) == "-" and U.time_text(-5) == "-"
    assert U.time_text(None, missing="n/a") == "n/a"
    assert U.time_text(-1_500, sign="+") == "-1.500"
    assert U.time_text(1_500, sign="+") == "+1.500"
    assert U.time_text(-7, "ns", sign="+") == "-7"
    assert U.time_text(1_234_567, decimals=0) == "1,235"
    assert U.time_text(1_500, "ms", decimals=1) == "0.0"


def test_every_unit_is_ns_per_unit_and_labels_name_it():
    assert U.TIME_UNITS == {"ns": 1, "us": 10**3, "ms": 10**6, "s": 10**9}
    assert U.DEFAULT_TIME_UNIT in U.TIME_UNITS
    assert set(U.HIST_UNITS.values()) <= set(U.TIME_UNITS)
    assert U.label("device", "us") == "device (us)"


def test_output_width_without_a_terminal(monkeypatch):
    monkeypatch.setattr(U.sys.stdout, "isatty", lambda: False, raising=False)
    assert U.output_width() == U.MAX_WIDTH


@pytest.mark.parametrize("cols, width", [(80, 80), (40, 60), (200, 100)])
def test_output_width_of_a_terminal(monkeypatch, cols, width):
    import os
    monkeypatch.setattr(U.sys.stdout, "isatty", lambda: True, raising=False)
    monkeypatch.setattr(U.shutil, "get_terminal_size",
                        lambda fallback: os.terminal_size((cols, 24)))
    assert U.output_width() == width
