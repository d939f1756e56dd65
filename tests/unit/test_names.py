"""iowhy.names: the escape of names that are not UTF-8 (utf8_text, comm_text) and the
cutting of long command lines (clip_command). The writers' side, every exporter reading
a hostile name back, is test_export_names.py."""

from __future__ import annotations

import pytest

from iowhy.names import CMD_ARG_KEEP, CMD_LIMIT, clip_command, comm_text, utf8_text


def test_utf8_text_keeps_valid_text_and_escapes_the_rest():
    assert utf8_text("näme\t\x1b") == "näme\t\x1b"  # control characters are valid UTF-8
    assert utf8_text(b"a\xff".decode("utf-8", "surrogateescape")) == "a\\xff"
    assert utf8_text("\udc80\udcff") == "\\x80\\xff"  # the ends of the escaped-byte range
    assert utf8_text("x\ud800y\udfff") == "x\\ud800y\\udfff"  # other lone surrogates
    assert utf8_text(42) == "42"


def test_utf8_text_output_always_encodes():
    s = "".join(chr(c) for c in (0x41, 0xD800, 0xDC7F, 0xDC80, 0xDCFF, 0xDD00, 0xE9))
    out = utf8_text(s)
    out.encode("utf-8")
    assert out == "A\\ud800\\udc7f\\x80\\xff\\udd00é"


def test_comm_text_stops_at_the_first_nul():
    assert comm_text(b"kworker/0:1\0\0\0\0\0") == "kworker/0:1"
    assert comm_text(b"ab\0cd") == "ab"
    assert comm_text(b"sixteen-bytes-xx") == "sixteen-bytes-xx"  # no NUL at all
    assert comm_text(b"\xfe\0") == "\\xfe"
    assert comm_text(b"") == ""


def test_clip_command_leaves_a_short_command_alone():
    argv = ["tar", "-x", "a" * CMD_LIMIT]  # an argument of exactly the limit is kept
    out, cut = clip_command(argv)
    assert out == argv and not cut


def test_clip_command_cuts_a_long_argument():
    long = "b" * (CMD_LIMIT + 1)
    out, cut = clip_command(["x", long])
    assert cut and out[0] == "x"
    assert out[1] == "b" * CMD_ARG_KEEP + f"[cut: {CMD_LIMIT + 1} characters in all]"
    assert len(out[1]) <= CMD_LIMIT
    assert clip_command([long], unit="bytes")[0][0].endswith(" bytes in all]")


@pytest.mark.parametrize("n,entries", [(5, 3), (4, 3), (1000, 10)])
def test_clip_command_cuts_too_many_arguments(n, entries):
    argv = [str(i) for i in range(n)]
    out, cut = clip_command(argv, entries=entries)
    assert cut and len(out) == entries
    assert out[:-1] == argv[:entries - 1]
    assert out[-1] == f"[cut: {n} arguments in all]"


def test_clip_command_at_exactly_the_entries_is_not_cut():
    argv = ["a", "b", "c"]
    assert clip_command(argv, entries=3) == (argv, False)
