"""Record-time metadata: devices from sysfs, filesystems from mountinfo, log placement
read from superblocks, checked against what debugfs, dumpe2fs, xfs_db and blkid say."""

from __future__ import annotations

import logging
import os
import re
import shutil
import stat
import struct
import subprocess
import time
from pathlib import Path

import pytest

from iowhy import metadata, superblocks
from iowhy.metadata import block_device_number, collect

from conftest import need, run


# -- helpers -----------------------------------------------------------------------------

def sysfs(name: str, attr: str) -> str:
    return Path(f"/sys/block/{name}/{attr}").read_text().strip()


def only_fs(meta: dict, mountpoint: Path) -> dict:
    found = [f for f in meta["filesystems"] if f["mountpoint"] == str(mountpoint)]
    assert len(found) == 1, meta["filesystems"]
    return found[0]


def merge(ranges):
    out = []
    for s, e in sorted(ranges):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def debugfs_extents(dev: str) -> list[tuple[int, int, int]]:
    """(logical, physical, length) of the journal inode per `debugfs -R 'stat <8>'`."""
    out = run(["debugfs", "-R", "stat <8>", dev]).stdout
    m = re.search(r"^(?:EXTENTS|BLOCKS):\n(.*)$", out, re.M)
    assert m, out
    exts = []
    # "(0-4159):65536-69695" or "(5):1234"; "(ETB0):..." and "(IND):..." are mapping
    # blocks, not journal blocks.
    for lo, hi, plo in re.findall(r"\((\d+)(?:-(\d+))?\):(\d+)", m.group(1)):
        n = int(hi) - int(lo) + 1 if hi else 1
        exts.append((int(lo), int(plo), n))
    assert exts, m.group(1)
    return sorted(exts)


def dumpe2fs(dev: str) -> dict[str, str]:
    out = run(["dumpe2fs", "-h", dev]).stdout
    return {k.strip(): v.strip() for k, _, v in
            (line.partition(":") for line in out.splitlines()) if v}


def blkid_uuid(dev: str) -> str:
    return run(["blkid", "-p", "-s", "UUID", "-o", "value", dev]).stdout.strip()


def write_mbr(img: Path, start: int, sectors: int) -> None:
    """A DOS partition table with one Linux partition (no partitioning tool needed)."""
    entry = struct.pack("<B3sB3sII", 0, b"\xff\xff\xff", 0x83, b"\xff\xff\xff", start, sectors)
    with open(img, "r+b") as f:
        f.seek(446)
        f.write(entry)
        f.seek(510)
        f.write(b"\x55\xaa")


def xfs_db(dev: str, *cmds: str) -> str:
    args = ["xfs_db", "-r"]
    for c in cmds:
        args += ["-c", c]
    return run(args + [dev]).stdout


# -- loop devices ------------------------------------------------------------------------

def test_block_device_number_loop(make_loop):
    lp = make_loop(64)
    assert block_device_number(lp.dev) == (lp.major, lp.minor)
    assert block_device_number(f"{lp.major}:{lp.minor}") == (lp.major, lp.minor)


def test_devices_follow_sysfs(make_loop):
    a, b = make_loop(64), make_loop(96)
    b.set_write_cache("write through")
    meta = collect(None, [(a.major, a.minor), (b.major, b.minor)])
    devs = {d["name"]: d for d in meta["devices"]}
    assert set(devs) == {a.name, b.name}
    for lp, mib in ((a, 64), (b, 96)):
        d = devs[lp.name]
        assert (d["major"], d["minor"]) == (lp.major, lp.minor)
        assert d["size_bytes"] == mib << 20
        assert d["write_cache"] == lp.write_cache()
        assert d["rotational"] == int(sysfs(lp.name, "queue/rotational"))
        assert d["fua"] == int(sysfs(lp.name, "queue/fua"))
        assert d["logical_block_bytes"] == int(sysfs(lp.name, "queue/logical_block_size"))
        assert d["physical_block_bytes"] == int(sysfs(lp.name, "queue/physical_block_size"))
        assert d["scheduler"] in sysfs(lp.name, "queue/scheduler")
        assert d["backing_file"] == str(lp.backing)
        assert d["partitions"] == []
    assert devs[b.name]["write_cache"] == "write through"
    assert devs[a.name]["write_cache"] == "write back"
    # Without a filter every bound loop device is listed, these two included.
    names = {d["name"] for d in collect(None, None)["devices"]}
    assert {a.name, b.name} <= names


