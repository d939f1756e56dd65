"""iowhy.export.files: the exporters' outputs appear whole or not at all, mode 0600 (a
new directory 0700), never through a symlink; a failure is one OutputError."""

from __future__ import annotations

import os
import stat

import pytest

from iowhy.export.files import check_dir, output_dir, output_file
from iowhy.outfile import OutputError


class Boom(Exception):
    pass


def mode(p) -> int:
    return stat.S_IMODE(os.lstat(p).st_mode)


def test_output_file_appears_when_the_block_ends(tmp_path):
    p = tmp_path / "out.pftrace"
    with output_file(str(p)) as f:
        f.write(b"abc")
        assert not p.exists()
    assert p.read_bytes() == b"abc" and mode(p) == 0o600
    assert os.listdir(tmp_path) == ["out.pftrace"]


def test_output_file_leaves_nothing_after_an_error(tmp_path):
    p = tmp_path / "out.json"
    p.write_bytes(b"old")
    with pytest.raises(Boom):
        with output_file(str(p)) as f:
            f.write(b"new")
            raise Boom
    assert p.read_bytes() == b"old" and os.listdir(tmp_path) == ["out.json"]


def test_output_file_os_error_is_one_line(tmp_path):
    with pytest.raises(OutputError) as ei:
        with output_file(str(tmp_path / "x")):
            raise OSError(28, "No space left on device")
    assert "\n" not in str(ei.value) and str(tmp_path / "x") in str(ei.value)
    assert os.listdir(tmp_path) == []


def test_check_dir(tmp_path):
    check_dir(str(tmp_path))  # an existing directory
    check_dir(str(tmp_path / "new"))  # one that can be made
    with pytest.raises(OutputError, match="does not exist") as ei:
        check_dir(str(tmp_path / "no" / "new"))
    assert "-o" in ei.value.hint
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(OutputError, match="it is not a directory"):
        check_dir(str(tmp_path / "file"))
    os.symlink(tmp_path, tmp_path / "link")
    with pytest.raises(OutputError, match="it is a symlink"):
        check_dir(str(tmp_path / "link"))


def test_output_dir_makes_a_new_directory_whole(tmp_path):
    d = tmp_path / "pq"
    with output_dir(str(d), ["a.parquet", "b.parquet"]) as (a, b):
        a.write(b"A")
        b.write(b"B")
        assert not d.exists()
    assert mode(d) == 0o700
    assert sorted(os.listdir(d)) == ["a.parquet", "b.parquet"]
    assert (d / "a.parquet").read_bytes() == b"A" and mode(d / "b.parquet") == 0o600
    assert os.listdir(tmp_path) == ["pq"]  # no temporary directory left


def test_output_dir_after_an_error_leaves_no_directory(tmp_path):
    with pytest.raises(Boom):
        with output_dir(str(tmp_path / "pq"), ["a.parquet"]) as (a,):
            a.write(b"A")
            raise Boom
    assert os.listdir(tmp_path) == []


def test_output_dir_into_an_existing_one_keeps_old_files_on_error(tmp_path):
    d = tmp_path / "pq"
    d.mkdir()
    (d / "a.parquet").write_bytes(b"old")
    with pytest.raises(Boom):
        with output_dir(str(d), ["a.parquet", "b.parquet"]) as (a, b):
            a.write(b"new")
            raise Boom
    assert os.listdir(d) == ["a.parquet"] and (d / "a.parquet").read_bytes() == b"old"
    with output_dir(str(d), ["a.parquet", "b.parquet"]) as (a, b):
        a.write(b"new")
    assert (d / "a.parquet").read_bytes() == b"new" and (d / "b.parquet").exists()


def test_output_dir_refuses_a_symlink(tmp_path):
    (tmp_path / "real").mkdir()
    os.symlink(tmp_path / "real", tmp_path / "pq")
    with pytest.raises(OutputError, match="symlink"):
        with output_dir(str(tmp_path / "pq"), ["a.parquet"]):
            pass
    assert os.listdir(tmp_path / "real") == []
