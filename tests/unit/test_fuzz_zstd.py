"""The fuzz test (test_fuzz.py) over a trace whose chunks are zstd-compressed (format
version 5): cuts, bit flips, chunks dropped, duplicated, swapped and re-typed, and
compressed payloads replaced by damaged frames with their CRC made right (bits flipped in
the frame, frames cut, declared sizes wrong, foreign bytes). Every reading command must
show the damage first or end with the one-line error: never a traceback or a hang.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import pytest
import zstandard

from conftest import FUZZ_STRIDES
from damaged_traces import Chunk, Sample, commands, join, run_cli, split, write_base
from iowhy import abi
from test_fuzz import KINDS as BASE_KINDS
from test_fuzz import check, variants

SEED = 23
FRAME_KINDS = ("frame byte", "frame cut at", "data_bytes", "bytes of junk", "two frames")
KINDS = (BASE_KINDS, FRAME_KINDS)  # per generator, in the order they run


def _frame(c: Chunk) -> bytes:
    d = zstandard.ZstdDecompressor().decompressobj()
    d.decompress(c.payload)
    return c.payload[:len(c.payload) - len(d.unused_data)]


def _with(c: Chunk, payload: bytes, data_bytes: int | None = None) -> Chunk:
    pad = (-len(payload)) % 8
    return Chunk(c.offset, c.magic, c.type, c.rec_size, c.count, len(payload) + pad,
                 c.data_bytes if data_bytes is None else data_bytes, 0, c.seq,
                 payload + b"\0" * pad)


def frame_variants(base: bytes, rng: random.Random) -> Iterator[tuple[str, str, bytes]]:
    head, chunks = split(base)
    packed = [i for i, c in enumerate(chunks) if c.type & abi.CHUNK_ZSTD]
    for _ in range(60):
        i = rng.choice(packed)
        c = chunks[i]
        f = bytearray(_frame(c))
        what = rng.randrange(5)
        if what == 0:
            pos = rng.randrange(len(f))
            f[pos] ^= 1 << rng.randrange(8)
            new, name = _with(c, bytes(f)), f"frame byte {pos} flipped"
        elif what == 1:
            cut = rng.randrange(len(f))
            new, name = _with(c, bytes(f[:cut])), f"frame cut at {cut}"
        elif what == 2:
            d = rng.choice([0, 1, c.data_bytes - 1, c.data_bytes + 1, 2 * c.data_bytes,
                            0xFFFFFFFF])
            new, name = _with(c, bytes(f), data_bytes=d), f"data_bytes {d}"
        elif what == 3:
            junk = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64)))
            new, name = _with(c, junk), f"{len(junk)} bytes of junk"
        else:
            new, name = _with(c, bytes(f) + bytes(f)), "two frames"
        yield "structure", f"chunk {i} ({c.type:#x}): {name}", \
            join(head, chunks[:i] + [new] + chunks[i + 1:])


def fuzz_chunked(tmp_path: Path, every: int, flag: int,
                 generators: Sequence[Callable[[bytes, random.Random], Iterator[Any]]],
                 kinds: Sequence[Sequence[str]], min_total: int, seed: int,
                 **write_kw: Any) -> None:
    """The fuzz of a trace written with zstd (and write_kw) in small chunks, at least 5
    of them with `flag`: each generator's variants (generator(data, rng)), every one
    (`all`, slow) or a sample of each of its kinds (`sample`, Sample), each read by
    `info --json` and by about a quarter of the other reading commands in turn."""
    base = Path(write_base(tmp_path / "base.iowt", zstd_level=3, chunk_records=8, **write_kw))
    other = str(tmp_path / "other.iowt")
    write_base(other, zstd_level=3, **write_kw)
    data = base.read_bytes()
    _, chunks = split(data)
    assert sum(1 for c in chunks if c.type & flag) >= 5
    target = tmp_path / "t.iowt"
    target.write_bytes(data)
    clean: dict[str, str] = {}
    cmds = list(commands(str(target), other))
    for argv in cmds:
        r = run_cli(argv)
        assert r.rc == 0 and not r.out.startswith("WARNING"), (argv, r.out[:300])
        clean[" ".join(argv[:-1])] = r.out
    rng = random.Random(seed)
    n = total = 0
    for gen, gkinds in zip(generators, kinds):
        sample = Sample(gen(data, rng), every, gkinds)
        for kind, name, blob in sample:
            target.write_bytes(blob)
            chosen = [cmds[1]] + [cmds[j] for j in range(len(cmds)) if j != 1
                                  and (j + n) % 4 == 0]
            for argv in chosen:
                check(run_cli(argv), kind, clean, name)
            n += 1
        total += sample.total
    assert total >= min_total and n >= total // every, (total, n)


@pytest.mark.parametrize("every", FUZZ_STRIDES)
def test_fuzz_compressed_trace(tmp_path: Path, every: int) -> None:
    fuzz_chunked(tmp_path, every, abi.CHUNK_ZSTD, (variants, frame_variants), KINDS, 200,
                 SEED)
