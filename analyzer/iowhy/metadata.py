"""What the analyzer needs to know about the machine, captured once before recording.

`collect()` describes the host, the block devices and the ext4/XFS/btrfs filesystems on
them, including where each filesystem's log lives on disk, so that the analyzer can classify
log writes by sector without ever touching the device again. Everything here is read-only
and best effort: an unreadable sysfs file or superblock costs a warning and a null field,
never the recording.

Sector numbers are always 512-byte units; log ranges are relative to the whole disk,
because block tracepoints report whole-disk sectors.

The superblock parsers are in superblocks.py.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import socket
import stat
import struct
import time
from typing import Callable, Iterator, TypeVar

from . import __version__
from .superblocks import BTRFS_SUPER_OFFSETS  # noqa: F401 (public here, as before)
from .filesystems import BY_NAME as FS_BY_NAME
from .filesystems import NAMES as LOG_FSTYPES  # the filesystems whose log iowhy places
from .superblocks import SECTOR, _btrfs_fsid, _reader_for, _unknown_log

log = logging.getLogger("iowhy")

# Where collect() reads; collect(sys_root=..., mountinfo=...) points them at a fixture.
SYS_BLOCK = "/sys/block"
SYS_DEV_BLOCK = "/sys/dev/block"
SYS_FS_BTRFS = "/sys/fs/btrfs"
MOUNTINFO = "/proc/self/mountinfo"

T = TypeVar("T")


# -- public API --------------------------------------------------------------------------

def block_device_number(spec: str) -> tuple[int, int]:
    """(major, minor) of a block device given as a path or as "MAJ:MIN"."""
    m = re.fullmatch(r"(\d+):(\d+)", spec.strip())
    if m:
        if not os.path.exists(f"{SYS_DEV_BLOCK}/{int(m[1])}:{int(m[2])}"):
            raise ValueError(f"no block device {spec}")
        return int(m[1]), int(m[2])
    try:
        st = os.stat(spec)
    except FileNotFoundError:
        raise ValueError(f"{spec}: no such file") from None
    except OSError as e:
        raise ValueError(f"{spec}: {e.strerror}") from None
    if not stat.S_ISBLK(st.st_mode):
        raise ValueError(f"{spec} is not a block device")
    return os.major(st.st_rdev), os.minor(st.st_rdev)


@contextlib.contextmanager
def _roots(sys_root: str, mountinfo: str) -> Iterator[None]:
    """Read sysfs under `sys_root` and the mount table from `mountinfo` meanwhile."""
    global SYS_BLOCK, SYS_DEV_BLOCK, SYS_FS_BTRFS, MOUNTINFO
    saved = SYS_BLOCK, SYS_DEV_BLOCK, SYS_FS_BTRFS, MOUNTINFO
    root = sys_root.rstrip("/")
    SYS_BLOCK, SYS_DEV_BLOCK, SYS_FS_BTRFS = (f"{root}/block", f"{root}/dev/block",
                                              f"{root}/fs/btrfs")
    MOUNTINFO = mountinfo
    try:
        yield
    finally:
        SYS_BLOCK, SYS_DEV_BLOCK, SYS_FS_BTRFS, MOUNTINFO = saved


def collect(command: list[str] | None = None,
            devices: list[tuple[int, int]] | None = None,
            sys_root: str = "/sys", mountinfo: str = "/proc/self/mountinfo") -> dict:
    """The trace's metadata: host, clocks, block devices and their filesystems' logs,
    and the device stack (what each device's I/O becomes on the devices below it).

    `devices` restricts the device list to those disks (a partition selects its disk);
    the devices below them are then described in `lower_devices`. `sys_root` and
    `mountinfo` say where sysfs and the mount table are read (tests use a fixture).
    """
    with _roots(sys_root, mountinfo):
        return _collect(command, devices)


def _collect(command: list[str] | None, devices: list[tuple[int, int]] | None) -> dict:
    uts = os.uname()
    realtime_ns, offset_ns = _clock_offset()
    disks = _collect_devices(devices)
    stack, lower = _collect_stack(disks)
    filesystems = _collect_filesystems(disks + lower)
    lower += _external_log_disks(filesystems, disks + lower)
    return {
        "host": socket.gethostname() or uts.nodename,
        "kernel": uts.release,
        "machine": uts.machine,
        "iowhy_version": __version__,
        "command": list(command) if command is not None else None,
        "created_realtime_ns": realtime_ns,
        "clock": {"realtime_minus_monotonic_ns": offset_ns,
                  "boottime_minus_monotonic_ns": _boottime_offset()},
        "page_size_bytes": os.sysconf("SC_PAGE_SIZE"),
        "ncpus": os.cpu_count() or 1,
        "devices": disks,
        "lower_devices": lower,
        "stack": stack,
        "bio_based_devices": sorted(d["name"] for d in disks + lower if d.get("bio_based")),
        "filesystems": filesystems,
    }


def _external_log_disks(filesystems: list[dict], known: list[dict]) -> list[dict]:
    """The disks of the described filesystems' external logs (`log.device`) that `known`
    leaves out (recording limited with `--dev` to the data device): described, so that
    they are recorded with it (their log writes are what a log force waits for)."""
    names = {d["name"] for d in known}
    out: list[dict] = []
    for f in filesystems:
        dv = (f.get("log") or {}).get("device") or {}
        name = dv.get("disk")
        if not name or name in names:
            continue
        try:
            out.append(_describe_disk(name))
            names.add(name)
        except Exception as e:  # an odd device must not stop the recording
            log.warning("cannot describe block device %s: %s", name, e)
    return out


# -- clocks ------------------------------------------------------------------------------

def _clock_offset() -> tuple[int, int]:
    """(realtime now, CLOCK_REALTIME - CLOCK_MONOTONIC) from the tightest of a few samples.

    BPF timestamps are CLOCK_MONOTONIC; the offset turns them into wall-clock time.
    """
    best: tuple[int, int, int] | None = None
    for _ in range(5):
        m0 = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        rt = time.clock_gettime_ns(time.CLOCK_REALTIME)
        m1 = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        width = m1 - m0
        if best is None or width < best[0]:
            best = (width, rt, rt - (m0 + width // 2))
    assert best is not None
    return best[1], best[2]


def _boottime_offset() -> int:
    """CLOCK_BOOTTIME - CLOCK_MONOTONIC (the time the host spent suspended since boot),
    from the tightest of a few samples: what ties the trace's monotonic times to
    Perfetto's default clock."""
    best: tuple[int, int] | None = None
    for _ in range(5):
        m0 = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        bt = time.clock_gettime_ns(time.CLOCK_BOOTTIME)
        m1 = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        if best is None or m1 - m0 < best[0]:
            best = (m1 - m0, bt - (m0 + (m1 - m0) // 2))
    assert best is not None
    return max(0, best[1])


# -- sysfs -------------------------------------------------------------------------------

def _read_text(path: str) -> str | None:
    """A sysfs attribute, stripped; None when absent or unreadable."""
    try:
        with open(path, "rb") as f:
            return os.fsdecode(f.read()).strip()
    except OSError:
        return None


def _attr(path: str, conv: Callable[[str], T], what: str) -> T | None:
    """A required attribute: None plus a warning when it cannot be read or parsed."""
    text = _read_text(path)
    if text is None:
        log.warning("cannot read %s (%s)", path, what)
        return None
    try:
        return conv(text)
    except ValueError:
        log.warning("unexpected %s in %s: %r", what, path, text)
        return None


def _parse_devnum(text: str) -> tuple[int, int]:
    major, minor = text.split(":")
    return int(major), int(minor)


def _bracketed(text: str) -> str:
    """The selected entry of a sysfs choice list such as "none [mq-deadline] kyber"."""
    m = re.search(r"\[([^\]]+)\]", text)
    if m:
        return m.group(1)
    if text and " " not in text:
        return text
    raise ValueError(text)


def _scheduler(queue_dir: str) -> str | None:
    # Bio-based devices (zram, some dm targets) have no scheduler attribute at all.
    if not os.path.exists(f"{queue_dir}/scheduler"):
        return "none"
    return _attr(f"{queue_dir}/scheduler", _bracketed, "I/O scheduler")


def _write_cache(text: str) -> str:
    if text not in ("write back", "write through"):
        raise ValueError(text)
    return text


def _sysfs_block_dir(major: int, minor: int) -> str | None:
    """The canonical sysfs directory of a device number (disk or partition)."""
    path = f"{SYS_DEV_BLOCK}/{major}:{minor}"
    if not os.path.exists(path):
        return None
    return os.path.realpath(path)


def _is_partition(sysdir: str) -> bool:
    return os.path.exists(os.path.join(sysdir, "partition"))


def _disk_of(major: int, minor: int) -> tuple[str, int] | None:
    """(disk name, partition start sector) of a device number; start is 0 for a disk."""
    sysdir = _sysfs_block_dir(major, minor)
    if sysdir is None:
        return None
    if _is_partition(sysdir):
        start = _attr(os.path.join(sysdir, "start"), int, "partition start")
        if start is None:
            return None
        return os.path.basename(os.path.dirname(sysdir)), start
    return os.path.basename(sysdir), 0


def _wanted_disks(devices: list[tuple[int, int]] | None) -> set[str] | None:
    if devices is None:
        return None
    names = set()
    for major, minor in devices:
        found = _disk_of(major, minor)
        if found is None:
            log.warning("no block device %d:%d in sysfs; it is left out of the metadata",
                        major, minor)
            continue
        names.add(found[0])
    return names


def _loop_backing_file(name: str) -> str | None:
    text = _read_text(f"{SYS_BLOCK}/{name}/loop/backing_file")
    return text or None


def _loop_info(name: str) -> dict | None:
    """A bound loop device: its backing file and the device that file lives on."""
    base = f"{SYS_BLOCK}/{name}/loop"
    backing = _loop_backing_file(name)
    if backing is None:
        return None
    info: dict = {
        "backing_file": backing,
        "offset_bytes": _attr(f"{base}/offset", int, "loop offset"),
        "sizelimit_bytes": _attr(f"{base}/sizelimit", int, "loop size limit"),
        "dio": _attr(f"{base}/dio", int, "loop direct I/O flag"),
        "backing_dev_major": None, "backing_dev_minor": None, "backing_ino": None,
        "backing_disk": None, "backing_part_start_sector": None,
    }
    # sysfs shows the path as the loop driver saw it at setup (" (deleted)" once it is
    # unlinked); stat what is there now only if it is the same file.
    try:
        st = os.stat(backing)
    except OSError as e:
        log.info("loop device %s: cannot stat its backing file %s: %s", name, backing,
                 e.strerror)
        return info
    dev = _block_device_under(os.major(st.st_dev), os.minor(st.st_dev))
    info["backing_ino"] = st.st_ino
    if dev is not None:
        info["backing_dev_major"], info["backing_dev_minor"] = dev
        where = _disk_of(*dev)
        if where is not None:
            info["backing_disk"], info["backing_part_start_sector"] = where
    return info


def _block_device_under(major: int, minor: int) -> tuple[int, int] | None:
    """The block device holding a file system whose st_dev is major:minor: itself when it
    is a block device, else (btrfs, whose st_dev is anonymous) the mount's source."""
    if os.path.exists(f"{SYS_DEV_BLOCK}/{major}:{minor}"):
        return major, minor
    for m in _mountinfo(quiet=True):
        if m["devnum"] == (major, minor):
            dev = _blockdev_of_path(m["source"])
            if dev is not None:
                return dev
    return None


def _names_in(path: str) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def _device_kind(name: str, base: str) -> str:
    if os.path.isdir(f"{base}/loop"):
        return "loop"
    if os.path.isdir(f"{base}/dm"):
        return "dm"
    if os.path.isdir(f"{base}/md"):
        return "md"
    for prefix in ("zram", "nbd", "rbd", "nvme", "mmcblk", "ram"):
        if name.startswith(prefix):
            return prefix
    return "disk"


def _is_bio_based(base: str) -> bool:
    """A bio-based device (zram, dm, md, brd): no blk-mq queue (/sys/block/X/mq absent).
    Its I/O never becomes requests, so block_rq_* events never fire for it."""
    return not os.path.isdir(f"{base}/mq")


def _collect_stack(disks: list[dict]) -> tuple[list[dict], list[dict]]:
    """Edges from each device down to the devices its I/O reaches (loop: the backing
    file's device; dm/md: the slaves), followed to the bottom, and the descriptions of the
    devices reached that are not in `disks`."""
    known = {d["name"]: d for d in disks}
    lower: list[dict] = []
    edges: list[dict] = []
    todo = [d["name"] for d in disks]
    done: set[str] = set()
    while todo:
        name = todo.pop(0)
        if name in done:
            continue
        done.add(name)
        d = known.get(name)
        if d is None:
            try:
                d = _describe_disk(name)
            except Exception as e:  # an odd device must not stop the recording
                log.warning("cannot describe block device %s: %s", name, e)
                continue
            known[name] = d
            lower.append(d)
        below: list[dict] = []
        lp = d.get("loop")
        if lp and lp.get("backing_disk"):
            below.append({"lower": lp["backing_disk"], "via": "loop",
                          "lower_dev_major": lp["backing_dev_major"],
                          "lower_dev_minor": lp["backing_dev_minor"]})
        for part in d.get("slaves") or []:
            dev = _attr(f"{SYS_BLOCK}/{name}/slaves/{part}/dev", _parse_devnum,
                        "device number")
            where = _disk_of(*dev) if dev else None
            if dev is None or where is None:
                continue
            below.append({"lower": where[0], "via": "slave", "lower_dev_major": dev[0],
                          "lower_dev_minor": dev[1]})
        for edge in below:
            edges.append({"upper": name, **edge})
            todo.append(edge["lower"])
    lower.sort(key=lambda d: (d["major"] is None, d["major"] or 0, d["minor"] or 0))
    return edges, lower


def _collect_devices(devices: list[tuple[int, int]] | None) -> list[dict]:
    try:
        names = os.listdir(SYS_BLOCK)
    except OSError as e:
        log.warning("cannot list %s: %s; no device metadata", SYS_BLOCK, e.strerror)
        return []
    wanted = _wanted_disks(devices)
    out = []
    for name in names:
        if name.startswith("ram"):
            continue
        if wanted is not None and name not in wanted:
            continue
        if name.startswith("loop") and _loop_backing_file(name) is None:
            continue  # unbound loop device: nothing can do I/O on it
        try:
            out.append(_describe_disk(name))
        except Exception as e:  # an odd device must not stop the recording
            log.warning("cannot describe block device %s: %s", name, e)
    out.sort(key=lambda d: (d["major"] is None, d["major"] or 0, d["minor"] or 0, d["name"]))
    return out


def _describe_disk(name: str) -> dict:
    base = f"{SYS_BLOCK}/{name}"
    q = f"{base}/queue"
    major, minor = _attr(f"{base}/dev", _parse_devnum, "device number") or (None, None)
    size = _attr(f"{base}/size", int, "size")
    return {
        "name": name,
        "major": major,
        "minor": minor,
        "size_bytes": size * SECTOR if size is not None else None,
        "rotational": _attr(f"{q}/rotational", int, "rotational flag"),
        "write_cache": _attr(f"{q}/write_cache", _write_cache, "write cache mode"),
        "fua": _attr(f"{q}/fua", int, "FUA support"),
        "logical_block_bytes": _attr(f"{q}/logical_block_size", int, "logical block size"),
        "physical_block_bytes": _attr(f"{q}/physical_block_size", int, "physical block size"),
        "scheduler": _scheduler(q),
        "backing_file": _loop_backing_file(name) if name.startswith("loop") else None,
        "model": _read_text(f"{base}/device/model") or None,
        "partitions": _describe_partitions(base),
        "kind": _device_kind(name, base),
        "bio_based": _is_bio_based(base),
        "slaves": _names_in(f"{base}/slaves"),
        "holders": _names_in(f"{base}/holders"),
        "loop": _loop_info(name) if os.path.isdir(f"{base}/loop") else None,
        "dm": ({"name": _read_text(f"{base}/dm/name"), "uuid": _read_text(f"{base}/dm/uuid")}
               if os.path.isdir(f"{base}/dm") else None),
        "md": ({"level": _read_text(f"{base}/md/level")}
               if os.path.isdir(f"{base}/md") else None),
    }


def _describe_partitions(base: str) -> list[dict]:
    parts: list[dict] = []
    try:
        entries = os.listdir(base)
    except OSError:
        return parts
    for entry in entries:
        pdir = os.path.join(base, entry)
        if not _is_partition(pdir):
            continue
        major, minor = _attr(f"{pdir}/dev", _parse_devnum, "device number") or (None, None)
        size = _attr(f"{pdir}/size", int, "size")
        parts.append({
            "name": entry,
            "major": major,
            "minor": minor,
            "start_sector": _attr(f"{pdir}/start", int, "partition start"),
            "size_bytes": size * SECTOR if size is not None else None,
        })
    parts.sort(key=lambda p: (p["start_sector"] or 0, p["name"]))
    return parts


# -- mounts ------------------------------------------------------------------------------

def _unescape(field: str) -> str:
    """mountinfo escapes space, tab, newline and backslash as \\ooo."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def _mountinfo(quiet: bool = False) -> Iterator[dict]:
    try:
        with open(MOUNTINFO, "rb") as f:
            text = os.fsdecode(f.read())
    except OSError as e:
        if not quiet:
            log.warning("cannot read %s: %s; no filesystem metadata", MOUNTINFO, e.strerror)
        return
    for line in text.splitlines():
        head, sep, tail = line.partition(" - ")
        if not sep:
            continue
        a, b = head.split(), tail.split()
        if len(a) < 6 or len(b) < 3:
            continue
        try:
            devnum = _parse_devnum(a[2])
        except ValueError:
            continue
        yield {"devnum": devnum, "root": _unescape(a[3]), "mountpoint": _unescape(a[4]),
               "mount_options": a[5], "fstype": b[0], "source": _unescape(b[1]),
               "super_options": b[2]}


def _merge_options(mount_opts: str, super_opts: str) -> str:
    """Per-mount options then superblock options, each option once."""
    seen: dict[str, None] = {}
    for opt in mount_opts.split(",") + super_opts.split(","):
        if opt:
            seen.setdefault(opt, None)
    return ",".join(seen)


def _blockdev_of_path(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISBLK(st.st_mode):
        return None
    return os.major(st.st_rdev), os.minor(st.st_rdev)


def _device_node(major: int, minor: int, hint: str | None = None) -> str | None:
    """A /dev path that really is this device: the mount source, udev's name or link."""
    cands = []
    if hint and hint.startswith("/"):
        cands.append(hint)
    uevent = _read_text(f"{SYS_DEV_BLOCK}/{major}:{minor}/uevent") or ""
    for line in uevent.splitlines():
        if line.startswith("DEVNAME="):
            cands.append("/dev/" + line[len("DEVNAME="):])
    cands.append(f"/dev/block/{major}:{minor}")
    for c in cands:
        if _blockdev_of_path(c) == (major, minor):
            return c
    return None


def _collect_filesystems(disks: list[dict]) -> list[dict]:
    known = {d["name"]: d for d in disks}
    out: list[dict] = []
    seen: set[tuple[int, int]] = set()
    # Bind mounts repeat a filesystem; describe it once, preferring its root mount.
    mounts = sorted((m for m in _mountinfo() if m["fstype"] in LOG_FSTYPES),
                    key=lambda m: m["root"] != "/")
    for m in mounts:
        try:
            for fs in _describe_mount(m, known, seen):
                key = (fs["dev_major"], fs["dev_minor"])
                seen.add(key)
                out.append(fs)
        except Exception as e:  # an odd filesystem must not stop the recording
            log.warning("cannot describe %s filesystem at %s: %s",
                        m["fstype"], m["mountpoint"], e)
    return out


def _describe_mount(m: dict, disks: dict[str, dict], done: set[tuple[int, int]]) -> list[dict]:
    """One entry per block device of the mounted filesystem that is on one of `disks`
    and not already described in `done`."""
    fstype = m["fstype"]
    if FS_BY_NAME[fstype].members_by_fsid:
        # mountinfo shows btrfs's anonymous device; the source names a real member.
        first = _blockdev_of_path(m["source"])
        if first is None:
            log.warning("btrfs at %s: cannot resolve source %s to a block device",
                        m["mountpoint"], m["source"])
            return []
        members = _btrfs_members(first, m["source"])
    else:
        members = [m["devnum"]]
    # Filesystem tracepoints report the superblock's s_dev, which is mountinfo's maj:min
    # (for btrfs an anonymous device; stat() would give a subvolume's, which differs).
    st_dev: tuple[int | None, int | None] = m["devnum"]
    out = []
    for major, minor in members:
        where = _disk_of(major, minor)
        if (major, minor) in done or where is None or where[0] not in disks:
            continue
        disk, part_start = where
        disk_major, disk_minor = (_attr(f"{SYS_BLOCK}/{disk}/dev", _parse_devnum, "device number")
                                  or (None, None))
        node = _device_node(major, minor, m["source"])
        sb = _read_superblock(fstype, node, major, minor, part_start)
        options = _merge_options(m["mount_options"], m["super_options"])
        if sb.get("log") and sb["log"]["kind"] == "external":
            sb["log"]["device"] = _external_log_device(fstype, options, sb["log"]["bytes"])
        source = m["source"] if (major, minor) == members[0] else (node or m["source"])
        out.append({
            "source": source,
            "mountpoint": m["mountpoint"],
            "fstype": fstype,
            "options": options,
            "dev_major": major,
            "dev_minor": minor,
            "st_dev_major": st_dev[0],
            "st_dev_minor": st_dev[1],
            "disk": disk,
            "disk_major": disk_major,
            "disk_minor": disk_minor,
            "part_start_sector": part_start,
            "uuid": sb.get("uuid"),
            "btrfs_fsid": sb.get("btrfs_fsid"),
            "block_bytes": sb.get("block_bytes"),
            "log": sb.get("log") or _unknown_log(),
        })
    return out


def _external_log_device(fstype: str, options: str, nbytes: int) -> dict | None:
    """Where an external log lives: the mount option that names it (XFS `logdev=`), the
    log at the start of that device. None when the option is missing or names no block
    device."""
    opt = FS_BY_NAME[fstype].external_log_option
    if opt is None:
        return None
    path = next((o[len(opt):] for o in options.split(",") if o.startswith(opt)), None)
    dev = _blockdev_of_path(path) if path else None
    where = _disk_of(*dev) if dev else None
    if dev is None or where is None:
        log.warning("%s external log: cannot find its device (%s%s)", fstype, opt, path)
        return None
    disk, start = where
    disk_dev = _attr(f"{SYS_BLOCK}/{disk}/dev", _parse_devnum, "device number") or (None, None)
    return {"source": path, "dev_major": dev[0], "dev_minor": dev[1], "disk": disk,
            "disk_major": disk_dev[0], "disk_minor": disk_dev[1],
            "ranges": [[start, start + nbytes // SECTOR]] if nbytes else []}


def _btrfs_members(first: tuple[int, int], source: str) -> list[tuple[int, int]]:
    """Every device of the btrfs holding `first`, the mounted source first."""
    node = _device_node(first[0], first[1], source)
    fsid = None
    if node is not None:
        try:
            fsid = _btrfs_fsid(_reader_for(node))
        except (OSError, ValueError):
            pass
    members = [first]
    if fsid is None:
        return members
    base = f"{SYS_FS_BTRFS}/{fsid}/devices"
    try:
        entries = sorted(os.listdir(base))
    except OSError:
        return members
    for entry in entries:
        devnum = _attr(f"{base}/{entry}/dev", _parse_devnum, "btrfs member device number")
        if devnum is not None and devnum not in members:
            members.append(devnum)
    return members


# -- superblocks -------------------------------------------------------------------------

def _read_superblock(fstype: str, node: str | None, major: int, minor: int,
                     part_start: int) -> dict:
    """uuid, fs block size and log placement read from the device; {} when unreadable."""
    if node is None:
        log.warning("no device node for %d:%d; %s log placement unknown", major, minor, fstype)
        return {}
    read = _reader_for(node)
    try:
        return FS_BY_NAME[fstype].superblock(read, part_start,
                                             lambda: _device_bytes(major, minor))
    except PermissionError as e:
        # Common for the root disk of a VM or container: its log is simply not placed.
        log.info("cannot read the %s superblock of %s: %s", fstype, node, e.strerror)
    except (OSError, ValueError, struct.error) as e:
        log.warning("cannot read the %s superblock of %s: %s", fstype, node, e)
    return {}


def _device_bytes(major: int, minor: int) -> int | None:
    sysdir = _sysfs_block_dir(major, minor)
    if sysdir is None:
        return None
    size = _attr(os.path.join(sysdir, "size"), int, "size")
    return size * SECTOR if size is not None else None
