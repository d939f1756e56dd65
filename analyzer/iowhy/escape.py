"""Names from a trace shown safely: one helper for every text and HTML renderer.

Names (command lines, task names, mount points, device names, paths) are bytes to the
kernel. The trace carries the bytes that are not UTF-8 as lone surrogates U+DC80..U+DCFF
(Python's surrogateescape), losslessly. On a terminal or in a page they are shown as
`\\xNN`; control characters as `cat -v` shows them (`^[` for ESC, `^?` for DEL, `^J` for a
newline inside a name), so that a hostile name cannot move the cursor, retitle the
terminal or clear the screen; other invisible or unencodable characters (C1 controls,
bidirectional overrides, other lone surrogates) as `\\uNNNN`. Printable text, including
non-ASCII, is unchanged.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

_HIDDEN = {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"}


def _char(c: str) -> str:
    o = ord(c)
    if o < 0x20:
        return "^" + chr(o + 0x40)
    if o == 0x7F:
        return "^?"
    if 0xDC80 <= o <= 0xDCFF:
        return f"\\x{o - 0xDC00:02x}"
    if unicodedata.category(c) in _HIDDEN:
        return f"\\u{o:04x}" if o <= 0xFFFF else f"\\U{o:08x}"
    return c


def printable(value: Any) -> str:
    """`value` as text that is safe to print anywhere (see the module docstring)."""
    s = value if isinstance(value, str) else str(value)
    if s.isprintable():
        return s
    return "".join(c if c.isprintable() or c == " " else _char(c) for c in s)


def printable_lines(text: str) -> str:
    """Each line of `text` made printable; the newlines between lines are kept."""
    return "\n".join(printable(line) for line in text.split("\n"))


# In a whole page: every character that `printable` would change, except the layout
# whitespace of the markup itself.
_PAGE_UNSAFE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff]")


def neutralise_page(doc: str) -> str:
    """A last pass over a whole HTML page: any control character or lone surrogate that
    reached it unescaped is shown as `printable` shows it, so that the page always
    encodes as UTF-8 and shows no control character."""
    return _PAGE_UNSAFE.sub(lambda m: _char(m.group()), doc)
