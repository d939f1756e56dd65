"""Fuzzing the trace reader and every reading command (seeded, a few hundred variants).

Each variant of a sound synthetic trace (cut at every chunk boundary, bit flips,
chunks dropped, duplicated, swapped or re-typed with their CRCs still right, hostile JSON
in every JSON chunk, out-of-range record values) goes through the commands
(`info`, `info --json`, `report`, `report --json`, `hist`, `compare`) in-process. Each
must end either with exit 0 and the damage first (text: a `WARNING:` first line; JSON:
`damage.damaged`), or with the one-line `iowhy: <what> (<hint>)` and a non-zero exit:
never a traceback, a hang, or NaN/Infinity in the output. A mutation the reader cannot
see (a flipped bit in the file header's reserved bytes) must leave the output as it was.
"""

from __future__ import annotations

import json
import random
import re
import struct
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest

from conftest import FUZZ_SAMPLE, FUZZ_STRIDES
from damaged_traces import (FHDR_BYTES, Chunk, Sample, commands, hostile_files, join, run_cli,
                            split, with_json, with_payload, write_base)
from iowhy import abi

SEED = 20
BIT_FLIPS = 60
RECORD_VALUES = 70
JSON_VALUES = 80
HTML_EVERY = 50  # report --html on every 50th variant (drawing the figures is slow)

# The kinds of variant (words of their names) every run has, the unit tier's sample too.
KINDS = ("cut at chunk boundary", "cut at ", "bit", "dropped", "duplicated", "swapped",
         "re-typed", "NaN", "Infinity", "\\udcff", "[[[[", ".ts_ns", "end_ns", " = ", "JSON b")

HOSTILE_JSON: list[Any] = [
    None, True, -1, 0, 2**64, 10**30, -(10**30), 1.5, "x", "\udcff\x1b[2J", [], {}, [[[]]],
    {"a": None}, ["\ud800"], "", "9" * 5000,
]
# Raw JSON texts the json module would not produce.
HOSTILE_TEXT = [b"NaN", b"Infinity", b"-Infinity", b"1e400", b"-1e400"]