@pytest.mark.parametrize("mkfs_args", [(), ("-b", "1024"), ("-O", "^extent,^64bit")],
                         ids=["4k", "1k", "blockmap"])
def test_ext4_journal_matches_debugfs(make_fs, mkfs_args):
    lp, mnt = make_fs("ext4", mkfs_args=mkfs_args)
    meta = collect(None, [(lp.major, lp.minor)])
    assert [d["name"] for d in meta["devices"]] == [lp.name]
    fs = only_fs(meta, mnt)
    info = dumpe2fs(lp.dev)
    bs = int(info["Block size"])
    assert fs["fstype"] == "ext4" and fs["source"] == lp.dev
    assert (fs["dev_major"], fs["dev_minor"]) == (lp.major, lp.minor)
    assert (fs["st_dev_major"], fs["st_dev_minor"]) == (lp.major, lp.minor)
    assert (fs["disk"], fs["disk_major"], fs["disk_minor"]) == (lp.name, lp.major, lp.minor)
    assert fs["part_start_sector"] == 0
    assert fs["uuid"] == blkid_uuid(lp.dev) == info["Filesystem UUID"]
    assert fs["btrfs_fsid"] is None
    assert fs["block_bytes"] == bs
    assert "rw" in fs["options"].split(",")

    spb = bs // 512
    want = merge([[p * spb, (p + n) * spb] for _, p, n in debugfs_extents(lp.dev)])
    lg = fs["log"]
    assert lg["kind"] == "jbd2"
    assert lg["ranges"] == want
    assert lg["bytes"] == int(info["Total journal blocks"]) * bs
    assert lg["fc_ranges"] == []


def test_ext4_fast_commit_area(make_fs):
    lp, mnt = make_fs("ext4", mkfs_args=("-O", "fast_commit"))
    fs = only_fs(collect(None, [(lp.major, lp.minor)]), mnt)
    info = dumpe2fs(lp.dev)
    spb = int(info["Block size"]) // 512
    nfc = int(info["Fast commit length"])
    assert nfc > 0
    exts = debugfs_extents(lp.dev)
    # The fast-commit area is the journal's last nfc blocks, mapped through its extents.
    blocks = [p + i for _, p, n in exts for i in range(n)]
    assert len(blocks) == int(info["Total journal blocks"])
    lg = fs["log"]
    assert lg["kind"] == "jbd2"
    assert lg["ranges"] == merge([[p * spb, (p + n) * spb] for _, p, n in exts])
    assert lg["fc_ranges"] == merge([[b * spb, (b + 1) * spb] for b in blocks[-nfc:]])
    assert sum(e - s for s, e in lg["fc_ranges"]) == nfc * spb
    # fc area lies inside the journal
    for s, e in lg["fc_ranges"]:
        assert any(rs <= s and e <= re_ for rs, re_ in lg["ranges"])


def test_ext4_superblock_backup_agrees_with_inode(make_fs):
    lp, _ = make_fs("ext4")
    read = metadata._reader_for(lp.dev)
    sb = read(1024, 1024)
    bs = int(dumpe2fs(lp.dev)["Block size"])
    from_inode = superblocks._ext4_journal_extents(read, sb, bs, 8)

    def no_inode(*a):
        raise OSError("inode table unreadable")
    orig = superblocks._ext4_read_inode
    superblocks._ext4_read_inode = no_inode
    try:
        from_backup = superblocks._ext4_journal_extents(read, sb, bs, 8)
    finally:
        superblocks._ext4_read_inode = orig
    assert from_inode == from_backup == debugfs_extents(lp.dev)


def test_ext4_external_journal(make_loop, make_fs):
    jdev = make_loop(64)
    run(["mkfs.ext4", "-q", "-F", "-O", "journal_dev", "-b", "4096", jdev.dev])
    lp, mnt = make_fs("ext4", mkfs_args=("-b", "4096", "-J", f"device={jdev.dev}"))
    fs = only_fs(collect(None, [(lp.major, lp.minor)]), mnt)
    assert fs["log"]["kind"] == "external"
    assert fs["log"]["ranges"] == []


