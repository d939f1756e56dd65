"""probes/iowhy.h and analyzer/iowhy/abi.py describe the same bytes.

Every struct is compiled with the host C compiler and its size, field offsets and field
sizes compared with the numpy dtypes; every #define of a mirrored family is compared
with the same-named constant in abi.py.
"""

from __future__ import annotations

import re
import shutil
import subprocess

import numpy as np
import pytest

from conftest import REPO, need
from iowhy import abi

HEADER = REPO / "probes" / "iowhy.h"

# `#define IOWHY_<NAME> <value>` with value an int, a hex int, (1 << n) or a "string".
DEFINE_RE = re.compile(
    r'^\s*#define\s+IOWHY_(\w+)\s+'
    r'(\(\s*1\s*<<\s*(\d+)\s*\)|0[xX][0-9a-fA-F]+|\d+|"[^"]*")',
    re.MULTILINE)

# Families whose every member must have a same-named constant in abi.py.
FAMILIES = ("REC_", "CHUNK_", "RQ_", "F_", "CALL_", "J_", "OFF_", "TASK_", "FS_", "OP_", "WCTX_",
            "THR_")
SINGLES = ("FORMAT_VERSION", "COMM_LEN", "FILE_MAGIC", "CHUNK_MAGIC")


def header_defines() -> dict[str, int | bytes]:
    out: dict[str, int | bytes] = {}
    for m in DEFINE_RE.finditer(HEADER.read_text()):
        name, val, shift = m.group(1), m.group(2), m.group(3)
        if shift is not None:
            out[name] = 1 << int(shift)
        elif val.startswith('"'):
            out[name] = val[1:-1].encode()
        else:
            out[name] = int(val, 0)
    return out


def _compiler() -> str | None:
    for cc in ("cc", "gcc", "clang"):
        if shutil.which(cc):
            return cc
    return None


HDR_FIELDS = abi.C_STRUCTS["iowhy_rec_hdr"].names


def c_member(struct: str, f: str) -> str:
    """The C member designator of a dtype field: record dtypes flatten the embedded
    `struct iowhy_rec_hdr hdr` into its four fields, C names them hdr.<field>."""
    names = abi.C_STRUCTS[struct].names
    if struct != "iowhy_rec_hdr" and names[:len(HDR_FIELDS)] == HDR_FIELDS and f in HDR_FIELDS:
        return f"hdr.{f}"
    return f


def _c_program(struct: str) -> str:
    """A C program printing `<field> <offset> <size>` for every dtype field of `struct`,
    and `. <sizeof> <sizeof>` for the struct itself."""
    lines = [
        "#include <stddef.h>",
        "#include <stdio.h>",
        "#include <linux/types.h>",
        f'#include "{HEADER}"',
        "#define FSZ(s, f) sizeof(((struct s *)0)->f)",
        "int main(void)",
        "{",
        f'\tprintf(". %zu %zu\\n", sizeof(struct {struct}), sizeof(struct {struct}));',
    ]
    for f in abi.C_STRUCTS[struct].names:
        m = c_member(struct, f)
        lines.append(f'\tprintf("{f} %zu %zu\\n", '
                     f'offsetof(struct {struct}, {m}), FSZ({struct}, {m}));')
    lines += ["\treturn 0;", "}", ""]
    return "\n".join(lines)


@pytest.fixture(scope="module")
def c_layout(tmp_path_factory):
    """c_layout(struct) -> {field: (offset, size)} as the C compiler lays the struct out;
    key "." is the struct itself (sizeof twice)."""
    cc = _compiler()
    need(cc is not None, "no C compiler (cc, gcc or clang) to compile probes/iowhy.h")
    assert cc is not None
    d = tmp_path_factory.mktemp("abi")

    def _layout(struct: str) -> dict[str, tuple[int, int]]:
        src, exe = d / f"{struct}.c", d / struct
        src.write_text(_c_program(struct))
        p = subprocess.run([cc, "-std=gnu11", "-Wall", "-Werror", "-o", str(exe), str(src)],
                           capture_output=True, text=True)
        assert p.returncode == 0, \
            f"struct {struct} does not have the dtype's fields (C compile failed):\n{p.stderr}"
        p = subprocess.run([str(exe)], capture_output=True, text=True, check=True)
        out = {}
        for line in p.stdout.splitlines():
            f, a, b = line.split()
            out[f] = (int(a), int(b))
        return out

    return _layout


