"""Views of a `batch.volcano.sh/v1alpha1` CronJob and the record that carries it, decoded with msgspec.

Volcano's types: volcano-sh/apis `pkg/apis/batch/v1alpha1/job.go` (CronJobSpec, CronJobStatus,
JobTemplateSpec). The job template's spec is kept as bytes (`Raw`): it is copied, never read.
A CronJob record is a watch record with one more field, `zones`: the time zones its
schedule names, resolved by the adapter (statemachines/cronjobs/zones.py).
"""

from __future__ import annotations

from msgspec import Raw, Struct

from statemachines.model.objects import Meta
from statemachines.model.zone import Zone

API_VERSION = "batch.volcano.sh/v1alpha1"
ALLOW = "Allow"
FORBID = "Forbid"
REPLACE = "Replace"


class ObjectReference(Struct, frozen=True, rename="camel", omit_defaults=True):
    """A `status.active` entry, as client-go's `reference.GetReference` makes it for a vcjob."""

    kind: str = ""
    namespace: str = ""
    name: str = ""
    uid: str = ""
    api_version: str = ""
    resource_version: str = ""


class TemplateMeta(Struct, frozen=True, rename="camel"):
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None


class JobTemplate(Struct, frozen=True, rename="camel"):
    metadata: TemplateMeta = TemplateMeta()
    spec: Raw = Raw(b"{}")


class CronJobSpec(Struct, frozen=True, rename="camel"):
    schedule: str = ""
    time_zone: str | None = None
    starting_deadline_seconds: int | None = None
    concurrency_policy: str = ""
    suspend: bool | None = None
    job_template: JobTemplate = JobTemplate()
    successful_jobs_history_limit: int | None = None
    failed_jobs_history_limit: int | None = None


class CronJobStatus(Struct, frozen=True, rename="camel", omit_defaults=True):
    active: list[ObjectReference] | None = None
    last_schedule_time: str | None = None
    last_successful_time: str | None = None


class CronJob(Struct, frozen=True, tag_field="kind", tag="CronJob", rename="camel"):
    api_version: str = ""
    metadata: Meta = Meta()
    spec: CronJobSpec = CronJobSpec()
    status: CronJobStatus = CronJobStatus()


class CronJobRecord(Struct, frozen=True):
    """`{"type": ADDED|MODIFIED|DELETED, "object": <CronJob>, "time": ..., "zones": {name: Zone}}`."""

    type: str
    object: CronJob
    time: str | None = None
    zones: dict[str, Zone] = {}
