"""iowhy.lab.scenarios without a disk: the scenario table's invariants (every field of
every scenario, the placeholders its commands use, the filesystems and cache settings
it names), the commands it builds, the run's files and what `run` refuses before it
touches anything. (`iowhy lab list` and `lab run`'s refusals through the command are in
test_lab_tools.py.)"""

from __future__ import annotations

import inspect
import re
import shlex
import string
from pathlib import Path

import pytest

from iowhy.filesystems import NAMES as FS_NAMES
from iowhy.lab import scenarios as sc

ALL = list(sc.SCENARIOS.values())
IDS = list(sc.SCENARIOS)
# What a run puts in the templates' context besides the params (scenarios.run, _on_disk)
CONTEXT = {"mnt", "tree", "pidfile", "stats", "archive"}


def _fields(text: str) -> set[str]:
    return {f for _, f, _, _ in string.Formatter().parse(text) if f is not None}


def _templates(s: sc.Scenario) -> list[tuple[str, ...]]:
    return [*s.setup, *s.measure] + ([s.background] if s.background else [])


def test_names_are_the_keys_and_unique():
    assert [s.name for s in ALL] == IDS and len(set(IDS)) == len(IDS)
    assert all(n and n == n.strip() and " " not in n for n in IDS)


@pytest.mark.parametrize("s", ALL, ids=IDS)
def test_every_scenario_is_complete(s):
    assert s.summary and s.description and s.steps
    assert s.filesystems and len(set(s.filesystems)) == len(s.filesystems)
    assert set(s.filesystems) <= set(FS_NAMES) == set(sc.FILESYSTEMS)
    assert s.default_fs() == s.filesystems[0]
    assert s.cache in sc.CACHE_MODES
    assert s.measure and all(t and all(isinstance(a, str) and a for a in t) for t in s.measure)
    assert all(isinstance(v, int) and not isinstance(v, bool) for v in s.params.values())
    assert s.attach_s >= 0
    if s.attach_s:  # attach: one command, which writes its PID where the run reads it
        assert len(s.measure) == 1 and "{pidfile}" in s.measure[0]


@pytest.mark.parametrize("s", ALL, ids=IDS)
def test_every_placeholder_is_filled_and_every_param_used(s):
    ctx = CONTEXT | set(s.params) | ({"mnt_b"} if s.second_disk else set()) | (
        {"upper"} if s.stack else set())
    used: set[str] = set()
    for t in _templates(s):
        for a in t:
            used |= _fields(a)
    assert used <= ctx, used - ctx
    text = _fields(s.summary) | _fields(s.steps)
    assert text <= set(s.params), text - set(s.params)
    assert set(s.params) <= used | text  # a param nothing shows nor runs is a leftover
    # the texts shown (list, label) have every placeholder filled
    for shown in (sc.describe(s), s.label()):
        assert "{" not in shown and "}" not in shown
    assert s.label().startswith(f"{s.name}: ")


def test_the_causal_settings_name_what_uses_them():
    for s in ALL:
        words = {f for t in _templates(s) for a in t for f in _fields(a)}
        assert s.second_disk == ("mnt_b" in words), s.name
        assert s.stack == ("upper" in words), s.name


def test_nobarrier_has_a_way_on_every_filesystem_it_names():
    """A mount option, or (XFS: none since 4.19) the loop device set to write through."""
    for s in ALL:
        if s.cache == "nobarrier":
            for fs in s.filesystems:
                assert fs in sc.NOBARRIER_MOUNT or fs == "xfs", (s.name, fs)
    assert "xfs" not in sc.NOBARRIER_MOUNT
    assert set(sc.MKFS) == set(FS_NAMES) and all(sc.MKFS[f][0].startswith("mkfs.")
                                                 for f in FS_NAMES)


