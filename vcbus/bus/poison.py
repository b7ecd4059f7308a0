"""Poison records: records a bus service cannot decode or decide, set aside instead of halting.

"Poison, never a halt." When the decider, the projector or the scheduler
service fails on a record for any reason (a `RecordError`, a `RecursionError`
from a document nested too deeply, an exception in the engine, a job key no
subject can be built from), it publishes a `record.poison.v1` event
(`statemachines.outputs.RecordPoisoned`) on VCBUS_JOBS, counts it, acks the
record and goes on with the next one.

- Subject: `vcbus.job.<ns>.<name>.record.poison.v1` for the record's job when
  it can be told (the object's vcjob, or the job in the K8S subject), else
  `vcbus.job._.poison.record.poison.v1` (job `_/poison`).
- `Nats-Msg-Id`: `poison:<component>:<stream>:<sequence>`: deciding the same
  record again (a crash before the ack) stores nothing new.
- The decider's poison events are also its memory: on start it reads them
  back and never folds those records again (`poisoned_sequences`), so a code
  fix cannot silently change what an old, already set-aside record meant.
  `vcbus poison retry SEQ` re-publishes the original record as a new record
  (`retry_record`); the decider decides that copy like any other record and,
  once it is decided without failure, publishes `record.retried.v1`, which
  clears the job's `Poisoned` status condition.
"""

from __future__ import annotations

import time
from typing import Any

import msgspec
from nats.js import JetStreamContext

from statemachines import outputs as o
from statemachines.model.records import Observed, decode
from vcbus.bus import subjects as s
from vcbus.bus.cloudevents import headers as ce_headers
from vcbus.bus.cloudevents import MSG_ID
from vcbus.bus.publisher import Prepared, owner_job
from vcbus.bus.reading import read_all

POISON_JOB = "_/poison"
POISON_TAG = o.tag_of(o.RecordPoisoned)
RETRIED_TAG = o.tag_of(o.RecordRetried)
POISON_FILTER = f"{s.JOBS_PREFIX}.*.*.{s.event_subtype(POISON_TAG)}"
RETRIED_FILTER = f"{s.JOBS_PREFIX}.*.*.{s.event_subtype(RETRIED_TAG)}"
RETRY_OF = "Vcbus-Retry-Of"  # header of a re-published record: the sequence it is a copy of
MAX_REASON = 2000


def reason_of(err: BaseException) -> str:
    """A one-line reason: the exception's class and message, cut to a sane length."""
    text = " ".join(str(err).split()) or "(no message)"
    name = type(err).__name__
    line = text if name in ("RecordError",) else f"{name}: {text}"
    return line if len(line) <= MAX_REASON else line[: MAX_REASON - 3] + "..."


def usable_job(job: str | None) -> str:
    """`job` if events can be addressed to it, else `_/poison`."""
    if not job:
        return POISON_JOB
    try:
        s.event_subject(job, POISON_TAG)
    except ValueError:
        return POISON_JOB
    return job


def job_of(subject: str, decoded: Any = None) -> str:
    """The job a K8S record belongs to, as far as it can be told; `_/poison` when it cannot."""
    if isinstance(decoded, Observed):
        try:
            job = owner_job(decoded.object)
        except Exception:  # a record odd enough to break this too: the subject may still tell
            job = None
        if job:
            return usable_job(job)
    parts = subject.split(".")
    if len(parts) in (5, 7) and f"{parts[0]}.{parts[1]}" == s.K8S_PREFIX and parts[2] in ("job", s.TIMER_KIND, s.REFUSAL_KIND):
        ns, name = s.untoken(parts[3]), s.untoken(parts[4])
        if ns != s.CLUSTER_SCOPE:
            return usable_job(f"{ns}/{name}")
    return POISON_JOB


class Failure:
    """Why a record could not be decided; `dirty` when the engine had started folding it."""

    __slots__ = ("reason", "job", "dirty")

    def __init__(self, reason: str, job: str, *, dirty: bool) -> None:
        self.reason = reason
        self.job = job
        self.dirty = dirty


