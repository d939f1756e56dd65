"""No function of the package is over MAX_LINES lines (CONTRIBUTING.md, "Style"): a
longer one is split into named steps, each with its intent and invariants."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

MAX_LINES = 150
ROOT = Path(__file__).resolve().parents[2]


def _long_functions(roots: tuple[str, ...]) -> list[str]:
    out = []
    for root in roots:
        for path in sorted((ROOT / root).rglob("*.py")):
            tree = ast.parse(path.read_text(), str(path))
            for node in ast.walk(tree):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    n = (node.end_lineno or node.lineno) - node.lineno + 1
                    if n > MAX_LINES:
                        out.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({n})")
    return out


def test_no_function_over_the_limit():
    assert _long_functions(("analyzer", "reports", "lab")) == []


def test_the_check_sees_a_long_function(tmp_path, monkeypatch):
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_LINES))
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text(f"def f():\n{body}\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert _long_functions(("pkg",)) == [f"pkg/m.py:1 f ({MAX_LINES + 1})"]
