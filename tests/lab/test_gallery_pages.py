"""The gallery made from recorded runs: labelled by scenario, the answer first, no path
of the machine outside each trace's metadata block, and the same traces give the same
pages byte for byte (`iowhy.lab.gallery --pages-only`).

The runs are the session's (`lab_runs`, tests/conftest.py); their files are copied to
a directory of this test's own, so the pages are made without touching them.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from htmlcheck import ABS_PATH, machine_paths
from iowhy.lab import gallery, scenarios

DISK = "hdd-7200"
RUNS = (("tar", "ext4"), ("fsync-tar", "ext4"))


def _pages(work: Path, out: Path) -> dict[str, bytes]:
    assert gallery.main(["--pages-only", "--work", str(work), "--out", str(out)]) == 0
    return {p.name: p.read_bytes() for p in sorted(out.iterdir())}


@pytest.mark.lab
def test_gallery_from_the_same_traces_is_the_same(lab_runs, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    for name, fs in RUNS:
        r = lab_runs(name, fs)
        rid = scenarios.run_id(name, fs, DISK)
        for f in Path(r["files"]["run"]).parent.glob(f"{rid}.*"):
            shutil.copy2(f, work / f.name)
    first = _pages(work, tmp_path / "one")
    second = _pages(work, tmp_path / "two")
    want = {f"{scenarios.run_id(n, fs, DISK)}.html" for n, fs in RUNS}
    want.add(f"compare-tar-vs-fsync-tar-ext4-{DISK}.html")
    assert want <= set(first), sorted(first)
    assert set(first) == set(second)
    for name in first:
        assert first[name] == second[name], f"{name} differs between two makings"

    for name, data in first.items():
        if name.endswith(".html"):
            text = data.decode()
            assert machine_paths(text) == [], name
            h1 = text[text.index("<h1>"):text.index("</h1>")]
            if name.startswith("compare-"):
                assert "tar: untar" in h1 and "fsync-tar: untar" in h1, h1
                assert text.index('id="changed"') < text.index('id="a-header"')
            else:
                s = scenarios.SCENARIOS[name.split("-ext4")[0]]
                assert s.label() in h1, h1
                assert text.index('id="where"') < text.index('id="header"')
    readme = first["README.md"].decode()
    assert [m.group() for m in ABS_PATH.finditer(readme)] == [], readme
    assert scenarios.SCENARIOS["tar"].label() in readme
