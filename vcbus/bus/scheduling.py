"""The scheduler service: VCBUS_K8S folded into the scheduler projection, sessions out to the bus.

Volcano's scheduler keeps a cache of nodes, queues, PodGroups, pods and
PriorityClasses and runs a session over a snapshot of it every
`--schedule-period` (1 s). Here the cache is a fold of the log
(`projections.scheduler.SchedulerCache`) and a session is the pure
`statemachines.scheduler.run_session`:

1. **Fold.** Records of VCBUS_K8S are folded in stream order. A record the
   projection cannot use (any exception) is logged, skipped and reported as a
   `record.poison.v1` event (component `scheduler`, `vcbus.bus.poison`); the
   service never stops on one.
2. **Session.** At most once per period, and only when the projection changed
   since the state the last session ran on (new records, or the previous
   session's own decisions applied), the service runs a session on it. Its cut
   is the last record folded (`seq`), its number counts up from 1, its time is
   the cut's record time. `run_session` runs in a worker thread, so the other
   services of `vcbus up` keep going meanwhile.
3. **Publish.** Its outputs go to the bus as the decider's do (CloudEvents
   headers; events to VCBUS_JOBS, commands to VCBUS_CMDS), with id
   `sched:<seq>:<number>:<index>` (`vcbus.bus.sessions`). The session's own
   `sched.session.v1` event is stored last, once everything else is
   acknowledged: it marks the session complete.
4. **Apply.** Only then are the outputs applied to the projection
   (`apply_outputs`: a bound pod is assumed on its node until the log shows it
   there), so the next session sees its own decisions before the log does.

Restart. The projection is a function of the log alone: the service refolds
VCBUS_K8S from sequence 1 and, at each past session's cut, re-applies that
session's outputs as stored on the bus (found by their ids), exactly in the
order the live service applied them; numbering continues after the last
session found. A session cut short by a crash (outputs stored without the
marker) is run again on the rebuilt projection, which is the one it ran on,
and what is missing is published (the same ids; JetStream drops repeats).

Run one scheduler per bus (two would both bind every pod).
"""

from __future__ import annotations

import asyncio
import collections
import hashlib
import logging
import time
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import msgspec

from projections.scheduler import SchedulerCache
from statemachines import outputs as o
from statemachines.model.records import RecordError
from statemachines.scheduler.config import DEFAULT_CONFIG, SchedulerConfig
from statemachines.scheduler.plugins.predicates import unevaluated_pods
from statemachines.scheduler.session import run_session
from vcbus.bus import direct, poison
from vcbus.bus import subjects as s
from vcbus.bus.batching import BatchWriter
from vcbus.bus.connecting import Bus
from vcbus.bus.publisher import Prepared
from vcbus.bus.reading import read_stream, stream_seq
from vcbus.bus.sessions import PastSession, past_sessions, session_messages
from vcbus.bus.streams import last_seq
from vcbus.bus.supervising import supervise
from vcbus.observability import metrics

log = logging.getLogger("vcbus.scheduler")

IDLE = 0.25  # seconds without records before a batch counts as "caught up"
MAX_SETTLE_SESSIONS = 100  # with until_idle: sessions in a row without new records before giving up


def _exact(value: Any) -> str:
    """Non-JSON values of the projection's state (exact Fractions of resources) as text."""
    if isinstance(value, Fraction):
        return f"{value.numerator}/{value.denominator}"
    return repr(value)


_encode = msgspec.json.Encoder(enc_hook=_exact, order="sorted").encode


class Fingerprint:
    """A digest of the projection's canonical dump (`SchedulerCache.state()`), to tell whether a session
    would see anything new. Each fact's encoding is kept while the projection holds the same object:
    facts are never mutated, a change replaces them (statemachines/scheduler/model.py), so a tick
    encodes only what changed since the last one instead of the whole cluster."""

    KINDS = (("nodes", "nodes"), ("queues", "queues"), ("podgroups", "groups"), ("pods", "tasks"))

    def __init__(self) -> None:
        self._memo: dict[tuple[str, str], tuple[Any, bytes]] = {}

    def of(self, cache: SchedulerCache) -> bytes:
        digest = hashlib.blake2b(digest_size=16)
        memo, kept = self._memo, {}
        for kind, attr in self.KINDS:
            facts = getattr(cache, attr)
            digest.update(kind.encode() + b"\0")
            for key in sorted(facts):
                fact = facts[key]
                hit = memo.get((kind, key))
                raw = hit[1] if hit is not None and hit[0] is fact else _encode(fact.dump())
                kept[(kind, key)] = (fact, raw)
                digest.update(b"%d:%s%d:" % (len(key), key.encode(), len(raw)) + raw)
        digest.update(_encode({k: list(v) for k, v in cache.classes.items()}))
        # namespaces, PVCs, PVs, StorageClasses, Services and the workloads: counted changes, not dumped
        digest.update(b"revision:%d" % cache.revision)
        self._memo = kept
        return digest.digest()


