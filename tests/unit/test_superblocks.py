"""iowhy.superblocks: the on-disk parsers that find where a filesystem's log lies, on
images built here byte by byte from the kernel's layouts (ext4 + jbd2, XFS, btrfs).
Every result is in disk-relative 512-byte sectors: the partition's start is added."""

from __future__ import annotations

import logging
import struct
import uuid

import pytest

from iowhy import superblocks as sb

PS = 2048  # the partition's first sector on its disk
BS = 4096
SPB = BS // 512
UUID = uuid.UUID("12345678-1234-5678-9abc-def012345678")


class Image:
    """A sparse disk image: the bytes put, zero elsewhere; reads count as a ReadFn."""

    def __init__(self) -> None:
        self.parts: dict[int, bytes] = {}

    def put(self, off: int, data: bytes) -> None:
        self.parts[off] = bytes(data)

    def read(self, off: int, n: int) -> bytes:
        out = bytearray(n)
        for at, data in self.parts.items():
            lo, hi = max(off, at), min(off + n, at + len(data))
            if lo < hi:
                out[lo - off:hi - off] = data[lo - at:hi - at]
        return bytes(out)


def ext4_image(*, fast_commit: bool = True, extents=((0, 100, 512), (512, 1000, 512)),
               journal_blocks: int = 1024, compat: int | None = None, jdev: int = 0,
               extent_magic: int = sb.EXT4_EXT_MAGIC, nfc: int = 0) -> Image:
    """An ext4 of 4 KiB blocks whose journal (inode 8) lies in `extents` (logical,
    physical, blocks), its jbd2 superblock in the first one."""
    img = Image()
    s = bytearray(1024)
    struct.pack_into("<I", s, 0x18, 2)  # 1024 << 2
    struct.pack_into("<I", s, 0x14, 0)  # first data block (4 KiB blocks)
    struct.pack_into("<I", s, 0x28, 128)  # inodes per group
    struct.pack_into("<I", s, 0x4C, 1)  # dynamic revision: inode size below
    struct.pack_into("<H", s, 0x38, sb.EXT4_MAGIC)
    struct.pack_into("<H", s, 0x58, 256)
    if compat is None:
        compat = sb.EXT4_COMPAT_HAS_JOURNAL | (sb.EXT4_COMPAT_FAST_COMMIT if fast_commit else 0)
    struct.pack_into("<I", s, 0x5C, compat)
    s[0x68:0x78] = UUID.bytes
    struct.pack_into("<II", s, 0xE0, 8, jdev)
    img.put(sb.EXT4_SB_OFFSET, s)
    desc = bytearray(32)
    struct.pack_into("<I", desc, 0x08, 5)  # inode table at block 5
    img.put(1 * BS, desc)  # group descriptors in the block after the superblock's
    ino = bytearray(256)
    struct.pack_into("<I", ino, 0x04, journal_blocks * BS)
    struct.pack_into("<I", ino, 0x20, sb.EXT4_EXTENTS_FL)
    struct.pack_into("<HHHH", ino, 0x28, extent_magic, len(extents), 4, 0)
    for i, (lblk, pblk, n) in enumerate(extents):
        struct.pack_into("<IHHI", ino, 0x28 + 12 + 12 * i, lblk, n, pblk >> 32, pblk & 0xFFFFFFFF)
    img.put(5 * BS + 7 * 256, ino)  # inode 8: group 0, index 7
    j = bytearray(1024)
    struct.pack_into(">II", j, 0, sb.JBD2_MAGIC, sb.JBD2_SUPERBLOCK_V2)
    struct.pack_into(">I", j, 0x10, journal_blocks)
    struct.pack_into(">I", j, 0x54, nfc)
    img.put(extents[0][1] * BS, j)
    return img


def sectors(pblk: int, n: int) -> list[int]:
    return [PS + pblk * SPB, PS + (pblk + n) * SPB]


def test_ext4_journal_and_fast_commit_area():
    info = sb._ext4_info(ext4_image().read, PS)
    assert info["uuid"] == str(UUID) and info["block_bytes"] == BS
    log = info["log"]
    assert log["kind"] == "jbd2"
    assert log["ranges"] == [sectors(100, 512), sectors(1000, 512)]
    assert log["bytes"] == 1024 * BS
    # the last JBD2_DEFAULT_FC_BLOCKS (256) of the journal: in its second extent
    assert log["fc_ranges"] == [sectors(1000 + 256, 256)]


