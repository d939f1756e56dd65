"""Other devices' I/O, apart from the workload's, and the bio-based devices whose I/O
the report cannot show (docs/report-json.md, `background`)."""

from __future__ import annotations

from typing import Any, Mapping, Sequence


def background(devices: Sequence[Mapping[str, Any]], mine: set[int],
               meta: Mapping[str, Any]) -> dict[str, Any]:
    """Other devices' I/O, shown apart: the devices with requests that the workload
    neither submitted to, fsynced a filesystem on, nor waited on (by a wakeup link),
    nor that sit below such a device in the stack (META stack)."""
    names = {devices[i]["name"] for i in mine if i < len(devices)}
    edges = [(e.get("upper"), e.get("lower")) for e in meta.get("stack", []) or []
             if isinstance(e, Mapping)]
    grew = True
    while grew:  # every device below one of the workload's
        new = {lo for up, lo in edges if up in names and lo not in names}
        names |= new
        grew = bool(new)
    other = [d for d in devices if d["name"] not in names and d.get("requests")]
    return {"devices": [{"name": d["name"], "requests": int(d["requests"]),
                         "read_bytes": int(d.get("read_bytes") or 0),
                         "write_bytes": int(d.get("write_bytes") or 0),
                         "busy_ns": int(d.get("busy_ns") or 0)} for d in other],
            "requests": int(sum(int(d["requests"]) for d in other))}


def bio_based_warnings(meta: Mapping[str, Any], seen: set[tuple[int, int]]) -> list[str]:
    """A line per bio-based device of META with no bio record (seen: the (major, minor)
    of the bio records): its I/O never becomes requests, so nothing of it is in the
    request figures."""
    names = [n for n in meta.get("bio_based_devices", []) or [] if isinstance(n, str)]
    out = []
    for d in [*(meta.get("devices") or []), *(meta.get("lower_devices") or [])]:
        if isinstance(d, Mapping) and d.get("name") in names and \
                (d.get("major"), d.get("minor")) not in seen:
            out.append(f"{d['name']} is a bio-based device (its I/O never becomes requests) "
                       "and no bio of it was recorded: any I/O of it is missing here")
    return out
