"""The decider's durable consumer on VCBUS_K8S: its configuration, and where a restart stands.

One per partition (`vcbus.bus.partitions.Partition.consumer`), filtering the
partition's own records with one filter subject, created through
the JetStream API directly, because nats-py's `ConsumerConfig` has no field
for priority groups: `priority_groups: ["vcbus"]` with `priority_policy:
pinned_client` lets the server deliver to one decider only
(`vcbus.bus.ownership`). An older consumer without them is updated in place.

`open_decider_consumer` returns the ack floor (the last decided record), the
priority group, and the highest record any run of the partition was ever
delivered: only a delivered record can have been decided, so only records up
to it can have outputs a run stored and died before acking. Resetting the
consumer forgets how far it had delivered, so that mark is kept in the
consumer's metadata (`vcbus.delivered`).
"""

from __future__ import annotations

import json
import logging
from typing import NamedTuple

from nats.aio.client import Client
from nats.js.errors import NotFoundError

from vcbus.bus import partitions as parts
from vcbus.bus import subjects as s
from vcbus.bus.errors import BusError
from vcbus.bus.ownership import GROUP, PIN_TIMEOUT
from vcbus.settings import BusSettings

log = logging.getLogger("vcbus.decider")

DELIVERED_KEY = "vcbus.delivered"


class Position(NamedTuple):
    floor: int  # the ack floor: every record up to it is decided and its outputs stored
    group: str | None  # the priority group to pull with (None: a server without groups)
    delivered: int  # the highest record ever delivered to a run of this partition


def decider_config(part: parts.Partition, settings: BusSettings, *, max_ack_pending: int, start_after: int = 0) -> dict:
    cfg = {
        "name": part.consumer,
        "durable_name": part.consumer,
        "description": f"vcbus decider (partition {part.name}): acks a record once its outputs are stored",
        "deliver_policy": "by_start_sequence" if start_after else "all",
        "ack_policy": "explicit",
        "ack_wait": int(settings.ack_wait * 1e9),
        "max_ack_pending": max_ack_pending,
        "max_deliver": -1,
        "max_waiting": 512,
        "priority_groups": [GROUP],
        "priority_policy": "pinned_client",
        "priority_timeout": int(PIN_TIMEOUT * 1e9),
    }
    if start_after:
        cfg["opt_start_seq"] = start_after + 1
    filters = part.consumer_filters  # with N > 1 the shared records come another way (vcbus.bus.merging)
    if len(filters) == 1:
        cfg["filter_subject"] = filters[0]
    else:
        cfg["filter_subjects"] = filters
    return cfg


async def consumer_api(nc: Client, verb: str, name: str, body: dict | None = None) -> dict:
    """`$JS.API.CONSUMER.<verb>.VCBUS_K8S.<name>`; raises NotFoundError (404) or BusError."""
    payload = json.dumps(body).encode() if body is not None else b""
    reply = json.loads((await nc.request(f"$JS.API.CONSUMER.{verb}.{s.K8S_STREAM}.{name}", payload, timeout=10)).data)
    error = reply.get("error")
    if error:
        if error.get("code") == 404:
            raise NotFoundError
        raise BusError(f"{verb.lower()} consumer {name}: {error.get('description')} ({error.get('err_code')})")
    return reply


async def _write(nc: Client, name: str, cfg: dict, action: str) -> dict:
    return await consumer_api(nc, "CREATE", name, {"stream_name": s.K8S_STREAM, "config": cfg, "action": action})


async def create_at(nc: Client, part: parts.Partition, settings: BusSettings, last: int, *, max_ack_pending: int) -> None:
    """A new consumer whose ack floor is `last` (its decider folds up to it, then decides)."""
    await _write(nc, part.consumer, decider_config(part, settings, max_ack_pending=max_ack_pending, start_after=last),
                 "create")


async def open_decider_consumer(nc: Client, part: parts.Partition, settings: BusSettings, *, max_ack_pending: int) -> Position:
    """Create the partition's consumer if missing, bring an older one up to date; where it stands."""
    name = part.consumer
    want = decider_config(part, settings, max_ack_pending=max_ack_pending)
    try:
        have = await consumer_api(nc, "INFO", name)
    except NotFoundError:
        have = await _write(nc, name, want, "create")
    cfg = have.get("config") or {}
    # two filter subjects (partition and shared records: vcbus before vcbus.bus.merging) become the one
    refilter = (cfg.get("filter_subjects") or [cfg.get("filter_subject")]) != part.consumer_filters
    if refilter or cfg.get("priority_policy") != "pinned_client" or (cfg.get("max_ack_pending") or 0) < max_ack_pending:
        update = {**want, "deliver_policy": cfg.get("deliver_policy", "all")}
        for key in ("opt_start_seq", "opt_start_time", "metadata"):
            update.pop(key, None)
            if key in cfg:
                update[key] = cfg[key]
        try:
            have = await _write(nc, name, update, "update")
        except BusError as err:  # an older server: no priority groups, the owner check alone guards
            log.warning("decider: consumer %s cannot be pinned (%s); relying on the owner check", name, err)
    cfg = have.get("config") or {}
    floor = int(((have.get("ack_floor") or {}).get("stream_seq")) or 0)
    delivered = int(((have.get("delivered") or {}).get("stream_seq")) or 0)
    meta = dict(cfg.get("metadata") or {})
    mark = str(meta.get(DELIVERED_KEY, "0"))
    marked = int(mark) if mark.isdigit() else 0
    if delivered > max(floor, marked):
        meta[DELIVERED_KEY] = str(delivered)
        try:
            await _write(nc, name, {**cfg, "metadata": meta}, "update")
        except BusError as err:  # not kept: a second crash before the floor passes it may repeat a batch
            log.warning("decider: cannot mark the consumer's delivered position (%s)", err)
    group = GROUP if cfg.get("priority_policy") == "pinned_client" else None
    return Position(floor, group, max(delivered, marked))
