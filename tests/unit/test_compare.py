"""Pure tests of `iowhy compare` on synthetic traces whose answer is known by construction.

Times in the hand-built pairs are in milliseconds from T0 (MS = 1 ms in ns). The base
run A: one task on CPU except [10, 50) (blocked in fsync), while a data write is in
flight [20, 40): cpu 60, data 20, wait-other 20, elapsed 100.
"""

from __future__ import annotations

import json
import sys
import types
from typing import Any

import pytest

from iowhy import abi
from iowhy.analysis import analyze
from iowhy.compare import compare
from iowhy.reports.compare_text import render_compare
from iowhy.traceformat import read_trace
from tracebuilder import CATS, Trace, busy_trace, fsync, meta, off, req, run, task, write_trace

MS = 1_000_000
T0 = 1_000_000_000
KEYS = {"schema", "a", "b", "speed_ratio", "slower", "factor", "difference_ns", "delta_ns",
        "explanations", "config_differences", "problems", "rows"}


def at(ms: float) -> int:
    return T0 + int(ms * MS)


def pair_trace(path, *, flushes: int = 0, flush_ms: int = 30, extra_cpu_ms: int = 0,
               write_cache: str = "write back", options: str | None = None,
               command=("star", "-x", "-f", "linux.tar"), trailer: bool = True) -> str:
    """Run A, plus `flushes` FF flushes of `flush_ms` each, back to back from 100 ms, each
    inside its own fsync while the task is blocked, then `extra_cpu_ms` more on CPU."""
    requests = [req(at(20), at(40), sector=50_000)]
    offcpu = [off(100, at(10), at(50))]
    fsyncs = [fsync(100, at(9), at(50))]
    t = 100
    if flushes:
        for i in range(flushes):
            s = t + i * flush_ms
            requests.append(req(at(s), at(s + flush_ms), op=abi.OP_FLUSH, flags=0))
            fsyncs.append(fsync(100, at(s), at(s + flush_ms)))
        offcpu.append(off(100, at(t), at(t + flushes * flush_ms)))
    end = t + flushes * flush_ms + extra_cpu_ms
    m = meta(write_cache=write_cache)
    if options is not None:
        m["filesystems"][0]["options"] = options
    return write_trace(path, start=T0, end=at(end), requests=requests, offcpu=offcpu,
                       fsyncs=fsyncs, tasks=[task(100, T0)], meta_obj=m, command=command,
                       trailer=trailer)


def both(tmp_path, kw_a: dict[str, Any], kw_b: dict[str, Any]):
    pa = pair_trace(tmp_path / "a.iowt", **kw_a)
    pb = pair_trace(tmp_path / "b.iowt", **kw_b)
    return run(pa), run(pb)


def assert_fits(text: str) -> None:
    assert max(len(line) for line in text.splitlines()) <= 100


def assert_consistent(c: dict[str, Any], a: dict[str, Any], b: dict[str, Any]) -> None:
    assert KEYS <= set(c)
    assert set(c["delta_ns"]) == set(CATS)
    for k in CATS:
        assert c["delta_ns"][k] == b["attribution_ns"][k] - a["attribution_ns"][k]
    assert c["difference_ns"] == b["elapsed_ns"] - a["elapsed_ns"]
    assert sum(c["delta_ns"].values()) == c["difference_ns"]
    assert c["a"]["attribution_ns"] == a["attribution_ns"]
    assert c["b"]["elapsed_ns"] == b["elapsed_ns"]
    for e in c["explanations"]:
        assert {"text", "category", "delta_ns", "share_of_difference"} <= set(e)
    json.loads(json.dumps(c))  # plain JSON types only
    assert_fits(render_compare(c))


# -- pairs with a known answer -------------------------------------------------------------

