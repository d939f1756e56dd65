"""reports/info.py render_info: the `iowhy info` text of an info dict: problems first,
key/value lines and tables at most 100 columns, what is unknown said so, long lists cut
with a pointer to the JSON."""

from __future__ import annotations

from iowhy.reports import info as INFO
from iowhy.reports.fmt import WIDTH


def _d(**more) -> dict:
    d = {"path": "/t/a.iowt", "format_version": 9, "iowhy_version": "1.0", "host": "h",
         "kernel": "6.18", "command": ["tar", "-x", "-f", "a b.tar"],
         "duration_ns": 2_500_000_000,
         "stop_reason": "workload exited", "exit_status": 0, "chunks": 12,
         "records": {"request": 1000, "offcpu": 20}}
    d.update(more)
    return d


def _lines(d: dict, problems=()) -> list[str]:
    text = INFO.render_info(d, list(problems))
    lines = text.splitlines()
    assert all(len(x) <= WIDTH for x in lines)
    return lines


def _value(lines: list[str], label: str) -> str:
    (line,) = [x for x in lines if x.startswith(label + ":")]
    return line[INFO._LABEL:]


def test_key_values_and_records():
    lines = _lines(_d())
    assert _value(lines, "command") == "tar -x -f 'a b.tar'"
    assert _value(lines, "duration (s)") == "2.500"
    assert _value(lines, "stop reason") == "workload exited (exit status 0)"
    assert _value(lines, "host / kernel") == "h / 6.18"
    i = lines.index(next(x for x in lines if x.strip().startswith("record type")))
    assert lines[i + 1].split() == ["request", "1,000"]
    assert lines[i + 3].split() == ["total", "1,020"]
    assert not any(x.startswith("damage:") for x in lines)


def test_the_unknown_is_said():
    lines = _lines({})
    assert _value(lines, "duration (s)") == "unknown (no recorder start time or end time)"
    assert _value(lines, "stop reason") == "unknown (no trailer)"
    assert _value(lines, "command") == "-" and _value(lines, "host / kernel") == "? / ?"
    assert _value(lines, "counters") == "none recorded (no trailer or progress chunk)"
    assert _value(lines, "probes") == "unknown (no recorder chunk)"
    assert _value(lines, "devices").startswith("none described")
    assert _value(lines, "probe cost") == "not measured (record with --probe-stats)"


def test_problems_come_first_wrapped():
    lines = _lines(_d(), ["a problem " * 30, "short"])
    assert lines[0].startswith("WARNING: a problem") and lines[1].startswith(" " * 9 + "problem")
    assert [x for x in lines if x.startswith("WARNING")][1] == "WARNING: short"


def test_damage_counters_and_probes():
    lines = _lines(_d(missing_bytes=4096, unknown_chunks=2,
                      counters={"lost_request": 3, "ok": 0}, lost_events=3,
                      probes={"a": "attached", "b": "skipped: no BTF", "c": "skipped"}))
    assert _value(lines, "damage") == "unreadable(bytes) 4096, unknown chunks (count) 2"
    assert "counters (non-zero; lost events: 3)" in lines
    assert any(x.split() == ["lost_request", "3"] for x in lines)
    assert _value(lines, "probes (count)") == "1 attached, 2 skipped"
    assert "  skipped b: no BTF" in lines and "  skipped c: no reason given" in lines
    lines = _lines(_d(counters={"x": 0}))
    assert _value(lines, "counters") == "all zero (from the trailer)"


def test_long_lists_are_cut_with_a_pointer():
    sc = [{"name": f"call{i}", "count": 2, "total_ns": 4_000_000 - i} for i in range(13)]
    lines = _lines(_d(syscalls=sc, syscalls_mode="all"))
    assert "syscalls (timed: every syscall (--syscalls all)), largest total first" in lines
    assert any(x.split() == ["call0", "2", "4.000", "2000.0"] for x in lines)
    assert "  ... 3 more in `iowhy info --json`" in lines
    assert not any("call10" in x for x in lines)


def test_devices_and_filesystems_tables():
    lines = _lines(_d(devices=[{"name": "sdz", "major": 8, "minor": 0, "size_bytes": 2**31,
                                "rotational": 1, "write_cache": "write back", "fua": 0}],
                      filesystems=[{"fstype": "ext4", "source": "/dev/" + "x" * 40,
                                    "mountpoint": "/mnt/t",
                                    "log": {"kind": "jbd2", "ranges": [[0, 2048]]}}]))
    assert any(x.split() == ["sdz", "8:0", "2.00", "yes", "write", "back", "no", "-"]
               for x in lines)
    fs = next(x for x in lines if x.strip().startswith("ext4"))
    assert "..." + "x" * 21 in fs and fs.split()[-1] == "1.0"  # 2048 sectors: 1 MiB
    assert INFO._log_bytes({"bytes": 5}) == 5 and INFO._log_bytes({"ranges": [["a", 1]]}) is None
    assert INFO._cut("abcdef", 5, "tail") == "...ef" and INFO._cut("abcdef", 2) == "ab"
