"""Putting watch records into VCBUS_K8S: one message per record, deduplicated, pipelined.

A record's body is the watch record itself as one line of compact JSON,
`{"type": ..., "object": {...}, "time"?: ...}`, with `metadata.managedFields`
removed (server-side-apply bookkeeping: large and never read). So the stream,
exported line by line, is a log `vcbus replay` reads as it is.

Subject `vcbus.k8s.<kind>.<namespace>.<name>` and headers:

    Nats-Msg-Id              <uid>:<resourceVersion>:<type>  (a re-listed or re-published
                             record is stored once); sha256 of the body if uid or
                             resourceVersion is missing
    Vcbus-Kind, Vcbus-Namespace, Vcbus-Name, Vcbus-Resource-Version, Vcbus-Type
    Vcbus-Job                <namespace>/<name> of the vcjob the record belongs to (pods,
                             podgroups, commands), absent for queues

Nodes (`v1`) and PriorityClasses (`scheduling.k8s.io/v1`) are published too
(`vcbus.k8s.node._.<name>`, `vcbus.k8s.priorityclass._.<name>`): the job
controller ignores them (statemachines.records decodes them as Ignored), the
scheduler folds them. Other records (bookmarks, other kinds) are not published.
A `TIMER` record (a delayed action firing, appended by the decider) goes to
`vcbus.k8s.timer.<namespace>.<name>` with msg id `timer:<id>`.

`Publisher` keeps up to `window` publishes in flight and checks every
acknowledgement; `publish_log` validates a whole file before publishing any of
it, so bad input publishes nothing.
"""

from __future__ import annotations

import asyncio
import hashlib
import shutil
import sys
import tempfile
from typing import Any, BinaryIO, NamedTuple

import msgspec
from nats.js import JetStreamContext
from nats.js.api import PubAck

from statemachines.cache import pod_identity
from statemachines.objects import Command, Job, Pod, PodGroup
from statemachines.records import WATCH_TYPES, Decoded, Ignored, Observed, TimerRecord
from statemachines.timers import Timer
from vcbus.bus import subjects as s
from vcbus.bus.cloudevents import MSG_ID
from vcbus.bus.errors import BusError
from vcbus.watchlog import decode_record, read_records

_generic = msgspec.json.Decoder()
_encode = msgspec.json.Encoder().encode


class Prepared(NamedTuple):
    subject: str
    body: bytes
    headers: dict[str, str]


def owner_job(obj: Any) -> str | None:
    """The `<namespace>/<name>` of the vcjob a watched object belongs to, if any."""
    meta = obj.metadata
    if isinstance(obj, Job):
        return f"{meta.namespace}/{meta.name}"
    if isinstance(obj, Pod):
        ident = pod_identity(obj)
        name = ident.job_name if ident is not None else (meta.labels or {}).get("volcano.sh/job-name")
        return f"{meta.namespace}/{name}" if name else None
    if isinstance(obj, PodGroup):
        for ref in meta.owner_references or ():
            if ref.kind == "Job":
                return f"{meta.namespace}/{ref.name}"
        return None
    if isinstance(obj, Command):
        return f"{meta.namespace}/{obj.target.name}" if obj.target is not None and obj.target.name else None
    return None


def compact_body(data: bytes) -> bytes:
    """The record as one line of compact JSON, without `metadata.managedFields`."""
    stripped = data.strip()
    if b"\n" not in stripped and b'"managedFields"' not in stripped:
        return stripped
    value = _generic.decode(stripped)
    meta = (value.get("object") or {}).get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    return _encode(value)


# Cluster-scoped kinds only the scheduler reads, with the apiVersion it reads.
SCHEDULER_KINDS = {"Node": "v1", "PriorityClass": "scheduling.k8s.io/v1"}


def prepare(data: bytes, decoded: Decoded) -> Prepared | None:
    """The message for one decoded record; None for records vcbus does not read."""
    if isinstance(decoded, TimerRecord):
        t = decoded.timer
        return Prepared(s.timer_subject(t.job), compact_body(data), _timer_headers(t.job, t.id))
    if isinstance(decoded, Ignored):
        return _scheduler_record(data, decoded)
    if not isinstance(decoded, Observed):
        return None
    obj = decoded.object
    meta = obj.metadata
    return _watch_message(
        compact_body(data), type(obj).__name__, decoded.type, meta.namespace, meta.name, meta.uid,
        meta.resource_version, owner_job(obj),
    )