def test_extra_flushes_on_the_critical_path(tmp_path):
    # B = A + 3 flushes of 30 ms, each inside an fsync while blocked (barrier +90), then
    # 10 ms more on CPU (cpu +10): elapsed 100 -> 200, ratio 2.0;
    # shares of the 100 ms difference: barrier 90/100 = 0.9, cpu 10/100 = 0.1.
    a, b = both(tmp_path, {}, {"flushes": 3, "extra_cpu_ms": 10})
    assert a["attribution_ns"] == {"cpu": 60 * MS, "runqueue": 0, "barrier": 0, "log": 0,
                                   "metadata": 0, "data": 20 * MS, "read": 0,
                                   "wait-other": 20 * MS}
    assert b["attribution_ns"]["barrier"] == 90 * MS and b["attribution_ns"]["cpu"] == 70 * MS
    c = compare(a, b)
    assert_consistent(c, a, b)
    assert c["speed_ratio"] == 2.0 and c["slower"] == "b" and c["factor"] == 2.0
    assert c["difference_ns"] == 100 * MS
    assert c["delta_ns"]["barrier"] == 90 * MS and c["delta_ns"]["cpu"] == 10 * MS
    ex = c["explanations"]
    assert ex[0]["category"] == "elapsed"
    assert ex[0]["text"] == "B is 2.0x slower than A: 200 ms vs 100 ms (+100 ms)"
    assert [e["category"] for e in ex] == ["elapsed", "barrier", "cpu"]
    bar = ex[1]
    assert bar["delta_ns"] == 90 * MS and bar["share_of_difference"] == 0.9
    assert bar["text"] == ("90% of the added time is barrier: 0 (0.0%) in A, 90 ms (45.0%) in B "
                           "(+90 ms); cache flushes 0 -> 3 (+3); median flush n/a -> 30 ms; "
                           "fsync calls 1 -> 4 (+3)")
    assert bar["evidence"]["flushes"] == {"a": 0, "b": 3}
    assert bar["evidence"]["flush_p50_ns"] == {"a": None, "b": 30 * MS}
    assert ex[2]["share_of_difference"] == 0.1
    assert ex[2]["text"].startswith("10% of the added time is cpu: 60 ms (60.0%) in A, "
                                    "70 ms (35.0%) in B (+10 ms)")
    assert c["config_differences"] == []  # same command, same disk and filesystem
    rows = {r["key"]: r for r in c["rows"]}
    assert rows["workload.flushes.count"]["a"] == 0 and rows["workload.flushes.count"]["b"] == 3
    assert rows["attribution_ns.barrier"]["b_pct"] == 45.0
    assert rows["elapsed_ns"]["ratio"] == 2.0 and rows["elapsed_ns"]["delta"] == 100 * MS
    assert rows["fsync.count"]["delta"] == 3
    text = render_compare(c)
    assert "1. B is 2.0x slower than A" in text and "2. 90% of the added time is barrier" in text


def test_write_through_sends_no_flushes(tmp_path):
    # A: the run with 3 flushes on a write-back cache (200 ms); B: the same workload on a
    # write-through disk, where the block layer sends no flush (100 ms). A is the slower:
    # barrier -90 ms is 90% of the time B saves.
    a, b = both(tmp_path, {"flushes": 3, "extra_cpu_ms": 10},
                {"write_cache": "write through"})
    c = compare(a, b)
    assert_consistent(c, a, b)
    assert c["speed_ratio"] == 0.5 and c["slower"] == "a"
    ex = c["explanations"]
    assert ex[0]["text"] == "A is 2.0x slower than B: 200 ms vs 100 ms (+100 ms)"
    assert ex[1]["category"] == "barrier" and ex[1]["share_of_difference"] == 0.9
    assert ex[1]["text"].startswith("90% of the time B saves is barrier: 90 ms (45.0%) in A, "
                                    "0 (0.0%) in B (-90 ms); cache flushes 3 -> 0 (-3)")
    wc = [d for d in c["config_differences"] if d["key"] == "write_cache"]
    assert wc == [{"key": "write_cache", "a": "write back", "b": "write through",
                   "text": "A runs with write cache 'write back', B with 'write through': "
                           "B sends no cache flushes (A sends 3)"}]
    assert ex[-1]["category"] == "config" and ex[-1]["text"] == wc[0]["text"]
    assert ex[-1]["delta_ns"] is None and ex[-1]["share_of_difference"] is None
    assert c["a"]["devices"][0]["write_cache"] == "write back"
    assert c["b"]["devices"][0]["write_cache"] == "write through"
    assert "B sends no cache flushes (A sends 3)" in render_compare(c).replace("\n     ", " ")


def test_identical_runs(tmp_path):
    a = run(pair_trace(tmp_path / "a.iowt", flushes=2))
    c = compare(a, a)
    assert_consistent(c, a, a)
    assert c["speed_ratio"] == 1.0 and c["slower"] is None and c["factor"] == 1.0
    assert c["difference_ns"] == 0 and set(c["delta_ns"].values()) == {0}
    assert [e["category"] for e in c["explanations"]] == ["elapsed"]
    assert c["explanations"][0]["text"] == "no difference: A and B both took 160 ms"
    assert c["explanations"][0]["share_of_difference"] is None
    assert c["config_differences"] == []
    assert all(r["delta"] in (0, 0.0, None) for r in c["rows"])
    # two files with the same content: the same answer
    b = run(pair_trace(tmp_path / "b.iowt", flushes=2))
    c2 = compare(a, b)
    assert c2["speed_ratio"] == 1.0 and len(c2["explanations"]) == 1
    assert "no configuration difference found" in render_compare(c2)


