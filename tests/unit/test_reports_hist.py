"""reports/hist.py: log2 histograms as biolatency prints them (slot i holds [2^i,
2^(i+1)), slot 0 also 0), slot positions for the percentile lines, slot labels."""

from __future__ import annotations

import json

from iowhy.reports import hist as H


def test_log2_counts():
    assert H.log2_counts([0, 1, 2, 3, 4, 7, 8]) == [2, 2, 2, 1]
    assert H.log2_counts([]) == []


def test_render_is_biolatencys_table():
    text = H.render_log2_hist([1, 0, 4, 2], "usecs")
    assert text.splitlines() == [
        "     usecs               : count    distribution",
        "         0 -> 1          : 1        |**********                              |",
        "         2 -> 3          : 0        |                                        |",
        "         4 -> 7          : 4        |****************************************|",
        "         8 -> 15         : 2        |********************                    |"]
    # trailing empty slots are not printed; nothing at all prints nothing
    assert H.render_log2_hist([0, 3, 0, 0]).count("\n") == 2
    assert H.render_log2_hist([0, 0]) == "" == H.render_log2_hist([])


def test_wide_slots_take_the_wide_layout():
    counts = [0] * 33 + [5]
    lines = H.render_log2_hist(counts, "nsecs").splitlines()
    assert lines[0].startswith(" " * 15 + "nsecs") and len(lines) == 35
    assert lines[-1].startswith(f"{1 << 33:>20} -> {(1 << 34) - 1:<20} : 5")
    assert lines[-1].endswith("|" + "*" * 20 + "|")


def test_slot_positions_are_linear_within_a_slot():
    # slot 0 spans [0, 2) (it holds 0 and 1), every other slot i [2^i, 2^(i+1))
    assert H.slot_position(0) == -0.5 and H.slot_position(1) == 0.0
    assert H.slot_position(1.5) == 0.25 and H.slot_position(2) == 0.5
    assert H.slot_position(4) == 1.5 and H.slot_position(6) == 2.0
    xs = [0, 0.5, 0.9, 1, 1.2, 2, 3, 5, 100, 1 << 20]
    assert [H.slot_position(x) for x in xs] == sorted(H.slot_position(x) for x in xs)


def test_slot_labels_and_json():
    assert [H._si(v) for v in (0, 512, 1024, 1536, 65536, 2 << 20, 1 << 30)] == [
        "0", "512", "1K", "1536", "64K", "2M", "1G"]
    assert json.loads(H.render_hist_json({"a": [1, 2]})) == {"a": [1, 2]}
    assert H._stars(7, 4, 4) == "****+" and H._stars(0, 0, 3) == "   "
