"""`vcbus bus repartition N`: VCBUS_K8S replayed into a layout of N partitions, sequences kept.

Everything on the bus refers to VCBUS_K8S sequences: output ids
(`<seq>:<index>`), poison events, the scheduler's session cuts, the
deciders' ack floors. Repartitioning therefore keeps every record at its
sequence and only changes its subject:

1. **Check.** No decider may run (each partition's owner subject must be
   silent, `vcbus.bus.ownership`) and every partition must be decided to the
   end (no record pending or unacked): then every record's outputs are
   stored and the new deciders only have to rebuild, never to re-decide.
2. **Copy out.** The records go, in order, into the stream
   `VCBUS_K8S_REPARTITION` (subjects `vcbus.repartition.>`), each with its
   sequence and subject in headers (`Vcbus-Seq`, `Vcbus-Subject`). Verified
   by count.
3. **Recreate** VCBUS_K8S with the new count (`first_seq` = the old first
   sequence) and **copy back** in order, each record routed for the new
   layout (`vcbus.bus.partitions.route`); a sequence the old stream no longer
   had (a deleted record) is filled by a placeholder that is deleted at once,
   so every record gets its old sequence back.
4. **Consumers.** Each new partition's durable consumer is created at the end
   of the log (ack floor = the last sequence): its decider folds its records
   on start and decides what comes after; with N > 1 the queue role's too
   (`vcbus.bus.queueing`). The copy stream is deleted.

Interrupted after step 2 (the copy exists), running it again resumes from the
copy: the copy is the log until it is deleted.
"""

from __future__ import annotations

import json
import logging
from typing import Callable

from nats.js.errors import NotFoundError

from vcbus.bus import partitions as parts
from vcbus.bus import subjects as s
from vcbus.bus.batching import BatchWriter
from vcbus.bus.connecting import Bus
from vcbus.bus.errors import BusError
from vcbus.bus.consumers import create_at
from vcbus.bus.ownership import PartitionOwned, control_subject
from vcbus.bus.publisher import Prepared
from vcbus.bus.queueing import QueueRole
from vcbus.bus.reading import read_stream
from vcbus.bus.streams import stream_config
from vcbus.errors import UserError

log = logging.getLogger("vcbus.repartition")

COPY_STREAM = "VCBUS_K8S_REPARTITION"
COPY_PREFIX = "vcbus.repartition"
SEQ = "Vcbus-Seq"
SUBJECT = "Vcbus-Subject"
CHUNK = 500
GAP_SUBJECT = f"{s.K8S_PREFIX}.gap._.placeholder"


async def check_idle(bus: Bus, count: int) -> None:
    """Refuse while a decider runs or a partition has records not decided yet."""
    import nats.errors

    roles = [parts.Partition(k, count) for k in range(count)] + ([QueueRole()] if count > 1 else [])
    for part in roles:  # with N > 1 the queue role too (vcbus.bus.queueing)
        try:
            await bus.nc.request(control_subject(part.consumer), b"", timeout=1.0)
        except nats.errors.NoRespondersError:
            pass
        except (nats.errors.TimeoutError, TimeoutError):
            raise PartitionOwned(f"partition {part.name} has an owner that does not answer; stop its decider first")
        else:
            raise PartitionOwned(f"partition {part.name} is owned by a running decider: stop the deciders first")
        try:
            info = await bus.js.consumer_info(s.K8S_STREAM, part.consumer)
        except NotFoundError:
            raise UserError(
                f"partition {part.name} has no decider consumer yet: decide the log first "
                f"(vcbus up --once --service decider)"
            ) from None
        if info.num_pending or info.num_ack_pending:
            raise UserError(
                f"partition {part.name} has {int(info.num_pending or 0) + int(info.num_ack_pending or 0)} records "
                f"not decided yet: decide them first (vcbus up --once --service decider)"
            )
        shared = await last_shared(bus) if part.count > 1 else 0
        if shared > int(info.ack_floor.stream_seq or 0):  # its consumer filters its own records only
            raise UserError(
                f"partition {part.name} has not decided the shared records up to seq {shared} yet: "
                f"decide them first (vcbus up --once --service decider)"
            )


async def last_shared(bus: Bus) -> int:
    """The sequence of the last shared record (of no job, `vcbus.bus.merging`), 0 if there is none."""
    body = json.dumps({"last_by_subj": parts.SHARED_FILTER}).encode()
    reply = json.loads((await bus.nc.request(f"$JS.API.STREAM.MSG.GET.{s.K8S_STREAM}", body, timeout=10)).data)
    error = reply.get("error")
    if error:
        if error.get("code") == 404:
            return 0
        raise BusError(f"repartition: last shared record of {s.K8S_STREAM}: {error.get('description')}")
    return int(reply["message"]["seq"])


