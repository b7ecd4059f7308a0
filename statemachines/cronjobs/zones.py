"""Time zones as data: the UTC offsets a CronJob's schedule needs, resolved by the adapter.

The domain never opens a tz database. A CronJob record carries, for each zone its
schedule names (`spec.timeZone`, a `TZ=`/`CRON_TZ=` prefix), a `Zone`: the zone's
offset before its first listed transition and every transition after it, as
`(utc_seconds, offset_seconds)` pairs in time order (vcbus/cronjobs/zonedata.py builds
them from the system tz database, as Go's `time.LoadLocation` would read it). A name
the adapter could not load carries Go's error text instead (`unknown time zone X`).

`lookup` is Go's `Location.lookup`: the offset in force at an instant, with the start and
end of the period it holds; `civil_to_unix` is the zone half of Go's `time.Date`
(a wall-clock time in a gap or an overlap resolves as Go resolves it). `UTC` (and
`Local`, which vcbus reads as UTC, the time zone of Volcano's controller image) has no
transitions.
"""

from __future__ import annotations

from bisect import bisect_right

from statemachines.model.zone import UTC, Zone

__all__ = ["UTC", "Zone", "lookup", "offset_at", "civil_to_unix"]

ALPHA = -(1 << 63)
OMEGA = (1 << 63) - 1


def lookup(zone: Zone, unix: int) -> tuple[int, int, int]:
    """(offset, start, end) at `unix`: Go's `loc.lookup(sec)`, end exclusive."""
    tx = zone.transitions
    if not tx or unix < tx[0][0]:
        return zone.first_offset, ALPHA, tx[0][0] if tx else OMEGA
    i = bisect_right(tx, (unix, OMEGA)) - 1
    end = tx[i + 1][0] if i + 1 < len(tx) else OMEGA
    return tx[i][1], tx[i][0], end


def offset_at(zone: Zone, unix: int) -> int:
    return lookup(zone, unix)[0]


def civil_to_unix(zone: Zone, local_seconds: int) -> int:
    """The instant of a wall-clock time given as seconds since 1970-01-01T00:00 local: Go's `time.Date`.

    Go looks up the offset in force at `local_seconds` read as UTC; if the instant that
    offset gives lies outside that offset's period, it takes the offset in force at it.
    """
    offset, start, end = lookup(zone, local_seconds)
    if offset != 0:
        utc = local_seconds - offset
        if utc < start or utc >= end:
            offset = lookup(zone, utc)[0]
        return local_seconds - offset
    return local_seconds