def _scheduler_record(data: bytes, decoded: Ignored) -> Prepared | None:
    """A Node or PriorityClass watch record (decoded as Ignored by the job controller)."""
    if decoded.kind not in SCHEDULER_KINDS:
        return None
    value = _generic.decode(data)  # decode() has parsed it already: valid JSON
    if not isinstance(value, dict) or value.get("type") not in WATCH_TYPES:
        return None
    obj = value.get("object")
    if not isinstance(obj, dict):
        return None
    kind = obj.get("kind")
    if obj.get("apiVersion", SCHEDULER_KINDS[kind]) != SCHEDULER_KINDS[kind]:
        return None
    meta = obj.get("metadata")
    if not isinstance(meta, dict) or not meta.get("name") or not isinstance(meta["name"], str):
        return None
    return _watch_message(
        compact_body(data), kind, value["type"], "", meta["name"], str(meta.get("uid") or ""),
        str(meta.get("resourceVersion") or ""), None,
    )


def _watch_message(
    body: bytes, kind: str, rtype: str, namespace: str, name: str, uid: str, resource_version: str, job: str | None
) -> Prepared:
    if uid and resource_version:
        msg_id = f"{uid}:{resource_version}:{rtype}"
    else:
        msg_id = "sha256:" + hashlib.sha256(body).hexdigest()
    headers = {
        MSG_ID: msg_id,
        "Vcbus-Kind": kind,
        "Vcbus-Namespace": namespace,
        "Vcbus-Name": name,
        "Vcbus-Resource-Version": resource_version,
        "Vcbus-Type": rtype,
    }
    if job:
        headers["Vcbus-Job"] = job
    return Prepared(s.k8s_subject(kind, namespace, name), body, headers)


def _timer_headers(job: str, timer_id: str) -> dict[str, str]:
    ns, name = s.split_job(job)
    return {
        MSG_ID: f"timer:{timer_id}",
        "Vcbus-Kind": "Timer",
        "Vcbus-Namespace": ns,
        "Vcbus-Name": name,
        "Vcbus-Type": "TIMER",
        "Vcbus-Job": job,
    }


def timer_message(timer: Timer) -> Prepared:
    """The TIMER record that fires `timer`: its time is the due time, so replay is exact."""
    body = _encode({"type": "TIMER", "time": timer.due, "timer": {"job": timer.job, "id": timer.id, "due": timer.due}})
    return Prepared(s.timer_subject(timer.job), body, _timer_headers(timer.job, timer.id))


class Publisher:
    """JetStream publishing with up to `window` acknowledgements outstanding, every one checked."""

    def __init__(self, js: JetStreamContext, *, window: int = 256, timeout: float = 10.0) -> None:
        self.js = js
        self.window = window
        self.timeout = timeout
        self.pending: list[tuple[str, asyncio.Future[PubAck]]] = []
        self.published = 0
        self.duplicates = 0
        self.first_seq = 0
        self.last_seq = 0

    async def publish(self, msg: Prepared) -> None:
        fut = await self.js.publish_async(msg.subject, msg.body, headers=dict(msg.headers))
        self.pending.append((msg.subject, fut))
        if len(self.pending) >= self.window:
            await self.flush()

    async def flush(self) -> None:
        pending, self.pending = self.pending, []
        if not pending:
            return
        try:
            acks = await asyncio.wait_for(asyncio.gather(*(f for _, f in pending)), self.timeout)
        except asyncio.TimeoutError:
            raise BusError(f"no acknowledgement from JetStream within {self.timeout:g}s") from None
        except Exception as err:
            subject = next((subj for subj, f in pending if f.done() and f.exception() is not None), "?")
            raise BusError(f"publishing to {subject} failed: {err or type(err).__name__}") from err
        for ack in acks:
            if ack.duplicate:
                self.duplicates += 1
            else:
                self.published += 1
                if not self.first_seq:
                    self.first_seq = ack.seq
                self.last_seq = max(self.last_seq, ack.seq)


class LogCheck(msgspec.Struct):
    records: int = 0
    publishable: int = 0
    ignored: int = 0


def check_log(stream: BinaryIO, source: str) -> LogCheck:
    """Decode every record, raising `InvalidRecord` (file, line, record, byte) at the first bad one."""
    counts = LogCheck()
    for rec in read_records(stream):
        decoded = decode_record(source, rec)
        counts.records += 1
        if prepare(rec.data, decoded) is not None:
            counts.publishable += 1
        else:
            counts.ignored += 1
    return counts


async def publish_records(js: JetStreamContext, stream: BinaryIO, source: str, *, timeout: float = 10.0) -> Publisher:
    """Publish every record vcbus reads; the input should have been checked already."""
    pub = Publisher(js, timeout=timeout)
    for rec in read_records(stream):
        msg = prepare(rec.data, decode_record(source, rec))
        if msg is not None:
            await pub.publish(msg)
    await pub.flush()
    return pub


def spooled_input(stream: BinaryIO) -> BinaryIO:
    """A seekable copy of a non-seekable input (stdin), so it can be read twice."""
    if stream is not sys.stdin.buffer and stream.seekable():
        return stream
    spool = tempfile.SpooledTemporaryFile(max_size=64 * 1024 * 1024)  # noqa: SIM115 - closed by the caller
    shutil.copyfileobj(stream, spool)
    spool.seek(0)
    return spool  # type: ignore[return-value]
