"""iowhy.errors: the error a user can fix, --decode-ratio, and opening a trace (load)."""

from __future__ import annotations

import argparse

import pytest

from iowhy import errors
from iowhy.errors import EXIT_FAIL, EXIT_USAGE, UserError
from tracebuilder import req, write_trace


@pytest.fixture(autouse=True)
def _keep_ratio(monkeypatch):
    # set_decode_ratio sets a module global: each test leaves it as it found it
    monkeypatch.setattr(errors, "DECODE_RATIO", errors.DECODE_RATIO)


def test_user_error_carries_message_hint_and_code():
    e = UserError("no such trace", "check the path")
    assert str(e) == "no such trace" and e.hint == "check the path" and e.code == EXIT_FAIL
    assert UserError("x", code=EXIT_USAGE).code == EXIT_USAGE
    assert UserError("x").hint == ""


@pytest.mark.parametrize("n", [1, 64, 1 << 20])
def test_decode_ratio_in_range_is_taken(n):
    errors.set_decode_ratio(n)
    assert errors.DECODE_RATIO == n
    errors.set_decode_ratio(None)
    assert errors.DECODE_RATIO is None


@pytest.mark.parametrize("n", [0, -1, (1 << 20) + 1])
def test_decode_ratio_out_of_range_is_a_usage_error(n):
    errors.set_decode_ratio(7)
    with pytest.raises(UserError) as ei:
        errors.set_decode_ratio(n)
    assert ei.value.code == EXIT_USAGE
    assert str(n) in str(ei.value) and "1 to 1048576" in ei.value.hint
    assert errors.DECODE_RATIO == 7  # unchanged by a refused value


def test_the_option_parses_an_integer():
    p = argparse.ArgumentParser()
    errors.add_decode_ratio(p)
    assert p.parse_args(["--decode-ratio", "9"]).decode_ratio == 9
    assert p.parse_args([]).decode_ratio is None
    assert str(errors.DEFAULT_DECODE_RATIO) in p.format_help()


def test_default_ratio_is_the_readers():
    from iowhy.traceformat import ZSTD_BUDGET_RATIO
    assert errors.DEFAULT_DECODE_RATIO == ZSTD_BUDGET_RATIO


def test_load_reads_a_trace(tmp_path):
    p = write_trace(tmp_path / "t.iowt", requests=[req(1010, 1050)])
    tr = errors.load(p)
    assert len(tr.records("request")) == 1


@pytest.mark.parametrize("content", [None, b"", b"not a trace at all\n" * 10])
def test_load_of_what_is_no_trace_is_a_user_error(tmp_path, content):
    p = tmp_path / "bad.iowt"
    if content is not None:
        p.write_bytes(content)
    with pytest.raises(UserError) as ei:
        errors.load(str(p))
    assert ei.value.code == EXIT_FAIL
    assert "\n" not in str(ei.value) and str(ei.value)
    assert ei.value.hint


def test_load_passes_the_decode_ratio(tmp_path, monkeypatch):
    seen = {}

    def fake(path, on_records=None, decode_ratio=None):
        seen["ratio"] = decode_ratio
        return "trace"
    monkeypatch.setattr("iowhy.traceformat.read_trace", fake)
    errors.set_decode_ratio(5)
    assert errors.load("x") == "trace" and seen["ratio"] == 5
