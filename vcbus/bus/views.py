"""The projector's fold in memory: status, history and pending timers per job (`Views`).

`vcbus.bus.projector` reads VCBUS_JOBS into a `Views` and writes the values it
gives (`values`) to the KV buckets. Everything here is a function of the events
folded so far, so a refold from sequence 1 gives the same values as the live
projector (`verify`). With `evict` a deleted job leaves memory once its values
are written (its history stays in the bucket: `projections.history.DeletedJobs`).
An event that cannot be decoded or folded is poison: counted, and listed in
`failed` for the live projector to report.
"""

from __future__ import annotations

import logging
from typing import Any, NamedTuple

import msgspec

from projections.history import DEFAULT_RETENTION, DeletedJobs, HistoryView, JobHistory, merge_report
from projections.replay import job_report
from projections.status import StatusView
from statemachines import outputs as o
from vcbus.bus import poison
from vcbus.bus import subjects as s

log = logging.getLogger("vcbus.projector")

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
    """Status, history and pending timers per job, and the last folded VCBUS_JOBS sequence.

    With `evict` (the live projector) a deleted job leaves memory once its
    values are written: its history lives in the bucket only (`DeletedJobs`),
    until `retention` seconds of record time after its deletion. Without it
    (`rebuild`, `verify`) every job stays in memory; both write the same values.
    """

    def __init__(self, *, retention: float | None = DEFAULT_RETENTION, evict: bool = False) -> None:
        self.deleted_jobs = DeletedJobs(retention)
        self.evict = evict
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
        self.deleted_jobs.note(event)
        self.statuses.apply(event, position=seq)
        self.history.apply(event, position=seq)
        if isinstance(event, o.TimerScheduled):
            self.timers.setdefault(event.job, {})[event.timer] = (seq, event)
        elif isinstance(event, (o.TimerCancelled, o.TimerFired)):
            self.timers.get(event.job, {}).pop(event.timer, None)
        if isinstance(event, (o.RecordPoisoned, o.RecordRetried)):
            return event.job  # the job's Poisoned condition (projections/status.py)
        if event.job in self.deleted_jobs.returned:
            return event.job  # a job forgotten after its deletion gets events again
        if event.job not in self.history.jobs and event.job not in self.statuses.statuses:
            return None  # e.g. the scheduler's events about a PodGroup no vcjob owns: no key
        return event.job

    def pending_timers(self, job: str) -> list[PendingTimer]:
        entries = sorted(self.timers.get(job, {}).values(), key=lambda e: (e[1].due, e[0]))
        return [PendingTimer(t.timer, t.action, t.due, t.pod, t.policy) for _, t in entries]

    def values(self, job: str) -> dict[str, bytes | None]:
        """The value of `job`'s key in each bucket (None: no key)."""
        h = self.history.jobs.get(job)
        base = self.deleted_jobs.bases.get(job)
        if h is None and base is not None:
            h = JobHistory(job)
        status = self.statuses.status(job)
        deleted = job in self.statuses.deleted or job in self.deleted_jobs.deleted
        out: dict[str, bytes | None] = {s.STATUS_BUCKET: None if status is None or deleted else _encode(status)}
        if h is None or (h.observed is None and not h.actions and base is None):
            out[s.HISTORY_BUCKET] = None
        else:
            report = job_report(h, status, pending_timers=self.pending_timers(job), deleted=deleted,
                                tasks=self.statuses.task_phases(job), task_pods=self.statuses.task_pods(job))
            del report["commands"]  # VCBUS_CMDS, not VCBUS_JOBS: never folded here
            report = merge_report(base, report, observed_since=job in self.deleted_jobs.observed_since)
            out[s.HISTORY_BUCKET] = _fit(report)
        return out

    def forget(self, job: str) -> None:
        """Drop everything `job` holds in memory (its values are in the buckets)."""
        self.history.forget(job)
        self.statuses.statuses.pop(job, None)
        self.statuses.deleted.discard(job)
        self.statuses.tasks.pop(job, None)
        self.statuses.pods.pop(job, None)
        self.statuses.poisoned.pop(job, None)
        self.timers.pop(job, None)

    def evict_deleted(self) -> None:
        """Forget the deleted jobs still in memory (call once their values are written)."""
        if not self.evict:
            return
        for job in [j for j in self.deleted_jobs.deleted if j not in self.deleted_jobs.evicted]:
            if self.deleted_jobs.forget(job):
                self.forget(job)

    def jobs(self) -> list[str]:
        return sorted(set(self.history.jobs) | set(self.statuses.statuses) | set(self.statuses.poisoned))

    def buckets(self) -> dict[str, dict[str, bytes]]:
        """Every bucket's content as `rebuild` writes it (deleted jobs past their retention left out)."""
        out: dict[str, dict[str, bytes]] = {b: {} for b in BUCKETS}
        expired = set(self.deleted_jobs.expired())
        for job in self.jobs():
            if job in expired:
                continue
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
