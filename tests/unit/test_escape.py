"""iowhy/escape.py: names shown safely on a terminal and in a page."""

from __future__ import annotations

from iowhy.escape import neutralise_page, printable, printable_lines
from iowhy.reports import escape


def test_printable():
    assert printable("plain ü") == "plain ü"
    assert printable("a\x1b[2Jb") == "a^[[2Jb"
    assert printable("\x7f\n") == "^?^J"
    assert printable("x\udcffy") == "x\\xffy"
    assert printable("\u202eevil") == "\\u202eevil"
    assert printable(12) == "12"


def test_lines_and_page():
    assert printable_lines("a\x07\nb") == "a^G\nb"
    assert neutralise_page("<p>\x1b\n</p>\udc80") == "<p>^[\n</p>\\x80"


def test_reports_read_the_same_helpers():
    assert escape.printable is printable and escape.neutralise_page is neutralise_page
