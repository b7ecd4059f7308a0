"""Storing a checked watch log in VCBUS_K8S (`vcbus publish`, `vcbus log import`): whole, or resumable.

The input was checked first, record by record (`publisher.check_log`: nothing is
sent when any record is bad). What can still fail is the server: it goes away,
a stream limit refuses a record, the connection drops. Two rules:

- **Small inputs: all or nothing.** An input of at most `ATOMIC_RECORDS` (1,000,
  the server's atomic batch limit) publishable records and `ATOMIC_BYTES` (64 MiB)
  goes as one JetStream atomic batch (nats-server 2.12+, stream `allow_atomic`;
  `vcbus.bus.batching`): the server stores every record or none. A batch holding
  a record the stream has already (a re-run) is refused whole by the server and
  then published record by record, each repeat dropped by its msg id; a server
  without atomic batches gets the same per-record path.
- **Larger inputs: a stored prefix, completed by a re-run.** Records are
  published in file order on one connection that never reconnects (a reconnect
  would send the client's buffered records after some that were lost on the old
  connection, leaving a gap). The server stores one connection's messages in
  order, so whatever is stored when it fails is a prefix of the file. Every
  record's `Nats-Msg-Id` is its identity (uid, resourceVersion, watch type), so
  running the same command again stores the rest, in order, and drops the
  prefix as duplicates, as long as the re-run comes within the stream's
  duplicate window (`duplicate_window`, 10 minutes by default).

A failure raises `StoreFailed` (a `BusError`, exit 3) that says how many records
the server acknowledged, and that running the same command again completes the
log without duplicates.
"""

from __future__ import annotations

import asyncio
import json
from typing import BinaryIO

from nats.aio.msg import Msg

from vcbus.bus import subjects as s
from vcbus.bus.batching import DUPLICATE_IN_BATCH, MAX_ATOMIC, BatchWriter
from vcbus.bus.connecting import Bus
from vcbus.bus.errors import BusError
from vcbus.bus.partitions import partitions as partition_count
from vcbus.bus.partitions import route
from vcbus.bus.publisher import LogCheck, Prepared, Publisher, prepare
from vcbus.watchlog import decoded_records

ATOMIC_RECORDS = MAX_ATOMIC
ATOMIC_BYTES = 64 * 1024 * 1024


class StoreFailed(BusError):
    """The server failed part-way; the message says what was stored and that a re-run completes it."""


def _window(seconds: float) -> str:
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{seconds / 3600:g}h"
    if seconds >= 60 and seconds % 60 == 0:
        return f"{seconds / 60:g}m"
    return f"{seconds:g}s"


def atomic_fits(checked: LogCheck) -> bool:
    return 0 < checked.publishable <= ATOMIC_RECORDS and checked.bytes <= ATOMIC_BYTES


async def store_log(bus: Bus, data: BinaryIO, source: str, checked: LogCheck, *, command: str) -> Publisher:
    """Store the checked input `data` (see the module docstring); `command` is what to run again."""
    bus.nc.options["allow_reconnect"] = False  # a lost connection fails now: what is stored stays a prefix
    info = await bus.js.stream_info(s.K8S_STREAM)
    window = _window(info.config.duplicate_window or 0)
    if atomic_fits(checked) and info.config.allow_atomic:
        return await _atomic(bus, data, source, checked, command=command, window=window)
    pub = Publisher(bus.js, timeout=bus.settings.publish_timeout)
    try:
        for rec, decoded in decoded_records(data, source):
            msg = prepare(rec.data, decoded)
            if msg is not None:
                await pub.publish(msg)
        await pub.flush()
    except Exception as err:  # a BusError, a timeout, nats.py's errors (connection closed, ...)
        lost = " (the connection to the server was lost)" if bus.nc.is_closed else ""
        raise StoreFailed(_partial(pub, checked, err, lost, command=command, window=window)) from err
    return pub


def _partial(pub: Publisher, checked: LogCheck, err: BaseException, lost: str, *, command: str, window: str) -> str:
    done = pub.published + pub.duplicates
    seqs = f" (seq {pub.first_seq}..{pub.last_seq}" if pub.published else " ("
    seqs += "; the ones sent after them may be stored too, unacknowledged)"
    return (
        f"the server failed after acknowledging {done} of {checked.publishable} records{seqs}: "
        f"{str(err) or type(err).__name__}{lost}. What is stored stays, in file order; running `{command}` again "
        f"stores the rest without duplicates (records already stored are dropped by their msg id, "
        f"within the stream's {window} duplicate window)"
    )


async def _atomic(bus: Bus, data: BinaryIO, source: str, checked: LogCheck, *, command: str, window: str) -> Publisher:
    """One atomic batch: every record stored, or none."""
    msgs: list[Prepared] = []
    count = await partition_count(bus.js)
    for rec, decoded in decoded_records(data, source):
        msg = prepare(rec.data, decoded)
        if msg is not None:
            msgs.append(msg._replace(subject=route(msg.subject, msg.headers.get("Vcbus-Job"), count)))
    writer = BatchWriter(bus.nc, min_atomic=2)
    pub = Publisher(bus.js)
    timeout = bus.settings.publish_timeout
    try:
        (sent,) = await writer.send(msgs)  # at most ATOMIC_RECORDS: one batch
        async with asyncio.timeout(timeout):
            answers = [await fut for _, fut in sent.replies]
        error = next((a["error"] for a in map(_answer, answers) if a.get("error")), None)
        if error is None:
            pub.published = len(msgs)
            _seqs(pub, sent.replies)
        elif error.get("err_code") == DUPLICATE_IN_BATCH or error.get("code") == DUPLICATE_IN_BATCH:
            # some records are there already (a re-run): record by record, each repeat dropped by its msg id
            res = await writer.one_by_one(msgs, timeout)
            pub.published, pub.duplicates = res.stored, res.duplicates
        else:
            raise BusError(f"the server refused the batch: {error.get('description') or error}")
    except Exception as err:
        raise StoreFailed(
            f"storing the {len(msgs)} records as one atomic batch failed: {str(err) or type(err).__name__}. "
            f"The server stores such a batch whole or not at all; running `{command}` again stores whatever "
            f"is missing without duplicates (msg ids, within the stream's {window} duplicate window)"
        ) from err
    finally:
        await writer.close()
    return pub


def _answer(msg: Msg) -> dict:
    """A reply to a batch message: a pub ack, `{}`, or `{"error": {...}}` (a status header is an error too)."""
    status = (msg.headers or {}).get("Status")
    if status and status != "100":
        return {"error": {"code": int(status) if status.isdigit() else 0,
                          "description": (msg.headers or {}).get("Description") or "no stream answered"}}
    try:
        value = json.loads(msg.data or b"{}")
    except ValueError:
        return {"error": {"description": msg.data[:200].decode(errors="replace")}}
    return value if isinstance(value, dict) else {}


def _seqs(pub: Publisher, replies: list) -> None:
    """The stream sequences from a stored batch's acknowledgements (the commit's: its last and count)."""
    for role, fut in replies:
        if not fut.done() or fut.cancelled():
            continue
        try:
            ack = json.loads(fut.result().data or b"{}")
        except ValueError:
            continue
        seq = int(ack.get("seq") or 0) if isinstance(ack, dict) else 0
        if not seq or role == "first":
            continue
        first = seq - int(ack.get("count") or 1) + 1 if role == "commit" else seq
        pub.first_seq = min(pub.first_seq, first) if pub.first_seq else first
        pub.last_seq = max(pub.last_seq, seq)