def test_ext4_fast_commit_blocks_from_the_jbd2_superblock():
    log = sb._ext4_info(ext4_image(nfc=10).read, PS)["log"]
    assert log["fc_ranges"] == [sectors(1000 + 502, 10)]


def test_ext4_without_fast_commit_has_no_fc_area():
    log = sb._ext4_info(ext4_image(fast_commit=False).read, PS)["log"]
    assert log["kind"] == "jbd2" and log["fc_ranges"] == []


def test_ext4_adjacent_extents_merge():
    img = ext4_image(extents=((0, 100, 512), (512, 612, 512)), fast_commit=False)
    assert sb._ext4_info(img.read, PS)["log"]["ranges"] == [sectors(100, 1024)]


def test_ext4_without_a_journal_and_with_an_external_one():
    assert sb._ext4_info(ext4_image(compat=0).read, PS)["log"]["kind"] == "unknown"
    assert sb._ext4_info(ext4_image(jdev=0x801).read, PS)["log"] == {
        "kind": "external", "ranges": [], "fc_ranges": [], "bytes": 0}


def test_ext4_corrupt_journal_map_is_unknown_with_a_warning(caplog):
    img = ext4_image(extent_magic=0x1234)
    with caplog.at_level(logging.WARNING, logger="iowhy"):
        info = sb._ext4_info(img.read, PS)
    assert info["uuid"] == str(UUID)  # the rest of what was read is kept
    assert info["log"]["kind"] == "unknown" and info["log"]["ranges"] == []
    assert "journal placement unknown" in caplog.text


def test_ext4_without_magic_is_refused():
    with pytest.raises(ValueError, match="no ext4 superblock magic"):
        sb._ext4_info(Image().read, PS)


def test_unwritten_extent_maps_the_same_blocks():
    node = bytearray(24)
    struct.pack_into("<HHHH", node, 0, sb.EXT4_EXT_MAGIC, 1, 4, 0)
    struct.pack_into("<IHHI", node, 12, 0, sb.EXT4_EXT_INIT_MAX_LEN + 7, 0, 300)
    assert sb._ext4_extent_tree(Image().read, bytes(node), BS) == [(0, 300, 7)]


def test_ext4_extent_tree_with_index_level():
    bs = 1024
    leaf = bytearray(bs)
    struct.pack_into("<HHHHI", leaf, 0, 0xF30A, 2, 84, 0, 0)
    struct.pack_into("<IHHI", leaf, 12, 0, 100, 0, 5000)
    struct.pack_into("<IHHI", leaf, 24, 100, 32768 + 28, 1, 7)  # unwritten, above 4 GiB
    root = bytearray(60)
    struct.pack_into("<HHHHI", root, 0, 0xF30A, 1, 4, 1, 0)
    struct.pack_into("<IIHH", root, 12, 0, 42, 0, 0)
    reads = []

    def read(off, length):
        reads.append((off, length))
        assert off == 42 * bs
        return bytes(leaf[:length])
    got = sb._ext4_extent_tree(read, bytes(root), bs)
    assert got == [(0, 5000, 100), (100, (1 << 32) + 7, 28)]
    assert reads == [(42 * bs, bs)]
    assert sb._map_range(got, 90, 110) == [(90, 5090, 10), (100, (1 << 32) + 7, 10)]
    root[0] = 0
    with pytest.raises(ValueError):
        sb._ext4_extent_tree(read, bytes(root), bs)


def test_extent_tree_too_deep_is_corrupt():
    node = bytearray(24)
    struct.pack_into("<HHHH", node, 0, sb.EXT4_EXT_MAGIC, 1, 4, sb.EXT4_EXT_MAX_DEPTH + 1)
    with pytest.raises(ValueError, match="corrupt"):
        sb._ext4_extent_tree(Image().read, bytes(node), BS)


def test_indirect_map_follows_the_indirect_block_and_joins_runs():
    img = Image()
    per = BS // 4
    img.put(50 * BS, struct.pack(f"<{per}I", *range(22, 22 + per)))  # blocks 12.. -> 22..
    i_block = struct.pack("<15I", *range(10, 22), 50, 0, 0)  # 12 direct: 10..21
    assert sb._ext4_indirect_map(img.read, i_block, BS, 20) == [(0, 10, 20)]
    # a hole (pointer 0) splits the map
    i_block = struct.pack("<15I", 10, 11, 0, 13, *[0] * 11)
    assert sb._ext4_indirect_map(img.read, i_block, BS, 4) == [(0, 10, 2), (3, 13, 1)]


