"""What a stored watch record keeps of `metadata.managedFields`: who wrote the object and when.

A managedFields entry's field set (`fieldsV1`) is the bulk of an object and nothing reads it, but
its `time` is when the API server took a write: where a log carries no time of its own, a replay's
clock reads it (statemachines.model.record_time). So `vcbus record` and `vcbus publish` keep each
entry's `WRITE_KEYS` and drop the rest, and a log replays with the same times from a file and
from the bus.
"""

from __future__ import annotations

WRITE_KEYS = ("manager", "operation", "time")


def kept_writes(fields: object) -> list[dict] | None:
    """The entries of `fields` that carry a time, reduced to `WRITE_KEYS`; None when none does."""
    if not isinstance(fields, list):
        return None
    kept = [{k: e[k] for k in WRITE_KEYS if k in e} for e in fields if isinstance(e, dict) and e.get("time")]
    return kept or None