def test_groups_and_gallery_pairs_compare_like_with_like():
    groups: dict[str, list[sc.Scenario]] = {}
    for s in ALL:
        groups.setdefault(s.group, []).append(s)
    assert all(len(v) >= 2 for g, v in groups.items() if g)  # a group compares its members
    for a, b in sc.GALLERY_PAIRS:
        sa, sb = sc.SCENARIOS[a], sc.SCENARIOS[b]
        assert sa.group == sb.group != "", (a, b)
        assert set(sa.filesystems) & set(sb.filesystems), (a, b)
    assert len(set(sc.GALLERY_PAIRS)) == len(sc.GALLERY_PAIRS)


def test_all_runs_is_every_scenario_on_each_of_its_filesystems():
    runs = sc.all_runs()
    assert len(runs) == sum(len(s.filesystems) for s in ALL) == len(set(runs))
    assert sc.all_runs("xfs") == [(n, f) for n, f in runs if f == "xfs"]
    assert sc.all_runs("no-such-fs") == []


def test_the_run_files_are_distinct_and_named_after_the_run():
    rid = sc.run_id("tar", "ext4", "ssd")
    assert rid == "tar-ext4-ssd"
    files = sc.run_files(Path("/out"), rid)
    assert list(files) == [k for k, _ in sc.RUN_FILES]
    assert len(set(files.values())) == len(files)
    assert all(p.parent == Path("/out") and p.name.startswith(rid + ".") for p in files.values())
    assert files["trace"].name == "tar-ext4-ssd.iowt"


def test_the_measured_command():
    ctx = {"mnt": "/m nt", "tree": "/m nt/tree", "files": 7, "k": 3, "tasks": 2}
    tar = sc.measured_command(sc.SCENARIOS["tar"], ctx)  # untar, then syncfs: one sh -c
    assert tar[:2] == ["sh", "-c"] and len(tar) == 3
    assert shlex.split(tar[2]) == [sc.SYSTEM_PY, str(sc.WORKLOADS), "untar", "/m nt/tree",
                                   "--files", "7", "&&", "sync", "-f", "/m nt"]
    one = sc.measured_command(sc.SCENARIOS["fsync-tasks-8"], ctx)  # no syncfs after
    assert one == [sc.SYSTEM_PY, str(sc.WORKLOADS), "fsync-tasks", "/m nt", "2", "3"]
    causal = sc.measured_command(sc.SCENARIOS["idle-thread"],
                                 {**ctx, "pidfile": "/p", "attach": 2})
    assert causal[:3] == [sc.SYSTEM_PY, str(sc.WORKLOADS_CAUSAL), "idle-thread"]
    plain = sc.measured_command(sc.SCENARIOS["sleep-bg"], {**ctx, "sleep": 2})
    assert plain == ["sleep", "2"]


@pytest.mark.parametrize("kw, what", [
    ({"name": "no-such"}, "unknown scenario 'no-such'"),
    ({"name": "tar", "fs": "ntfs"}, "unknown filesystem 'ntfs'"),
    ({"name": "tar", "disk": "floppy"}, "unknown disk 'floppy'"),
])
def test_run_refuses_bad_arguments_before_it_touches_anything(tmp_path, monkeypatch, kw, what):
    # as a user: were a check gone, the run stops at the root check, not on a disk
    monkeypatch.setattr(sc.os, "geteuid", lambda: 1000)
    with pytest.raises(sc.LabError, match=what):
        sc.run(out_dir=tmp_path / "out", workdir=tmp_path / "work", **kw)
    assert list(tmp_path.iterdir()) == []


def test_disks_are_the_emulated_disks_presets():
    """The disks a scenario runs on are the presets the daemon itself knows (its C
    table, not the Python list the lab reads them from), and the defaults are one."""
    src = (Path(__file__).resolve().parents[2] / "lab" / "emudisk.c").read_text()
    table = src[src.index("PRESETS[] = {"):]
    daemon = re.findall(r'\{\s*"([^"]+)",', table[:table.index("};")])
    assert list(sc.DISKS) == daemon
    for fn in (sc.run, sc.gallery):
        assert inspect.signature(fn).parameters["disk"].default in daemon, fn
