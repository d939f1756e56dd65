"""On-disk superblock parsers for metadata.collect(): the ext4 superblock, journal inode
and jbd2 superblock (where the journal and its fast-commit area lie), the XFS superblock
(where the internal log lies) and the btrfs superblock (fsid and the superblock copies every
commit rewrites). Each reads through a ReadFn and returns disk-relative 512-byte sectors."""

from __future__ import annotations

import logging
import os
import struct
import uuid
from typing import Callable

log = logging.getLogger("iowhy")

SECTOR = 512

Range = list[int]  # [start_sector, end_sector_exclusive]
Extent = tuple[int, int, int]  # (logical block, physical block, length in blocks)
ReadFn = Callable[[int, int], bytes]  # (byte offset, length) -> bytes

# ext4 on-disk layout (struct ext4_super_block, little-endian; checked against the
# kernel's BTF for 6.18). Offsets are within the superblock, which starts at byte 1024.
EXT4_SB_OFFSET = 1024
EXT4_MAGIC = 0xEF53
EXT4_COMPAT_HAS_JOURNAL = 0x0004
EXT4_COMPAT_FAST_COMMIT = 0x0400
EXT4_INCOMPAT_JOURNAL_DEV = 0x0008
EXT4_INCOMPAT_64BIT = 0x0080
EXT4_EXTENTS_FL = 0x80000
EXT4_EXT_MAGIC = 0xF30A
EXT4_EXT_MAX_DEPTH = 5
EXT4_EXT_INIT_MAX_LEN = 1 << 15
EXT3_JNL_BACKUP_BLOCKS = 1
# jbd2 superblock (journal_superblock_t, big-endian), in the journal's first block.
JBD2_MAGIC = 0xC03B3998
JBD2_SUPERBLOCK_V2 = 4
JBD2_INCOMPAT_FAST_COMMIT = 0x20
JBD2_DEFAULT_FC_BLOCKS = 256

# XFS (struct xfs_dsb, big-endian, at byte 0 of the data device).
XFS_MAGIC = b"XFSB"

# btrfs: primary superblock at 64 KiB, mirrors at 16 KiB << (12 * i) for i = 1, 2.
BTRFS_MAGIC = b"_BHRfS_M"
BTRFS_SUPER_OFFSETS = (64 << 10, 64 << 20, 256 << 30)
BTRFS_SUPER_SIZE = 4096


def _unknown_log() -> dict:
    return {"kind": "unknown", "ranges": [], "fc_ranges": [], "bytes": 0}


def _reader_for(node: str) -> ReadFn:
    """pread-based reader on a device node, opened per call (few reads, no fd leaks)."""
    def read(offset: int, length: int) -> bytes:
        fd = os.open(node, os.O_RDONLY | os.O_CLOEXEC)
        try:
            data = os.pread(fd, length, offset)
        finally:
            os.close(fd)
        if len(data) != length:
            raise ValueError(f"short read at byte {offset} of {node}")
        return data
    return read


def _merge(ranges: list[Range]) -> list[Range]:
    """Sorted, with overlapping or touching ranges joined."""
    out: list[Range] = []
    for s, e in sorted(ranges):
        if e <= s:
            continue
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def _le32(buf: bytes, off: int) -> int:
    return int(struct.unpack_from("<I", buf, off)[0])


def _le16(buf: bytes, off: int) -> int:
    return int(struct.unpack_from("<H", buf, off)[0])


def _be32(buf: bytes, off: int) -> int:
    return int(struct.unpack_from(">I", buf, off)[0])


def _be64(buf: bytes, off: int) -> int:
    return int(struct.unpack_from(">Q", buf, off)[0])


# ext4 ----------------------------------------------------------------------------------

def _ext4_info(read: ReadFn, part_start: int) -> dict:
    sb = read(EXT4_SB_OFFSET, 1024)
    if _le16(sb, 0x38) != EXT4_MAGIC:
        raise ValueError("no ext4 superblock magic")
    bs = 1024 << _le32(sb, 0x18)
    info = {"uuid": str(uuid.UUID(bytes=sb[0x68:0x78])), "block_bytes": bs}
    try:
        info["log"] = _ext4_log(read, sb, bs, part_start)
    except (OSError, ValueError, struct.error) as e:
        log.warning("ext4 journal placement unknown: %s", e)
        info["log"] = _unknown_log()
    return info


def _ext4_log(read: ReadFn, sb: bytes, bs: int, part_start: int) -> dict:
    compat, incompat = _le32(sb, 0x5C), _le32(sb, 0x60)
    if not compat & EXT4_COMPAT_HAS_JOURNAL:
        return _unknown_log()  # no journal at all
    inum, jdev = _le32(sb, 0xE0), _le32(sb, 0xE4)
    if inum == 0 or jdev != 0 or incompat & EXT4_INCOMPAT_JOURNAL_DEV:
        return {"kind": "external", "ranges": [], "fc_ranges": [], "bytes": 0}

    extents = _ext4_journal_extents(read, sb, bs, inum)
    spb = bs // SECTOR

    def to_sectors(exts: list[Extent]) -> list[Range]:
        return _merge([[part_start + p * spb, part_start + (p + n) * spb] for _, p, n in exts])

    ranges = to_sectors(extents)
    try:
        fc_ranges = to_sectors(_jbd2_fc_area(read, extents, bs, compat))
    except (OSError, ValueError, struct.error) as e:
        log.warning("ext4 fast-commit area unknown: %s", e)
        fc_ranges = []
    return {"kind": "jbd2", "ranges": ranges, "fc_ranges": fc_ranges,
            "bytes": sum(e - s for s, e in ranges) * SECTOR}