class SchedulerStats(msgspec.Struct):
    rebuilt_records: int = 0  # records refolded on start
    rebuilt_sessions: int = 0  # past sessions re-applied on start
    resumed: int = 0  # sessions cut short by a crash, completed on start
    folded: int = 0  # records folded in this run
    skipped: int = 0  # records the projection could not use
    sessions: int = 0  # sessions run in this run
    unchanged: int = 0  # periods skipped: the projection was as the last session saw it
    failed: int = 0  # sessions that raised (logged; nothing published)
    outputs: int = 0  # outputs stored
    duplicates: int = 0  # outputs JetStream already had
    binds: int = 0
    evictions: int = 0


@dataclass
class _Pending:
    """A session run but not yet stored and applied (retried first after a bus failure)."""

    seq: int
    number: int
    outputs: list[o.Output]
    result: Any = None


class SchedulerService:
    def __init__(
        self,
        bus: Bus,
        *,
        config: SchedulerConfig = DEFAULT_CONFIG,
        period: float = 1.0,
        batch: int = 512,
    ) -> None:
        self.bus = bus
        self.js = bus.js
        self.config = config
        self.period = period
        self.batch = batch
        self.cache = SchedulerCache()
        self.number = 0  # the last session number used
        self.read = 0  # the last VCBUS_K8S sequence read (folded or skipped)
        self.last: Any = None  # the last SessionResult (reports for why-pending)
        self.stats = SchedulerStats()
        self.ready = asyncio.Event()
        self._rebuilt = False
        self._dirty = True  # something was folded or applied since the last check
        self._seen: bytes | None = None  # fingerprint of the projection the last session ran on
        self._fingerprint = Fingerprint()
        self._writer: BatchWriter | None = None  # a session's outputs, one atomic batch per stream (vcbus.bus.batching)
        self._changed_at: float | None = None  # monotonic time of the first change not yet scheduled
        self._pending: _Pending | None = None
        # True once a check found the projection as the last session saw it (nothing to do)
        self.settled = False
        self._skipped: list[str] = []  # records skipped while rebuilding, reported once
        self._poison_out: list[tuple[int, str, str]] = []  # records skipped live, to report

    # ------------------------------------------------------------------ lifecycle

    async def run(self, *, stop: asyncio.Event | None = None, until_idle: bool = False) -> SchedulerStats:
        """Schedule until `stop` is set (or, with `until_idle`, until the log is used up and
        a session changes nothing any more)."""
        stop = stop or asyncio.Event()
        try:
            await supervise(
                "scheduler",
                lambda: self._session(stop, until_idle),
                progress=lambda: self.read + self.number,
                stop=stop,
                until_idle=until_idle,
                log=log,
            )
        finally:
            writer, self._writer = self._writer, None
            if writer is not None:
                await writer.close()
        return self.stats

    async def _session(self, stop: asyncio.Event, until_idle: bool) -> None:
        if not self._rebuilt:
            await self.rebuild()
            self._rebuilt = True
        if self._pending is not None:  # a session whose publishing failed: finish it first
            await self._finish(self._pending)
        self.ready.set()
        next_due = 0.0
        settling = 0
        async for batch in read_stream(
            self.js, s.K8S_STREAM, start_seq=self.read + 1, follow=True, batch=self.batch, idle=min(IDLE, self.period)
        ):
            for msg in batch:
                self._fold(stream_seq(msg), msg.data, subject=msg.subject)
            if self._poison_out:
                await self._report_poison()
            if stop.is_set():
                break
            if until_idle:
                if batch or self.read < await last_seq(self.js, s.K8S_STREAM):
                    settling = 0
                    continue
                if not await self._tick():
                    break
                settling += 1
                if settling >= MAX_SETTLE_SESSIONS:
                    log.warning("scheduler: %d sessions in a row changed the projection; stopping", settling)
                    break
                continue
            now = time.monotonic()
            # Debounce a burst of records (e.g. a job's pods being created), but never beyond a period.
            quiet = not batch or (self._changed_at is not None and now - self._changed_at >= self.period)
            if now >= next_due and quiet and await self._tick():
                next_due = now + self.period

    # ------------------------------------------------------------------ folding

    def _fold(self, seq: int, data: bytes, *, quiet: bool = False, subject: str = "") -> None:
        if seq <= self.read:
            return
        try:
            self.cache.apply(seq, data)
        except RecordError as err:
            self.stats.skipped += 1
            if quiet:
                self._skipped.append(f"seq {seq}: {err}")
            else:
                log.warning("scheduler: record seq %d skipped: %s", seq, err)
            self._poison_out.append((seq, subject, poison.reason_of(err)))
        except Exception as err:  # RecursionError included: poison, never a halt
            self.stats.skipped += 1
            if quiet:
                self._skipped.append(f"seq {seq}: {type(err).__name__}: {err}")
            else:
                log.exception("scheduler: folding record seq %d failed; skipped", seq)
            self._poison_out.append((seq, subject, poison.reason_of(err)))
        self.read = seq
        self._dirty = True
        self.settled = False
        if self._changed_at is None:
            self._changed_at = time.monotonic()
        if quiet:
            self.stats.rebuilt_records += 1
        else:
            self.stats.folded += 1

    async def _report_poison(self) -> None:
        """A record.poison event per record skipped live (msg id per seq: stored at most once)."""
        out, self._poison_out = self._poison_out, []
        msgs = []
        for seq, subject, reason in out:
            event = poison.poison_event(
                component="scheduler", stream=s.K8S_STREAM, sequence=seq, subject=subject, reason=reason,
                job=poison.job_of(subject), now=self.cache.time or "",
            )
            msgs.append(poison.poison_message(event, source=self.bus.settings.ce_source))
        await self._store(msgs, what=f"{len(msgs)} poison event(s)")

    def fingerprint(self) -> bytes:
        return self._fingerprint.of(self.cache)

    # ------------------------------------------------------------------ sessions

    def unevaluated(self) -> dict[str, int]:
        """Pending pods held back by a field the scheduler does not evaluate, per field (/metrics)."""
        return unevaluated_pods(self.cache.snapshot(), self.config)

    async def _tick(self) -> bool:
        """Run a session if the projection changed since the last one saw it; True if one ran."""
        if not self._dirty:
            return False
        self._dirty = False
        self._changed_at = None
        before = self.fingerprint()
        if before == self._seen:
            self.stats.unchanged += 1
            self.settled = True
            return False
        self._seen = before
        seq, number, when = self.cache.position, self.number + 1, self.cache.time
        cache, config = self.cache, self.config
        try:
            with metrics.SESSION_SECONDS.time():
                result = await asyncio.to_thread(
                    lambda: run_session(cache.snapshot(), config, seq=seq, number=number, time=when)
                )
        except Exception:
            self.stats.failed += 1
            log.exception("scheduler: session %d (cut seq %d) failed; nothing published", number, seq)
            return False
        self.number = number
        self._pending = _Pending(seq, number, list(result.outputs), result)
        await self._finish(self._pending)
        return True

    async def _finish(self, pending: _Pending) -> None:
        """Store a session's outputs (marker last), then apply them to the projection."""
        first, last = session_messages(
            pending.outputs, seq=pending.seq, number=pending.number, source=self.bus.settings.ce_source
        )
        what = f"outputs of session {pending.number} (cut seq {pending.seq})"
        await self._store([m for _, m in first], what=what)
        await self._store([m for _, m in last], what=what)
        self._apply(pending.outputs, pending.number)
        self._pending = None
        self.last = pending.result
        self.stats.sessions += 1
        binds = sum(isinstance(x, o.BindPod) for x in pending.outputs)
        evictions = sum(isinstance(x, o.EvictPod) for x in pending.outputs)
        self.stats.binds += binds
        self.stats.evictions += evictions
        decisions = len(pending.outputs) - sum(isinstance(x, o.SchedulingSession) for x in pending.outputs)
        (log.info if binds or evictions else log.debug)(
            "scheduler: session %d at seq %d: %d outputs, %d binds, %d evictions",
            pending.number,
            pending.seq,
            decisions,
            binds,
            evictions,
        )

    def _apply(self, outputs: list[o.Output], number: int) -> None:
        try:
            self.cache.apply_outputs(outputs)
        except Exception:
            log.exception("scheduler: applying the outputs of session %d to the projection failed", number)
        self._dirty = True
        self.settled = False

    async def _store(self, messages: list[Prepared], *, what: str) -> None:
        """Publish `messages` in order and wait for every ack, retried (vcbus.bus.direct)."""
        if not messages:
            return
        if self._writer is None:
            self._writer = BatchWriter(self.bus.nc)
        res = await direct.store(self._writer, messages, who="scheduler", what=what,
                                 timeout=self.bus.settings.publish_timeout, log=log)
        self.stats.duplicates += res.duplicates
        self.stats.outputs += res.stored

    # ------------------------------------------------------------------ restart

    async def rebuild(self) -> None:
        """Refold VCBUS_K8S, re-applying each past session's outputs at its cut."""
        t0 = time.perf_counter()
        sessions = collections.deque(await past_sessions(self.bus))
        found = len(sessions)
        async for batch in read_stream(self.js, s.K8S_STREAM, batch=1024):
            for msg in batch:
                seq = stream_seq(msg)
                while sessions and sessions[0].seq < seq:
                    await self._replay(sessions.popleft(), last=not sessions)
                self._fold(seq, msg.data, quiet=True, subject=msg.subject)
        while sessions:
            await self._replay(sessions.popleft(), last=not sessions)
        self._dirty = True
        self._changed_at = None
        if self._skipped:
            shown = "; ".join(self._skipped[:5]) + ("; ..." if len(self._skipped) > 5 else "")
            log.warning("scheduler: %d records of VCBUS_K8S could not be used and were skipped (%s)", len(self._skipped), shown)
            self._skipped = []
        if self._poison_out:  # report what no earlier run reported (a poison event per record)
            known = await poison.poisoned_sequences(self.js, "scheduler")
            self._poison_out = [x for x in self._poison_out if x[0] not in known]
            await self._report_poison()
        log.info(
            "scheduler: projection rebuilt from %d records and %d past sessions in %.2fs; next session %d",
            self.stats.rebuilt_records,
            found,
            time.perf_counter() - t0,
            self.number + 1,
        )

    async def _replay(self, past: PastSession, *, last: bool) -> None:
        outputs = past.decoded()
        if past.unreadable:
            log.warning("scheduler: %d outputs of session %d are not readable; skipped", past.unreadable, past.number)
        if not past.complete:
            if last:
                outputs = await self._resume(past, outputs)
            else:
                log.warning(
                    "scheduler: session %d (cut seq %d) is incomplete on the bus; applying the %d outputs stored",
                    past.number,
                    past.seq,
                    len(outputs),
                )
        if last:  # the projection this session ran on: no new session until it changes
            self._seen = self.fingerprint()
        self._apply(outputs, past.number)
        self.number = max(self.number, past.number)
        self.stats.rebuilt_sessions += 1

    async def _resume(self, past: PastSession, stored: list[o.Output]) -> list[o.Output]:
        """Run a session cut short by a crash again and publish what it had not stored yet."""
        try:
            result = run_session(self.cache.snapshot(), self.config, seq=past.seq, number=past.number, time=self.cache.time)
        except Exception:
            log.exception("scheduler: re-running session %d failed; applying the outputs stored", past.number)
            return stored
        outputs = list(result.outputs)
        bodies = [o.encoder.encode(x) for x in outputs]
        if any(i >= len(bodies) or bodies[i] != body for i, body in past.outputs.items()):
            log.warning(
                "scheduler: session %d (cut seq %d) was cut short and decides otherwise now (another config?); "
                "applying the %d outputs stored",
                past.number,
                past.seq,
                len(stored),
            )
            return stored
        first, final = session_messages(outputs, seq=past.seq, number=past.number, source=self.bus.settings.ce_source)
        what = f"rest of session {past.number} (cut seq {past.seq})"
        await self._store([m for i, m in first if i not in past.outputs], what=what)
        await self._store([m for i, m in final if i not in past.outputs], what=what)
        self.stats.resumed += 1
        log.info("scheduler: session %d (cut seq %d) was cut short by a crash; completed it", past.number, past.seq)
        return outputs
