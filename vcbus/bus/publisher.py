"""Putting watch records into VCBUS_K8S: one message per record, deduplicated, pipelined.

A record's body is the watch record itself as one line of compact JSON,
`{"type": ..., "object": {...}, "time"?: ...}`, with each `metadata.managedFields`
entry reduced to who wrote and when (vcbus.writetimes: the field sets are large and never
read; the times are a replay's clock where a record has no `time`). So the stream,
exported line by line, is a log `vcbus replay` reads as it is.

Subject `vcbus.k8s.<kind>.<namespace>.<name>` and headers:

    Nats-Msg-Id              <uid>:<resourceVersion>:<type>  (a re-listed or re-published
                             record is stored once); sha256 of the body if uid or
                             resourceVersion is missing
    Vcbus-Kind, Vcbus-Namespace, Vcbus-Name, Vcbus-Resource-Version, Vcbus-Type
    Vcbus-Job                <namespace>/<name> of the vcjob the record belongs to (pods,
                             podgroups, commands), absent for queues

Header values carry `%` and control characters as `%XX` (`subjects.header_value`):
no valid Kubernetes name has one, and a CR or LF would break the header block.

Nodes (`v1`), PriorityClasses (`scheduling.k8s.io/v1`), Namespaces, PersistentVolumes (`v1`),
StorageClasses, CSINodes, VolumeAttachments (`storage.k8s.io/v1`), and the namespaced PersistentVolumeClaims, Services and
ReplicationControllers (`v1`) are published too (`vcbus.k8s.node._.<name>`, ...,
`vcbus.k8s.persistentvolumeclaim.<namespace>.<name>`, `vcbus.k8s.service.<namespace>.<name>`): the job
controller ignores them (statemachines.model.records decodes them as Ignored), the
scheduler folds them. BOOKMARK and ERROR records, about the watch itself (a recording's initial list
ends at a bookmark, an ERROR is a gap), go to `vcbus.k8s.bookmark._.<resourceVersion or _>` and
`vcbus.k8s.error._._`, so the stream holds what the file holds, record for record (a replay of either
numbers its rows alike). Records of other kinds are not published.
A `TIMER` record (a delayed action firing, appended by the decider) goes to
`vcbus.k8s.timer.<namespace>.<name>` with msg id `timer:<id>`. A `REFUSED` record (a command the
API server refused for good, appended by the actuator) goes to `vcbus.k8s.refusal.<namespace>.<name>`
with msg id `refused:<the command's msg id>` (a redelivered command refused again is stored once).

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
from typing import Any, BinaryIO, Callable, NamedTuple

import msgspec
from nats.js import JetStreamContext
from nats.js.api import PubAck

from statemachines.cache import pod_identity
from statemachines.model.objects import Command, Job, Pod, PodGroup, is_vcjob_ref
from statemachines.model.cronjob import CronJobRecord
from statemachines.model.jobflow import FlowRecord
from statemachines.model.records import REFUSED, WATCH_TYPES, Decoded, Ignored, Observed, RefusalRecord, TimerRecord
from statemachines.timers.rules import Timer
from vcbus.bus import subjects as s
from vcbus.bus.cloudevents import MSG_ID
from vcbus.bus.errors import BusError
from vcbus.bus.partitions import partitions as partition_count
from vcbus.bus.partitions import route
from vcbus.watchlog import decoded_records
from vcbus.writetimes import kept_writes

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
    if isinstance(obj, PodGroup):  # a batch/v1 Job's (kind Job too) is no vcjob's: shared, as any workload's
        for ref in meta.owner_references or ():
            if is_vcjob_ref(ref):
                return f"{meta.namespace}/{ref.name}"
        return None
    if isinstance(obj, Command):
        return f"{meta.namespace}/{obj.target.name}" if obj.target is not None and obj.target.name else None
    return None


def compact_body(data: bytes) -> bytes:
    """The record as one line of compact JSON, `metadata.managedFields` reduced to who wrote and when
    (vcbus.writetimes: a replay's clock reads those times, so the bus's copy replays as the file)."""
    stripped = data.strip()
    if b"\n" not in stripped and b'"managedFields"' not in stripped:
        return stripped
    value = _generic.decode(stripped)
    meta = (value.get("object") or {}).get("metadata")
    if isinstance(meta, dict) and "managedFields" in meta:
        kept = kept_writes(meta.pop("managedFields"))
        if kept is not None:
            meta["managedFields"] = kept
    return _encode(value)


# Kinds only the scheduler reads, with the apiVersion it reads, and those of them that are namespaced.
SCHEDULER_KINDS = {"Node": "v1", "PriorityClass": "scheduling.k8s.io/v1", "Namespace": "v1",
                   "PersistentVolumeClaim": "v1", "PersistentVolume": "v1", "StorageClass": "storage.k8s.io/v1",
                   "CSINode": "storage.k8s.io/v1", "VolumeAttachment": "storage.k8s.io/v1",
                   "Service": "v1", "ReplicationController": "v1"}
NAMESPACED_SCHEDULER_KINDS = frozenset({"PersistentVolumeClaim", "Service", "ReplicationController"})


def prepare(data: bytes, decoded: Decoded) -> Prepared | None:
    """The message for one decoded record; None for records vcbus does not read."""
    if isinstance(decoded, TimerRecord):
        t = decoded.timer
        return Prepared(s.timer_subject(t.job), compact_body(data), _timer_headers(t.job, t.id))
    if isinstance(decoded, RefusalRecord):
        body = compact_body(data)
        return Prepared(s.refusal_subject(decoded.refusal.job), body,
                        _refusal_headers(decoded.refusal.job, "sha256:" + hashlib.sha256(body).hexdigest()))
    if isinstance(decoded, Ignored):
        if decoded.kind in LOG_MARKS:
            return _log_mark(data, decoded.kind)
        return _scheduler_record(data, decoded)
    if isinstance(decoded, CronJobRecord):  # vcbus.k8s.cronjob.<ns>.<name>, with its zones; of no vcjob
        meta = decoded.object.metadata
        return _watch_message(compact_body(data), "CronJob", decoded.type, meta.namespace, meta.name, meta.uid,
                              meta.resource_version, None)
    if isinstance(decoded, FlowRecord):  # vcbus.k8s.jobflow.<ns>.<name>, vcbus.k8s.jobtemplate.<ns>.<name>; of no vcjob
        obj = decoded.object
        meta = obj.metadata
        return _watch_message(compact_body(data), type(obj).__name__, decoded.type, meta.namespace, meta.name,
                              meta.uid, meta.resource_version, None)
    if not isinstance(decoded, Observed):
        return None
    obj = decoded.object
    meta = obj.metadata
    return _watch_message(
        compact_body(data), type(obj).__name__, decoded.type, meta.namespace, meta.name, meta.uid,
        meta.resource_version, owner_job(obj),
    )


# Records about the watch itself, stored so that the bus's log is the file's, record for record: a
# recording's initial-list marks (vcbus.logmarks), a watch ERROR (a gap). Subject kind: the type in lower case.
LOG_MARKS = {"BOOKMARK": "Bookmark", "ERROR": "Error"}


def _log_mark(data: bytes, rtype: str) -> Prepared:
    """A BOOKMARK or ERROR record: `vcbus.k8s.bookmark._.<resourceVersion>` (`_` when it has none),
    `vcbus.k8s.error._._`; its id the SHA-256 of its body, so a re-published log stores it once."""
    body = compact_body(data)
    value = _generic.decode(body)  # decode() has parsed it already: valid JSON
    obj = value.get("object") if isinstance(value, dict) else None
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    rv = meta.get("resourceVersion") if isinstance(meta, dict) and rtype == "BOOKMARK" else None
    rv = rv if isinstance(rv, str) and rv else ""
    return _watch_message(body, LOG_MARKS[rtype], rtype, "", rv or s.CLUSTER_SCOPE, "", rv, None)


def _scheduler_record(data: bytes, decoded: Ignored) -> Prepared | None:
    """A Node, PriorityClass, Namespace, PVC, PV, StorageClass, Service or ReplicationController watch
    record (decoded as Ignored by the job controller)."""
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
    namespace = meta.get("namespace") if kind in NAMESPACED_SCHEDULER_KINDS else ""
    return _watch_message(
        compact_body(data), kind, value["type"], namespace if isinstance(namespace, str) else "", meta["name"],
        str(meta.get("uid") or ""), str(meta.get("resourceVersion") or ""), None,
    )


def _watch_message(
    body: bytes, kind: str, rtype: str, namespace: str, name: str, uid: str, resource_version: str, job: str | None
) -> Prepared:
    if uid and resource_version:
        msg_id = f"{uid}:{resource_version}:{rtype}"
    else:
        msg_id = "sha256:" + hashlib.sha256(body).hexdigest()
    hv = s.header_value  # a name with CR, LF or NUL must not break the header block
    headers = {
        MSG_ID: hv(msg_id),
        "Vcbus-Kind": hv(kind),
        "Vcbus-Namespace": hv(namespace),
        "Vcbus-Name": hv(name),
        "Vcbus-Resource-Version": hv(resource_version),
        "Vcbus-Type": hv(rtype),
    }
    if job:
        headers["Vcbus-Job"] = hv(job)
    return Prepared(s.k8s_subject(kind, namespace, name), body, headers)


def _timer_headers(job: str, timer_id: str) -> dict[str, str]:
    ns, name = s.split_job(job)
    hv = s.header_value
    return {
        MSG_ID: hv(f"timer:{timer_id}"),
        "Vcbus-Kind": "Timer",
        "Vcbus-Namespace": hv(ns),
        "Vcbus-Name": hv(name),
        "Vcbus-Type": "TIMER",
        "Vcbus-Job": hv(job),
    }


def timer_message(timer: Timer) -> Prepared:
    """The TIMER record that fires `timer`: its time is the due time, so replay is exact."""
    body = _encode({"type": "TIMER", "time": timer.due, "timer": {"job": timer.job, "id": timer.id, "due": timer.due}})
    return Prepared(s.timer_subject(timer.job), body, _timer_headers(timer.job, timer.id))


def _refusal_headers(job: str, msg_id: str) -> dict[str, str]:
    ns, name = s.split_job(job)
    hv = s.header_value
    return {MSG_ID: hv(msg_id), "Vcbus-Kind": "Refusal", "Vcbus-Namespace": hv(ns), "Vcbus-Name": hv(name),
            "Vcbus-Type": REFUSED, "Vcbus-Job": hv(job)}


def refusal_message(refusal: dict[str, Any], time: str, command_id: str) -> Prepared:
    """The REFUSED record of a command the API server refused (`refusal`: the fields of
    `statemachines.model.records.RefusalSpec`, camelCase), observed at `time`; msg id
    `refused:<command_id>`, the command's own msg id."""
    job = refusal["job"]
    body = _encode({"type": REFUSED, "time": time, "refusal": refusal})
    return Prepared(s.refusal_subject(job), body, _refusal_headers(job, f"refused:{command_id}"))


