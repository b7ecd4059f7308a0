"""A partition's own records and the shared records, merged in stream order (N > 1 partitions).

A decider of partition K folds its own records (`vcbus.k8s.*.*.*.*.K`) and the
records of no job every partition folds (`vcbus.k8s.*.*.*`: queues, nodes,
PriorityClasses, pods no job owns), all in stream order. One consumer with
both filter subjects would do, but nats-server 2.15 spends about four times
the CPU per delivered record on a consumer with two filters than on one with
a single filter (measured: 0.8-1.0 s against 0.16-0.24 s of server CPU for
the 6,000 records of one partition of 12,000), which made two partitions
slower than one. So the records come through two consumers, each with one
filter:

- **own**: the partition's durable, pinned consumer (`vcbus.bus.consumers`),
  acked by the decider once their outputs are stored, as with one partition;
- **shared**: an ephemeral consumer without acks, created per session from
  the decider's position (`applied + 1`); a gap in its delivery (a lost
  message) ends the session, and the next one starts it again from there.

`Merger.take` hands the decider the records of both in stream order. Each
consumer delivers its records in order, so the smaller of the two heads is
next, when both have one. When one side has nothing queued, its next record
may still be on its way: the merger then asks the stream (`STREAM.MSG.GET`
with `next_by_subj`, one request) for that side's next record after the
last one it knows. None, or one past the other side's head: the head goes.
One before it: the merger waits for its consumer to deliver it. What a probe
learns is kept (`own_known`, `shared_known`: every record of that side up to
there has been received; a record handed out moves the other side's mark to
it too, since it is not one of the other side's), so at a steady load there
is at most one probe per batch, none while the other side's next record is
known to lie ahead, and none for a record right after the last one handed out
(its sequence is the next: nothing lies between).
With a backlog (the own consumer reports records pending: a start, a
catch-up) the stream's last sequence is asked first, so one probe covers
everything stored until then instead of one batch.

Restarts. The durable consumer's ack floor is the last own record whose
outputs are stored; every shared record before it was decided before it
(stream order), so the next session starts after the floor and the shared
consumer with it. Shared records decided after the last own record are
decided again (their outputs are dropped as duplicates), unless the decider
stopped cleanly: then it moves the floor to its position (`Decider._settle`).
"""

from __future__ import annotations

import asyncio
import json
import time

from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js import api
from nats.js.errors import NotFoundError

from vcbus.bus import partitions as parts
from vcbus.bus import subjects as s
from vcbus.bus.errors import BusError
from vcbus.bus.pulling import Puller

INACTIVE = 120.0  # seconds before the server drops the shared consumer of a decider that died
SHARED_SILENT = 10.0  # seconds a shared record known to be stored may take to arrive before the session restarts


def _seq(msg: Msg) -> int:
    return msg.metadata.sequence.stream