def json_keys(obj: Any, path: tuple = ()) -> Iterator[tuple]:
    """Paths to every value of a JSON document (dict keys and list indices)."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield path + (k,)
            yield from json_keys(v, path + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield path + (i,)
            yield from json_keys(v, path + (i,))


def set_path(obj: Any, path: tuple, value: Any) -> None:
    for p in path[:-1]:
        obj = obj[p]
    obj[path[-1]] = value


def variants(base: bytes, rng: random.Random) -> Iterator[tuple[str, str, bytes]]:
    """(kind, name, file bytes): kind "structure" must show damage (or read as sound
    when the reader cannot tell, see above); kind "value" must not crash."""
    head, chunks = split(base)
    ends = [c.offset + 32 + c.payload_bytes for c in chunks]
    for e in [FHDR_BYTES] + ends[:-1]:
        yield "structure", f"cut at chunk boundary {e}", base[:e]
    for e in sorted(rng.sample(range(FHDR_BYTES + 1, len(base)), 12)):
        yield "structure", f"cut at {e}", base[:e]
    for _ in range(BIT_FLIPS):
        pos = rng.randrange(len(base))
        bit = rng.randrange(8)
        b = bytearray(base)
        b[pos] ^= 1 << bit
        yield "structure", f"bit {bit} of byte {pos} flipped", bytes(b)
    for i in range(len(chunks)):
        yield "structure", f"chunk {i} dropped", join(head, chunks[:i] + chunks[i + 1:])
        yield "structure", f"chunk {i} duplicated", join(head, chunks[:i + 1] + chunks[i:])
        if i + 1 < len(chunks):
            sw = chunks[:i] + [chunks[i + 1], chunks[i]] + chunks[i + 2:]
            yield "structure", f"chunks {i} and {i + 1} swapped", join(head, sw)
        c = chunks[i]
        for t in (abi.REC_REQUEST, abi.REC_JOURNAL, abi.REC_OFFCPU, abi.CHUNK_PROGRESS,
                  abi.CHUNK_TRAILER, 0x77):
            if t != c.type and rng.random() < 0.35:
                rt = Chunk(c.offset, c.magic, t, c.rec_size, c.count, c.payload_bytes,
                           c.data_bytes, c.crc, c.seq, c.payload)
                yield "structure", f"chunk {i} re-typed {c.type:#x} -> {t:#x}", \
                    join(head, chunks[:i] + [rt] + chunks[i + 1:])
    # hostile JSON, CRC right
    json_idx = [i for i, c in enumerate(chunks) if c.type in abi.JSON_CHUNKS]
    for k in range(JSON_VALUES if json_idx else 0):  # none plain in a compressed trace
        i = rng.choice(json_idx)
        obj = json.loads(chunks[i].data)
        paths = list(json_keys(obj))
        path = rng.choice(paths)
        value = rng.choice(HOSTILE_JSON)
        set_path(obj, path, value)
        text = json.dumps(obj).encode()
        shown = repr(value)[:40]
        if k % 4 == 0:  # the same key, as a raw non-JSON number
            raw = rng.choice(HOSTILE_TEXT)
            set_path(obj, path, "@@@")
            text = json.dumps(obj).encode().replace(b'"@@@"', raw)
            shown = raw.decode()
        name = f"{abi.JSON_CHUNKS[chunks[i].type]} {'.'.join(map(str, path))} = {shown}"
        yield "value", name, join(head, chunks[:i] + [with_json(chunks[i], text)]
                                  + chunks[i + 1:])
    for i in json_idx:
        for text in (b"[1, 2]", b"[" * 100_000 + b"]" * 100_000, b'{"a": NaN}',
                     b"\xff\xfe{}", b'{"end_ns": 1e999}', b"{" * 50_000):
            yield "value", f"chunk {i} JSON {text[:20]!r}", \
                join(head, chunks[:i] + [with_json(chunks[i], text)] + chunks[i + 1:])
    # out-of-range record values, CRC right
    rec_idx = [i for i, c in enumerate(chunks) if c.type in abi.RECORD_TYPES]
    for _ in range(RECORD_VALUES if rec_idx else 0):
        i = rng.choice(rec_idx)
        c = chunks[i]
        dtype = abi.RECORD_TYPES[c.type][1]
        arr = np.frombuffer(c.payload[:c.data_bytes], dtype=dtype).copy()
        fields = [f for f in dtype.names if not f.startswith("pad") and f != "reserved"]
        f = rng.choice(fields)
        kind = dtype[f]
        if kind.kind == "S":
            value: Any = rng.choice([b"\x1b]0;pwned\x07", b"\xff\xfe\x80", b"\x00" * 16])
        else:
            info = np.iinfo(kind)
            value = rng.choice([info.max, info.max - 1, info.min, 1 << (kind.itemsize * 8 - 1)
                                if kind.kind == "u" else -1, 0, 1 << 40 if kind.itemsize == 8
                                else info.max // 2])
        row = rng.randrange(len(arr))
        arr[f][row] = value
        payload = arr.tobytes() + c.payload[c.data_bytes:]
        yield "value", f"{abi.RECORD_TYPES[c.type][0]}[{row}].{f} = {value!r}", \
            join(head, chunks[:i] + [with_payload(c, payload)] + chunks[i + 1:])


UNSAFE = re.compile("[\x00-\x09\x0b-\x1f\x7f\ud800-\udfff]")  # what _unsafe finds


def _first_line(text: str) -> str:
    return text.splitlines()[0] if text else ""


def _unsafe(text: str) -> list[str]:
    """Characters no output may hold: control characters other than the newline (a name's
    escape sequences must be shown escaped) and lone surrogates (they cannot be encoded)."""
    return sorted({c for c in text if (ord(c) < 0x20 and c != "\n") or ord(c) == 0x7F
                   or 0xD800 <= ord(c) <= 0xDFFF})


def check(r: Any, kind: str, clean: dict[str, str], name: str) -> None:
    what = f"{name}: {' '.join(r.argv)}"
    assert "Traceback" not in r.err and "Traceback" not in r.out, what
    assert "NaN" not in r.out and "Infinity" not in r.out, what
    assert not _unsafe(r.out) and not _unsafe(r.err), (what, _unsafe(r.out + r.err))
    if r.rc != 0:
        lines = [ln for ln in r.err.splitlines() if ln.strip()]
        # the one-line error, after the damage line where the command had read the trace
        # (hist with no values left to draw)
        assert lines and lines[-1].startswith("iowhy: "), (what, r.err)
        assert all(ln.startswith("WARNING: ") for ln in lines[:-1]) and len(lines) <= 2, \
            (what, r.err)
        # stdout holds at most the damage block that came first
        assert r.out == "" or r.out.startswith("WARNING: "), what
        return
    key = " ".join(r.argv[:-1])
    is_json = "--json" in r.argv
    if is_json:
        obj = json.loads(r.out)
        dmg = (obj.get("damage") or {}).get("b") if r.argv[0] == "compare" else obj.get("damage")
        damaged = bool(dmg and dmg["damaged"])
    else:
        first = _first_line(r.out)
        damaged = first.startswith("WARNING: ")
        if damaged and r.argv[0] != "info":
            # report, hist and compare print nothing before the damage line
            assert first.startswith(("WARNING: trace", "WARNING: B: trace")), (what, first)
    if kind == "structure" and not damaged:
        assert r.out == clean[key], (what, "damage not shown first", r.out[:400])


@pytest.fixture(scope="module")
def base_paths(tmp_path_factory: Any) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("fuzz")
    return Path(write_base(d / "base.iowt")), d


@pytest.mark.parametrize("every", FUZZ_STRIDES)
def test_fuzz_every_command(base_paths: tuple[Path, Path], every: int) -> None:
    """Every variant (`all`, slow) or a sample of every kind (`sample`, Sample)."""
    base, d = base_paths
    other = str(d / "other.iowt")
    write_base(other)
    data = base.read_bytes()
    target = d / "t.iowt"
    target.write_bytes(data)
    clean = {}
    for argv in commands(str(target), other):
        r = run_cli(argv)
        assert r.rc == 0 and not _first_line(r.out).startswith("WARNING"), (argv, r.out[:300])
        clean[" ".join(argv[:-1])] = r.out
    rng = random.Random(SEED)
    n = 0
    cmds = list(commands(str(target), other))
    sample = Sample(variants(data, rng), every, KINDS)
    for kind, name, blob in sample:
        target.write_bytes(blob)
        # info --json on every variant; the other commands in turn (each on about a
        # third of the variants)
        chosen = [cmds[1]] + [cmds[j] for j in range(len(cmds)) if j != 1
                              and (j + n) % 3 == 0]
        for argv in chosen:
            check(run_cli(argv), kind, clean, name)
        if (sample.total - 1) % (HTML_EVERY * every) == 0:  # the first variant, and more
            html = d / "t.html"
            if html.exists():
                html.unlink()
            r = run_cli(["report", "--html", str(html), str(target)])
            check(r, "value", clean, name)
            if r.rc == 0:
                page = html.read_bytes().decode("utf-8")  # always encodable
                assert not _unsafe(page.replace("\t", "")), (name, _unsafe(page))
        n += 1
    assert sample.total >= 300 and n == sample.ran >= sample.total // every, \
        (sample.total, n)


def test_fuzz_covers_the_damage_kinds(base_paths: tuple[Path, Path]) -> None:
    """The generator makes every kind of variant the issue lists (guards against a change
    that quietly stops producing some)."""
    base, _ = base_paths
    names = [name for _, name, _ in variants(base.read_bytes(), random.Random(SEED))]
    sampled = [name for _, name, _ in Sample(variants(base.read_bytes(), random.Random(SEED)),
                                             FUZZ_SAMPLE, KINDS)]
    assert set(sampled) < set(names)
    for word in KINDS:
        assert any(word in n for n in names), word
        assert any(word in n for n in sampled), word


def test_header_struct_matches_abi() -> None:
    assert struct.calcsize("<4sHHIIIIQ") == abi.CHUNK_HDR_DTYPE.itemsize


# test_hostile_files_every_command: every file through every command (`all`, slow), or
# through `info --json` and every HOSTILE_SAMPLE-th of the others, starting one further
# on for each file, so that each command meets that share of the files (`sample`).
HOSTILE_SAMPLE = 3


@pytest.mark.parametrize("every", [pytest.param(HOSTILE_SAMPLE, id="sample"),
                                   pytest.param(1, id="all", marks=pytest.mark.slow)])
def test_hostile_files_every_command(tmp_path: Path, every: int) -> None:
    """The reproducers of hostile input (damaged_traces.hostile_files: names that are not
    UTF-8, a few KB decoding to 58,240 requests, META keys of the wrong type, a META
    re-typed by one bit, command lines longer than a trace's strings and lists) through
    every reading command, the listings, the three exporters and a query: never a
    traceback, the damage first (on stderr where the output is a file), or one line."""
    other = write_base(tmp_path / "other.iowt", n=8)
    exports = pytest.importorskip("duckdb") and [
        ["export", "--format", "parquet", "-o", str(tmp_path / "pq")],
        ["export", "--format", "perfetto", "-o", str(tmp_path / "t.pftrace")],
        ["export", "--format", "chrome-json", "-o", str(tmp_path / "t.json")]]
    met: dict[int, int] = {}  # command (its place in `runs`) -> files it read
    files = list(hostile_files(tmp_path))
    for i, (name, path, damaged) in enumerate(files):
        runs = [*commands(path, other), ["requests", "--json", path], ["requests", path],
                *([*a[:1], path, *a[1:]] for a in exports),
                ["query", "SELECT count(*) AS n, max(command) AS c FROM requests, runs",
                 path, "--json"]]
        assert runs[1][:2] == ["info", "--json"]
        for j, argv in enumerate(runs):
            if j != 1 and (i + j) % every:
                continue
            met[j] = met.get(j, 0) + 1
            r = run_cli(argv)
            what = f"{name}: {' '.join(argv[:3])}"
            assert "Traceback" not in r.err and "Traceback" not in r.out, what
            assert not UNSAFE.search(r.out + r.err), (what, _unsafe(r.out + r.err))
            if r.rc != 0:  # hist with no values to draw: one line, after the damage
                lines = [ln for ln in r.err.splitlines() if ln.strip()]
                assert argv[0] == "hist" and len(lines) == 1, (what, r.err)
                assert lines[0].startswith("iowhy: no values"), (what, r.err)
                assert r.out.startswith("WARNING: ") == damaged, (what, r.out)
                continue
            if argv[0] in ("export", "query") or "--json" in argv and argv[0] == "requests":
                shown = r.err.startswith("WARNING: ")
            elif "--json" in argv:
                obj = json.loads(r.out)
                dmg = (obj.get("damage") or {}).get("b") if argv[0] == "compare" \
                    else obj.get("damage")
                shown = bool(dmg and dmg["damaged"])
            else:
                shown = r.out.startswith("WARNING: ")
            assert shown == damaged, (what, r.out[:200], r.err[:200])
    # every command met its share of the files (all of them in `all`)
    assert len(met) == len(runs) and min(met.values()) >= len(files) // every, met