def _jbd2_fc_area(read: ReadFn, extents: list[Extent], bs: int, ext4_compat: int
                  ) -> list[Extent]:
    """The journal blocks reserved for fast commits: the last s_num_fc_blks of the journal
    (jbd2's default when the field is 0); none when fast commit is off."""
    jsb = read(_map_block(extents, 0) * bs, 1024)
    if _be32(jsb, 0) != JBD2_MAGIC:
        raise ValueError("journal superblock has no jbd2 magic")
    # ext4 sets its compat bit at mkfs/tune2fs time; jbd2's incompat bit appears once
    # fast commits may be in the journal. Either means the tail is reserved.
    if not (ext4_compat & EXT4_COMPAT_FAST_COMMIT
            or _be32(jsb, 0x28) & JBD2_INCOMPAT_FAST_COMMIT):
        return []
    nfc = _be32(jsb, 0x54) if _be32(jsb, 4) == JBD2_SUPERBLOCK_V2 else 0
    nfc = nfc or JBD2_DEFAULT_FC_BLOCKS
    mapped_end = max(lblk + n for lblk, _, n in extents)
    maxlen = _be32(jsb, 0x10)
    end = min(maxlen, mapped_end) if maxlen else mapped_end
    return _map_range(extents, max(0, end - nfc), end)


def _ext4_journal_extents(read: ReadFn, sb: bytes, bs: int, inum: int) -> list[Extent]:
    """The journal inode's block map, from the inode itself or else the superblock's copy."""
    try:
        i_block, size, flags = _ext4_read_inode(read, sb, bs, inum)
    except (OSError, ValueError, struct.error) as e:
        if sb[0xFD] != EXT3_JNL_BACKUP_BLOCKS:
            raise
        log.debug("journal inode unreadable (%s); using the superblock's backup", e)
        jnl = sb[0x10C:0x10C + 17 * 4]
        i_block = jnl[:60]
        size = (_le32(jnl, 60) << 32) | _le32(jnl, 64)
        flags = EXT4_EXTENTS_FL if _le16(i_block, 0) == EXT4_EXT_MAGIC else 0
    nblocks = (size + bs - 1) // bs
    if flags & EXT4_EXTENTS_FL:
        extents = _ext4_extent_tree(read, i_block, bs)
    else:
        extents = _ext4_indirect_map(read, i_block, bs, nblocks)
    if not extents:
        raise ValueError("the journal inode maps no blocks")
    return sorted(extents)


def _ext4_read_inode(read: ReadFn, sb: bytes, bs: int, inum: int) -> tuple[bytes, int, int]:
    """(i_block, i_size, i_flags) of an inode, located through the group descriptors."""
    ipg = _le32(sb, 0x28)
    if ipg == 0:
        raise ValueError("zero inodes per group")
    isize = _le16(sb, 0x58) if _le32(sb, 0x4C) >= 1 else 128
    desc_size = 32
    if _le32(sb, 0x60) & EXT4_INCOMPAT_64BIT:
        desc_size = _le16(sb, 0xFE) or 64
    group, index = divmod(inum - 1, ipg)
    gdt_block = _le32(sb, 0x14) + 1
    desc = read(gdt_block * bs + group * desc_size, desc_size)
    table = _le32(desc, 0x08)
    if desc_size >= 64:
        table |= _le32(desc, 0x28) << 32
    if table == 0:
        raise ValueError("group descriptor has no inode table")
    ino = read(table * bs + index * isize, 128)
    size = _le32(ino, 0x04) | (_le32(ino, 0x6C) << 32)
    return ino[0x28:0x28 + 60], size, _le32(ino, 0x20)


def _ext4_extent_tree(read: ReadFn, node: bytes, bs: int, depth_left: int = EXT4_EXT_MAX_DEPTH
                      ) -> list[Extent]:
    """Leaf extents under an extent-tree node (the inode's root or an on-disk block)."""
    magic, entries, _, depth = struct.unpack_from("<HHHH", node, 0)
    if magic != EXT4_EXT_MAGIC:
        raise ValueError("bad extent header magic")
    if depth > depth_left or 12 + entries * 12 > len(node):
        raise ValueError("corrupt extent tree")
    out: list[Extent] = []
    for i in range(entries):
        off = 12 + 12 * i
        if depth == 0:
            lblk, length, hi, lo = struct.unpack_from("<IHHI", node, off)
            if length > EXT4_EXT_INIT_MAX_LEN:
                length -= EXT4_EXT_INIT_MAX_LEN  # unwritten extent: same blocks
            out.append((lblk, (hi << 32) | lo, length))
        else:
            _, lo, hi = struct.unpack_from("<IIH", node, off)
            child = read(((hi << 32) | lo) * bs, bs)
            out.extend(_ext4_extent_tree(read, child, bs, depth - 1))
    return out