class Publisher:
    """JetStream publishing with up to `window` acknowledgements outstanding, every one checked.

    With a `writer` (a `vcbus.bus.batching.BatchWriter` on the bus's connection), the messages
    published between two flushes are held and stored at `flush` as one atomic batch (one fsync for
    all of them under `sync_interval: always`, where message by message costs one each); a batch
    holding a message the stream has already is stored message by message, each repeat dropped."""

    def __init__(self, js: JetStreamContext, *, window: int = 256, timeout: float = 10.0, writer: Any = None) -> None:
        self.js = js
        self.window = window
        self.timeout = timeout
        self.writer = writer
        self.held: list[Prepared] = []  # with a writer: routed, not sent yet
        self.pending: list[tuple[str, asyncio.Future[PubAck]]] = []
        self.published = 0
        self.duplicates = 0
        self.first_seq = 0
        self.last_seq = 0
        self.partitions: int | None = None  # VCBUS_K8S's partition count, read on the first publish

    async def publish(self, msg: Prepared) -> None:
        if self.partitions is None:  # a partitioned VCBUS_K8S routes a job's records (vcbus.bus.partitions)
            self.partitions = await partition_count(self.js)
        subject = route(msg.subject, msg.headers.get("Vcbus-Job"), self.partitions)
        if self.writer is not None:
            self.held.append(msg if subject == msg.subject else Prepared(subject, msg.body, msg.headers))
            if len(self.held) >= self.window:
                await self.flush()
            return
        fut = await self.js.publish_async(subject, msg.body, headers=dict(msg.headers))
        self.pending.append((msg.subject, fut))
        if len(self.pending) >= self.window:
            await self.flush()

    async def flush(self) -> None:
        if self.writer is not None:
            await self._store_held()
            return
        pending, self.pending = self.pending, []
        if not pending:
            return
        try:
            acks = await asyncio.wait_for(asyncio.gather(*(f for _, f in pending)), self.timeout)
        except asyncio.TimeoutError:
            self._count_done(pending)
            raise BusError(f"no acknowledgement from JetStream within {self.timeout:g}s") from None
        except Exception as err:
            self._count_done(pending)
            subject = next((subj for subj, f in pending if f.done() and f.exception() is not None), "?")
            raise BusError(f"publishing to {subject} failed: {str(err) or type(err).__name__}") from err
        self._count(acks)

    async def _store_held(self) -> None:
        held, self.held = self.held, []
        if not held:
            return
        try:
            results = [await sent.wait(self.timeout) for sent in await self.writer.send(held)]
        except TimeoutError:
            raise BusError(f"no acknowledgement from JetStream within {self.timeout:g}s") from None
        except BusError:
            raise
        except Exception as err:
            raise BusError(f"publishing to {held[0].subject} failed: {str(err) or type(err).__name__}") from err
        for result in results:
            self.published += result.stored
            self.duplicates += result.duplicates
            if result.last_seq:
                if not self.first_seq and not result.duplicates:  # (an atomic batch's sequences are contiguous)
                    self.first_seq = result.last_seq - result.stored + 1
                self.last_seq = max(self.last_seq, result.last_seq)

    def _count_done(self, pending: list[tuple[str, asyncio.Future[PubAck]]]) -> None:
        """After a failure: count the acknowledgements that did come (in order, up to the first missing)."""
        acks = []
        for _, fut in pending:
            if not fut.done() or fut.cancelled() or fut.exception() is not None:
                break
            acks.append(fut.result())
        self._count(acks)

    def _count(self, acks: list[PubAck]) -> None:
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
    bytes: int = 0  # of the publishable messages, as the server counts them (vcbus.bus.logstore)


