"""`make gallery`: the seeds' experiments as iowhy pages.

Runs the seed scenarios on the emulated 7200 rpm disk (lab/scenarios.py), copies each
run's HTML report and each comparison page into reports/gallery/, and writes
reports/gallery/README.md listing every scenario with its headline finding, plus one
figure (attribution.png: plain tar, fsync per file, fsync per file with the write cache
off) that the main README shows. Needs root (loop devices, FUSE, BPF).

    .venv/bin/python -m iowhy.lab.gallery [--out reports/gallery] [--work out/gallery]
                                          [--pages-only]

Each run is labelled by its scenario (`wc-barrier: untar 2000 files, syncfs, rm -rf`,
`iowhy record --label`); its pages open with the answer and show the machine's paths
(the emulated disk's mount, the checkout) only in each trace's metadata block. With
--pages-only nothing is run: the pages are made again from the traces in --work, and
the same traces give the same pages.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from iowhy import outfile
from iowhy.lab import scenarios

DISK = "hdd-7200"
# (scenario, filesystem): the seeds' experiments, smallest set that shows each of them.
RUNS = (
    ("tar", "ext4"), ("fsync-tar", "ext4"), ("fsync-tar-wc-off", "ext4"),
    ("tar", "xfs"), ("fsync-tar", "xfs"),
    ("wc-barrier", "xfs"), ("wc-nobarrier", "xfs"), ("wc-off", "xfs"),
    ("fsync-tasks-1", "ext4"), ("fsync-tasks-8", "ext4"), ("fsync-tasks-32", "ext4"),
    ("rmtree", "xfs"), ("sqlite-off", "ext4"), ("sqlite-full", "ext4"),
)
FIGURE_RUNS = (("tar", "ext4"), ("fsync-tar", "ext4"), ("fsync-tar-wc-off", "ext4"))


def _ms(ns: int) -> str:
    return f"{ns / 1e6:,.0f} ms" if ns >= 10e6 else f"{ns / 1e6:.1f} ms"


def _headline(report: dict[str, Any]) -> str:
    found = report.get("findings") or []
    return str(found[0]["text"]) if found else "(no finding)"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="reports/gallery",
                   help="pages and README (default: %(default)s)")
    p.add_argument("--work", default="out/gallery",
                   help="traces, truth and reports of the runs (default: %(default)s)")
    p.add_argument("--pages-only", action="store_true",
                   help="run nothing: analyze the traces already in --work again and "
                        "write the pages (the same traces give the same pages, byte for "
                        "byte)")
    a = p.parse_args(argv)
    out, work = Path(a.out), Path(a.work)
    outfile.make_output_dir(out)
    outfile.make_output_dir(work)

    rows = []
    for name, fs in RUNS:
        rid = scenarios.run_id(name, fs, DISK)
        if a.pages_only:
            if not (work / f"{rid}.run.json").exists():
                print(f"gallery: {rid}: no run in {work}, skipped", file=sys.stderr)
                continue
            print(f"gallery: {name} on {fs} ({DISK}), from its trace", file=sys.stderr,
                  flush=True)
            scenarios.reanalyze(work / f"{rid}.run.json")
        else:
            print(f"gallery: {name} on {fs} ({DISK})", file=sys.stderr, flush=True)
            scenarios.run(name, fs, DISK, out_dir=work)
        report = json.loads((work / f"{rid}.report.json").read_text())
        page = work / f"{rid}.report.html"
        if page.exists():
            outfile.copy_output(page, out / f"{rid}.html")
        rows.append((name, fs, rid, report))

    compares = []
    for f in scenarios.gallery(work, DISK):
        if f.suffix == ".html":
            outfile.copy_output(f, out / f.name)
            text = f.with_suffix(".txt").read_text().splitlines()
            verdict = next((ln.strip() for ln in text if ln.lstrip().startswith("1. ")), "")
            compares.append((f.name, re.sub(r"^\d+\.\s*", "", verdict)))

    from iowhy.reports.figures import attribution_figure
    by_key = {(n, fs): r for n, fs, _, r in rows}
    runs = [(f"{n} ({fs})", by_key[(n, fs)]) for n, fs in FIGURE_RUNS if (n, fs) in by_key]
    if runs:
        outfile.write_output(out / "attribution.png", attribution_figure(runs))

    lines = [
        "# Gallery: the seeds' experiments, explained by iowhy",
        "",
        f"Each run is a seed scenario on the emulated {DISK} disk (`iowhy lab run`), recorded",
        "and analyzed by iowhy; the pages are self-contained HTML. Regenerate with",
        "`make gallery` (root; a few minutes). Figures differ a little from run to run.",
        "",
        "![where the time went](attribution.png)",
        "",
        "| scenario | fs | elapsed | headline finding | page |",
        "|---|---|---|---|---|",
    ]
    for name, fs, rid, r in rows:
        label = (r.get("trace") or {}).get("label") or name
        lines.append(f"| {label.replace('|', '/')} | {fs} | {_ms(int(r['elapsed_ns']))} | "
                     f"{_headline(r).replace('|', '/')} | [{rid}]({rid}.html) |")
    if compares:
        lines += ["", "## Comparisons (`iowhy compare`)", "", "| page | verdict |",
                  "|---|---|"]
        for page_name, verdict in compares:
            lines.append(f"| [{page_name}]({page_name}) | {verdict.replace('|', '/')} |")
    outfile.write_output(out / "README.md", "\n".join(lines) + "\n")
    print(f"gallery: {len(rows)} runs, {len(compares)} comparisons in {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
