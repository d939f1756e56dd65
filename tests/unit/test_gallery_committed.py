"""The committed gallery (reports/gallery, `make gallery`) as a visitor reads it: no path
of the machine that made it outside each trace's metadata block, and, in headless
Chromium at 1200 x 1000 px, the answer on the first screen."""

from __future__ import annotations

from pathlib import Path

import pytest

from htmlcheck import ABS_PATH, layout, machine_paths

GALLERY = Path(__file__).resolve().parents[2] / "reports" / "gallery"
PAGES = sorted(GALLERY.glob("*.html"))
FIRST_SCREEN_PX = 1000


def test_the_gallery_is_there():
    assert len(PAGES) >= 10, "reports/gallery holds no pages: `make gallery`"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_no_machine_path_outside_the_metadata(page):
    assert machine_paths(page.read_text(encoding="utf-8")) == []


def test_readme_names_no_machine_path():
    text = (GALLERY / "README.md").read_text(encoding="utf-8")
    assert [m.group() for m in ABS_PATH.finditer(text)] == []


# (page, the answer's section, its first lines): a report and two comparisons
SHOTS = (
    ("fsync-tar-ext4-hdd-7200.html", "where", "table-where"),
    ("compare-wc-barrier-vs-wc-off-xfs-hdd-7200.html", "changed", "compare-text"),
    ("compare-tar-vs-fsync-tar-ext4-hdd-7200.html", "changed", "compare-text"),
)


@pytest.mark.slow  # headless Chromium, as the unit tier's other page layouts
@pytest.mark.parametrize("name, section, body", SHOTS, ids=[s[0] for s in SHOTS])
def test_the_answer_is_on_the_first_screen(tmp_path, name, section, body):
    top = layout(GALLERY / name, tmp_path, (section, body, "header", "a-header"))
    assert top[section] is not None and top[body] is not None
    # the heading and the first lines under it, not only the heading's top edge
    assert top[section] < top[body] < FIRST_SCREEN_PX - 60, top
    meta = top["header"] if top["header"] is not None else top["a-header"]
    assert meta is not None and meta > top[body], top
