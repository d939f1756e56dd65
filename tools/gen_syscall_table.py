#!/usr/bin/env python3
"""Generate analyzer/iowhy/syscall_table.py, the syscall names of x86-64 and arm64, from
the kernel's UAPI headers (Debian: linux-libc-dev).

    python3 tools/gen_syscall_table.py [-o OUT] [--include DIR] [--check]

x86-64: `#define __NR_<name> <nr>` lines of <asm/unistd_64.h> (the installed x86-64
header under /usr/include/x86_64-linux-gnu/asm, else /usr/include/asm). arm64 has no
table of its own: it is <asm-generic/unistd.h> with the `__ARCH_WANT_*` switches of the
kernel's arch/arm64/include/uapi/asm/unistd.h and 64-bit longs, so that header is run
through the C preprocessor (`$CC -E -dM`, default `cc`) with those switches set.

An architecture whose header is not installed (the x86-64 header on an arm64 machine)
keeps the table already in OUT, with its recorded source. --check writes nothing and
exits 1 when OUT differs from what the headers give (the unit test runs this).
Standard library only; the generated module is committed so that `pip install .` works
on a machine without the headers.
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO / "analyzer" / "iowhy" / "syscall_table.py"

# arch/arm64/include/uapi/asm/unistd.h (Linux 6.1): the optional calls arm64 provides.
ARM64_WANTS = ("RENAMEAT", "NEW_STAT", "SET_GET_RLIMIT", "TIME32_SYSCALLS", "SYS_CLONE3",
               "MEMFD_SECRET")

DEFINE = re.compile(r"^#define\s+(__NR3264_\w+|__NR_\w+)\s+(.+?)\s*$")
NOT_CALLS = {"__NR_syscalls", "__NR_arch_specific_syscall"}


def headers_version(include: Path) -> str:
    """`Linux X.Y.Z` from <linux/version.h>, or "" when it is not there."""
    try:
        text = (include / "linux" / "version.h").read_text()
    except OSError:
        return ""
    parts = [re.search(rf"#define LINUX_VERSION_{k}\s+(\d+)", text)
             for k in ("MAJOR", "PATCHLEVEL", "SUBLEVEL")]
    if all(parts):
        return "Linux " + ".".join(m.group(1) for m in parts if m)
    code = re.search(r"#define LINUX_VERSION_CODE\s+(\d+)", text)
    if code:
        c = int(code.group(1))
        return f"Linux {c >> 16}.{(c >> 8) & 0xff}.{c & 0xff}"
    return ""


def _eval(expr: str, macros: dict[str, str], depth: int = 0) -> int:
    """An integer macro value: decimal/hex literals, other macros, + - ( )."""
    if depth > 20:
        raise ValueError(f"macro recursion in {expr!r}")

    def sub(m: re.Match) -> str:
        name = m.group(0)
        if name not in macros:
            raise ValueError(f"undefined {name} in {expr!r}")
        return str(_eval(macros[name], macros, depth + 1))

    text = re.sub(r"\b[A-Za-z_]\w*\b", sub, expr)
    tree = ast.parse(text, mode="eval")

    def ev(n: ast.AST) -> int:
        if isinstance(n, ast.Expression):
            return ev(n.body)
        if isinstance(n, ast.Constant) and isinstance(n.value, int):
            return n.value
        if isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Add, ast.Sub)):
            a, b = ev(n.left), ev(n.right)
            return a + b if isinstance(n.op, ast.Add) else a - b
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub):
            return -ev(n.operand)
        raise ValueError(f"not an integer expression: {expr!r}")

    return ev(tree)


def table_from_defines(lines: list[str]) -> dict[int, str]:
    macros: dict[str, str] = {}
    for line in lines:
        m = DEFINE.match(line.strip())
        if m:
            macros[m.group(1)] = m.group(2)
    out: dict[int, str] = {}
    for name, val in macros.items():
        if not name.startswith("__NR_") or name in NOT_CALLS:
            continue
        nr = _eval(val, macros)
        call = name[len("__NR_"):]
        if nr in out and out[nr] != call:
            raise ValueError(f"syscall {nr} is both {out[nr]} and {call}")
        out[nr] = call
    return dict(sorted(out.items()))


def x86_64_header(include: Path) -> Path | None:
    for p in (include / "x86_64-linux-gnu" / "asm" / "unistd_64.h",
              include / "asm" / "unistd_64.h"):
        if p.is_file():
            return p
    return None


def x86_64_table(include: Path) -> tuple[dict[int, str], str] | None:
    h = x86_64_header(include)
    if h is None:
        return None
    return table_from_defines(h.read_text().splitlines()), f"{h.relative_to(include)}"


def arm64_table(include: Path, cc: str) -> tuple[dict[int, str], str] | None:
    h = include / "asm-generic" / "unistd.h"
    if not h.is_file():
        return None
    with tempfile.TemporaryDirectory(prefix="iowhy-unistd-") as d:
        # 64-bit longs whatever the build machine; only the generic header is read.
        (Path(d) / "asm").mkdir()
        (Path(d) / "asm" / "bitsperlong.h").write_text("#define __BITS_PER_LONG 64\n")
        src = Path(d) / "arm64.c"
        src.write_text("".join(f"#define __ARCH_WANT_{w}\n" for w in ARM64_WANTS)
                       + "#include <asm-generic/unistd.h>\n")
        p = subprocess.run([*cc.split(), "-E", "-dM", "-nostdinc", "-I", d, "-I", str(include),
                            str(src)], capture_output=True, text=True)
        if p.returncode != 0:
            raise SystemExit(f"gen_syscall_table: {cc} -E failed on {h}: {p.stderr.strip()}")
    return (table_from_defines(p.stdout.splitlines()),
            f"{h.relative_to(include)} with arm64's __ARCH_WANT_*")


def existing(out: Path) -> tuple[dict[str, dict[int, str]], dict[str, str]]:
    """TABLES and SOURCES of a previously generated module (literals only, not run)."""
    try:
        tree = ast.parse(out.read_text())
    except (OSError, SyntaxError):
        return {}, {}
    found: dict[str, dict] = {}
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value:
            if node.target.id in ("TABLES", "SOURCES"):
                found[node.target.id] = ast.literal_eval(node.value)
    return found.get("TABLES", {}), found.get("SOURCES", {})


def render(tables: dict[str, dict[int, str]], sources: dict[str, str]) -> str:
    lines = [
        '"""Syscall numbers to names for x86-64 and arm64.',
        "",
        "GENERATED by tools/gen_syscall_table.py from the kernel's UAPI headers; do not edit",
        "(`make syscall-table` regenerates it, tests/unit/test_syscalls.py checks it).",
        "The table is chosen by the trace's recorded machine (uname -m), else by the machine",
        "running the analyzer; a number the headers do not name is shown as `syscall_<nr>`.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "import os",
        "",
        "SOURCES: dict[str, str] = {",
    ]
    for arch in sorted(sources):
        lines.append(f"    {arch!r}: {sources[arch]!r},")
    lines += ["}", "", "TABLES: dict[str, dict[int, str]] = {"]
    for arch in sorted(tables):
        lines.append(f"    {arch!r}: {{")
        for nr, name in sorted(tables[arch].items()):
            lines.append(f"        {nr}: {name!r},")
        lines.append("    },")
    lines += [
        "}",
        "",
        "# uname -m spellings (and common names) of the architectures above.",
        "ALIASES = {\"x86_64\": \"x86_64\", \"amd64\": \"x86_64\", \"x86-64\": \"x86_64\",",
        "           \"aarch64\": \"aarch64\", \"arm64\": \"aarch64\"}",
        "",
        "",
        "def table_of(arch: str | None = None) -> dict[int, str] | None:",
        "    \"\"\"The table of `arch` (a uname -m machine name as the trace's metadata records",
        "    it; None or anything but a name: this machine's), or None when there is none.\"\"\"",
        "    if not isinstance(arch, str) or not arch:",
        "        arch = os.uname().machine",
        "    key = ALIASES.get(arch.lower())",
        "    return TABLES.get(key) if key else None",
        "",
        "",
        "def name_of(nr: int, arch: str | None = None) -> str:",
        "    \"\"\"The name of syscall `nr` on `arch` (None: this machine), `syscall_<nr>` when",
        "    the headers the table came from do not name it.\"\"\"",
        "    table = table_of(arch)",
        "    name = table.get(nr) if table is not None else None",
        "    return name if name is not None else f\"syscall_{nr}\"",
        "",
    ]
    return "\n".join(lines)