def test_mount_options_and_command_are_stated(tmp_path):
    a, b = both(tmp_path, {"options": "rw,relatime,barrier=1,data=ordered"},
                {"options": "rw,relatime,nobarrier,data=ordered", "command": ("tar", "-xf", "x")})
    c = compare(a, b, {"kernel": "6.1.0"}, {"kernel": "6.8.0"})
    texts = {d["key"]: d["text"] for d in c["config_differences"]}
    assert texts["command"] == "A runs `star -x -f linux.tar`, B runs `tar -xf x`"
    assert texts["mount_options"] == ("ext4 mount options differ: only A has barrier=1; "
                                      "only B has nobarrier")
    assert texts["kernel"] == "A was recorded on kernel 6.1.0, B on 6.8.0"
    assert [d["key"] for d in c["config_differences"]] == ["command", "kernel",
                                                           "mount_options"]
    assert c["explanations"][0]["text"].startswith("no difference")


# -- the rules on bare results ------------------------------------------------------------------

def bare(elapsed: int, **att: int) -> dict[str, Any]:
    """The smallest analysis result compare() accepts: elapsed and the attribution."""
    full = {k: 0 for k in CATS}
    full.update({k.replace("_", "-"): v for k, v in att.items()})
    full["cpu"] = elapsed - sum(v for k, v in full.items() if k != "cpu")
    return {"elapsed_ns": elapsed, "attribution_ns": full}


