"""The emulated disk's Python side without a daemon: a missing binary is reported
clearly, and a torn truth file is read up to its last whole record."""

from __future__ import annotations

import pytest

from iowhy.lab import emudisk

MiB = 1 << 20


def test_missing_binary_is_clear(tmp_path, monkeypatch):
    monkeypatch.setenv("IOWHY_EMUDISK", str(tmp_path / "no-such-emudisk"))
    with pytest.raises(emudisk.EmulatedDiskError, match="emudisk binary not found"):
        with emudisk.EmulatedDisk(tmp_path, 64 * MiB):
            pass
    assert list(tmp_path.iterdir()) == []


def test_torn_truth_file(tmp_path):
    hdr = bytearray(emudisk.HEADER_SIZE)
    hdr[:8] = emudisk.MAGIC
    hdr[12:20] = (emudisk.HEADER_SIZE).to_bytes(4, "little") \
        + (emudisk.RECORD_SIZE).to_bytes(4, "little")
    rec = bytearray(emudisk.RECORD_SIZE)
    rec[0:4] = (2).to_bytes(4, "little")
    rec[32:40] = (4096).to_bytes(8, "little")
    p = tmp_path / "truth.bin"
    p.write_bytes(bytes(hdr) + bytes(rec) * 3 + bytes(rec)[:77])
    with pytest.warns(emudisk.TornTruthWarning, match="dropped 77 bytes"):
        recs = emudisk.read_truth(p)
    assert len(recs) == 3 and (recs["offset_bytes"] == 4096).all()
    p.write_bytes(bytes(hdr)[:100])
    with pytest.raises(emudisk.EmulatedDiskError, match="header"):
        emudisk.read_truth(p)
