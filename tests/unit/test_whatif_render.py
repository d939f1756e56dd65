"""whatif/render.py: the text of `iowhy whatif` and `--fit`: what was lost first, the
three elapsed times, the attribution recorded beside predicted with each change, every
line at most 100 columns."""

from __future__ import annotations

from iowhy.whatif import render as W

MS = 1_000_000


def _disk(**more) -> dict:
    d = {"t2t_ns": 1 * MS, "rot_ns": 4 * MS, "full_stroke_ns": 15 * MS,
         "media_rate": 150 << 20, "iface_rate": 600 << 20, "write_cache": "on",
         "cache_bytes": 64 << 20, "flush_ns": 0}
    d.update(more)
    return d


def _result(**more) -> dict:
    r = {"trace": "/t/a.iowt", "problems": ["3 off-CPU records lost"],
         "scenario": {"nobarrier": True, "write_cache": None, "disk": None},
         "measured_elapsed_ns": 100 * MS, "predicted_elapsed_ns": 80 * MS,
         "baseline_elapsed_ns": 101 * MS,
         "attribution_ns": {"cpu": 50 * MS, "barrier": 30 * MS, "data": 20 * MS},
         "predicted_attribution_ns": {"cpu": 50 * MS, "data": 30 * MS},
         "changes": [{"text": "barrier goes: " + "the flushes are not sent " * 8}],
         "devices": [{"device": "sdz", "model": "hdd", "disk": _disk(), "kernel_flushes": False}],
         "recorded_devices": [{"disk": _disk(), "path_ns": {"write": 20_000},
                               "queue_depth": 1}],
         "replay": {"actors": 3, "requests": 1200, "requests_anchored": 1100, "flushes": 0,
                    "recorded_flushes": 40},
         "assumptions": ["one queue"], "cannot_tell": ["the page cache"]}
    r.update(more)
    return r


def _lines(text: str) -> list[str]:
    lines = text.splitlines()
    assert all(len(x) <= W.WIDTH for x in lines)
    return lines


def test_the_prediction_text():
    lines = _lines(W.render_text(_result()))
    assert lines[:6] == [
        "iowhy whatif  /t/a.iowt", "! 3 off-CPU records lost", "scenario    --nobarrier",
        "measured    100 ms elapsed", "predicted   80 ms elapsed (-20.0%)",
        "baseline    101 ms: the replay against the recorded devices' model "
        "(+1.0% from measured)"]
    i = lines.index(next(x for x in lines if x.startswith("WHERE THE TIME WOULD GO")))
    rows = {x.split()[0]: x.split()[1:] for x in lines[i + 1:i + 5]}
    assert rows == {"barrier": ["30", "ms", "0", "-30", "ms"],
                    "data": ["20", "ms", "30", "ms", "+10", "ms"],
                    "cpu": ["50", "ms", "50", "ms", "0"],
                    "elapsed": ["100", "ms", "80", "ms", "-20", "ms"]}
    changes = lines[lines.index("WHAT CHANGES") + 1:lines.index("DEVICES") - 1]
    assert len(changes) == 3 and changes[0].startswith("  barrier goes:")
    assert all(x.startswith("    ") for x in changes[1:])
    text = "\n".join(lines)
    assert "sdz in this scenario: hdd: positioning 5 ms to 19 ms, media 150 MiB/s" in text
    assert "no flush sent" in text and "1,100 at their submitter's point" in text
    assert lines[-1] == "  - the page cache" and "  - one queue" in lines


def test_nothing_moves_and_scenarios_named():
    r = _result(changes=[], problems=[], scenario={"disk": "ssd", "write_cache": "off"})
    lines = _lines(W.render_text(r))
    assert lines[1] == "scenario    --disk ssd --write-cache off"
    assert "  no category moves by 1% of the elapsed time or more" in lines
    # a category only the prediction has is a row too
    r = _result(predicted_attribution_ns={"cpu": 50 * MS, "log": 30 * MS})
    assert any(x.split() == ["log", "0", "30", "ms", "+30", "ms"]
               for x in _lines(W.render_text(r)))
    assert _lines(W.render_text(_result(scenario={})))[2] == "scenario    as recorded"


def test_the_disk_words():
    assert W._disk(_disk(t2t_ns=0, rot_ns=0, full_stroke_ns=0)).startswith("no positioning")
    assert W._disk(_disk(t2t_ns=0, rot_ns=0)).startswith("positioning 0 ns to 15 ms")
    assert W._disk(_disk(flush_ns=2 * MS)).endswith("flush overhead 2 ms")
    assert W._pct(5, 0) == "-" and W._signed(0) == "0" and W._signed(-MS) == "-1 ms"


def test_the_profile_text():
    p = {"source": "/t/a.iowt", "device": "sdz", "requests": 1234, "disk": _disk(),
         "path_ns": {"read": 10_000, "write": 20_000}, "queue_depth": 4,
         "assumed": ["cache size"],
         "fit": {"write": {"requests": 1000, "measured_ns": 5 * MS, "model_ns": 4 * MS,
                           "median_abs_error_ns": MS}}}
    lines = _lines(W.render_profile(p, "/t/p.json"))
    assert lines[0] == "iowhy whatif --fit  /t/a.iowt"
    assert lines[1] == "device      sdz: 1,234 requests served"
    # the model wrapped under its label
    assert lines[2].startswith("model       positioning 5 ms to 19 ms")
    assert lines[3].startswith(" " * 12) and lines[3].endswith("flush overhead 0")
    assert lines[4] == "path        10 us per read, 20 us per write or flush"
    assert "assumed (no request of the trace exercises them): cache size" in lines
    assert lines[-2].split() == ["write", "1,000", "5", "ms", "4", "ms", "1", "ms"]
    assert lines[-1] == "wrote /t/p.json"