def retried_event(seq: int, original: int, subject: str, data: bytes, *, now: str) -> o.RecordRetried:
    """The decider's note that the copy at `seq` of poisoned record `original` was decided."""
    try:
        job = job_of(subject, decode(data))
    except Exception:
        job = job_of(subject)
    return o.RecordRetried(job=job, seq=seq, time=now, stream=s.K8S_STREAM, sequence=original, retry_sequence=seq)


def poison_event(
    *, component: str, stream: str, sequence: int, subject: str, reason: str, job: str, now: str
) -> o.RecordPoisoned:
    return o.RecordPoisoned(
        job=usable_job(job), seq=sequence, time=now, stream=stream, sequence=sequence, subject=subject,
        component=component, reason=reason,
    )


def poison_message(event: o.RecordPoisoned, *, source: str) -> Prepared:
    msg_id = f"poison:{event.component}:{event.stream}:{event.sequence}"
    headers = ce_headers(event, ce_id=msg_id, source=source)
    headers[MSG_ID] = msg_id
    return Prepared(s.event_subject(event.job, POISON_TAG), o.encoder.encode(event), headers)


def retried_message(event: o.RecordRetried, *, source: str) -> Prepared:
    msg_id = f"retried:{event.stream}:{event.sequence}:{event.retry_sequence}"
    headers = ce_headers(event, ce_id=msg_id, source=source)
    headers[MSG_ID] = msg_id
    return Prepared(s.event_subject(event.job, RETRIED_TAG), o.encoder.encode(event), headers)


async def poison_events(js: JetStreamContext) -> list[tuple[int, o.RecordPoisoned]]:
    """Every `record.poison.v1` event stored on VCBUS_JOBS: (VCBUS_JOBS seq, event), in order."""
    out = []
    async for msg in read_all(js, s.JOBS_STREAM, filters=[POISON_FILTER]):
        try:
            event = o.output_decoder.decode(msg.data)
        except msgspec.DecodeError:
            continue
        if isinstance(event, o.RecordPoisoned):
            out.append((msg.metadata.sequence.stream, event))
    return out


async def retried_sequences(js: JetStreamContext) -> set[int]:
    """VCBUS_K8S sequences whose retry was decided without failure."""
    out: set[int] = set()
    async for msg in read_all(js, s.JOBS_STREAM, filters=[RETRIED_FILTER]):
        try:
            event = o.output_decoder.decode(msg.data)
        except msgspec.DecodeError:
            continue
        if isinstance(event, o.RecordRetried):
            out.add(event.sequence)
    return out


async def poisoned_sequences(js: JetStreamContext, component: str = "decider") -> set[int]:
    """VCBUS_K8S sequences `component` has set aside (the decider skips them on every rebuild)."""
    return {
        e.sequence for _, e in await poison_events(js) if e.component == component and e.stream == s.K8S_STREAM
    }


async def retry_record(js: JetStreamContext, sequence: int) -> int:
    """Re-publish VCBUS_K8S record `sequence` as a new record; return the new sequence.

    The copy has the original's subject and body, a new `Nats-Msg-Id`
    (`retry:<sequence>:<unix ns>`) and the header `Vcbus-Retry-Of: <sequence>`.
    Raises `LookupError` when the stream no longer holds that record.
    """
    from nats.js.errors import NotFoundError

    try:
        raw = await js.get_msg(s.K8S_STREAM, sequence)
    except NotFoundError:
        raise LookupError(f"{s.K8S_STREAM} has no record at sequence {sequence}") from None
    headers = {k: v for k, v in (raw.headers or {}).items() if not k.startswith("Nats-")}
    headers[MSG_ID] = f"retry:{sequence}:{time.time_ns()}"
    headers[RETRY_OF] = str(sequence)
    ack = await js.publish(raw.subject or "", raw.data or b"", headers=headers)
    return int(ack.seq)
