"""The decider: VCBUS_K8S in, domain events (VCBUS_JOBS) and commands (VCBUS_CMDS) out.

The state machines are a pure fold over the log, so the decider's state is a
function of the stream alone and needs no storage of its own:

1. **Rebuild.** A durable consumer (`vcbus-decider`) remembers how far the
   decider got: its ack floor. On start the decider re-applies VCBUS_K8S from
   sequence 1 up to the ack floor to its engine, publishing nothing.
2. **Decide.** Then it takes the records after the floor one at a time, in
   stream order (a missing sequence is fetched directly, so a redelivery can
   never overtake), applies each to the engine and publishes the outputs. Each
   output's `Nats-Msg-Id` (and CloudEvents id) is `<K8S seq>:<index>`.
3. **Ack** a record only after JetStream has acknowledged all its outputs.

A crash anywhere between receiving a record and acking it means the record is
decided again after the restart: the same outputs with the same ids, which
JetStream drops as duplicates (within the streams' duplicate window, 1 hour
by default). Nothing is lost and nothing is repeated.

Time. The engine fires delayed actions (policies with `timeout`) when the
log's time passes their due time, exactly as `vcbus replay` does, so the bus
and a replay of the same log agree. When the log goes quiet past a due time,
the decider appends a `TIMER` record to VCBUS_K8S (msg id `timer:<id>`, time =
the due time) and fires the action when it reads that record back: the firing
is itself in the log, and replaying the stream gives the same decisions.

Poison records (undecodable, or an engine failure) are logged with their
subject and sequence and terminated, never retried forever.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Callable

import msgspec
import nats.errors
from nats.aio.msg import Msg
from nats.js import api
from nats.js.errors import NotFoundError

from statemachines import outputs as o
from statemachines.engine import Engine
from statemachines.objects import Job
from statemachines.records import Decoded, Observed, RecordError, decode
from statemachines.timefmt import fmt
from vcbus.bus import subjects as s
from vcbus.bus.cloudevents import headers as ce_headers
from vcbus.bus.cloudevents import output_id
from vcbus.bus.connecting import Bus
from vcbus.bus.errors import BusError
from vcbus.bus.publisher import Prepared, timer_message
from vcbus.bus.reading import read_stream
from vcbus.bus.supervising import supervise

log = logging.getLogger("vcbus.decider")

DURABLE = "vcbus-decider"
PUBLISH_ATTEMPTS = 5


def wall_clock() -> str:
    return fmt(int(time.time()))


class DeciderStats(msgspec.Struct):
    rebuilt: int = 0  # records re-applied from the stream on start
    decided: int = 0  # records decided and acked in this run
    outputs: int = 0  # outputs stored
    duplicates: int = 0  # outputs JetStream already had (a re-decided record)
    timers: int = 0  # TIMER records appended
    poison: int = 0  # records terminated


class Decider:
    def __init__(
        self,
        bus: Bus,
        *,
        engine: Engine | None = None,
        publish_commands: bool = True,
        clock: Callable[[], str] = wall_clock,
        batch: int = 64,
        idle: float = 0.25,
    ) -> None:
        self.bus = bus
        self.js = bus.js
        self.engine = engine or Engine()
        # Observe-only: nothing acts on the commands, so none is stored (a later full-mode
        # actuator must never carry out what was decided while only watching).
        self.publish_commands = publish_commands
        self.clock = clock
        self.batch = batch
        self.idle = idle
        self.applied = 0
        self.stats = DeciderStats()
        self._timers_sent: set[str] = set()
        self._rebuilt = False
        self.ready = asyncio.Event()

    # ------------------------------------------------------------------ lifecycle

    async def run(self, *, stop: asyncio.Event | None = None, until_idle: bool = False) -> DeciderStats:
        """Decide until `stop` is set (or, with `until_idle`, until the log is used up).

        Transient bus failures restart the session, which continues from the
        last decided record with the engine state it has (`vcbus.bus.supervising`).
        """
        stop = stop or asyncio.Event()
        await supervise(
            "decider",
            lambda: self._session(stop, until_idle),
            progress=lambda: self.applied,
            stop=stop,
            until_idle=until_idle,
            log=log,
        )
        return self.stats

    async def _session(self, stop: asyncio.Event, until_idle: bool) -> None:
        floor = await self._consumer()
        if not self._rebuilt:
            t0 = time.perf_counter()
            await self._rebuild(floor)
            self._rebuilt = True
            log.info(
                "decider: state rebuilt from %d records in %.2fs; deciding from seq %d",
                self.stats.rebuilt,
                time.perf_counter() - t0,
                floor + 1,
            )
        info = await self.js.stream_info(s.K8S_STREAM)
        first = int(info.state.first_seq or 1)
        if self.applied < first - 1:  # older records were removed (limits, purge): nothing to fill in
            self.applied = first - 1
        await self._reset()
        sub = await self.js.pull_subscribe_bind(durable=DURABLE, stream=s.K8S_STREAM)
        self.ready.set()
        try:
            while not stop.is_set():
                try:
                    msgs = await sub.fetch(self.batch, timeout=self.idle)
                except (nats.errors.TimeoutError, asyncio.TimeoutError):
                    if await self._fire_due_timers():
                        continue
                    if until_idle and await self._caught_up():
                        break
                    continue
                for msg in msgs:
                    await self._handle(msg)
                    if stop.is_set():
                        break
        finally:
            try:
                await sub.unsubscribe()
            except Exception:  # the connection may be gone already
                pass

    async def _consumer(self) -> int:
        """Create the durable consumer if needed; return its ack floor (the last decided seq)."""
        try:
            info = await self.js.consumer_info(s.K8S_STREAM, DURABLE)
        except NotFoundError:
            info = await self.js.add_consumer(
                s.K8S_STREAM,
                api.ConsumerConfig(
                    name=DURABLE,
                    durable_name=DURABLE,
                    description="vcbus decider: acks a record once its outputs are stored",
                    deliver_policy=api.DeliverPolicy.ALL,
                    ack_policy=api.AckPolicy.EXPLICIT,
                    ack_wait=self.bus.settings.ack_wait,
                    max_ack_pending=self.batch * 4,
                    max_deliver=-1,
                    filter_subject=f"{s.K8S_PREFIX}.>",
                ),
            )
        floor = info.ack_floor.stream_seq if info.ack_floor is not None else 0
        return int(floor or 0)

    async def _reset(self) -> None:
        """Redeliver what a crashed run had received but not acked now, not after AckWait."""
        try:
            await self.js.reset_consumer(s.K8S_STREAM, DURABLE, seq=self.applied + 1)
        except Exception as err:  # servers before 2.14 have no reset; order is kept anyway (`_handle`)
            log.debug("decider: consumer reset unavailable (%s); relying on redelivery", err)

    async def _rebuild(self, floor: int) -> None:
        if floor <= 0:
            return
        async for batch in read_stream(self.js, s.K8S_STREAM, end_seq=floor, batch=512):
            for msg in batch:
                seq = msg.metadata.sequence.stream
                decoded = self._decode(seq, msg.subject, msg.data, quiet=True)
                if decoded is not None:
                    self._apply(seq, decoded, msg.data, quiet=True)
                self.applied = seq
                self.stats.rebuilt += 1
        self.applied = max(self.applied, floor)

    async def _caught_up(self) -> bool:
        info = await self.js.stream_info(s.K8S_STREAM)
        return self.applied >= int(info.state.last_seq or 0)

    # ------------------------------------------------------------------ one record

    async def _handle(self, msg: Msg) -> None:
        seq = msg.metadata.sequence.stream
        if seq <= self.applied:
            await msg.ack()  # a redelivery of something already decided
            return
        while self.applied + 1 < seq:  # fill a gap from the stream itself: order is the fold's
            await self._decide_missing(self.applied + 1)
        decoded = self._decode(seq, msg.subject, msg.data)
        if decoded is None:
            await msg.term()
            self.applied = seq
            return
        await self._publish(seq, self._apply(seq, decoded, msg.data))
        await msg.ack()
        self.applied = seq
        self.stats.decided += 1

    async def _decide_missing(self, seq: int) -> None:
        try:
            raw = await self.js.get_msg(s.K8S_STREAM, seq)
        except NotFoundError:
            self.applied = seq  # deleted from the stream: nothing to decide
            return
        decoded = self._decode(seq, raw.subject or "", raw.data or b"")
        if decoded is not None:
            await self._publish(seq, self._apply(seq, decoded, raw.data or b""))
        self.applied = seq
        self.stats.decided += 1

    def _decode(self, seq: int, subject: str, data: bytes, *, quiet: bool = False) -> Decoded | None:
        try:
            return decode(data)
        except RecordError as err:
            if not quiet:
                self.stats.poison += 1
                log.warning("decider: poison record %s seq %d terminated: %s", subject, seq, err)
            return None

    def _apply(self, seq: int, decoded: Decoded, data: bytes, *, quiet: bool = False) -> list[o.Output]:
        raw = data if isinstance(decoded, Observed) and isinstance(decoded.object, Job) else None
        try:
            return self.engine.apply(seq, decoded, raw=raw)
        except Exception:
            if not quiet:
                self.stats.poison += 1
                log.exception("decider: the engine failed on record seq %d; its outputs are dropped", seq)
            return []

    async def _publish(self, seq: int, outs: list[o.Output]) -> None:
        if not outs:
            return
        source = self.bus.settings.ce_source
        commands, events = [], []
        for i, out in enumerate(outs):
            headers = ce_headers(out, ce_id=output_id(seq, i), source=source)
            if o.is_command(out):
                if self.publish_commands:
                    commands.append(Prepared(s.command_subject(out.job), o.encoder.encode(out), headers))
            else:
                events.append(Prepared(s.event_subject(out.job, o.tag_of(type(out))), o.encoder.encode(out), headers))
        # Commands first, sent before the events are even prepared for sending: the cluster side
        # waits for them. Each stream still gets its messages in decision order (the ids keep
        # the index in the record's outputs).
        for ack in await self._store(commands, events, what=f"outputs of record {seq}"):
            if ack.duplicate:
                self.stats.duplicates += 1
            else:
                self.stats.outputs += 1

    async def _store(
        self, first: list[Prepared], then: list[Prepared] | None = None, *, what: str
    ) -> list[api.PubAck]:
        """Publish `first`, then `then`, in order; wait for every ack; on failure retry the lot."""
        then = then or []
        timeout = self.bus.settings.publish_timeout
        publish = self.js.publish_async
        for attempt in range(1, PUBLISH_ATTEMPTS + 1):
            try:
                futs = [await publish(m.subject, m.body, headers=dict(m.headers)) for m in first]
                if first and then:
                    await asyncio.sleep(0)  # let the client's flusher put `first` on the wire now
                futs += [await publish(m.subject, m.body, headers=dict(m.headers)) for m in then]
                acks = await asyncio.wait_for(asyncio.gather(*futs), timeout)
            except (asyncio.TimeoutError, nats.errors.Error) as err:
                if attempt == PUBLISH_ATTEMPTS:
                    raise BusError(f"decider: cannot store the {what}: {err or type(err).__name__}") from err
                log.warning("decider: storing the %s failed (%s); retrying", what, err or type(err).__name__)
                await asyncio.sleep(0.2 * attempt)
                continue
            return list(acks)
        raise AssertionError("unreachable")

    # ------------------------------------------------------------------ timers

    async def _fire_due_timers(self) -> int:
        """Append a TIMER record for each pending timer due by the clock (the log is quiet)."""
        pending = self.engine.pending_timers()
        if not pending:
            self._timers_sent.clear()
            return 0
        now = self.clock()
        due = [t for t in pending if t.due <= now and t.id not in self._timers_sent]
        if not due:
            return 0
        await self._store([timer_message(t) for t in due], what=f"{len(due)} TIMER record(s)")
        self._timers_sent.intersection_update(t.id for t in pending)
        self._timers_sent.update(t.id for t in due)
        self.stats.timers += len(due)
        log.info("decider: fired %d timer(s) due by %s", len(due), now)
        return len(due)
