"""A time zone as data: its UTC offsets, as the adapter read them (vcbus/cronjobs/zonedata.py).

The domain never opens a tz database: a CronJob record carries the zones its schedule names
(statemachines/model/cronjob.py); statemachines/cronjobs/zones.py reads offsets from them.
"""

from __future__ import annotations

from msgspec import Struct


class Zone(Struct, frozen=True):
    """One time zone's offsets, as the adapter read them (`error` if it could not)."""

    name: str = "UTC"
    first_offset: int = 0  # seconds east of UTC before the first transition
    transitions: tuple[tuple[int, int], ...] = ()  # (utc seconds, offset from then on)
    error: str = ""


UTC = Zone()