def _ext4_indirect_map(read: ReadFn, i_block: bytes, bs: int, nblocks: int) -> list[Extent]:
    """Block-mapped (ext3-style) inode: follow direct, indirect, double and triple blocks."""
    per = bs // 4
    ptrs = struct.unpack_from("<15I", i_block, 0)
    blocks: list[int] = list(ptrs[:12])

    def walk(blk: int, level: int) -> None:
        if len(blocks) >= nblocks:
            return
        if blk == 0:
            blocks.extend([0] * min(per ** level, nblocks - len(blocks)))
            return
        children = struct.unpack_from(f"<{per}I", read(blk * bs, bs), 0)
        for c in children:
            if len(blocks) >= nblocks:
                return
            if level == 1:
                blocks.append(c)
            else:
                walk(c, level - 1)

    for level, blk in ((1, ptrs[12]), (2, ptrs[13]), (3, ptrs[14])):
        walk(blk, level)
    out: list[Extent] = []
    for lblk, pblk in enumerate(blocks[:nblocks]):
        if pblk == 0:
            continue
        if out and out[-1][0] + out[-1][2] == lblk and out[-1][1] + out[-1][2] == pblk:
            out[-1] = (out[-1][0], out[-1][1], out[-1][2] + 1)
        else:
            out.append((lblk, pblk, 1))
    return out


def _map_block(extents: list[Extent], lblk: int) -> int:
    for start, pblk, n in extents:
        if start <= lblk < start + n:
            return pblk + lblk - start
    raise ValueError(f"journal block {lblk} is not mapped")


def _map_range(extents: list[Extent], first: int, end: int) -> list[Extent]:
    """The physical pieces of logical blocks [first, end)."""
    out = []
    for start, pblk, n in extents:
        s, e = max(first, start), min(end, start + n)
        if s < e:
            out.append((s, pblk + s - start, e - s))
    return out


# XFS -----------------------------------------------------------------------------------

def _xfs_info(read: ReadFn, part_start: int) -> dict:
    sb = read(0, 512)
    if sb[:4] != XFS_MAGIC:
        raise ValueError("no XFS superblock magic")
    bs = _be32(sb, 4)
    logstart = _be64(sb, 48)
    agblocks = _be32(sb, 84)
    logblocks = _be32(sb, 96)
    agblklog = sb[124]
    info: dict = {"uuid": str(uuid.UUID(bytes=sb[32:48])), "block_bytes": bs}
    nbytes = logblocks * bs
    if logstart == 0:
        info["log"] = {"kind": "external", "ranges": [], "fc_ranges": [], "bytes": nbytes}
        return info
    if bs < SECTOR or bs % SECTOR:
        raise ValueError(f"odd XFS block size {bs}")
    # logstart is an AG-encoded fs block number: AG in the high bits, block in AG below.
    agno, agbno = logstart >> agblklog, logstart & ((1 << agblklog) - 1)
    start = part_start + (agno * agblocks + agbno) * (bs // SECTOR)
    info["log"] = {"kind": "xfs", "ranges": [[start, start + nbytes // SECTOR]],
                   "fc_ranges": [], "bytes": nbytes}
    return info


# btrfs ---------------------------------------------------------------------------------

def _btrfs_fsid(read: ReadFn) -> str:
    sb = read(BTRFS_SUPER_OFFSETS[0], 0x100)
    if sb[0x40:0x48] != BTRFS_MAGIC:
        raise ValueError("no btrfs superblock magic")
    return str(uuid.UUID(bytes=sb[0x20:0x30]))


def _btrfs_info(read: ReadFn, part_start: int, dev_bytes: int | None) -> dict:
    sb = read(BTRFS_SUPER_OFFSETS[0], 0x100)
    if sb[0x40:0x48] != BTRFS_MAGIC:
        raise ValueError("no btrfs superblock magic")
    fsid = str(uuid.UUID(bytes=sb[0x20:0x30]))
    # The size btrfs believes this device has (dev_item.total_bytes) decides which
    # superblock copies it writes; the block device's size stands in if that is unset.
    size = int(struct.unpack_from("<Q", sb, 0xC9 + 8)[0]) or dev_bytes
    # btrfs has no log region: its superblock copies are what every commit rewrites,
    # and the kernel writes a copy only if it ends before the device does.
    ranges = [[part_start + off // SECTOR, part_start + (off + BTRFS_SUPER_SIZE) // SECTOR]
              for off in BTRFS_SUPER_OFFSETS
              if off == BTRFS_SUPER_OFFSETS[0] or (size and off + BTRFS_SUPER_SIZE < size)]
    return {"uuid": fsid, "btrfs_fsid": fsid, "block_bytes": _le32(sb, 0x90),
            "log": {"kind": "btrfs-super", "ranges": ranges, "fc_ranges": [],
                    "bytes": len(ranges) * BTRFS_SUPER_SIZE}}
