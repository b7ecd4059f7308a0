"""Reading a stream in order: from a sequence or a time, to its end or forever.

`read_stream` is the one reader behind rebuilds (decider and projector), log
export, `vcbus replay --nats`, `vcbus events tail` and the benchmark's floor.
It uses an ephemeral pull consumer without acks (fetching in batches is
cheaper in Python than a push consumer's per-message callbacks) and keeps
order itself, as an ordered consumer does: the consumer sequence must grow by
one; on a gap (a delivery lost) the consumer is recreated after the last
message seen, so nothing is skipped and nothing repeated. The same holds when
the consumer's server dies in a cluster (pulls answered 503 "no responders",
or the consumer gone): the reader goes on through a new consumer for up to
`UNAVAILABLE_FOR` seconds of outage.

Batches are yielded as lists. When following (`follow=True`) an empty list
means "nothing new for `idle` seconds", so a caller can flush its writes; when
not following, reading stops at the last message that existed when it began
(or at `end_seq`).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
from typing import Any, AsyncIterator

import nats.errors
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js import api
from nats.js.errors import NotFoundError, ServiceUnavailableError

from vcbus import retries

INACTIVE = 120.0  # seconds before the server drops an abandoned reader's consumer
UNAVAILABLE_FOR = 60.0  # seconds of "no responders" (503) a reader outlasts before it gives up


def stream_seq(msg: Msg) -> int:
    """A JetStream message's stream sequence, read from its ack subject (ADR-15: `$JS.ACK.<stream>.<consumer>.
    <delivered>.<stream seq>...`, 9 tokens, or with domain and account hash before the stream, 12 or more)
    without building nats-py's whole `metadata` (a dataclass and a datetime per message)."""
    tokens = (msg.reply or "").split(".")
    if len(tokens) == 9 and tokens[0] == "$JS":
        return int(tokens[5])
    if len(tokens) >= 12 and tokens[0] == "$JS":
        return int(tokens[7])
    return msg.metadata.sequence.stream


def pending_after(msg: Msg) -> int:
    """How many messages the consumer still had for the reader after this one (the ack subject's last
    token, ADR-15), read as `stream_seq` reads the sequence; 0 when the subject does not say."""
    tokens = (msg.reply or "").split(".")
    if tokens[0] == "$JS" and (len(tokens) == 9 or len(tokens) >= 12):
        try:
            return int(tokens[8] if len(tokens) == 9 else tokens[10])
        except ValueError:
            return 0
    return 0


def _config(
    *,
    start_seq: int,
    start_time: dt.datetime | None,
    filters: list[str] | None,
    last_per_subject: bool,
) -> api.ConsumerConfig:
    cfg = api.ConsumerConfig(
        ack_policy=api.AckPolicy.NONE,
        inactive_threshold=INACTIVE,
        mem_storage=True,
        num_replicas=1,
        max_waiting=16,
    )
    if last_per_subject:
        cfg.deliver_policy = api.DeliverPolicy.LAST_PER_SUBJECT
    elif start_time is not None:
        cfg.deliver_policy = api.DeliverPolicy.BY_START_TIME
        cfg.opt_start_time = start_time
    elif start_seq > 1:
        cfg.deliver_policy = api.DeliverPolicy.BY_START_SEQUENCE
        cfg.opt_start_seq = start_seq
    else:
        cfg.deliver_policy = api.DeliverPolicy.ALL
    if filters:
        if len(filters) == 1:
            cfg.filter_subject = filters[0]
        else:
            cfg.filter_subjects = list(filters)
    return cfg


async def read_stream(
    js: JetStreamContext,
    stream: str,
    *,
    start_seq: int = 1,
    start_time: dt.datetime | None = None,
    end_seq: int | None = None,
    filters: list[str] | None = None,
    follow: bool = False,
    last_per_subject: bool = False,
    batch: int = 256,
    idle: float = 0.5,
) -> AsyncIterator[list[Msg]]:
    """Batches of `stream`'s messages in stream order (see the module docstring)."""
    if end_seq is not None and end_seq < start_seq:
        return
    info = await js.stream_info(stream)
    last = int(info.state.last_seq or 0)
    if not follow:
        if end_seq is None or end_seq > last:
            end_seq = last
        if end_seq < max(start_seq, 1) or int(info.state.messages or 0) == 0:
            return
    cfg = _config(start_seq=start_seq, start_time=start_time, filters=filters, last_per_subject=last_per_subject)
    sub, pending, name = await _subscribe(js, stream, cfg)
    expected = 1
    last_stream_seq = 0
    unavailable_since: float | None = None
    waits = retries.Streak(retries.RESUBSCRIBE)  # the waits of one outage
    try:
        if not follow and pending == 0:
            return
        while True:
            try:
                msgs = await sub.fetch(batch, timeout=idle)
                unavailable_since, lost = None, False
                waits.reset()
            except ServiceUnavailableError:
                # 503 "no responders": in a cluster the pull reached no server holding the consumer
                # (its interest not propagated yet, or its server restarted and an R1 in-memory
                # consumer went with it). Read on through a new consumer from the last message kept.
                unavailable_since = await _outlast(unavailable_since, waits)
                msgs, lost = [], True
            except (nats.errors.TimeoutError, asyncio.TimeoutError):
                if follow:
                    yield []
                    continue
                try:
                    info_now = await sub.consumer_info()
                except (NotFoundError, ServiceUnavailableError, nats.errors.TimeoutError):
                    unavailable_since = await _outlast(unavailable_since, waits)  # the consumer went with its server
                    msgs, lost = [], True
                else:
                    if not info_now.num_pending:
                        return
                    continue
            out: list[Msg] = []
            done = False
            gap = lost
            for msg in msgs:
                meta = msg.metadata
                if meta.sequence.consumer != expected:
                    gap = True  # a lost delivery: start over after the last message kept
                    break
                expected += 1
                seq = meta.sequence.stream
                if end_seq is not None and seq > end_seq:
                    done = True
                    break
                out.append(msg)
                last_stream_seq = seq
                if not follow and (meta.num_pending == 0 or (end_seq is not None and seq >= end_seq)):
                    done = True
                    break
            if out:
                yield out
            if done:
                return
            if gap:
                with contextlib.suppress(Exception):
                    await js.delete_consumer(stream, name)
                with contextlib.suppress(Exception):
                    await sub.unsubscribe()
                cfg = _config(
                    start_seq=last_stream_seq + 1 if last_stream_seq else start_seq,
                    start_time=None if last_stream_seq else start_time,
                    filters=filters,
                    last_per_subject=last_per_subject and not last_stream_seq,
                )
                while True:
                    try:
                        sub, pending, name = await _subscribe(js, stream, cfg)
                        break
                    except (ServiceUnavailableError, nats.errors.TimeoutError):  # no stream leader yet
                        unavailable_since = await _outlast(unavailable_since, waits)
                expected = 1
    finally:
        with contextlib.suppress(Exception):
            await js.delete_consumer(stream, name)
        with contextlib.suppress(Exception):
            await sub.unsubscribe()


async def _outlast(since: float | None, waits: retries.Streak) -> float:
    """Wait (the RESUBSCRIBE policy's next wait) before reading on through a new consumer; raise after
    UNAVAILABLE_FOR."""
    now = asyncio.get_running_loop().time()
    if since is not None and now - since > UNAVAILABLE_FOR:
        raise nats.errors.TimeoutError  # the stream's servers stayed unreachable
    await asyncio.sleep(waits.failed())
    return now if since is None else since


async def _subscribe(
    js: JetStreamContext, stream: str, cfg: api.ConsumerConfig
) -> tuple[JetStreamContext.PullSubscription, int, str]:
    info = await js.add_consumer(stream, config=cfg)
    sub = await js.pull_subscribe_bind(consumer=info.name, stream=stream)
    return sub, int(info.num_pending or 0), info.name


async def read_all(js: JetStreamContext, stream: str, **kwargs: Any) -> AsyncIterator[Msg]:
    """`read_stream` one message at a time."""
    async for batch in read_stream(js, stream, **kwargs):
        for msg in batch:
            yield msg


async def read_bucket(js: JetStreamContext, bucket: str) -> dict[str, bytes]:
    """Every live key of a KV bucket with its value (deleted and purged keys left out)."""
    out: dict[str, bytes] = {}
    prefix = f"$KV.{bucket}."
    try:
        async for batch in read_stream(js, f"KV_{bucket}", last_per_subject=True, filters=[f"{prefix}>"]):
            for msg in batch:
                op = (msg.headers or {}).get("KV-Operation")
                key = msg.subject[len(prefix):]
                if op in ("DEL", "PURGE"):
                    out.pop(key, None)
                else:
                    out[key] = msg.data
    except NotFoundError:
        return {}
    return out