@pytest.mark.parametrize("struct", sorted(abi.C_STRUCTS))
def test_struct_layout(struct, c_layout):
    dt = abi.C_STRUCTS[struct]
    lay = c_layout(struct)
    size = lay["."][0]
    assert size == dt.itemsize, f"sizeof(struct {struct}) = {size}, dtype itemsize {dt.itemsize}"
    assert size % 8 == 0, f"struct {struct} is {size} bytes, not a multiple of 8"
    covered = 0
    for f in dt.names:
        fdt, off = dt.fields[f][:2]
        c_off, c_size = lay[f]
        assert c_off == off, f"{struct}.{f}: C offset {c_off}, dtype offset {off}"
        assert c_size == fdt.itemsize, f"{struct}.{f}: C size {c_size}, dtype size {fdt.itemsize}"
        covered += c_size
    # No implicit padding: the dtype's fields tile the whole struct.
    assert covered == size, f"struct {struct}: fields cover {covered} of {size} bytes"


def test_record_header_prefix():
    hdr = abi.C_STRUCTS["iowhy_rec_hdr"]
    for code, (name, dt) in abi.RECORD_TYPES.items():
        for f in hdr.names:
            assert dt.fields[f][:2] == hdr.fields[f][:2], f"{name}.{f} differs from rec_hdr"
        assert dt.itemsize <= np.iinfo(np.uint16).max


def test_header_constants_match_abi():
    defs = header_defines()
    checked = 0
    for name, val in defs.items():
        if name.startswith("C_") or name == "MAX_BIO_WALK":
            continue
        if name == "REC_MAX":
            assert val == max(abi.RECORD_TYPES), "IOWHY_REC_MAX is not the largest record type"
            continue
        if not (name.startswith(FAMILIES) or name in SINGLES):
            continue
        assert hasattr(abi, name), f"IOWHY_{name} has no abi.{name}"
        assert getattr(abi, name) == val, f"IOWHY_{name} = {val!r}, abi.{name} = " \
                                          f"{getattr(abi, name)!r}"
        checked += 1
    # Guard the regex: every family must have been found in the header.
    for fam in FAMILIES:
        assert any(n.startswith(fam) for n in defs), f"no IOWHY_{fam}* parsed from iowhy.h"
    for s in SINGLES:
        assert s in defs, f"IOWHY_{s} not parsed from iowhy.h"
    valued = re.findall(r"^\s*#define\s+IOWHY_(\w+)[ \t]+\S", HEADER.read_text(), re.MULTILINE)
    assert sorted(valued) == sorted(defs), "a #define IOWHY_* value the regex does not parse"
    assert checked >= 60


def test_record_types_cover_header():
    defs = header_defines()
    recs = {n for n in defs if n.startswith("REC_") and n != "REC_MAX"}
    assert {defs[n] for n in recs} == set(abi.RECORD_TYPES)
    flags = ("CHUNK_MAGIC", "CHUNK_ZSTD", "CHUNK_COMPACT")
    chunks = {defs[n] for n in defs if n.startswith("CHUNK_") and n not in flags}
    assert chunks == set(abi.JSON_CHUNKS)


def test_counters_match_header():
    defs = header_defines()
    counters = {n: v for n, v in defs.items() if n.startswith("C_") and n != "C_MAX"}
    assert len(counters) == len(abi.COUNTER_NAMES)
    assert defs["C_MAX"] == len(abi.COUNTER_NAMES)
    assert sorted(counters.values()) == list(range(len(abi.COUNTER_NAMES)))