def test_ext4_in_partition(root, tmp_path, request):
    """Log ranges are whole-disk sectors: the partition's start is added."""
    img = tmp_path / "parted.img"
    with open(img, "wb") as f:
        f.truncate(256 << 20)
    write_mbr(img, start=4096, sectors=(200 << 20) // 512)
    dev = run(["losetup", "--find", "--show", "--partscan", str(img)]).stdout.strip()
    mnt = tmp_path / "pmnt"

    def teardown():
        if os.path.ismount(mnt):
            subprocess.run(["umount", str(mnt)], capture_output=True)
        subprocess.run(["losetup", "-d", dev], capture_output=True)
    request.addfinalizer(teardown)

    part = dev + "p1"
    if not os.path.exists(part) and shutil.which("partx"):
        # A kernel without partition-table parsers still accepts partitions via BLKPG.
        subprocess.run(["partx", "--add", dev], capture_output=True)

    def is_blockdev() -> bool:  # a stale regular file of that name is no partition
        try:
            return stat.S_ISBLK(os.stat(part).st_mode)
        except FileNotFoundError:
            return False

    for _ in range(50):
        if is_blockdev():
            break
        time.sleep(0.1)
    need(is_blockdev(), f"loop partitions did not appear ({part} is no block device)")
    run(["mkfs.ext4", "-q", "-F", part])
    mnt.mkdir()
    run(["mount", part, str(mnt)])

    pmaj, pmin = block_device_number(part)
    dmaj, dmin = block_device_number(dev)
    meta = collect(None, [(pmaj, pmin)])  # a partition selects its whole disk
    name = os.path.basename(dev)
    assert [d["name"] for d in meta["devices"]] == [name]
    parts = meta["devices"][0]["partitions"]
    assert [(p["name"], p["major"], p["minor"], p["start_sector"], p["size_bytes"])
            for p in parts] == [(name + "p1", pmaj, pmin, 4096, 200 << 20)]
    fs = only_fs(meta, mnt)
    assert (fs["dev_major"], fs["dev_minor"]) == (pmaj, pmin)
    assert (fs["disk"], fs["disk_major"], fs["disk_minor"]) == (name, dmaj, dmin)
    assert fs["part_start_sector"] == 4096
    spb = int(dumpe2fs(part)["Block size"]) // 512
    want = merge([[4096 + p * spb, 4096 + (p + n) * spb] for _, p, n in debugfs_extents(part)])
    assert fs["log"]["ranges"] == want


def test_xfs_log_matches_xfs_db(make_fs):
    need(shutil.which("xfs_db") is not None, "xfs_db not installed")
    lp, mnt = make_fs("xfs")
    meta = collect(None, [(lp.major, lp.minor)])
    fs = only_fs(meta, mnt)
    out = xfs_db(lp.dev, "sb 0", "print logstart logblocks blocksize uuid")
    sb = dict(re.findall(r"^(\w+) = (\S+)$", out, re.M))
    bs = int(sb["blocksize"])
    conv = xfs_db(lp.dev, f"convert fsb {sb['logstart']} daddr")
    daddr = int(re.search(r"\((\d+)\)", conv).group(1))
    n = int(sb["logblocks"]) * bs // 512
    assert fs["fstype"] == "xfs"
    assert (fs["dev_major"], fs["dev_minor"]) == (lp.major, lp.minor)
    assert (fs["st_dev_major"], fs["st_dev_minor"]) == (lp.major, lp.minor)
    assert fs["block_bytes"] == bs
    assert fs["uuid"] == sb["uuid"] == blkid_uuid(lp.dev)
    assert fs["log"] == {"kind": "xfs", "ranges": [[daddr, daddr + n]], "fc_ranges": [],
                         "bytes": int(sb["logblocks"]) * bs}


def test_xfs_external_log(make_loop, make_fs):
    need(shutil.which("mkfs.xfs") is not None, "mkfs.xfs not installed")
    logdev = make_loop(80)
    lp, mnt = make_fs("xfs", mkfs_args=("-l", f"logdev={logdev.dev},size=64m"),
                      mount_opts=f"logdev={logdev.dev}")
    fs = only_fs(collect(None, [(lp.major, lp.minor)]), mnt)
    assert fs["log"]["kind"] == "external"
    assert fs["log"]["ranges"] == []
    assert fs["log"]["bytes"] == 64 << 20


def test_btrfs_superblocks_and_fsid(make_fs):
    lp, mnt = make_fs("btrfs")
    meta = collect(None, [(lp.major, lp.minor)])
    fs = only_fs(meta, mnt)
    fsid = blkid_uuid(lp.dev)
    assert fs["fstype"] == "btrfs"
    assert fs["btrfs_fsid"] == fs["uuid"] == fsid
    if shutil.which("btrfs"):
        assert f"uuid: {fsid}" in run(["btrfs", "filesystem", "show", lp.dev]).stdout
    assert Path(f"/sys/fs/btrfs/{fsid}").is_dir()
    # st_dev_* is the superblock's s_dev, what btrfs tracepoints carry: an anonymous
    # device, shown by mountinfo (stat() gives the subvolume's, another one); dev_* is
    # the real block device.
    sb_dev = None
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        f = line.split()
        if f[4] == str(mnt):
            sb_dev = tuple(int(x) for x in f[2].split(":"))
    assert (fs["st_dev_major"], fs["st_dev_minor"]) == sb_dev
    assert fs["st_dev_major"] == 0
    assert (fs["dev_major"], fs["dev_minor"]) == (lp.major, lp.minor)
    assert fs["disk"] == lp.name and fs["part_start_sector"] == 0
    assert fs["block_bytes"] == 4096
    # 512 MiB: the 64 KiB and 64 MiB copies fit, the 256 GiB one does not.
    assert fs["log"] == {"kind": "btrfs-super", "ranges": [[128, 136], [131072, 131080]],
                         "fc_ranges": [], "bytes": 8192}


def test_filter_leaves_out_other_devices(make_fs):
    a, ma = make_fs("ext4", size_mib=64)
    b, mb = make_fs("xfs", size_mib=320)
    meta = collect(None, [(b.major, b.minor)])
    assert [d["name"] for d in meta["devices"]] == [b.name]
    # the filesystems of b and of the disks below it (its backing file's), not a's
    below = {d["name"] for d in meta["lower_devices"]}
    assert a.name not in below
    assert [f["mountpoint"] for f in meta["filesystems"] if f["disk"] not in below] == [str(mb)]
    assert str(ma) not in {f["mountpoint"] for f in meta["filesystems"]}
    both = collect(None, None)
    mounts = {f["mountpoint"] for f in both["filesystems"]}
    assert {str(ma), str(mb)} <= mounts


def test_bind_mount_described_once(make_fs, tmp_path, request):
    lp, mnt = make_fs("ext4", size_mib=64)
    (mnt / "sub").mkdir()
    bind = tmp_path / "bind"
    bind.mkdir()
    run(["mount", "--bind", str(mnt / "sub"), str(bind)])
    request.addfinalizer(lambda: subprocess.run(["umount", str(bind)], capture_output=True))
    meta = collect(None, [(lp.major, lp.minor)])
    below = {d["name"] for d in meta["lower_devices"]}
    fss = [f for f in meta["filesystems"] if f["disk"] not in below]
    assert [f["mountpoint"] for f in fss] == [str(mnt)]


def test_unreadable_superblock_warns(make_fs, caplog, monkeypatch):
    lp, mnt = make_fs("ext4", size_mib=64)

    def broken(node):
        def read(offset, length):
            raise OSError(5, "Input/output error")
        return read
    monkeypatch.setattr(metadata, "_reader_for", broken)
    with caplog.at_level(logging.WARNING, logger="iowhy"):
        fs = only_fs(collect(None, [(lp.major, lp.minor)]), mnt)
    assert fs["log"]["kind"] == "unknown" and fs["log"]["ranges"] == []
    assert fs["uuid"] is None and fs["block_bytes"] is None
    assert (fs["dev_major"], fs["dev_minor"]) == (lp.major, lp.minor)
    assert any("superblock" in r.getMessage() for r in caplog.records)
