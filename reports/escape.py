"""Names from a trace shown safely: the one helper is iowhy.escape (the analyzer's own
outputs, `iowhy query` and the progress line, print names too); the reports read it
from here."""

from iowhy.escape import neutralise_page, printable, printable_lines

__all__ = ["neutralise_page", "printable", "printable_lines"]
