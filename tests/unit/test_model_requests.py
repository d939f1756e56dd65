"""model/requests.py: what the request records say beyond their fields.

A FUA write on a device that emulates FUA (a volatile write cache, no FUA support) is
flush-sequenced: its data stage ends at a completion of its own, its post-flush after
it. When the kernel delivers only its last completion (data_done == done), nothing in
the probes counts the loss; the report says so on its first lines."""

from __future__ import annotations

from iowhy import abi

import tracebuilder as tb

FUA_SEQ = dict(iflags=abi.F_FUA | abi.F_PREFLUSH,
               flags=abi.RQ_TRACKED | abi.RQ_FLUSH_SEQ)


def _trace(path, data_done: int, fua: int = 0, write_cache: str = "write back") -> str:
    requests = [
        tb.req(1010, 1020, op=abi.OP_FLUSH, seq=1),
        tb.req(1020, 1060, data_done=data_done, seq=2, **FUA_SEQ),
        tb.req(1040, 1060, op=abi.OP_FLUSH, seq=3),
        tb.req(1070, 1080, seq=4),  # a plain write: one completion, data_done == done
    ]
    return tb.write_trace(path, start=1000, end=1100, requests=requests,
                          meta_obj=tb.meta(write_cache=write_cache, fua=fua))


def _unseen(r: dict) -> list[str]:
    return [p for p in r["problems"] if "data-stage completion" in p]


def test_a_fua_write_missing_its_data_stage_completion_is_reported(tmp_path):
    r = tb.run(_trace(tmp_path / "a.iowt", data_done=1060))
    assert _unseen(r) == [
        "1 FUA write whose data-stage completion the kernel did not deliver (only the last "
        "completion was seen: the device stage runs to the end of the post-flush)"]


def test_a_fua_write_with_both_completions_is_not(tmp_path):
    assert _unseen(tb.run(_trace(tmp_path / "b.iowt", data_done=1040))) == []


def test_a_device_with_fua_or_without_a_write_cache_has_no_post_flush(tmp_path):
    # FUA served by the device, or no volatile cache: one completion is all there is.
    assert _unseen(tb.run(_trace(tmp_path / "c.iowt", data_done=1060, fua=1))) == []
    assert _unseen(tb.run(_trace(tmp_path / "d.iowt", data_done=1060,
                                 write_cache="write through"))) == []