async def repartition(bus: Bus, count: int, *, progress: Callable[[str], None] = lambda _m: None) -> dict:
    """Replay VCBUS_K8S into `count` partitions (see the module docstring); return a summary."""
    parts.Partition(0, count)  # range check
    js = bus.js
    try:
        await js.stream_info(COPY_STREAM)
        resuming = True
    except NotFoundError:
        resuming = False
    if not resuming:
        info = await js.stream_info(s.K8S_STREAM)
        old = parts.count_of(info.config)
        if old == count:
            return {"partitions": count, "records": int(info.state.messages or 0), "changed": False}
        await check_idle(bus, old)
        first, last, n = int(info.state.first_seq or 1), int(info.state.last_seq or 0), int(info.state.messages or 0)
        await _copy_out(bus, n, progress)
    else:
        progress(f"resuming from {COPY_STREAM}")
        try:
            await js.delete_stream(s.K8S_STREAM)  # a partial copy back, if any
        except NotFoundError:
            pass
    copy = await js.stream_info(COPY_STREAM)
    meta = copy.config.metadata or {}
    first, last = int(meta.get("first_seq", "1")), int(meta.get("last_seq", "0"))
    n = int(copy.state.messages or 0)
    if resuming is False:
        try:
            await js.delete_stream(s.K8S_STREAM)
        except NotFoundError:
            pass
    cfg = stream_config(s.K8S_STREAM, bus.settings, partitions=count)
    if first > 1:
        cfg.first_seq = first
    await js.add_stream(cfg)
    await _copy_back(bus, count, first, progress)
    info = await js.stream_info(s.K8S_STREAM)
    if int(info.state.messages or 0) != n or (n and int(info.state.last_seq or 0) != last):
        raise BusError(
            f"repartition: {s.K8S_STREAM} holds {info.state.messages} records up to seq {info.state.last_seq} "
            f"after the copy back, {n} up to {last} expected; the copy is kept in {COPY_STREAM}: run it again"
        )
    for k in range(count):
        await _consumer_at(bus, parts.Partition(k, count), last)
    if count > 1:  # the queue role folds every partition's records (vcbus.bus.queueing)
        await _consumer_at(bus, QueueRole(), last)
    await js.delete_stream(COPY_STREAM)
    progress(f"{n} records in {count} partition(s); deciders start after seq {last}")
    return {"partitions": count, "records": n, "changed": True, "last_seq": last}


async def _copy_out(bus: Bus, n: int, progress: Callable[[str], None]) -> None:
    js = bus.js
    info = await js.stream_info(s.K8S_STREAM)
    cfg = stream_config(s.K8S_STREAM, bus.settings, partitions=1)
    cfg.name, cfg.subjects = COPY_STREAM, [f"{COPY_PREFIX}.>"]
    cfg.description = "vcbus repartition: a copy of VCBUS_K8S while it is rebuilt"
    cfg.metadata = {"first_seq": str(int(info.state.first_seq or 1)), "last_seq": str(int(info.state.last_seq or 0))}
    await js.add_stream(cfg)
    writer = BatchWriter(bus.nc)
    copied = 0
    try:
        batches = read_stream(js, s.K8S_STREAM, batch=CHUNK)
        async for batch in batches:
            out = []
            for msg in batch:
                headers = {k: v for k, v in (msg.headers or {}).items() if not k.startswith("Nats-")}
                msg_id = (msg.headers or {}).get("Nats-Msg-Id")
                if msg_id:
                    headers["Vcbus-Msg-Id"] = msg_id
                headers[SEQ] = str(msg.metadata.sequence.stream)
                headers[SUBJECT] = msg.subject
                out.append(Prepared(f"{COPY_PREFIX}.record", msg.data, headers))
            for sent in await writer.send(out):
                await sent.wait(bus.settings.publish_timeout)
            copied += len(out)
    finally:
        await writer.close()
    have = int((await js.stream_info(COPY_STREAM)).state.messages or 0)
    if have != n or copied != n:
        await js.delete_stream(COPY_STREAM)
        raise BusError(f"repartition: copied {have} of {n} records; nothing was changed")
    progress(f"copied {n} records to {COPY_STREAM}")


async def _copy_back(bus: Bus, count: int, first: int, progress: Callable[[str], None]) -> None:
    js = bus.js
    writer = BatchWriter(bus.nc)
    expected = first
    gaps: list[int] = []
    try:
        async for batch in read_stream(js, COPY_STREAM, batch=CHUNK):
            out = []
            for msg in batch:
                h = dict(msg.headers or {})
                seq, subject = int(h.pop(SEQ)), parts.unrouted(h.pop(SUBJECT))
                msg_id = h.pop("Vcbus-Msg-Id", None)
                h = {k: v for k, v in h.items() if not k.startswith("Nats-")}
                while expected < seq:  # keep the numbering: a placeholder, deleted below
                    out.append(Prepared(GAP_SUBJECT, b"", {}))
                    gaps.append(expected)
                    expected += 1
                if msg_id:
                    h["Nats-Msg-Id"] = msg_id
                out.append(Prepared(parts.route(subject, h.get("Vcbus-Job"), count), msg.data, h))
                expected = seq + 1
            for sent in await writer.send(out, atomic=True):
                await sent.wait(bus.settings.publish_timeout)
    finally:
        await writer.close()
    for seq in gaps:
        await js.delete_msg(s.K8S_STREAM, seq)
    if gaps:
        progress(f"{len(gaps)} sequence(s) the old stream had deleted are deleted again")


async def _consumer_at(bus: Bus, part: parts.Partition, last: int) -> None:
    """The partition's durable consumer with its ack floor at `last`."""
    try:
        await create_at(bus.nc, part, bus.settings, last, max_ack_pending=256 * 6)
    except BusError as err:
        raise BusError(f"repartition: {err}") from None
