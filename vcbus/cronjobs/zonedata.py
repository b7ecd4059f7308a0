"""A time zone's offsets as data for the domain (statemachines/cronjobs/zones.py), read with zoneinfo.

Volcano's controller loads a CronJob's zone with Go's `time.LoadLocation` when it syncs;
vcbus reads the zone here, in the adapter, and the record carries the result, so a
replay decides with the zone data of the log, not of the machine replaying it.

`zone(name)` lists the zone's offset changes between 1970 and 2100 (found by sampling
every day and bisecting each change to the second), its offset at 1970 as the
offset before them, or Go's error text if the zone cannot be loaded:
`unknown time zone X`, `time: invalid location name`.
"""

from __future__ import annotations

import datetime as _dt
import zoneinfo
from functools import lru_cache

import msgspec

from statemachines.cronjobs.zones import UTC, Zone

START = int(_dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc).timestamp())
END = int(_dt.datetime(2100, 1, 1, tzinfo=_dt.timezone.utc).timestamp())
STEP = 86400


def _offset(tz: zoneinfo.ZoneInfo, unix: int) -> int:
    delta = _dt.datetime.fromtimestamp(unix, tz).utcoffset()
    return int(delta.total_seconds()) if delta is not None else 0


@lru_cache(maxsize=256)
def zone(name: str) -> Zone:
    """The zone `name` as Go's LoadLocation would resolve it, as data."""
    if name in ("", "UTC", "Local"):
        return UTC
    try:
        tz = zoneinfo.ZoneInfo(name)
    except zoneinfo.ZoneInfoNotFoundError:
        return Zone(name=name, error=f"unknown time zone {name}")
    except (ValueError, OSError):
        return Zone(name=name, error="time: invalid location name")
    first = _offset(tz, START)
    transitions: list[tuple[int, int]] = []
    prev, current = START, first
    t = START + STEP
    while t <= END:
        if _offset(tz, t) == current:
            prev, t = t, t + STEP
            continue
        lo, hi = prev, t  # offset(lo) == current, offset(hi) != current: one change at least, in (lo, hi]
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if _offset(tz, mid) == current:
                lo = mid
            else:
                hi = mid
        current = _offset(tz, hi)
        transitions.append((hi, current))
        prev = hi  # look at the rest of the window again: a second change in it is found too
    return Zone(name=name, first_offset=first, transitions=tuple(transitions))


def zones_for(*names: str | None) -> dict[str, Zone]:
    """The zones a CronJob names (its `spec.timeZone`, its schedule's `TZ=` prefix), by name."""
    return {n: zone(n) for n in names if n is not None}



def zones_of(cronjob: object) -> dict[str, Zone]:
    """The zones a CronJob object (a dict, as the API server sends it) names: its `spec.timeZone` and
    a `TZ=`/`CRON_TZ=` prefix of its schedule."""
    spec = cronjob.get("spec") if isinstance(cronjob, dict) else None
    spec = spec if isinstance(spec, dict) else {}
    schedule = spec.get("schedule") if isinstance(spec.get("schedule"), str) else ""
    names = [spec.get("timeZone") if isinstance(spec.get("timeZone"), str) else None]
    if schedule.startswith(("TZ=", "CRON_TZ=")) and " " in schedule:
        names.append(schedule[schedule.find("=") + 1:schedule.find(" ")])
    return zones_for(*names)


def cronjob_zones(cronjob: object) -> dict:
    """`zones_of` as the JSON a CronJob's watch record carries (`"zones"`; the bridge adds it)."""
    return {name: msgspec.to_builtins(z) for name, z in zones_of(cronjob).items()}
