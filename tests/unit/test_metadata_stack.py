"""The device stack in the metadata, read from a fake sysfs tree: partitions, loop
devices and the device under their backing file, device-mapper and md slaves,
bio-based devices, and an XFS external log device."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from iowhy import metadata


class FakeSys:
    """A sysfs tree under tmp: /sys/devices/virtual/block/<disk>[/<part>], with
    /sys/block/<disk> and /sys/dev/block/<maj:min> symlinks as the kernel makes them."""

    def __init__(self, root: Path) -> None:
        self.root = root
        for d in ("block", "dev/block", "devices/virtual/block"):
            (root / d).mkdir(parents=True, exist_ok=True)

    def disk(self, name: str, major: int, minor: int, size_sectors: int = 2048,
             mq: bool = True) -> Path:
        d = self.root / "devices/virtual/block" / name
        (d / "queue").mkdir(parents=True)
        (d / "slaves").mkdir()
        (d / "holders").mkdir()
        (d / "dev").write_text(f"{major}:{minor}\n")
        (d / "size").write_text(f"{size_sectors}\n")
        q = d / "queue"
        for f, v in (("rotational", "0"), ("write_cache", "write back"), ("fua", "0"),
                     ("logical_block_size", "512"), ("physical_block_size", "512")):
            (q / f).write_text(v + "\n")
        if mq:
            (d / "mq").mkdir()
            (q / "scheduler").write_text("[none] mq-deadline\n")
        (self.root / "block" / name).symlink_to(d)
        (self.root / "dev/block" / f"{major}:{minor}").symlink_to(d)
        return d

    def part(self, disk: str, name: str, major: int, minor: int, start: int) -> Path:
        p = self.root / "devices/virtual/block" / disk / name
        p.mkdir()
        (p / "partition").write_text("1\n")
        (p / "start").write_text(f"{start}\n")
        (p / "size").write_text("1024\n")
        (p / "dev").write_text(f"{major}:{minor}\n")
        (self.root / "dev/block" / f"{major}:{minor}").symlink_to(p)
        return p

    def slave(self, upper: str, lower_dir: Path) -> None:
        up = self.root / "devices/virtual/block" / upper
        (up / "slaves" / lower_dir.name).symlink_to(lower_dir)
        (lower_dir / "holders").mkdir(exist_ok=True)
        (lower_dir / "holders" / upper).symlink_to(up)

    def loop(self, name: str, minor: int, backing: Path, dio: int = 0) -> Path:
        d = self.disk(name, 7, minor)
        (d / "loop").mkdir()
        (d / "loop/backing_file").write_text(f"{backing}\n")
        (d / "loop/offset").write_text("0\n")
        (d / "loop/sizelimit").write_text("0\n")
        (d / "loop/dio").write_text(f"{dio}\n")
        return d


@pytest.fixture
def stack(tmp_path):
    """vda (a partition vda1 at sector 2048), the disk holding tmp_path (as `hostdisk`,
    under its real st_dev), loop0 on a file in tmp_path, loop1 on a file "inside" loop0
    (its st_dev made loop0's by a fake mount table), dm-0 over loop1 and vda1 (bio-based),
    md0 over vda (bio-based), zram0 (bio-based)."""
    fs = FakeSys(tmp_path / "sys")
    vda = fs.disk("vda", 8, 0, size_sectors=1 << 20)
    vda1 = fs.part("vda", "vda1", 8, 1, 2048)
    st = os.stat(tmp_path)
    host = (os.major(st.st_dev), os.minor(st.st_dev))
    assert host[0] not in (7, 8, 9, 252, 253), "tmp lives on a device the fixture fakes"
    fs.disk("hostdisk", *host)
    outer = tmp_path / "outer.img"
    outer.write_bytes(b"\0" * 4096)
    fs.loop("loop0", 0, outer)
    inner = tmp_path / "inner.img"
    inner.write_bytes(b"\0" * 4096)
    loop1 = fs.loop("loop1", 1, inner, dio=1)
    dm = fs.disk("dm-0", 253, 0, mq=False)
    (dm / "dm").mkdir()
    (dm / "dm/name").write_text("vg-lv\n")
    (dm / "dm/uuid").write_text("LVM-abc\n")
    fs.slave("dm-0", loop1)
    fs.slave("dm-0", vda1)
    md = fs.disk("md0", 9, 0, mq=False)
    (md / "md").mkdir()
    (md / "md/level").write_text("raid1\n")
    fs.slave("md0", vda)
    fs.disk("zram0", 252, 0, mq=False)
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text("")
    return fs, host, mountinfo


def test_devices_name_kind_queue_and_slaves(stack):
    fs, host, mountinfo = stack
    m = metadata.collect(sys_root=str(fs.root), mountinfo=str(mountinfo))
    by = {d["name"]: d for d in m["devices"]}
    assert by["vda"]["kind"] == "disk" and by["vda"]["bio_based"] is False
    assert by["vda"]["partitions"][0]["start_sector"] == 2048
    assert by["vda"]["holders"] == ["md0"]
    assert by["dm-0"]["kind"] == "dm" and by["dm-0"]["bio_based"] is True
    assert by["dm-0"]["dm"] == {"name": "vg-lv", "uuid": "LVM-abc"}
    assert by["dm-0"]["slaves"] == ["loop1", "vda1"]
    assert by["md0"]["md"] == {"level": "raid1"} and by["md0"]["slaves"] == ["vda"]
    assert by["zram0"]["kind"] == "zram" and by["zram0"]["bio_based"] is True
    assert by["zram0"]["scheduler"] == "none"
    assert m["bio_based_devices"] == ["dm-0", "md0", "zram0"]
    lp = by["loop0"]["loop"]
    st = os.stat(lp["backing_file"])
    assert (lp["backing_dev_major"], lp["backing_dev_minor"]) == host
    assert lp["backing_ino"] == st.st_ino and lp["backing_disk"] == "hostdisk"
    assert lp["offset_bytes"] == 0 and lp["dio"] == 0
    assert by["loop1"]["loop"]["dio"] == 1
    assert by["vda"]["loop"] is None and by["vda"]["dm"] is None


def test_stack_edges_reach_the_bottom(stack):
    fs, host, mountinfo = stack
    m = metadata.collect(sys_root=str(fs.root), mountinfo=str(mountinfo))
    edges = {(e["upper"], e["lower"], e["via"]) for e in m["stack"]}
    assert ("dm-0", "loop1", "slave") in edges
    assert ("dm-0", "vda", "slave") in edges  # through the partition vda1
    assert ("md0", "vda", "slave") in edges
    assert ("loop0", "hostdisk", "loop") in edges
    assert ("loop1", "hostdisk", "loop") in edges
    e = next(e for e in m["stack"] if e["upper"] == "dm-0" and e["lower"] == "vda")
    assert (e["lower_dev_major"], e["lower_dev_minor"]) == (8, 1)
    assert m["lower_devices"] == []  # nothing was filtered out


def test_filtered_devices_keep_their_lower_devices_apart(stack):
    fs, host, mountinfo = stack
    m = metadata.collect(devices=[(253, 0)], sys_root=str(fs.root), mountinfo=str(mountinfo))
    assert [d["name"] for d in m["devices"]] == ["dm-0"]
    assert sorted(d["name"] for d in m["lower_devices"]) == ["hostdisk", "loop1", "vda"]
    assert {(e["upper"], e["lower"]) for e in m["stack"]} == {
        ("dm-0", "loop1"), ("dm-0", "vda"), ("loop1", "hostdisk")}
    assert m["bio_based_devices"] == ["dm-0"]


def test_loop_on_a_file_of_a_btrfs_like_anonymous_device(stack, tmp_path, monkeypatch):
    """A backing file whose st_dev is no block device (btrfs): the mount table's source
    names the device."""
    fs, host, mountinfo = stack
    mountinfo.write_text("40 1 0:99 / /mnt rw - btrfs /dev/fake rw\n")
    real = os.stat

    def fake_stat(path, *a, **kw):
        st = real(path, *a, **kw)
        if str(path).endswith("outer.img"):
            return os.stat_result((st.st_mode, st.st_ino, os.makedev(0, 99)) + tuple(st)[3:])
        return st
    monkeypatch.setattr(metadata.os, "stat", fake_stat)
    monkeypatch.setattr(metadata, "_blockdev_of_path",
                        lambda p: (8, 1) if p == "/dev/fake" else None)
    m = metadata.collect(sys_root=str(fs.root), mountinfo=str(mountinfo))
    lp = next(d for d in m["devices"] if d["name"] == "loop0")["loop"]
    assert (lp["backing_dev_major"], lp["backing_dev_minor"]) == (8, 1)
    assert lp["backing_disk"] == "vda" and lp["backing_part_start_sector"] == 2048


def test_xfs_external_log_device(stack, monkeypatch):
    fs, host, mountinfo = stack
    monkeypatch.setattr(metadata, "_blockdev_of_path",
                        lambda p: (8, 1) if p == "/dev/vda1" else None)
    with metadata._roots(str(fs.root), str(mountinfo)):
        got = metadata._external_log_device("xfs", "rw,logdev=/dev/vda1,noquota", 10 << 20)
        missing = metadata._external_log_device("xfs", "rw,noquota", 10 << 20)
        other = metadata._external_log_device("ext4", "rw,logdev=/dev/vda1", 10 << 20)
    assert got == {"source": "/dev/vda1", "dev_major": 8, "dev_minor": 1, "disk": "vda",
                   "disk_major": 8, "disk_minor": 0,
                   "ranges": [[2048, 2048 + (10 << 20) // 512]]}
    assert missing is None and other is None
    assert metadata.SYS_BLOCK == "/sys/block"  # the roots are put back


def test_record_dev_also_records_the_devices_below(stack):
    """`record --dev dm-0` passes the recorder dm-0 and every device under it (loop1, the
    disk under loop1's backing file, vda: not its partition, requests carry the disk),
    and the report names them from `lower_devices`."""
    from iowhy.cli import _devices_below
    from iowhy.model.devices import device_names
    fs, host, mountinfo = stack
    m = metadata.collect(devices=[(253, 0)], sys_root=str(fs.root), mountinfo=str(mountinfo))
    below = _devices_below(m, [(253, 0)])
    assert sorted(below) == sorted([(7, 1), (8, 0), host])
    assert _devices_below(m, [(253, 0), (7, 1)]) == [d for d in below if d != (7, 1)]
    assert device_names(m, [(253, 0), (7, 1), (8, 0), (1, 2)]) == [
        "dm-0", "loop1", "vda", "1:2"]


def test_filesystems_of_the_devices_below_are_described(stack):
    """A filesystem on a device below the recorded ones (here ext4 on vda1, under dm-0)
    is described too: its journal range is what classes the lower device's log writes."""
    fs, host, mountinfo = stack
    mountinfo.write_text("36 35 8:1 / /srv rw,relatime shared:1 - ext4 /dev/vda1 rw\n")
    m = metadata.collect(devices=[(253, 0)], sys_root=str(fs.root), mountinfo=str(mountinfo))
    got = [(f["mountpoint"], f["disk"], f["part_start_sector"]) for f in m["filesystems"]]
    assert got == [("/srv", "vda", 2048)]
    m = metadata.collect(devices=[(9, 0)], sys_root=str(fs.root), mountinfo=str(mountinfo))
    assert [f["disk"] for f in m["filesystems"]] == ["vda"]  # md0 over vda
    m = metadata.collect(devices=[(252, 0)], sys_root=str(fs.root), mountinfo=str(mountinfo))
    assert m["filesystems"] == []  # zram0 has nothing below it
