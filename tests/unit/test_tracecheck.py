"""iowhy.tracecheck: what a trace's JSON chunks and records may hold. A bad field is
dropped and named, a bad record dropped; nothing raises on bad input."""

from __future__ import annotations

import numpy as np
import pytest

from iowhy import tracecheck as tc
from tracebuilder import DTYPES, disk, meta, records, req


def test_a_good_meta_passes_unchanged():
    m = meta()
    out, bad = tc.check_json("meta", m)
    assert bad == [] and out == m


def test_a_bad_field_is_dropped_and_named():
    d = disk(rotational=2)  # a flag is 0 or 1
    out, bad = tc.check_json("meta", {"devices": [d], "host": 5})
    assert sorted(bad) == ["meta.devices[0].rotational", "meta.host"]
    assert "host" not in out and "rotational" not in out["devices"][0]
    assert out["devices"][0]["name"] == "sdz"


def test_an_object_without_what_it_needs_is_dropped_from_its_list():
    good, no_major = disk(), disk(major=tc.MAJOR_MAX + 1)  # 12-bit majors
    out, bad = tc.check_json("meta", {"devices": [good, no_major]})
    assert out["devices"] == [good]
    assert "meta.devices[1]" in bad and "meta.devices[1].major" in bad


def test_a_device_number_is_kept_both_halves_or_neither():
    fs = {"fstype": "ext4", "dev_major": 8, "dev_minor": -1, "disk_major": 8, "disk_minor": 0}
    out, bad = tc.check_json("meta", {"filesystems": [fs]})
    f = out["filesystems"][0]
    assert "dev_major" not in f and "dev_minor" not in f
    assert f["disk_major"] == 8 and f["disk_minor"] == 0
    assert set(bad) == {"meta.filesystems[0].dev_minor", "meta.filesystems[0].dev_major"}


def test_unknown_keys_are_kept_when_plain_json():
    out, bad = tc.check_json("recorder", {"start_ns": 5, "future": {"a": [1, "x", None]},
                                          "odd": float("nan")})
    assert out == {"start_ns": 5, "future": {"a": [1, "x", None]}}
    assert bad == ["recorder.odd"]


def test_a_chunk_that_is_no_object():
    assert tc.check_json("trailer", [1, 2]) == ({}, ["trailer"])  # type: ignore[arg-type]


def test_a_long_command_is_cut_not_dropped():
    argv = ["x"] * (tc.LIST_MAX + 5)
    out, bad = tc.check_json("recorder", {"command": argv, "start_ns": 1})
    assert bad == [] and len(out["command"]) == tc.LIST_MAX
    assert out["command"][-1].startswith("[cut: ")
    out, bad = tc.check_json("recorder", {"command": ["a", 3], "start_ns": 1})
    assert "command" not in out and bad == ["recorder.command"]


@pytest.mark.parametrize("label,ok", [("run 1", True), ("", False), ("a\nb", False)])
def test_label_is_what_the_recorder_accepts(label, ok):
    out, bad = tc.check_json("meta", {"label": label})
    assert ("label" in out) is ok and (bad == []) is ok


def test_safe_json_limits():
    deep: object = 1
    for _ in range(32):
        deep = [deep]
    assert tc.safe_json(deep) and not tc.safe_json([deep])  # 32 levels of lists, 33
    assert tc.safe_json(tc.I64_MAX) and not tc.safe_json(tc.I64_MAX + 1)
    assert tc.safe_json(-tc.I64_MAX - 1) and not tc.safe_json(-tc.I64_MAX - 2)
    assert not tc.safe_json(float("inf")) and tc.safe_json(1.5)
    assert tc.safe_json("x" * tc.STR_MAX) and not tc.safe_json("x" * (tc.STR_MAX + 1))
    assert not tc.safe_json({1, 2})


def test_list_of_fails_whole_unless_it_drops():
    strict, lenient = tc.list_of(tc.U64), tc.list_of(tc.U64, drop_bad=True)
    bad: list[str] = []
    assert strict([1, -1], "p", bad) == (False, [1, -1]) and bad == []
    assert lenient([1, -1, 2], "p", bad) == (True, [1, 2]) and bad == ["p[1]"]
    assert strict([True], "p", []) == (False, [True])  # a bool is no integer


def test_mistyped_chunk():
    assert tc.mistyped("meta", {"pid": 1, "start_ns": 2}) == "recorder"
    assert tc.mistyped("meta", {"pid": 1, "devices": []}) is None  # one of its own keys
    assert tc.mistyped("recorder", {"stop_reason": "x"}) == "trailer"
    # PROGRESS's keys are all the TRAILER's: a trailer with only those is no progress
    assert tc.mistyped("trailer", {"end_ns": 1, "counters": {}}) is None
    assert tc.mistyped("meta", {"unknown": 1}) is None


def requests(rows):
    return records(DTYPES["request"], rows)


def test_records_out_of_range_are_masked():
    a = requests([req(10, 20), req(10, 20, op=16), req(10, 20),
                  req(10, 20, dev=(tc.MAJOR_MAX + 1, 0))])
    a["done_ns"][2] = np.uint64(1 << 63)
    assert tc.valid_records("request", a).tolist() == [True, False, False, False]
    assert tc.valid_records("request", requests([req(10, 20)])) is None


def test_time_bounds_skip_zeros():
    a = requests([req(10, 20, insert=0), req(5, 30)])
    assert tc.time_bounds("request", a) == (5, 30)
    assert tc.time_bounds("request", a[:0]) == (1 << 64, 0)


def test_checks_is_valid_records_and_time_bounds_in_one():
    rng = np.random.default_rng(1)
    a = requests([req(int(i), int(i) + 5) for i in rng.integers(1, 10**6, 50)])
    a["issue_ns"][7] = np.uint64((1 << 63) + 3)
    a["op"][9] = 200
    a["start_sector"][11] = np.uint64(tc.SECTOR_MAX + 1)
    mask, bounds = tc.checks("request", a)
    assert mask.tolist() == tc.valid_records("request", a).tolist()
    assert bounds == tc.time_bounds("request", a)
    assert (~mask).sum() == 3
    ok = a[mask]
    assert tc.checks("request", ok) == (None, tc.time_bounds("request", ok))


def test_in_window():
    a = requests([req(100, 200), req(50, 200), req(100, 301), req(100, 200, insert=0)])
    assert tc.in_window("request", a, 100, 300).tolist() == [True, False, False, True]
    assert tc.in_window("request", a[:1], 100, 300) is None
