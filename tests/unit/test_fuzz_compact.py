"""The fuzz test (test_fuzz.py, test_fuzz_zstd.py) over a trace whose record chunks are
compacted (format version 6): the generic variants (cuts, bit flips, chunks dropped,
duplicated, swapped, re-typed), damaged frames with their CRC right, and compacted data
that lies inside a sound frame (checksum and CRC right): bytes flipped anywhere in it
(group numbers, byte columns, row-wise names), group numbers beyond the count, data cut
or grown by a few bytes with data_bytes following, the compact flag moved onto other
chunk types. Every reading command must show the damage first or end with the one-line
error: never a traceback or a hang.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any, Iterator

import pytest
import zstandard

from conftest import FUZZ_STRIDES
from damaged_traces import Chunk, Sample, commands, join, run_cli, split, write_base
from iowhy import abi
from test_fuzz import KINDS as BASE_KINDS
from test_fuzz import check, variants
from test_fuzz_zstd import FRAME_KINDS, frame_variants

SEED = 26
COMPACT_KINDS = ("data byte", "out of range", "bytes short", "bytes long", "compact flag on")
KINDS = (BASE_KINDS, FRAME_KINDS, COMPACT_KINDS)  # per generator, in the order they run


def _data(c: Chunk) -> bytes:
    return zstandard.ZstdDecompressor().decompressobj().decompress(c.payload)


def _repack(c: Chunk, data: bytes, ctype: int | None = None) -> Chunk:
    z = zstandard.ZstdCompressor(level=1, write_content_size=True,
                                 write_checksum=True).compress(data)
    pad = (-len(z)) % 8
    return Chunk(c.offset, c.magic, c.type if ctype is None else ctype, c.rec_size, c.count,
                 len(z) + pad, len(data), 0, c.seq, z + b"\0" * pad)


def compact_variants(base: bytes, rng: random.Random) -> Iterator[tuple[str, str, bytes]]:
    head, chunks = split(base)
    packed = [i for i, c in enumerate(chunks) if c.type & abi.CHUNK_COMPACT]
    for _ in range(70):
        i = rng.choice(packed)
        c = chunks[i]
        d = bytearray(_data(c))
        what = rng.randrange(5)
        kind = "structure"
        if what == 0:  # a value anywhere: records change, or come back in another order
            pos = rng.randrange(len(d))
            d[pos] ^= 1 << rng.randrange(8)
            new, name, kind = _repack(c, bytes(d)), f"data byte {pos} flipped", "value"
        elif what == 1:
            k = rng.randrange(c.count)
            d[c.count + k] = rng.randrange(1, 256)  # high byte: a group number >= 256
            if c.count > 256:
                kind = "value"
            new, name = _repack(c, bytes(d)), f"group of record {k} out of range"
        elif what == 2:
            n = rng.randrange(1, 3 * c.rec_size)
            new, name = _repack(c, bytes(d[:-n])), f"data {n} bytes short"
        elif what == 3:
            n = rng.randrange(1, 3 * c.rec_size)
            new, name = _repack(c, bytes(d) + bytes(n)), f"data {n} bytes long"
        else:
            t = rng.choice([abi.REC_TASK, abi.REC_SYSCALL, abi.REC_BIO, abi.CHUNK_TRAILER,
                            abi.CHUNK_META, 0x77])
            new = _repack(c, bytes(d), ctype=t | abi.CHUNK_ZSTD | abi.CHUNK_COMPACT)
            name = f"compact flag on type {t:#x}"
        yield kind, f"chunk {i} ({c.type:#x}): {name}", \
            join(head, chunks[:i] + [new] + chunks[i + 1:])


@pytest.mark.parametrize("every", FUZZ_STRIDES)
def test_fuzz_compacted_trace(tmp_path: Path, every: int) -> None:
    """Every variant (`all`, slow) or a sample of every kind (`sample`, Sample)."""
    base = Path(write_base(tmp_path / "base.iowt", zstd_level=3, compact=True,
                           chunk_records=8))
    other = str(tmp_path / "other.iowt")
    write_base(other, zstd_level=3, compact=True)
    data = base.read_bytes()
    _, chunks = split(data)
    assert sum(1 for c in chunks if c.type & abi.CHUNK_COMPACT) >= 5
    target = tmp_path / "t.iowt"
    target.write_bytes(data)
    clean: dict[str, str] = {}
    cmds = list(commands(str(target), other))
    for argv in cmds:
        r = run_cli(argv)
        assert r.rc == 0 and not r.out.startswith("WARNING"), (argv, r.out[:300])
        clean[" ".join(argv[:-1])] = r.out
    rng = random.Random(SEED)
    n = total = 0
    gen: list[Iterator[Any]] = [variants(data, rng), frame_variants(data, rng),
                                compact_variants(data, rng)]
    for g, kinds in zip(gen, KINDS):
        sample = Sample(g, every, kinds)
        for kind, name, blob in sample:
            target.write_bytes(blob)
            chosen = [cmds[1]] + [cmds[j] for j in range(len(cmds)) if j != 1
                                  and (j + n) % 4 == 0]
            for argv in chosen:
                check(run_cli(argv), kind, clean, name)
            n += 1
        total += sample.total
    assert total >= 250 and n >= total // every, (total, n)
