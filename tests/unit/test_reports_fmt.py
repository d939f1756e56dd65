"""reports/fmt.py: the cell and line formatters of the text and HTML reports."""

from __future__ import annotations

from iowhy.reports import fmt as F


def test_counts_fit_ten_columns():
    assert [F.fmt_count(x) for x in (None, 0, 99_999, 100_000, 123_456, 422_600_000,
                                     1_234_567_890, -150_000)] == [
        "-", "0", "99,999", "100.0k", "123.5k", "422.6M", "1.2G", "-150.0k"]
    assert all(len(F.fmt_count(10 ** k - 1)) <= 10 for k in range(1, 13))


def test_sizes_shares_and_words():
    assert F.fmt_mib(3 * 2**20 + 2**19) == "3.5" and F.fmt_mib(2**40) == "1,048,576.0"
    assert F.fmt_pct(None) == "-" and F.fmt_pct(0.1234) == "12.3%" and F.fmt_pct(1) == "100.0%"
    assert [F.yes_no(v) for v in (None, True, 0, "maybe")] == ["unknown", "yes", "no", "maybe"]


def test_lines_fit_the_width():
    assert F.fit_line("x" * F.WIDTH) == "x" * F.WIDTH
    long = F.fit_line("y" * (F.WIDTH + 1))
    assert len(long) == F.WIDTH and long.endswith("...")
    lines = F.wrap_text("word " * 60, "  first: ", "    ")
    assert all(len(x) <= F.WIDTH for x in lines) and lines[0].startswith("  first: word")
    assert all(x.startswith("    word") for x in lines[1:])
    assert F.wrap_text("", "head: ", "  ") == ["head:"]


def test_command_texts():
    r = {"trace": {"command": ["tar", "-x", "-f", "a b.tar"], "command_short": "tar -x"}}
    assert F.short_command(r) == "tar -x"
    assert "tar -x -f" in F.command_text(r)
    assert F.command_text({"trace": {"pid": 42}}) == "(attached process)"
    assert F.command_text({}) == "(unknown)" == F.short_command({})


def test_cgroup_names():
    assert F.cgroup_name({"cgroup": "/a/b"}, 20) == "/a/b"
    assert F.cgroup_name({"cgroup": "/" + "x" * 30}, 10) == "..." + "x" * 7
    assert F.cgroup_name({"cgroup": None, "id": 0}, 20) == "(unknown)"
    assert F.cgroup_name({"id": 77}, 20) == "(removed, id 77)"


def test_served_below():
    r = {"stack_service": [{"upper": "loop1", "lower": ["sdz"], "busy_ns": 1000,
                            "by_category_ns": {
                                "barrier": {"idle below": 600, "metadata": 400},
                                "data": {"data": 5},  # under 1% of the busy time
                            }}]}
    lower, texts = F.served_below(r, "loop1")
    assert lower == ["sdz"]
    assert len(texts) == 1 and texts[0].startswith("barrier ") and \
        texts[0].endswith(": idle 60%, " + F.BELOW_WORDS["metadata"] + " 40%")
    assert F.served_below(r, "loop2") is None and F.served_below({}, "loop1") is None
    assert "loop1, loop2" in F.remapped_note({"placement_remapped": ["loop1", "loop2"]})
