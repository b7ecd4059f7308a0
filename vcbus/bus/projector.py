"""The projector: VCBUS_JOBS folded into the KV buckets `vcbus_status` and `vcbus_history`.

Views (the same folds `vcbus replay` uses, `projections/`):

- `vcbus_status`, key `<namespace>.<name>`: the vcjob `status` object Volcano
  would write, as JSON. A deleted job's key is deleted.
- `vcbus_history`, same keys: the job's entry of the `vcbus replay --json`
  report (status, phase history, actions, divergences, errors, pending
  timers; docs/replay.md) without `commands` (those are VCBUS_CMDS, which
  this fold does not read); kept after the job is deleted.
- `_position` in both buckets: the last VCBUS_JOBS sequence folded in.

Writes are batched: the projector folds everything available (up to a batch),
then writes each touched key once and the position last. On start it
refolds VCBUS_JOBS in memory up to the stored position (writing nothing) and
continues after it, so a crash between a view write and the position write
only means some keys are written again with the same value.

`rebuild` purges both buckets and refolds from sequence 1; since every value
is a function of the events up to the position, the result equals the live
buckets byte for byte (`verify` checks exactly that without writing).

Poison, never a halt: an event the views cannot decode or fold (any
exception) is skipped, counted (`Views.poison`) and, live, reported as a
`record.poison.v1` event (component `projector`, stream VCBUS_JOBS;
`vcbus.bus.poison`); a failure while building one job's values skips that
job's write the same way. A record.poison event itself is never reported
again (no loop).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, NamedTuple

import msgspec
from nats.js.errors import KeyNotFoundError, NotFoundError

from projections.history import HistoryView
from projections.replay import job_report
from projections.status import StatusView
from statemachines import outputs as o
from statemachines.timefmt import fmt
from vcbus.bus import poison
from vcbus.bus import subjects as s
from vcbus.bus.connecting import Bus
from vcbus.bus.errors import BusError
from vcbus.bus.reading import read_bucket, read_stream
from vcbus.bus.streams import last_seq, purge_bucket
from vcbus.bus.supervising import supervise

log = logging.getLogger("vcbus.projector")


def wall_clock() -> str:
    return fmt(int(time.time()))

BUCKETS = (s.STATUS_BUCKET, s.HISTORY_BUCKET)
MAX_VALUE = 900_000  # bytes; a history over this drops its oldest actions (fits any server's 1 MB)
CLUSTER_JOB = s.CLUSTER_SCOPE + "/"  # job key prefix of cluster-scoped outputs (queues, `_/scheduler`)
_encode = msgspec.json.Encoder().encode


class PendingTimer(NamedTuple):
    """What `job_report` needs of a pending timer (the engine's `Timer` has the same fields)."""

    id: str
    action: str
    due: str
    pod: str
    policy: str


class Views:
    """Status, history and pending timers per job, and the last folded VCBUS_JOBS sequence."""

    def __init__(self) -> None:
        self.statuses = StatusView()
        self.history = HistoryView(keep_commands=False)  # commands live in VCBUS_CMDS, not here
        self.timers: dict[str, dict[str, tuple[int, o.TimerScheduled]]] = {}
        self.position = 0
        self.undecodable = 0
        self.poison = 0  # events set aside (undecodable or failing to fold)
        self.failed: list[tuple[int, str, str, str]] = []  # (seq, subject, reason, job) not yet reported

    def apply(self, seq: int, data: bytes, subject: str = "") -> str | None:
        """Fold the event stored at `seq`; return its job (None if already folded or unreadable)."""
        if seq <= self.position:
            return None
        self.position = seq
        try:
            return self._apply(seq, data)
        except Exception as err:  # poison, never a halt (RecursionError included)
            self.poison += 1
            reason = poison.reason_of(err)
            log.warning("projector: event seq %d %s set aside: %s", seq, subject, reason)
            if not subject.endswith("." + s.event_subtype(poison.POISON_TAG)):
                self.failed.append((seq, subject, reason, _job_of_event_subject(subject)))
            return None

    def _apply(self, seq: int, data: bytes) -> str | None:
        try:
            event = o.output_decoder.decode(data)
        except msgspec.DecodeError as err:
            self.undecodable += 1
            raise ValueError(f"event not readable: {err}") from None
        if event.job.startswith(CLUSTER_JOB):
            return None  # the scheduler's sessions and queues (`_/<name>`): not a vcjob, no key
        self.statuses.apply(event, position=seq)
        self.history.apply(event, position=seq)
        if isinstance(event, o.TimerScheduled):
            self.timers.setdefault(event.job, {})[event.timer] = (seq, event)
        elif isinstance(event, (o.TimerCancelled, o.TimerFired)):
            self.timers.get(event.job, {}).pop(event.timer, None)
        if isinstance(event, (o.RecordPoisoned, o.RecordRetried)):
            return event.job  # the job's Poisoned condition (projections/status.py)
        if event.job not in self.history.jobs and event.job not in self.statuses.statuses:
            return None  # e.g. the scheduler's events about a PodGroup no vcjob owns: no key
        return event.job

    def pending_timers(self, job: str) -> list[PendingTimer]:
        entries = sorted(self.timers.get(job, {}).values(), key=lambda e: (e[1].due, e[0]))
        return [PendingTimer(t.timer, t.action, t.due, t.pod, t.policy) for _, t in entries]

    def values(self, job: str) -> dict[str, bytes | None]:
        """The value of `job`'s key in each bucket (None: no key)."""
        h = self.history.jobs.get(job)
        status = self.statuses.status(job)
        deleted = job in self.statuses.deleted
        out: dict[str, bytes | None] = {s.STATUS_BUCKET: None if status is None or deleted else _encode(status)}
        if h is None or (h.observed is None and not h.actions):
            out[s.HISTORY_BUCKET] = None
        else:
            report = job_report(h, status, pending_timers=self.pending_timers(job), deleted=deleted)
            del report["commands"]  # VCBUS_CMDS, not VCBUS_JOBS: never folded here
            out[s.HISTORY_BUCKET] = _fit(report)
        return out

    def jobs(self) -> list[str]:
        return sorted(set(self.history.jobs) | set(self.statuses.statuses) | set(self.statuses.poisoned))

    def buckets(self) -> dict[str, dict[str, bytes]]:
        """Every bucket's content as `rebuild` writes it."""
        out: dict[str, dict[str, bytes]] = {b: {} for b in BUCKETS}
        for job in self.jobs():
            try:
                key = s.kv_key(job)
            except ValueError:
                continue
            for bucket, value in self.values(job).items():
                if value is not None:
                    out[bucket][key] = value
        if self.position:
            for bucket in BUCKETS:
                out[bucket][s.POSITION_KEY] = str(self.position).encode()
        return out


def _job_of_event_subject(subject: str) -> str:
    """`vcbus.job.<ns>.<name>.<event>` -> `<ns>/<name>` (`_/poison` when it is not one)."""
    parts = subject.split(".")
    if len(parts) > 4 and f"{parts[0]}.{parts[1]}" == s.JOBS_PREFIX and parts[2] != s.CLUSTER_SCOPE:
        return poison.usable_job(f"{s.untoken(parts[2])}/{s.untoken(parts[3])}")
    return poison.POISON_JOB


def _fit(report: dict[str, Any]) -> bytes:
    value = _encode(report)
    if len(value) <= MAX_VALUE:
        return value
    report = dict(report, truncated=True)
    for field in ("actions", "history"):
        items = list(report[field])
        while items and len(value) > MAX_VALUE:
            items = items[len(items) // 4 + 1 :]
            report[field] = items
            value = _encode(report)
    return value


async def stored_position(bus: Bus) -> int:
    kv = await bus.js.key_value(s.STATUS_BUCKET)
    try:
        entry = await kv.get(s.POSITION_KEY)
    except (KeyNotFoundError, NotFoundError):
        return 0
    text = (entry.value or b"0").decode()
    return int(text) if text.isdigit() else 0


async def fold(bus: Bus, views: Views, *, end_seq: int | None = None) -> None:
    """Fold VCBUS_JOBS after `views.position` (to its current end, or `end_seq`) into `views`."""
    async for batch in read_stream(bus.js, s.JOBS_STREAM, start_seq=views.position + 1, end_seq=end_seq, batch=1024):
        for msg in batch:
            views.apply(msg.metadata.sequence.stream, msg.data, msg.subject)
    views.failed.clear()  # reported by the live projector when it first met them


class Writer:
    """Writes keys with pipelined publishes to the buckets' subjects, checking every ack."""

    def __init__(self, bus: Bus) -> None:
        self.js = bus.js
        self.timeout = bus.settings.publish_timeout
        self.futures: list[asyncio.Future[Any]] = []

    async def put(self, bucket: str, key: str, value: bytes | None) -> None:
        subject = f"$KV.{bucket}.{key}"
        if value is None:
            fut = await self.js.publish_async(subject, b"", headers={"KV-Operation": "DEL"})
        else:
            fut = await self.js.publish_async(subject, value)
        self.futures.append(fut)
        if len(self.futures) >= 512:
            await self.flush()

    async def flush(self) -> None:
        futs, self.futures = self.futures, []
        if not futs:
            return
        try:
            await asyncio.wait_for(asyncio.gather(*futs), self.timeout)
        except asyncio.TimeoutError:
            raise BusError(f"projector: no acknowledgement from the KV buckets within {self.timeout:g}s") from None
        except Exception as err:
            raise BusError(f"projector: writing the KV buckets failed: {err or type(err).__name__}") from err


async def write_jobs(writer: Writer, views: Views, jobs: set[str]) -> None:
    for job in sorted(jobs):
        try:
            key = s.kv_key(job)
        except ValueError:
            log.warning("projector: job %s has no valid KV key; not projected", job)
            continue
        try:
            values = views.values(job)
        except Exception as err:  # poison, never a halt: this job's keys stay as they were
            views.poison += 1
            log.warning("projector: building the views of %s failed, not written: %s", job, poison.reason_of(err))
            continue
        for bucket, value in values.items():
            await writer.put(bucket, key, value)
    await writer.flush()  # the views before the position
    for bucket in BUCKETS:
        await writer.put(bucket, s.POSITION_KEY, str(views.position).encode())
    await writer.flush()


class Projector:
    def __init__(self, bus: Bus, *, batch: int = 512, idle: float = 0.25) -> None:
        self.bus = bus
        self.batch = batch
        self.idle = idle
        self.views = Views()
        self.written = 0  # events folded and written by this run
        self.ready = asyncio.Event()
        self._started = False
        self._dirty: set[str] = set()
        self.clock = wall_clock

    async def run(self, *, stop: asyncio.Event | None = None, until_idle: bool = False) -> None:
        """Project until `stop` is set (or, with `until_idle`, until VCBUS_JOBS is used up)."""
        stop = stop or asyncio.Event()
        await supervise(
            "projector",
            lambda: self._session(stop, until_idle),
            progress=lambda: self.views.position,
            stop=stop,
            until_idle=until_idle,
            log=log,
        )

    async def _session(self, stop: asyncio.Event, until_idle: bool) -> None:
        js = self.bus.js
        if not self._started:
            await self._start()
            self._started = True
        writer = Writer(self.bus)
        if self._dirty:  # a previous session folded these but may not have written them
            await write_jobs(writer, self.views, self._dirty)
            self._dirty = set()
        self.ready.set()
        async for batch in read_stream(
            js, s.JOBS_STREAM, start_seq=self.views.position + 1, follow=True, batch=self.batch, idle=self.idle
        ):
            if batch:
                for msg in batch:
                    job = self.views.apply(msg.metadata.sequence.stream, msg.data, msg.subject)
                    if job is not None:
                        self._dirty.add(job)
                await self._report_poison()
                await write_jobs(writer, self.views, self._dirty)
                self._dirty = set()
                self.written += len(batch)
            elif until_idle and self.views.position >= await last_seq(js, s.JOBS_STREAM):
                break
            if stop.is_set():
                break

    async def _report_poison(self) -> None:
        """Publish a record.poison event for each event the views set aside (msg ids dedup)."""
        failed, self.views.failed = self.views.failed, []
        for seq, subject, reason, job in failed:
            event = poison.poison_event(
                component="projector", stream=s.JOBS_STREAM, sequence=seq, subject=subject, reason=reason, job=job,
                now=self.clock(),
            )
            msg = poison.poison_message(event, source=self.bus.settings.ce_source)
            try:
                await self.bus.js.publish(msg.subject, msg.body, headers=msg.headers)
            except Exception as err:
                raise BusError(f"projector: cannot store the poison event of seq {seq}: {err}") from err

    async def _start(self) -> None:
        position = await stored_position(self.bus)
        end = await last_seq(self.bus.js, s.JOBS_STREAM)
        if position > end:
            log.warning(
                "projector: the views are at seq %d but VCBUS_JOBS ends at %d (stream recreated?); rebuilding",
                position,
                end,
            )
            await rebuild(self.bus)
            position = await stored_position(self.bus)
        await fold(self.bus, self.views, end_seq=position)
        self.views.position = max(self.views.position, position)
        log.info("projector: views at seq %d; projecting from seq %d", position, position + 1)


async def rebuild(bus: Bus) -> Views:
    """Purge both buckets and refold VCBUS_JOBS from sequence 1 into them."""
    for bucket in BUCKETS:
        await purge_bucket(bus.js, bucket)
    views = Views()
    await fold(bus, views)
    writer = Writer(bus)
    content = views.buckets()
    for bucket in BUCKETS:
        for key, value in content[bucket].items():
            if key != s.POSITION_KEY:
                await writer.put(bucket, key, value)
    await writer.flush()
    if views.position:
        for bucket in BUCKETS:
            await writer.put(bucket, s.POSITION_KEY, str(views.position).encode())
        await writer.flush()
    return views


async def live_buckets(bus: Bus) -> dict[str, dict[str, bytes]]:
    return {bucket: await read_bucket(bus.js, bucket) for bucket in BUCKETS}


async def verify(bus: Bus) -> list[str]:
    """Differences between the live buckets and a refold from sequence 1 (empty: identical)."""
    live = await live_buckets(bus)
    views = Views()
    await fold(bus, views)
    want = views.buckets()
    problems = []
    for bucket in BUCKETS:
        have, expected = live[bucket], want[bucket]
        for key in sorted(set(have) | set(expected)):
            if key not in have:
                problems.append(f"{bucket}: key {key} missing")
            elif key not in expected:
                problems.append(f"{bucket}: key {key} should not exist")
            elif have[key] != expected[key]:
                problems.append(f"{bucket}: key {key} differs")
    return problems