def generate(include: Path, out: Path, cc: str) -> tuple[str, list[str]]:
    """The module's text, and notes on architectures kept from `out`."""
    old_tables, old_sources = existing(out)
    version = headers_version(include)
    tables: dict[str, dict[int, str]] = {}
    sources: dict[str, str] = {}
    notes = []
    for arch, got in (("x86_64", x86_64_table(include)), ("aarch64", arm64_table(include, cc))):
        if got is not None:
            tables[arch], where = got
            sources[arch] = f"{version} {where}".strip()
        elif arch in old_tables:
            tables[arch], sources[arch] = old_tables[arch], old_sources.get(arch, "")
            notes.append(f"{arch}: header not installed, table kept from {out}")
        else:
            raise SystemExit(f"gen_syscall_table: no {arch} header under {include} and no "
                             f"table in {out} (install linux-libc-dev)")
    return render(tables, sources), notes


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-o", "--output", default=str(DEFAULT_OUT), help="module to write")
    ap.add_argument("--include", default="/usr/include", help="where the UAPI headers are")
    ap.add_argument("--check", action="store_true",
                    help="write nothing; exit 1 when the output differs from the headers'")
    args = ap.parse_args(argv)
    out = Path(args.output)
    text, notes = generate(Path(args.include), out, os.environ.get("CC") or "cc")
    for n in notes:
        print(f"gen_syscall_table: {n}", file=sys.stderr)
    if args.check:
        cur = out.read_text() if out.is_file() else ""
        if cur != text:
            print(f"gen_syscall_table: {out} differs from the headers' table "
                  "(run `make syscall-table` and commit it)", file=sys.stderr)
            return 1
        return 0
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
