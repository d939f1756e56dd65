"""The filesystem table (iowhy/filesystems.py) is what the probes, the record format,
the metadata, the importer and the analysis agree on: a filesystem is one entry there
(plus its superblock parser)."""

from __future__ import annotations

import logging
import re
import struct
from pathlib import Path

import numpy as np

from iowhy import abi, analysis, metadata
from iowhy.categories import ATTRIBUTION_CATEGORIES
from iowhy.filesystems import (BY_NAME, FILESYSTEMS, GENERIC_HELPER_THREADS, HELPER_THREADS,
                               NAMES)
from iowhy.importers import ftrace
from iowhy.lab import scenarios
from iowhy.model import classify, wakeups
from iowhy.model.requests import Window
from iowhy.reports import html, terminal
from iowhy.views import background, commits, series

REPO = Path(__file__).resolve().parents[2]
# The probes' tracepoints that are not a filesystem's.
NOT_FS = ("block_", "sched_", "sys_", "cgroup_", "balance_dirty_pages")


def test_the_record_format_names_the_same_filesystems():
    assert set(NAMES) == {v for v in abi.FS_NAMES.values() if v}
    events = {ev for f in FILESYSTEMS for _, ev in f.journal_tracepoints}
    assert events == set(abi.JOURNAL_EVENT_NAMES.values())  # every journal event has its fs
    assert all(ev in events for f in FILESYSTEMS for _, ev in f.commit_marks)
    assert all(f.fsync_entry in f.fsync_tracepoints for f in FILESYSTEMS)
    for f in FILESYSTEMS:  # its spans are bounded by its own events, keyed by a field
        own = {ev for _, ev in f.journal_tracepoints}
        for span in f.journal_spans:
            assert {span.begin, span.end, *(e for e, _ in span.phases)} <= own
            assert {span.key, *(fld for _, fld in span.args)} <= {"seq", "tid"}
        assert set(f.call_commit) <= own


def test_the_probes_attach_the_table_s_tracepoints():
    """Every filesystem tracepoint the probes attach (IOWHY_TP in probes/iowhy.bpf.c) is
    in the table, and every one in the table is attached."""
    src = (REPO / "probes" / "iowhy.bpf.c").read_text()
    probes = set(re.findall(r"^IOWHY_TP\((\w+),", src, re.MULTILINE))
    assert len(probes) > 20  # the regex found them
    fs_probes = {p for p in probes if not p.startswith(NOT_FS)}
    table = {t for f in FILESYSTEMS
             for t in (*f.fsync_tracepoints, *(tp for tp, _ in f.journal_tracepoints))}
    assert fs_probes == table


def test_readers_follow_the_table():
    assert metadata.LOG_FSTYPES == NAMES
    assert scenarios.FILESYSTEMS == NAMES and set(scenarios.MKFS) == set(NAMES)
    assert [c for _, c in series.COMMIT_MARKS] == [
        abi.JOURNAL_EVENT_CODES[ev] for f in FILESYSTEMS for _, ev in f.commit_marks]
    assert classify.LOG_IN_CALLS.tolist() == [abi.FS_BTRFS]
    # Each kind of journal has its figures; with no records they are none, and their
    # commit durations are the kinds `iowhy hist --metric commit --class` offers.
    assert set(commits.JOURNAL_FIGURES) == {f.journal for f in FILESYSTEMS}
    kinds: set = set()
    for f in FILESYSTEMS:
        figures, n, d = commits.JOURNAL_FIGURES[f.journal](
            None, {}, np.zeros(0, np.uint16), np.zeros(0, np.int64), {}, None)
        assert (figures, n) == ({}, 0) and all(len(v) == 0 for v in d.values())
        kinds |= set(d)
    assert kinds == set(analysis.COMMIT_KINDS)
    for f in FILESYSTEMS:  # its kernel threads are not user submitters
        for t in f.journal_threads:
            assert background.KERNEL_THREAD_NAME.match(t.rstrip(b"/") + b"/sdb-8")
    # The causal engine's helper threads are the table's journal threads and the
    # generic helpers, each once.
    assert wakeups.HELPER_PREFIXES == HELPER_THREADS
    assert set(HELPER_THREADS) == {t for f in FILESYSTEMS for t in f.journal_threads} \
        | set(GENERIC_HELPER_THREADS)
    assert len(set(HELPER_THREADS)) == len(HELPER_THREADS)
    # A wait a journal thread ends is for its entry's level one.
    assert all(f.journal_thread_serves in ATTRIBUTION_CATEGORIES for f in FILESYSTEMS)
    assert wakeups.JOURNAL_THREAD_SERVES == (
        (b"jbd2/", wakeups.L_LOG), (b"xfsaild", wakeups.L_METADATA))


