"""Golden outputs: `report --json`, `report`, `info --json`, `hist` and `compare --json`
on the fixed synthetic traces of golden_traces.py, byte for byte.

The analysis may be restructured freely as long as these outputs do not change. When an
output changes on purpose, regenerate the files and review the diff:

    IOWHY_UPDATE_GOLDEN=1 .venv/bin/pytest -q tests/unit/test_golden.py

Outputs are stored one JSON file per trace in tests/unit/golden/ (gzip for the
200k-request trace). Timings of the analysis itself are not part of any output
(`report --json` leaves out the private `_timings_s`).
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
from pathlib import Path
from typing import Any

import pytest

import golden_traces as gt
from iowhy.cli import main

GOLDEN = Path(__file__).resolve().parent / "golden"
UPDATE = os.environ.get("IOWHY_UPDATE_GOLDEN") == "1"
COMPRESSED = {"big", "big_blocked"}


def run_cli(argv: list[str]) -> dict[str, Any]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(argv)
    return {"argv": argv, "rc": rc, "stdout": out.getvalue()}


def outputs(name: str) -> dict[str, Any]:
    """Every output of one trace (the trace is `<name>.iowt` in the current directory)."""
    t = f"{name}.iowt"
    res = {"report_json": run_cli(["report", "--json", t]),
           "report_text": run_cli(["report", t]),
           "info_json": run_cli(["info", "--json", t])}
    if name in gt.HIST_TRACES:
        res["hist"] = [run_cli(["hist", *args, t]) for args in gt.HIST_ARGS]
    return res


def golden_path(name: str) -> Path:
    return GOLDEN / (f"{name}.json.gz" if name in COMPRESSED else f"{name}.json")


def dump(obj: Any) -> bytes:
    return (json.dumps(obj, indent=1, sort_keys=True) + "\n").encode()


def check(name: str, got: dict[str, Any]) -> None:
    path = golden_path(name)
    data = dump(got)
    if UPDATE:
        GOLDEN.mkdir(exist_ok=True)
        if path.suffix == ".gz":
            with open(path, "wb") as f:
                with gzip.GzipFile(fileobj=f, mode="wb", mtime=0, filename="") as g:
                    g.write(data)
        else:
            path.write_bytes(data)
        return
    assert path.exists(), f"no golden file {path}: run with IOWHY_UPDATE_GOLDEN=1"
    raw = path.read_bytes()
    want = json.loads(gzip.decompress(raw) if path.suffix == ".gz" else raw)
    for key in want:
        assert got.get(key) == want[key], f"{name}: {key} differs from {path.name}"
    assert set(got) == set(want), f"{name}: outputs {sorted(got)} vs {sorted(want)}"


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    d = tmp_path_factory.mktemp("golden")
    gt.build(d)
    return d


@pytest.mark.parametrize("name", list(gt.TRACES))
def test_golden_outputs(traces, monkeypatch, name):
    monkeypatch.chdir(traces)
    check(name, outputs(name))


def test_golden_compare(traces, monkeypatch):
    monkeypatch.chdir(traces)
    got = {f"{a}-{b}": run_cli(["compare", "--json", f"{a}.iowt", f"{b}.iowt"])
           for a, b in gt.COMPARE_PAIRS}
    got.update({f"text:{a}-{b}": run_cli(["compare", f"{a}.iowt", f"{b}.iowt"])
                for a, b in gt.COMPARE_PAIRS[:2]})
    check("compare", got)


def test_traces_are_deterministic(tmp_path):
    """The builders write the same bytes every time (else the goldens could not hold)."""
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    names = [n for n in gt.TRACES if not n.startswith("big")]
    pa, pb = gt.build(a, names), gt.build(b, names)
    for n in names:
        assert pa[n].read_bytes() == pb[n].read_bytes(), n
