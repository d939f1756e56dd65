"""Checks of an HTML report shared by the test tiers: rendered through the CLI,
self-contained (nothing fetched), complete (every figure and table), problems first,
and drawn without error by headless Chromium."""

from __future__ import annotations

import base64
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import numpy as np

from conftest import need

FIG_IDS = ("fig-attribution", "fig-latency", "fig-seek", "fig-sectors", "fig-throughput",
           "fig-fsync-timeline")
TABLE_IDS = ("header", "table-where", "findings-list", "table-classes", "table-fsync",
             "table-commits", "table-devices", "table-placement")


def render(trace: str | Path, out: Path, *extra: str) -> str:
    """`iowhy report TRACE --html OUT` through the CLI; returns the file's text."""
    from iowhy.cli import main
    assert main(["report", str(trace), "--html", str(out), *extra]) == 0
    return out.read_text(encoding="utf-8")


def assert_self_contained(text: str) -> None:
    assert text.startswith("<!DOCTYPE html>")
    assert 'src="http' not in text and "src='http" not in text
    assert "<link" not in text.lower()
    assert "<script" not in text.lower()  # no script at all, inline or external
    assert "@import" not in text and "url(" not in text
    # Every src/href is an embedded image or an anchor on the page.
    for m in re.finditer(r'\b(?:src|href)\s*=\s*"([^"]*)"', text):
        assert m.group(1).startswith(("data:image/png;base64,", "#")), m.group(1)[:60]


def figures_of(text: str) -> dict[str, tuple[bytes, str]]:
    """id -> (PNG bytes, caption) of every <figure> of the page."""
    out = {}
    for m in re.finditer(r'<figure id="([^"]+)">\n<img src="data:image/png;base64,([^"]+)"'
                         r'[^>]*>\n<figcaption>(.*?)</figcaption>', text, re.S):
        out[m.group(1)] = (base64.b64decode(m.group(2)), m.group(3))
    return out


def assert_complete(text: str) -> None:
    figs = figures_of(text)
    for fid in FIG_IDS:
        assert fid in figs, f"figure {fid} missing or not an embedded PNG"
        png, caption = figs[fid]
        assert png[:8] == b"\x89PNG\r\n\x1a\n"
        assert len(png) > 2000
        assert len(caption) > 40 and "\n" not in caption  # one line saying how to read it
    for tid in TABLE_IDS:
        assert f'id="{tid}"' in text, f"table {tid} missing"
    for head in ("Where the time went", "Findings", "Requests by class", "fsync and commits",
                 "Devices", "Placement and locality"):
        assert f"<h2>{head}</h2>" in text
    ids = re.findall(r'\bid="([^"]+)"', text)
    assert len(ids) == len(set(ids)), "duplicate ids"


def problems_block(text: str) -> str:
    m = re.search(r'<div id="problems"[^>]*>(.*?)</div>', text, re.S)
    assert m, "no problems block"
    assert m.start() < text.index('<section id="where"'), "problems must come first"
    return m.group(1)


def chromium(page: Path, tmp: Path, height: int = 4000) -> tuple[np.ndarray, str]:
    """Screenshot of the page in headless Chromium, and its log (console messages)."""
    exe = shutil.which("chromium")
    need(exe is not None, "chromium is not installed (apt-get install chromium)")
    assert exe is not None
    shot = tmp / "shot.png"
    profile = tmp / "chromium-profile"
    cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
           "--no-first-run", "--disable-background-networking", "--disable-component-update",
           "--disable-sync", f"--user-data-dir={profile}", f"--screenshot={shot}",
           f"--window-size=1280,{height}", "--enable-logging=stderr", "--v=0",
           f"file://{page.resolve()}"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert shot.exists(), f"no screenshot (exit {p.returncode}): {p.stderr[-2000:]}"
    import matplotlib.image as mpimg
    return mpimg.imread(str(shot)), p.stderr


