"""reports/htmlkit.py: the HTML pages' building blocks, each value escaped (control
characters made visible first) unless it is markup built there (Raw), and the markup
well nested."""

from __future__ import annotations

import base64
from html.parser import HTMLParser

from iowhy.reports import htmlkit as K

VOID = {"meta", "img", "br"}


class _Nesting(HTMLParser):
    """Start and end tags balanced; the text seen."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag not in VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag):
        assert self.stack and self.stack.pop() == tag, tag

    def handle_data(self, data):
        self.text.append(data)


def _parse(fragment: str) -> str:
    p = _Nesting()
    p.feed(fragment)
    p.close()
    assert p.stack == [], p.stack
    return "".join(p.text)


EVIL = "<script>x</script> & \"q\"\x1b[0m"


def test_esc():
    assert K.esc(None) == "-"
    assert K.esc(K.Raw("<b>x</b>")) == "<b>x</b>"
    out = K.esc(EVIL)
    assert "<" not in out and ">" not in out and "\x1b" not in out and "&quot;q&quot;" in out
    assert K.esc(3) == "3"


def test_page_and_section_nest_and_escape():
    doc = K.page(EVIL, [K.section("s1", EVIL, "<p>ok</p>", ""), K.nav([("s1", EVIL)])])
    assert doc.startswith("<!DOCTYPE html>") and doc.count("<script>") == 0
    text = _parse(doc)
    assert "<script>x</script>" in text  # shown as text
    assert K.page("t", [], heading=K.Raw("<i>h</i>")).count("<h1><i>h</i></h1>") == 1


def test_tables():
    t = K.table(["a", "n"], [["<x>", 5], [K.Raw("<b>y</b>"), None]], numeric=[1],
                table_id="tid", cls="c")
    assert _parse(t).count("<x>") == 1
    assert "<td class=\"num\">5</td>" in t and "<td class=\"num\">-</td>" in t
    assert "<b>y</b>" in t and 'id="tid"' in t and 'class="c"' in t
    assert t.count("<tr>") == 3
    kv = K.kv_table([("k", "<v>"), ("n", None)], table_id="kv1", cls="wide")
    _parse(kv)
    assert 'class="kv wide"' in kv and "<td>&lt;v&gt;</td>" in kv and "<td>-</td>" in kv


def test_figure_block():
    png = b"\x89PNG fake"
    f = K.figure_block("fig-a", "A <title>", "how to read", png, note="sampled")
    _parse(f)
    data = f.split("base64,", 1)[1].split('"', 1)[0]
    assert base64.b64decode(data) == png
    assert "A &lt;title&gt;." in f and "how to read sampled" in f
    none = K.figure_block("fig-b", "B", "cap", None, note="no data")
    assert "(no data)" in none and "<img" not in none


def test_prefix_ids_and_nested_mappings():
    frag = K.section("where", "W", K.table(["a"], [[1]], table_id="t"))
    pre = K.prefix_ids(frag, "a")
    assert 'id="a-where"' in pre and 'id="a-t"' in pre and 'id="where"' not in pre
    m = K.section_mapping("m", "M", {"n": 1234567, "f": 0.1234567, "l": [1, None, "<z>"],
                                     "d": {}, "nest": [{"k": True}]}, folded="more")
    text = _parse(m)
    assert "1,234,567" in text and "0.123457" in text and "1, -, <z>" in text
    assert "(empty)" in text and "True" in text and "<details><summary>more</summary>" in m
    assert _parse(K.text_block("a < b", "blk")) == "a < b"
