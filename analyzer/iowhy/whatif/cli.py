"""`iowhy whatif` (added to cli.py's parser by add_whatif_parser). numpy and the
analysis are imported where used."""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

DISKS = ("hdd-7200", "ssd", "ram")


def add_whatif_parser(sub: Any) -> None:
    w = sub.add_parser(
        "whatif", help="predict the elapsed time with barriers off, the write cache off, "
                       "or another disk",
        description="Replay the recorded workload against changed storage and print the "
                    "predicted elapsed time, the predicted attribution beside the recorded "
                    "one, and the difference explained. The replay keeps each thread's "
                    "syscalls and CPU bursts and what ended each of its waits; the device "
                    "is served by the emulated disk's model (docs/whatif.md). With --fit, "
                    "write a profile of the trace's device instead, for --disk.")
    w.add_argument("trace", help="trace file (.iowt)")
    sc = w.add_argument_group("scenario")
    sc.add_argument("--nobarrier", action="store_true",
                    help="no cache flush reaches the device: PREFLUSH dropped, FUA writes "
                         "served as plain writes")
    sc.add_argument("--write-cache", choices=("on", "off"),
                    help="the device's volatile write cache on or off (off: the kernel "
                         "sends no flush and every write goes to the media; default: as "
                         "recorded)")
    sc.add_argument("--disk", metavar="DISK",
                    help="serve the requests on another disk: a preset of the emulated disk "
                         "(hdd-7200, ssd, ram) or a PROFILE.json from --fit (default: the "
                         "recorded device, as fitted from the trace)")
    out = w.add_argument_group("output")
    out.add_argument("--json", action="store_true",
                     help="print the prediction as JSON (keys in docs/whatif.md; times in "
                          "integer ns)")
    out.add_argument("--fit", action="store_true",
                     help="fit a device profile from the trace (its busiest device) and "
                          "write it to -o")
    out.add_argument("-o", "--output", metavar="PROFILE.json",
                     help="with --fit: the profile to write (mode 0600, replacing an "
                          "existing file atomically, never through a symlink)")
    w.set_defaults(func=cmd_whatif)


def cmd_whatif(args: argparse.Namespace) -> int:
    from ..commands import _check_out, _user_error, _wrote
    from ..errors import load
    from ..memory import tune_allocator
    from ..outfile import write_output, write_stdout
    from ..progress import progress
    t0 = time.monotonic()
    if args.fit:
        if args.nobarrier or args.write_cache or args.disk:
            raise _user_error("--fit takes no scenario (--nobarrier, --write-cache, --disk)",
                              "fit first: iowhy whatif --fit TRACE -o PROFILE.json", usage=True)
        if not args.output:
            raise _user_error("--fit needs -o PROFILE.json",
                              "iowhy whatif --fit TRACE -o PROFILE.json", usage=True)
        _check_out(args.output, (".json",))
    elif args.output:
        raise _user_error("-o is for --fit only", "to keep a prediction: --json > FILE",
                          usage=True)
    from .predict import Scenario, WhatifError, load_profile
    profile = None
    if args.disk and args.disk not in DISKS:
        if not (args.disk.endswith(".json") or os.path.isfile(args.disk)):
            raise _user_error(f"unknown disk {args.disk!r}",
                              f"one of {', '.join(DISKS)}, or a PROFILE.json from --fit",
                              usage=True)
        try:
            profile = load_profile(args.disk)
        except WhatifError as e:
            raise _user_error(str(e), e.hint) from None
    tune_allocator()  # before the trace is read (commands.cmd_report says why)
    try:
        with progress(f"replaying {args.trace}") as step:
            step("read trace")
            tr = load(args.trace)
            if args.fit:
                from .predict import fit_profile
                step("fit")
                prof = fit_profile(tr)
            else:
                from .predict import predict, prepare
                from ..analysis import AnalysisConfig
                step("analysis")
                prep = prepare(tr, AnalysisConfig(progress=step))
                step("replay")
                sc = Scenario(nobarrier=args.nobarrier, write_cache=args.write_cache,
                              disk=args.disk if profile is None else None, profile=profile,
                              profile_name=args.disk if profile is not None else None)
                result = predict(tr, sc, prep)
    except WhatifError as e:
        raise _user_error(str(e), e.hint) from None
    from .render import render_profile, render_text
    if args.fit:
        write_output(args.output, json.dumps(prof, indent=2) + "\n")
        _wrote(args.output, t0)
        write_stdout(render_profile(prof, args.output))
        return 0
    if args.json:
        write_stdout(json.dumps(result, indent=2, allow_nan=False))
    else:
        write_stdout(render_text(result))
    return 0