def test_the_reports_have_a_line_for_each_journal_kind_s_figures():
    """Every key of the report's `commits` a kind of journal adds (JOURNAL_FIGURES, on a
    record of every journal event and a btrfs call that needed a commit) has its line
    in the terminal report and its row in the HTML one."""
    codes = sorted(abi.JOURNAL_EVENT_NAMES)
    n = len(codes)
    jr = {"event_u16": np.array(codes, np.uint16), "ts_ns": np.arange(n, dtype=np.int64) + 10,
          "seq": np.ones(n, np.uint64), "tid": np.full(n, 7, np.uint32),
          "dev_major": np.full(n, 8, np.uint32), "dev_minor": np.ones(n, np.uint32),
          "aux0": np.zeros(n, np.uint64), "aux1": np.zeros(n, np.uint64),
          "aux2": np.zeros(n, np.uint64)}
    fs = {"fs_u16": np.array([abi.FS_BTRFS], np.uint16)}
    pc = {"needed": np.array([True]), "sync_of": np.array([-1])}
    keys: list[str] = []
    for f in FILESYSTEMS:
        figures, _, _ = commits.JOURNAL_FIGURES[f.journal](
            Window(0, 100), jr, jr["event_u16"], jr["ts_ns"], fs, pc)
        assert figures, f.name  # each kind gave figures of its own
        keys += figures
    assert len(set(keys)) == len(keys) and "ext4_fast_commit" in keys
    assert {k for k, _ in terminal.COMMIT_LINES} == set(keys)
    assert {k for k, _, _ in html.COMMIT_ROWS} == set(keys)


def _probe_helper_names(src: str) -> tuple[list[bytes], list[bytes]]:
    """The comm prefixes helper_name() in probes/iowhy.bpf.c compares, decoded from its
    little-endian constants (`c == V`: 8 bytes; `(c & M) == V`: as many bytes as M has
    low 0xff bytes), and the names its comment lists."""
    m = re.search(r"/\*((?:(?!\*/).)*)\*/\s*static __always_inline int helper_name\(.*?\n\}",
                  src, re.DOTALL)
    assert m, "helper_name() not found in probes/iowhy.bpf.c"
    body = m.group(0)[len(m.group(1)):]
    names = []
    for mask, value in re.findall(r"\(?c(?: & (0x[0-9a-f]+)ULL\))? == (0x[0-9a-f]+)ULL", body):
        n = 8 if not mask else len(mask[2:]) // 2
        assert not mask or int(mask, 16) == (1 << 8 * n) - 1, mask  # low bytes only
        names.append(int(value, 16).to_bytes(n, "little"))
    listed = [w.encode() for w in re.findall(r'"([^"]+)"', m.group(1))]
    return names, listed


def test_the_probes_follow_the_table_s_helper_threads():
    """The kernel threads the probes mark helpers (helper_name()) are HELPER_THREADS:
    the constants it compares and the names its comment gives."""
    src = (REPO / "probes" / "iowhy.bpf.c").read_text()
    names, listed = _probe_helper_names(src)
    assert len(names) == len(set(names)) == len(listed)
    assert set(names) == set(HELPER_THREADS) == set(listed)
    # The decoding is right: an invented constant reads back as its bytes.
    fake = "/* \"abc\" */\nstatic __always_inline int helper_name(int btf)\n{\n" \
           "\treturn (c & 0xffffffULL) == 0x636261ULL ||\n\t       c == 0x3837363534333231ULL;\n}"
    assert _probe_helper_names(fake) == ([b"abc", b"12345678"], [b"abc"])


def test_the_ftrace_importer_reads_the_table_s_events():
    """The text importer's journal events are the table's tracepoints, recording the
    same journal events, with the filesystem the table gives."""
    by_tp = {tp: (f.name, ev) for f in FILESYSTEMS for tp, ev in f.journal_tracepoints}
    for tp, code in {**ftrace.JBD2, **ftrace.XLOG}.items():
        name, ev = by_tp[tp]
        assert abi.JOURNAL_EVENT_NAMES[code] == ev
        assert abi.FS_NAMES[ftrace.FS_OF_EVENT[tp]] == name
    assert ftrace.FSYNC_ENTRY == {f.fsync_entry for f in FILESYSTEMS}


def test_each_superblock_parser_is_reached(tmp_path, caplog):
    """metadata reads a mounted filesystem's superblock with its entry's parser: on a
    device of zeros each says its own magic is missing; on an XFS superblock the XFS
    one places the log."""
    zeros = tmp_path / "zeros"
    zeros.write_bytes(bytes(70 << 10))
    words = {"ext4": "ext4 superblock magic", "xfs": "XFS superblock magic",
             "btrfs": "btrfs superblock magic"}
    assert set(words) == set(NAMES)
    for name in NAMES:
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="iowhy"):
            assert metadata._read_superblock(name, str(zeros), 7, 0, 0) == {}
        assert words[name] in caplog.text, (name, caplog.text)
    sb = bytearray(512)
    sb[:4] = b"XFSB"
    struct.pack_into(">I", sb, 4, 4096)  # block size
    struct.pack_into(">Q", sb, 48, (1 << 10) | 5)  # log start: AG 1, block 5
    struct.pack_into(">I", sb, 84, 1000)  # blocks per AG
    struct.pack_into(">I", sb, 96, 64)  # log blocks
    sb[124] = 10  # log2 of the AG size, rounded up
    xfs = tmp_path / "xfs"
    xfs.write_bytes(bytes(sb))
    info = metadata._read_superblock("xfs", str(xfs), 7, 0, 2048)
    # AG 1 block 5: fs block 1005, 8 sectors each, after the partition's 2048
    start = 2048 + 1005 * 8
    assert info["log"] == {"kind": "xfs", "ranges": [[start, start + 64 * 8]],
                           "fc_ranges": [], "bytes": 64 * 4096}
    assert BY_NAME["xfs"].superblock is not BY_NAME["ext4"].superblock