def test_merge_joins_touching_and_drops_empty():
    assert sb._merge([[10, 20], [0, 5], [20, 30], [25, 27], [40, 40]]) == [[0, 5], [10, 30]]
    assert sb._merge([[8, 16], [0, 8], [20, 24], [22, 30], [5, 5]]) == [[0, 16], [20, 30]]


def xfs_image(bs: int = BS, logstart: int = (2 << 16) + 10, logblocks: int = 2560) -> Image:
    s = bytearray(512)
    s[:4] = sb.XFS_MAGIC
    struct.pack_into(">I", s, 4, bs)
    s[32:48] = UUID.bytes
    struct.pack_into(">Q", s, 48, logstart)
    struct.pack_into(">I", s, 84, 50_000)  # blocks per AG
    struct.pack_into(">I", s, 96, logblocks)
    s[124] = 16  # log2 of the AG block numbers' range
    img = Image()
    img.put(0, s)
    return img


def test_xfs_internal_log_from_its_ag_encoded_start():
    info = sb._xfs_info(xfs_image().read, PS)
    start = PS + (2 * 50_000 + 10) * SPB  # AG 2, block 10 of it
    assert info["uuid"] == str(UUID) and info["block_bytes"] == BS
    assert info["log"] == {"kind": "xfs", "ranges": [[start, start + 2560 * SPB]],
                           "fc_ranges": [], "bytes": 2560 * BS}


def test_xfs_external_log_and_bad_input():
    assert sb._xfs_info(xfs_image(logstart=0).read, PS)["log"]["kind"] == "external"
    with pytest.raises(ValueError, match="odd XFS block size"):
        sb._xfs_info(xfs_image(bs=1000).read, PS)
    with pytest.raises(ValueError, match="no XFS superblock magic"):
        sb._xfs_info(Image().read, PS)


def btrfs_image(total_bytes: int) -> Image:
    s = bytearray(0x100)
    s[0x20:0x30] = UUID.bytes
    s[0x40:0x48] = sb.BTRFS_MAGIC
    struct.pack_into("<I", s, 0x90, BS)
    struct.pack_into("<Q", s, 0xC9 + 8, total_bytes)
    img = Image()
    img.put(sb.BTRFS_SUPER_OFFSETS[0], s)
    return img


def test_btrfs_superblock_copies_that_fit_the_device():
    info = sb._btrfs_info(btrfs_image(1 << 30).read, PS, None)
    assert info["btrfs_fsid"] == info["uuid"] == str(UUID)
    assert info["log"]["ranges"] == [[PS + 128, PS + 136], [PS + (64 << 11), PS + (64 << 11) + 8]]
    assert info["log"]["bytes"] == 2 * sb.BTRFS_SUPER_SIZE
    assert sb._btrfs_fsid(btrfs_image(0).read) == str(UUID)


def test_btrfs_size_falls_back_to_the_device():
    assert len(sb._btrfs_info(btrfs_image(0).read, PS, None)["log"]["ranges"]) == 1
    assert len(sb._btrfs_info(btrfs_image(0).read, PS, 1 << 40)["log"]["ranges"]) == 3
    with pytest.raises(ValueError, match="no btrfs superblock magic"):
        sb._btrfs_info(Image().read, PS, None)


def test_reader_for_reads_and_refuses_a_short_read(tmp_path):
    p = tmp_path / "dev"
    p.write_bytes(b"0123456789")
    read = sb._reader_for(str(p))
    assert read(2, 3) == b"234"
    with pytest.raises(ValueError, match="short read at byte 8"):
        read(8, 4)


def test_btrfs_copy_that_ends_at_the_device_end_is_not_written():
    # the kernel writes a copy only if it ends before the device does
    mirror = sb.BTRFS_SUPER_OFFSETS[1] + sb.BTRFS_SUPER_SIZE
    assert len(sb._btrfs_info(btrfs_image(mirror).read, PS, None)["log"]["ranges"]) == 1
    assert len(sb._btrfs_info(btrfs_image(mirror + 1).read, PS, None)["log"]["ranges"]) == 2