def assert_renders(page: Path, tmp: Path, colourful: bool = True) -> None:
    """No console error, a screenshot that is not one colour, and (colourful) some
    strongly coloured pixels: the figures reached the screen. A real trace may have
    nothing but grey to draw (a plain untar whose writes stay in the page cache: only
    `cpu`, which is dark grey), so live pages are not held to that last check."""
    img, log = chromium(page, tmp)
    bad = [ln for ln in log.splitlines()
           if "Uncaught" in ln or "ERROR:CONSOLE" in ln or "net::ERR_" in ln]
    assert not bad, bad
    assert img.shape[0] == 4000 and img.shape[1] == 1280
    px = img[:, :, :3]
    assert float(px.std()) > 0.05, "the screenshot is (nearly) one colour"
    if colourful:  # the figures reached the screen: strongly coloured pixels, not only text
        sat = px.max(axis=2) - px.min(axis=2)
        assert float((sat > 0.3).mean()) > 0.005


# -- what a page shows outside the trace's metadata block ---------------------------------

ABS_PATH = re.compile(r"(?<![\w.~<>/+-])/[\w.-]+(?:/[\w.-]*)*")


class _Shown(HTMLParser):
    """The text and attribute values a reader can see or hover, outside <style>, image
    data and the elements of class "meta" (a page's metadata block)."""

    VOID = {"br", "img", "meta", "hr", "input", "link", "wbr", "col", "source"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self.stack: list[bool] = []     # per open element: inside a skipped one

    def _skipping(self) -> bool:
        return bool(self.stack) and self.stack[-1]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        classes = (dict(attrs).get("class") or "").split()
        skip = self._skipping() or tag in ("style", "script") or "meta" in classes
        if not skip:
            self.out += [v for k, v in attrs if v and k not in ("src", "class", "id", "href")]
        if tag not in self.VOID:
            self.stack.append(skip)

    def handle_endtag(self, tag: str) -> None:
        if tag not in self.VOID and self.stack:
            self.stack.pop()

    def handle_data(self, data: str) -> None:
        if not self._skipping():
            self.out.append(data)


def machine_paths(text: str) -> list[str]:
    """Absolute paths a page shows outside its metadata blocks (class "meta")."""
    p = _Shown()
    p.feed(text)
    return [m.group() for s in p.out for m in ABS_PATH.finditer(s)]


def layout(page: Path, tmp: Path, ids: tuple[str, ...], width: int = 1200,
           height: int = 1000) -> dict[str, float]:
    """Top of each element (by id) in CSS px, from headless Chromium at WIDTH x HEIGHT: a
    copy of the page with a script appended that writes the positions into the title,
    read back from --dump-dom (the page itself holds no script). A screenshot of the
    first screen is left beside the copy (<stem>.png)."""
    import json as _json
    exe = shutil.which("chromium")
    need(exe is not None, "chromium is not installed (apt-get install chromium)")
    assert exe is not None
    probe = ("<script>document.title = 'LAYOUT' + JSON.stringify(Object.fromEntries("
             + _json.dumps(list(ids)) + ".map(i => [i, document.getElementById(i) ? "
             "document.getElementById(i).getBoundingClientRect().top : null])));</script>")
    copy = tmp / f"{page.stem}.layout.html"
    copy.write_text(page.read_text(encoding="utf-8").replace("</body>", probe + "</body>"),
                    encoding="utf-8")
    base = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
            "--disable-background-networking", "--disable-component-update",
            "--disable-sync", f"--user-data-dir={tmp / 'chromium-profile'}",
            f"--window-size={width},{height}", "--hide-scrollbars"]
    p = subprocess.run([*base, "--dump-dom", f"file://{copy.resolve()}"],
                       capture_output=True, text=True, timeout=180)
    m = re.search(r"<title>LAYOUT(\{.*?\})</title>", p.stdout)
    assert m, f"no layout from Chromium (exit {p.returncode}): {p.stderr[-1500:]}"
    shot = tmp / f"{page.stem}.png"
    subprocess.run([*base, f"--screenshot={shot}", f"file://{page.resolve()}"],
                   capture_output=True, text=True, timeout=180)
    assert shot.exists(), "no screenshot"
    return {k: v for k, v in _json.loads(m.group(1)).items()}
