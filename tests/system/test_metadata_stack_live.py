"""The device stack of a real loop-on-file-on-loop: the metadata names both levels and
the device under each backing file, checked against stat(2) and losetup."""

from __future__ import annotations

import os
import subprocess

from conftest import run
from iowhy import metadata


def test_loop_on_file_on_loop_names_both_levels(make_fs, tmp_path, request):
    lower, mnt = make_fs("ext4", size_mib=64)
    img = mnt / "inner.img"
    with open(img, "wb") as f:
        f.truncate(16 << 20)
    upper = run(["losetup", "--find", "--show", str(img)]).stdout.strip()
    request.addfinalizer(lambda: subprocess.run(["losetup", "-d", upper], capture_output=True))
    st = os.stat(upper)
    up = (os.major(st.st_rdev), os.minor(st.st_rdev))
    m = metadata.collect(devices=[up])
    assert [d["name"] for d in m["devices"]] == [os.path.basename(upper)]
    lp = m["devices"][0]["loop"]
    assert lp["backing_file"] == str(img)
    assert (lp["backing_dev_major"], lp["backing_dev_minor"]) == (lower.major, lower.minor)
    assert (lp["backing_dev_major"], lp["backing_dev_minor"]) == (
        os.major(os.stat(img).st_dev), os.minor(os.stat(img).st_dev))
    assert lp["backing_disk"] == lower.name and lp["backing_ino"] == os.stat(img).st_ino
    # The lower loop device and the disk under its own backing file, described apart.
    names = {d["name"]: d for d in m["lower_devices"]}
    assert lower.name in names
    below = names[lower.name]["loop"]
    host = os.stat(lower.backing).st_dev
    assert below["backing_file"] == str(lower.backing)
    assert (below["backing_dev_major"], below["backing_dev_minor"]) == (
        os.major(host), os.minor(host))
    edges = {(e["upper"], e["lower"], e["via"]) for e in m["stack"]}
    assert (os.path.basename(upper), lower.name, "loop") in edges
    if below["backing_disk"] is not None:
        assert (lower.name, below["backing_disk"], "loop") in edges
        assert below["backing_disk"] in names
