"""The projector: VCBUS_JOBS folded into the KV buckets `vcbus_status` and `vcbus_history`.

Views (the same folds `vcbus replay` uses, `projections/`):

- `vcbus_status`, key `<namespace>.<name>`: the vcjob `status` object Volcano
  would write, as JSON. A deleted job's key is purged; the purge marker goes
  after `kv_marker_ttl` (`Writer`).
- `vcbus_history`, same keys: the job's entry of the `vcbus replay --json`
  report (status, phase history, actions, divergences, errors, pending
  timers; docs/replay.md) without `commands` (those are VCBUS_CMDS, which
  this fold does not read); kept after the job is deleted, for the
  settings' `history_retention` (record time after the deletion, a week by
  default; `VCBUS_HISTORY_RETENTION`), then its key is deleted. Once written,
  a deleted job's history is in the bucket only, not in the projector's
  memory (`projections.history.DeletedJobs`): the memory of a long-running
  projector follows the live jobs, not the log's length.
- `_position` in both buckets: the last VCBUS_JOBS sequence folded in.

Writes are batched: the projector folds everything available (up to a batch),
then writes each touched key once and the position last. While the stream
has more for it (a burst: a gang's restart, hundreds of jobs at once) it
folds on and writes at most every `write_every` seconds (1 s), each job's
keys once for all the batches folded since, rather than a big job's history
after every batch; once it has caught up it writes at once. The buckets and
their position move together either way: a reader never sees a view ahead
of, or behind, the position it is stored with. On start it
refolds VCBUS_JOBS in memory up to the stored position (writing nothing) and
continues after it, so a crash between a view write and the position write
only means some keys are written again with the same value. The refold starts
from the newest valid snapshot of the views when there is one
(`vcbus.bus.statesnap`: saved every `snapshot_every` events, right after a
write, and on a clean stop).

`rebuild` purges both buckets and refolds from sequence 1; since every value
is a function of the events up to the position, the result equals the live
buckets byte for byte (`verify` checks exactly that without writing).

Poison, never a halt: an event the views cannot decode or fold (any
exception) is skipped, counted (`Views.poison`) and, live, reported as a
`record.poison.v1` event (component `projector`, stream VCBUS_JOBS;
`vcbus.bus.poison`); a failure while building one job's values skips that
job's write the same way. A record.poison event itself is never reported
again (no loop). The fold in memory is `vcbus.bus.views.Views`.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from typing import Any

import msgspec
from nats.js.errors import KeyNotFoundError, NotFoundError

from projections.history import DEFAULT_RETENTION
from statemachines.model.timefmt import fmt
from vcbus.bus import poison
from vcbus.bus import subjects as s
from vcbus.bus.connecting import Bus
from vcbus.bus.errors import BusError
from vcbus.bus import statesnap
from vcbus.bus.reading import pending_after, read_bucket, read_stream, stream_seq
from vcbus.bus.streams import last_seq, purge_bucket
from vcbus.bus.supervising import supervise
from vcbus.bus.views import BUCKETS, MAX_VALUE, Views  # part of this module's interface

log = logging.getLogger("vcbus.projector")
SNAPSHOT_OWNER = "vcbus-projector"  # its snapshots' names in the object store (vcbus.bus.statesnap)


def wall_clock() -> str:
    return fmt(int(time.time()))


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
            views.apply(stream_seq(msg), msg.data, msg.subject)
        views.evict_deleted()  # already written by the projector that folded them first
    views.failed.clear()  # reported by the live projector when it first met them


async def load_returned(bus: Bus, views: Views, *, refolded: bool = False) -> None:
    """The stored history of each forgotten job that got events again, as the base of its next value.

    After a refold (`refolded`) the stored value already holds the events folded
    since the job was forgotten, so those are dropped from memory.
    """
    returned = views.deleted_jobs.returned
    if not returned:
        return
    kv = await bus.js.key_value(s.HISTORY_BUCKET)
    for job in sorted(returned):
        try:
            entry = await kv.get(s.kv_key(job))
            base = msgspec.json.decode(entry.value) if entry.value else None
        except (KeyNotFoundError, NotFoundError, ValueError, msgspec.DecodeError):
            base = None
        # any other failure (a timeout) leaves the job in `returned`: the next session reads it again
        returned.discard(job)
        if base is not None:
            views.deleted_jobs.bases[job] = base
            if refolded:
                views.history.restart(job)
                views.deleted_jobs.observed_since.discard(job)


class Writer:
    """Writes keys with pipelined publishes to the buckets' subjects, checking every ack.

    A key is deleted with a purge marker (`KV-Operation: PURGE`, `Nats-Rollup: sub`: what
    nats.go's and nats-py's `KeyValue.purge` send), which watchers see as the key's deletion, with
    `Nats-TTL` of the settings' `kv_marker_ttl` when the bucket allows per-message TTLs: the
    server then removes the marker itself once the TTL is up, so deleted jobs leave no markers
    behind for good. A bucket without `allow_msg_ttl` (a server before 2.11) keeps its markers."""

    def __init__(self, bus: Bus) -> None:
        self.js = bus.js
        self.timeout = bus.settings.publish_timeout
        self.marker_ttl = getattr(bus.settings, "kv_marker_ttl", 0.0) or 0.0
        self.futures: list[asyncio.Future[Any]] = []
        self._markers: dict[str, dict[str, str]] = {}  # bucket -> the headers of its purge markers

    async def marker(self, bucket: str) -> dict[str, str]:
        """The headers of a purge marker in `bucket` (its TTL checked once per writer)."""
        headers = self._markers.get(bucket)
        if headers is None:
            headers = {"KV-Operation": "PURGE", "Nats-Rollup": "sub"}
            if self.marker_ttl:
                info = await self.js.stream_info(f"KV_{bucket}")
                if info.config.allow_msg_ttl:
                    headers["Nats-TTL"] = f"{max(1, math.ceil(self.marker_ttl))}s"
                else:
                    log.warning("projector: bucket %s allows no per-message TTL (nats-server before 2.11?): "
                                "its delete markers stay", bucket)
            self._markers[bucket] = headers
        return headers

    async def put(self, bucket: str, key: str, value: bytes | None) -> None:
        subject = f"$KV.{bucket}.{key}"
        if value is None:
            fut = await self.js.publish_async(subject, b"", headers=dict(await self.marker(bucket)))
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
            raise BusError(f"projector: writing the KV buckets failed: {str(err) or type(err).__name__}") from err


async def write_jobs(writer: Writer, views: Views, jobs: set[str]) -> None:
    for job in sorted(jobs):
        try:
            key = s.kv_key(job)
        except ValueError as err:  # not a silent skip: reported as poison (`Projector._report_poison`)
            views.poison += 1
            views.failed.append((views.position, f"job {job!r}", poison.reason_of(err), poison.POISON_JOB))
            log.warning("projector: job %r has no KV key, not projected: %s", job, err)
            continue
        try:
            values = views.values(job)
        except Exception as err:  # poison, never a halt: this job's keys stay as they were
            views.poison += 1
            log.warning("projector: building the views of %s failed, not written: %s", job, poison.reason_of(err))
            continue
        for bucket, value in values.items():
            await writer.put(bucket, key, value)
    expired = views.deleted_jobs.expired()
    for job in expired:  # retention over: the history key goes too
        try:
            await writer.put(s.HISTORY_BUCKET, s.kv_key(job), None)
        except ValueError:
            pass  # never had a key (reported when it was written)
    await writer.flush()  # the views before the position
    for bucket in BUCKETS:
        await writer.put(bucket, s.POSITION_KEY, str(views.position).encode())
    await writer.flush()
    # Memory forgets only now: when a write fails the next session writes `jobs` again, and a job
    # forgotten before that would be written as if it had no history (its stored key deleted).
    for job in expired:
        views.deleted_jobs.drop(job)
        views.forget(job)
    views.evict_deleted()


class Projector:
    def __init__(
        self, bus: Bus, *, batch: int = 512, idle: float = 0.25, history_retention: float | None = None,
        write_every: float = 1.0,
    ) -> None:
        self.bus = bus
        self.batch = batch
        self.idle = idle
        self.write_every = write_every  # seconds between writes while the stream has more (module docstring)
        self.views = Views(retention=retention_of(bus, history_retention), evict=True)
        self.written = 0  # events folded and written by this run
        self.ready = asyncio.Event()
        self._started = False
        self._dirty: set[str] = set()
        self.clock = wall_clock
        self.snapshot_every = getattr(bus.settings, "snapshot_every", 0)  # events between snapshots (0: none)
        self.restored = 0  # the VCBUS_JOBS sequence the start's snapshot covered (0: refolded from 1)
        self.snapshots = (
            statesnap.Store(bus.js, owner=SNAPSHOT_OWNER, stream=s.JOBS_STREAM, config=self._snapshot_config())
            if self.snapshot_every
            else None
        )

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
            await self._write_dirty(writer)
        self.ready.set()
        loop = asyncio.get_running_loop()
        wrote_at = loop.time()
        unwritten = False  # folded since the last write
        async for batch in read_stream(
            js, s.JOBS_STREAM, start_seq=self.views.position + 1, follow=True, batch=self.batch, idle=self.idle
        ):
            if batch:
                for msg in batch:
                    job = self.views.apply(stream_seq(msg), msg.data, msg.subject)
                    if job is not None:
                        self._dirty.add(job)
                self.written += len(batch)
                unwritten = True
                due = self.snapshots is not None and self.snapshots.due(self.views.position, self.snapshot_every)
                if (pending_after(batch[-1]) and loop.time() - wrote_at < self.write_every and not due
                        and not stop.is_set()):
                    continue  # more is waiting: fold it before writing (the module docstring)
            elif until_idle and not unwritten and self.views.position >= await last_seq(js, s.JOBS_STREAM):
                break
            if unwritten:
                await self._write_dirty(writer)
                wrote_at, unwritten = loop.time(), False
                if self.snapshots is not None and self.snapshots.due(self.views.position, self.snapshot_every):
                    await self._snapshot()
            if stop.is_set():
                break
        if unwritten:
            await self._write_dirty(writer)
        if self.snapshots is not None and self.views.position > self.snapshots.saved_seq:
            await self._snapshot()  # a clean stop: the next start folds nothing

    async def _write_dirty(self, writer: Writer) -> None:
        """Write the folded jobs' keys and the position; `_dirty` empties only once all of it is stored.

        Pending poison events go first, then the stored histories of returning jobs (their
        base), then the keys; the poison events of jobs no KV key can hold go last. Any step that
        fails leaves `_dirty`, the returning jobs and the pending events for the next session."""
        await self._report_poison()
        await load_returned(self.bus, self.views)
        await write_jobs(writer, self.views, self._dirty)
        await self._report_poison()  # jobs no KV key can hold
        self._dirty = set()

    def _snapshot_config(self) -> str:
        """What a snapshot's views must have been folded with to be this projector's."""
        d = self.views.deleted_jobs
        return msgspec.json.encode(
            {"retention": getattr(d, "retention", None), "evict": self.views.evict, "max_value": MAX_VALUE}
        ).decode()

    async def _snapshot(self) -> None:
        """Save the views as covering `position`, only right after their keys and position are written."""
        if self.snapshots is None or self._dirty or self.views.failed or self.views.deleted_jobs.returned:
            return
        await self.snapshots.save(self.views.position, self.views)

    async def _report_poison(self) -> None:
        """Publish a record.poison event for each event the views set aside (msg ids dedup)."""
        failed = self.views.failed
        while failed:  # each one leaves the list once stored: a failure leaves the rest to the next session
            seq, subject, reason, job = failed[0]
            event = poison.poison_event(
                component="projector", stream=s.JOBS_STREAM, sequence=seq, subject=subject, reason=reason, job=job,
                now=self.clock(),
            )
            msg = poison.poison_message(event, source=self.bus.settings.ce_source)
            try:
                await self.bus.js.publish(msg.subject, msg.body, headers=msg.headers)
            except Exception as err:
                raise BusError(f"projector: cannot store the poison event of seq {seq}: {err}") from err
            del failed[0]

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
        if self.snapshots is not None:  # the newest valid snapshot, else a refold from sequence 1
            snap = await self.snapshots.restore(kind=Views, max_seq=position)
            if snap is not None:
                self.views, self.restored = snap.state, snap.seq
        await fold(self.bus, self.views, end_seq=position)
        await load_returned(self.bus, self.views, refolded=True)
        self.views.position = max(self.views.position, position)
        log.info("projector: views at seq %d; projecting from seq %d", position, position + 1)


def retention_of(bus: Bus, seconds: float | None) -> float | None:
    """`seconds`, else the bus settings' `history_retention`; 0 means forever (None)."""
    value = getattr(bus.settings, "history_retention", DEFAULT_RETENTION) if seconds is None else seconds
    return value or None


async def rebuild(bus: Bus, *, history_retention: float | None = None) -> Views:
    """Purge both buckets and refold VCBUS_JOBS from sequence 1 into them (every job in memory)."""
    for bucket in BUCKETS:
        await purge_bucket(bus.js, bucket)
    views = Views(retention=retention_of(bus, history_retention))
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


async def verify(bus: Bus, *, history_retention: float | None = None) -> list[str]:
    """Differences between the live buckets and a refold from sequence 1 (empty: identical)."""
    live = await live_buckets(bus)
    views = Views(retention=retention_of(bus, history_retention))
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