def test_rules_within_two_percent_and_offsets():
    # 100 -> 101.5 ms: within 2%; barrier +30 ms (>= 1% of 101.5 ms) and cpu -28.5 ms are
    # both shown, largest first, without shares in words (30 / 1.5 = 20, -28.5 / 1.5 = -19).
    c = compare(bare(100 * MS, barrier=10 * MS), bare(101_500_000, barrier=40 * MS))
    ex = c["explanations"]
    assert c["slower"] is None and c["speed_ratio"] == 1.015
    assert ex[0]["text"] == "A and B are within 2% of each other: 100 ms vs 102 ms (+1.5 ms in B)"
    assert [e["category"] for e in ex[1:]] == ["barrier", "cpu"]
    assert ex[1]["text"].startswith("barrier +30 ms in B: 10 ms (10.0%) in A, 40 ms (39.4%) in B")
    assert ex[1]["share_of_difference"] == 20.0 and ex[2]["share_of_difference"] == -19.0
    # 100 -> 115 ms: "15% slower"; metadata +20 ms (share 20/15), cpu -4.5 ms offsets 30%
    # of it; data -0.5 ms (< 1% of 115 ms) is not explained.
    c = compare(bare(100 * MS, metadata=10 * MS, data=1 * MS),
                bare(115 * MS, metadata=30 * MS, data=MS // 2))
    ex = c["explanations"]
    assert ex[0]["text"] == "B is 15% slower than A: 115 ms vs 100 ms (+15 ms)"
    assert [e["category"] for e in ex] == ["elapsed", "metadata", "cpu"]
    assert ex[1]["text"].startswith("133% of the added time is metadata: ")
    assert ex[2]["text"].startswith("cpu went the other way, offsetting 30% of the added time")
    assert ex[2]["share_of_difference"] == -0.3
    assert c["delta_ns"]["data"] == -MS // 2
    # a zero-length A: no ratio, said in words
    c = compare(bare(0), bare(10))
    assert c["speed_ratio"] is None and c["factor"] is None
    assert c["explanations"][0]["text"].startswith("speeds cannot be compared: A covers no time")
    assert_fits(render_compare(c))


def test_device_config_differences_and_long_commands():
    # Different disks: names in the words; FUA, rotational and (with META) the scheduler.
    def run_on(name: str, fua: int, rot: int, flushes: int, cmd: list[str]) -> dict[str, Any]:
        r = bare(100 * MS)
        r["workload"] = {"devices": [name], "flushes": {"count": flushes}}
        r["devices"] = [{"name": name, "write_cache": "write back", "fua": fua,
                         "rotational": rot, "utilisation": 0.5}]
        r["trace"] = {"path": f"{name}.iowt", "command": cmd}
        return r
    stem = ["sh", "-c", "tar -xf /var/cache/iowhy/linux-6.1-5000.tar -C /var/tmp/iowhy-demo."]
    a = run_on("sda", 0, 1, 10, stem + ["AAAA/mnt && sync"])
    b = run_on("nvme0n1", 1, 0, 10, stem + ["BBBB/mnt && sync"])
    c = compare(a, b, {"devices": [{"name": "sda", "scheduler": "mq-deadline"}]},
                {"devices": [{"name": "nvme0n1", "scheduler": "none"}]})
    texts = {d["key"]: d["text"] for d in c["config_differences"]}
    assert texts["fua"] == "B's nvme0n1 honours FUA, A's sda does not (each FUA write there " \
                           "costs a post-flush)"
    assert texts["rotational"] == "A's sda is a rotational disk, B's nvme0n1 is not"
    assert texts["scheduler"] == "I/O scheduler: mq-deadline on A's sda, none on B's nvme0n1"
    assert "write_cache" not in texts
    # the commands differ past the first 70 characters: the quoted parts show where
    assert "AAAA/mnt" in texts["command"] and "BBBB/mnt" in texts["command"]
    assert [r["label"] for r in c["rows"] if r["section"] == "devices"] == \
        ["sda/nvme0n1 utilisation"]
    assert_fits(render_compare(c))


def test_busy_pair_json_and_text(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    pa = busy_trace(tmp_path / "a", n=3000)
    pb = busy_trace(tmp_path / "b", n=6000)
    a, b = run(pa), run(pb)
    c = compare(a, b, read_trace(pa).meta, read_trace(pb).meta)
    assert_consistent(c, a, b)
    diff = c["difference_ns"]
    for e in c["explanations"][1:]:
        if e["category"] != "config":
            assert e["delta_ns"] == c["delta_ns"][e["category"]]
            assert e["share_of_difference"] == round(e["delta_ns"] / diff, 4)
    deltas = [abs(e["delta_ns"]) for e in c["explanations"][1:] if e["category"] != "config"]
    assert deltas == sorted(deltas, reverse=True)
    text = render_compare(c)
    for head in ("WHAT CHANGED", "SIDE BY SIDE", "elapsed (", "requests by class"):
        assert head in text


# -- the command line ------------------------------------------------------------------------

def test_cli_compare_end_to_end(tmp_path, capsys):
    from iowhy.cli import main
    pa = pair_trace(tmp_path / "a.iowt")
    pb = pair_trace(tmp_path / "b.iowt", flushes=3, extra_cpu_ms=10)
    assert main(["compare", pa, pb, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert KEYS <= set(out)
    assert out["speed_ratio"] == 2.0 and out["explanations"][1]["category"] == "barrier"
    assert out["a"]["path"] == pa and out["b"]["path"] == pb
    assert out == json.loads(json.dumps(compare(run(pa), run(pb),
                                                read_trace(pa).meta, read_trace(pb).meta)))
    assert main(["compare", pa, pb]) == 0
    text = capsys.readouterr().out
    assert_fits(text)
    assert "B is 2.0x slower than A" in text
    # a trace with itself: analyzed once, ratio 1.0, no difference
    assert main(["compare", pa, pa, "--json"]) == 0
    same = json.loads(capsys.readouterr().out)
    assert same["speed_ratio"] == 1.0
    assert same["explanations"][0]["text"].startswith("no difference")


def test_cli_trace_without_trailer_is_compared_and_flagged(tmp_path, capsys):
    from iowhy.cli import main
    pa = pair_trace(tmp_path / "a.iowt")
    pb = pair_trace(tmp_path / "b.iowt", trailer=False)  # recorder killed: no trailer
    assert main(["compare", pa, pb]) == 0
    text = capsys.readouterr().out
    assert text.startswith("WARNING: B: trace is truncated")


def _one_line_error(capsys) -> str:
    cap = capsys.readouterr()
    assert cap.out == ""
    err = cap.err.strip()
    assert err.startswith("iowhy: ") and "\n" not in err and "Traceback" not in err
    return err


def test_cli_bad_input(tmp_path, capsys):
    from iowhy.cli import main
    good = pair_trace(tmp_path / "a.iowt")
    assert main(["compare", good, str(tmp_path / "missing.iowt")]) != 0
    assert "cannot open" in _one_line_error(capsys)
    foreign = tmp_path / "notes.txt"
    foreign.write_text("not a trace at all\n" * 10)
    assert main(["compare", str(foreign), good]) != 0
    assert "not an iowhy trace" in _one_line_error(capsys)
    data = open(good, "rb").read()
    cut = tmp_path / "cut.iowt"
    cut.write_bytes(data[:20])  # cut inside the file header
    assert main(["compare", good, str(cut)]) != 0
    assert "not an iowhy trace" in _one_line_error(capsys)
    from iowhy.traceformat import HDR_SIZE
    cut.write_bytes(data[:HDR_SIZE + 10])  # cut inside the first chunk
    assert main(["compare", good, str(cut)]) != 0
    assert "holds no readable chunk" in _one_line_error(capsys)
    empty = tmp_path / "empty.iowt"  # metadata only, cut before the recording started
    Trace(empty, meta()).close(None)
    assert main(["compare", str(empty), good]) != 0
    assert "covers no time" in _one_line_error(capsys)
    with pytest.raises(SystemExit) as exc:  # argparse: B is required
        main(["compare", good])
    assert exc.value.code == 2
    assert "required: B" in capsys.readouterr().err


def test_cli_html(tmp_path, capsys, monkeypatch):
    from iowhy.cli import main
    pa = pair_trace(tmp_path / "a.iowt")
    pb = pair_trace(tmp_path / "b.iowt", flushes=1)
    out = tmp_path / "c.html"
    # the renderer is called with both analyses and the comparison
    seen: list[tuple[Any, ...]] = []
    fake = types.ModuleType("iowhy.reports.html")

    def render_compare_html(a: Any, b: Any, comparison: Any) -> str:
        seen.append((a, b, comparison))
        return "<html>ok</html>"
    setattr(fake, "render_compare_html", render_compare_html)
    monkeypatch.setitem(sys.modules, "iowhy.reports.html", fake)
    assert main(["compare", pa, pb, "--html", str(out)]) == 0
    assert out.read_text() == "<html>ok</html>"
    assert capsys.readouterr().out == ""
    a, b, comparison = seen[0]
    assert a["elapsed_ns"] == 100 * MS and b["elapsed_ns"] == 130 * MS
    assert comparison["speed_ratio"] == 1.3
    assert main(["compare", pa, pb, "--html", str(tmp_path / "no" / "c.html")]) != 0
    assert "does not exist" in _one_line_error(capsys)


@pytest.mark.parametrize("flushes", [0, 5])
def test_text_fits_with_long_names(tmp_path, flushes):
    long_cmd = ("sh", "-c", "tar -xf /var/cache/iowhy/" + "x" * 150 + ".tar && sync")
    d = tmp_path / ("d" * 80)
    d.mkdir()
    a = analyze(read_trace(pair_trace(d / "a.iowt", command=long_cmd)))
    b = analyze(read_trace(pair_trace(d / "b.iowt", flushes=flushes,
                                      options="rw," + ",".join(f"opt{i}" for i in range(40)))))
    text = render_compare(compare(a, b))
    assert_fits(text)


def test_filesystems_pair_by_type_before_position():
    """A on XFS, B with an ext4 listed before its XFS: the XFS runs are compared with
    each other, and B's ext4 is the one only B has (pairing by position said "only B
    has a xfs filesystem" of the XFS run)."""
    from iowhy.compare import _config_differences
    xfs_a = {"fstype": "xfs", "mountpoint": "/mnt/a", "options": "rw,noatime"}
    ext4_b = {"fstype": "ext4", "mountpoint": "/", "options": "rw"}
    xfs_b = {"fstype": "xfs", "mountpoint": "/mnt/b", "options": "rw,noatime"}
    run = {"command": ["x"], "command_short": "x", "flushes": 0, "devices": []}
    sa = {**run, "filesystems": [xfs_a]}
    sb = {**run, "filesystems": [ext4_b, xfs_b]}
    diffs = _config_differences({}, {}, sa, sb)
    assert [d["text"] for d in diffs if d["key"] == "filesystem"] == [
        "only B has a ext4 filesystem on its devices (/)"]
    # different types with nothing to pair by type: side by side
    sb2 = {**run, "filesystems": [ext4_b]}
    assert [d["text"] for d in _config_differences({}, {}, sa, sb2)] == [
        "A runs on xfs (/mnt/a), B on ext4 (/)"]