class Merger:
    """The decider's records with N > 1 partitions: `start`, `take`, `poke`, `close` as `Puller`'s."""

    def __init__(
        self, nc: Client, js: JetStreamContext, partition: parts.Partition, *, batch: int, group: str | None, start: int
    ) -> None:
        self.nc = nc
        self.js = js
        self.partition = partition
        self.batch = batch
        self._arrived = asyncio.Event()
        self.own = Puller(nc, s.K8S_STREAM, partition.consumer, batch=batch, group=group, arrived=self._arrived)
        self.shared: Puller | None = None
        self._shared_name = ""
        self._shared_next = 1  # the shared consumer's next delivery sequence (a gap ends the session)
        self.emitted = start  # the last record handed out (either side)
        self.own_known = start  # every own record up to here has been received
        self.shared_known = start  # every shared record up to here has been received
        self.probes = 0  # STREAM.MSG.GET requests made (a figure for tests and benchmarks)
        self._waiting_since = 0.0  # a probe found a shared record not delivered yet: since when
        self._poked = False

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        cfg = api.ConsumerConfig(
            description=f"vcbus decider (partition {self.partition.name}): shared records, merged by sequence",
            filter_subject=parts.SHARED_FILTER,
            ack_policy=api.AckPolicy.NONE,
            inactive_threshold=INACTIVE,
            mem_storage=True,
            num_replicas=1,
            max_waiting=16,
        )
        if self.emitted > 0:
            cfg.deliver_policy = api.DeliverPolicy.BY_START_SEQUENCE
            cfg.opt_start_seq = self.emitted + 1
        else:
            cfg.deliver_policy = api.DeliverPolicy.ALL
        info = await self.js.add_consumer(s.K8S_STREAM, cfg)
        self._shared_name = info.name
        self.shared = Puller(self.nc, s.K8S_STREAM, info.name, batch=self.batch, arrived=self._arrived)
        await self.own.start()
        await self.shared.start()

    async def close(self) -> None:
        await self.own.close()
        if self.shared is not None:
            await self.shared.close()
            try:
                await self.js.delete_consumer(s.K8S_STREAM, self._shared_name)
            except Exception:  # gone with the server or the connection: it expires by itself (INACTIVE)
                pass

    def poke(self) -> None:
        """Make a waiting `take` return now (empty-handed if no record can go)."""
        self._poked = True
        self._arrived.set()

    # ------------------------------------------------------------------ taking

    async def take(self, n: int, timeout: float) -> list[Msg]:
        """Up to `n` records in stream order: waits at most `timeout` for the first, never for more."""
        assert self.shared is not None
        deadline = time.monotonic() + timeout
        probed = False
        while True:
            self._check_shared()
            out = self._merge(n)
            if out:
                await self.own.keep_up()
                await self.shared.keep_up()
                return out
            if self._poked:
                self._poked = False
                return []
            await self.own.keep_up()
            await self.shared.keep_up()
            if not probed and await self._probe():
                probed = True
                continue
            self._silent_shared()
            left = deadline - time.monotonic()
            if left <= 0:
                return []
            queued = (len(self.own.queue), len(self.shared.queue))
            self._arrived.clear()
            if queued != (len(self.own.queue), len(self.shared.queue)):
                continue
            try:
                await asyncio.wait_for(self._arrived.wait(), min(left, self.own.heartbeat))
            except asyncio.TimeoutError:
                pass
            probed = False

    def _merge(self, n: int) -> list[Msg]:
        own, shared = self.own.queue, self.shared.queue  # type: ignore[union-attr]  # after start(): both pullers set
        out: list[Msg] = []
        while len(out) < n:
            a = _seq(own[0]) if own else 0
            if own and a <= self.emitted:  # a redelivery of a record decided already: the decider acks it
                out.append(own.popleft())
                continue
            b = _seq(shared[0]) if shared else 0
            if shared and b <= self.emitted:
                shared.popleft()
                continue
            if own and ((shared and a < b) or (not shared and self.shared_known >= a - 1)):
                out.append(own.popleft())
                # every shared record before `a` has been received, and `a` is not one: so up to `a`
                self.emitted, self.own_known, self.shared_known = a, max(self.own_known, a), max(self.shared_known, a)
                if shared:
                    self.shared_known = max(self.shared_known, b - 1)
            elif shared and ((own and b < a) or (not own and self.own_known >= b - 1)):
                out.append(shared.popleft())
                self.emitted, self.shared_known, self.own_known = b, max(self.shared_known, b), max(self.own_known, b)
                self._waiting_since = 0.0
                if own:
                    self.own_known = max(self.own_known, a - 1)
            else:
                break
        return out

    async def _probe(self) -> bool:
        """When one side's head waits on the other side's unknown: ask the stream. True if it
        learnt something (the head may go now, or it is known to wait for a record on its way)."""
        own, shared = self.own.queue, self.shared.queue  # type: ignore[union-attr]  # after start(): both pullers set
        if own and not shared and self.shared_known < _seq(own[0]) - 1:
            upto = _seq(own[-1])  # stored, as everything before it: the probe covers the whole queue
            if own[-1].metadata.num_pending:  # a backlog (catching up): learn about everything stored so far,
                # the stream's last sequence asked *before* the probe, so the probe covers at least up to it
                upto = max(upto, int((await self.js.stream_info(s.K8S_STREAM)).state.last_seq or 0))
            nxt = await self._next(parts.SHARED_FILTER, self.shared_known + 1)
            self.shared_known = max(self.shared_known, upto if nxt is None else nxt - 1)
            if nxt is not None and nxt < _seq(own[0]) and not self._waiting_since:
                self._waiting_since = time.monotonic()
            return True
        if shared and not own and self.own_known < _seq(shared[0]) - 1:
            upto = _seq(shared[-1])
            nxt = await self._next(self.partition.own_filter, self.own_known + 1)
            self.own_known = max(self.own_known, upto if nxt is None else nxt - 1)
            return True
        return False

    async def _next(self, subject: str, seq: int) -> int | None:
        """The sequence of the first record on `subject` at or after `seq`, None if there is none."""
        self.probes += 1
        body = json.dumps({"seq": seq, "next_by_subj": subject}).encode()
        reply = await self.nc.request(f"$JS.API.STREAM.MSG.GET.{s.K8S_STREAM}", body, timeout=10)
        value = json.loads(reply.data)
        error = value.get("error")
        if error:
            if error.get("code") == 404:
                return None
            raise BusError(f"{s.K8S_STREAM}: next record on {subject} after {seq - 1}: {error.get('description')}")
        return int(value["message"]["seq"])

    def _check_shared(self) -> None:
        """The shared consumer delivers every shared record once, in order: a gap is a lost delivery."""
        for msg in self.shared.queue:  # type: ignore[union-attr]  # after start(): set
            meta = msg.metadata
            if meta.sequence.consumer < self._shared_next:
                continue
            if meta.sequence.consumer != self._shared_next:
                raise BusError(
                    f"{s.K8S_STREAM}: the shared records' consumer skipped deliveries "
                    f"{self._shared_next}..{meta.sequence.consumer - 1} (seq {meta.sequence.stream}); restarting"
                )
            self._shared_next += 1

    def _silent_shared(self) -> None:
        if self._waiting_since and time.monotonic() - self._waiting_since > SHARED_SILENT:
            raise BusError(
                f"{s.K8S_STREAM}: a shared record stored after seq {self.shared_known} was not delivered "
                f"within {SHARED_SILENT:g}s; restarting"
            )

    # ------------------------------------------------------------------ state

    def idle(self) -> bool:
        """Nothing received and not taken yet."""
        return not self.own.queue and not (self.shared is not None and self.shared.queue)

    async def caught_up(self) -> bool:
        """Every record of both sides stored so far has been taken (the own consumer acked)."""
        if not self.idle():
            return False
        info = await self.js.consumer_info(s.K8S_STREAM, self.partition.consumer)
        if info.num_pending or info.num_ack_pending:
            return False
        try:
            shared = await self.js.consumer_info(s.K8S_STREAM, self._shared_name)
        except NotFoundError:
            return False
        delivered = int(shared.delivered.stream_seq or 0) if shared.delivered else 0
        return not shared.num_pending and delivered <= max(self.shared_known, self.emitted) and self.idle()
