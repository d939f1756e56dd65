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
from typing import Iterator

import pytest
import zstandard

from conftest import FUZZ_STRIDES
from damaged_traces import Chunk, join, split
from iowhy import abi
from test_fuzz import KINDS as BASE_KINDS
from test_fuzz import variants
from test_fuzz_zstd import FRAME_KINDS, frame_variants, fuzz_chunked

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
    fuzz_chunked(tmp_path, every, abi.CHUNK_COMPACT,
                 (variants, frame_variants, compact_variants), KINDS, 250, SEED,
                 compact=True)
