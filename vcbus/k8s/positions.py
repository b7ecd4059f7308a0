"""A watch position as the bridge stores it in KV (`vcbus_bridge`): JSON, compressed when large.

A position holds the watcher's resourceVersion and the metadata of every
object it knows (`vcbus.k8s.bridge.trim`), about 420 bytes per pod: a cluster
of 20,000 pods would pass the server's `max_payload` (8 MiB by default) as
plain JSON. Positions over `COMPRESS_ABOVE` bytes are stored zlib-compressed
behind a `MAGIC` prefix (the metadata of one job's pods repeats itself: 20,000
pods of vcjobs are 13.9 MB of JSON and 0.93 MB stored), smaller ones as plain
JSON, readable with `nats kv get`.
Reading accepts both. A stored value that cannot be read (corrupt, cut short,
inflating past `MAX_INFLATED`, not a position) gives None and a warning: the
bridge then lists from scratch, as on its first start, and the server drops
what it publishes again (the same `Nats-Msg-Id`).
"""

from __future__ import annotations

import logging
import zlib
from typing import Any

import msgspec

log = logging.getLogger("vcbus.bridge")

MAGIC = b"vcbus-zlib:"
COMPRESS_ABOVE = 1 << 20  # bytes of JSON
MAX_INFLATED = 512 << 20  # bytes: a stored position never inflates past this

_enc = msgspec.json.Encoder()
_dec = msgspec.json.Decoder()


def encode(position: dict[str, Any]) -> bytes:
    raw = _enc.encode(position)
    if len(raw) <= COMPRESS_ABOVE:
        return raw
    return MAGIC + zlib.compress(raw, 6)


def decode(value: bytes | None, *, key: str = "") -> dict[str, Any] | None:
    """The stored position, or None (nothing stored, or a value that cannot be used: warned)."""
    if not value:
        return None
    try:
        if value.startswith(MAGIC):
            inflater = zlib.decompressobj()
            raw = inflater.decompress(value[len(MAGIC):], MAX_INFLATED)
            if inflater.unconsumed_tail or not inflater.eof:
                raise ValueError(f"does not inflate to a whole position within {MAX_INFLATED >> 20} MiB")
        else:
            raw = value
        position = _dec.decode(raw)
        if not isinstance(position, dict) or not isinstance(position.get("known", {}), dict):
            raise ValueError("not a watch position (an object with resourceVersion and known)")
        if not all(isinstance(obj, dict) and isinstance(obj.get("metadata", {}), dict)
                   for obj in position.get("known", {}).values()):
            raise ValueError("a known object is not an object with metadata")
        rv = position.get("resourceVersion")
        if rv is not None and not isinstance(rv, str):
            raise ValueError("resourceVersion is not a string")
    except (ValueError, zlib.error, msgspec.DecodeError) as err:
        log.warning("bridge: the stored watch position %s cannot be read (%s); listing from scratch", key, err)
        return None
    return position