def message_size(msg: Prepared) -> int:
    """Bytes the server counts against its max payload: the body plus the NATS header block."""
    headers = sum(len(k) + len(v.encode()) + 4 for k, v in msg.headers.items())
    return len(msg.body) + (len(b"NATS/1.0\r\n\r\n") + headers if msg.headers else 0)


def checked_message(source: str, rec: Any, decoded: Decoded, *, max_payload: int | None = None) -> Prepared | None:
    """`prepare`, with every reason the record could not be published as an `InvalidRecord` (file, line, byte)."""
    from vcbus.watchlog import InvalidRecord

    try:
        msg = prepare(rec.data, decoded)
    except (ValueError, KeyError, TypeError) as err:  # no job key, a name no subject can hold
        raise InvalidRecord(source, rec, f"cannot be published: {err}") from None
    if msg is not None and max_payload is not None:
        size = message_size(msg)
        if size > max_payload:
            raise InvalidRecord(
                source, rec, f"{size:,} bytes, more than the server's max payload of {max_payload:,} bytes"
            )
    return msg


def check_log(
    stream: BinaryIO, source: str, *, max_payload: int | None = None, warn: Callable[[str], None] | None = None
) -> LogCheck:
    """Decode and prepare every record, raising `InvalidRecord` (file, line, record, byte) at the first bad one.

    Every form `vcbus replay` reads (`vcbus.watchlog.decoded_records`); `warn` hears what replay
    warns of while reading (snapshots, a last record cut short, which is skipped).

    Bad: undecodable, no job key where one is needed (a TIMER without `timer.job`
    as NAMESPACE/NAME), a name no subject can hold, or (with `max_payload`, the
    server's limit) a message the server would refuse as too big. Run over the
    whole input before publishing any of it: all or nothing.
    """
    counts = LogCheck()
    for rec, decoded in decoded_records(stream, source, warn=warn):
        counts.records += 1
        msg = checked_message(source, rec, decoded, max_payload=max_payload)
        if msg is not None:
            counts.publishable += 1
            counts.bytes += message_size(msg)
        else:
            counts.ignored += 1
    return counts


async def publish_records(js: JetStreamContext, stream: BinaryIO, source: str, *, timeout: float = 10.0) -> Publisher:
    """Publish every record vcbus reads; the input should have been checked already."""
    pub = Publisher(js, timeout=timeout)
    for rec, decoded in decoded_records(stream, source):
        msg = prepare(rec.data, decoded)
        if msg is not None:
            await pub.publish(msg)
    await pub.flush()
    return pub


def spooled_input(stream: BinaryIO) -> BinaryIO:
    """A seekable copy of a non-seekable input (stdin), so it can be read twice."""
    if stream is not sys.stdin.buffer and stream.seekable():
        return stream
    spool = tempfile.SpooledTemporaryFile(max_size=64 * 1024 * 1024)  # closed by the caller
    shutil.copyfileobj(stream, spool)
    spool.seek(0)
    return spool  # type: ignore[return-value]  # SpooledTemporaryFile is a binary file, but typeshed does not type it a BinaryIO
