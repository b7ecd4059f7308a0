"""Full manifests for the engine's CreatePod and CreatePodGroup commands.

Replaying a log needs only the decisions; the cluster side needs the objects.
An `Engine(render_pod=r.pod, render_podgroup=r.podgroup)` with a `Renderer`
fills every CreatePod with the pod the controller would create (§6.2 plus the
plugins' OnPodCreate, `statemachines.manifests.pod.build_pod`) and every CreatePodGroup
with its PodGroup (`statemachines.manifests.podgroup.build_podgroup`). The job manifest
comes from the raw watch record the engine kept; it is decoded once per record.
Pure: the same record and status give the same manifest.

When the job's queue has `extendClusters` (`job_forwarding`), the job is seen
as Volcano's syncJob leaves it: annotated `volcano.sh/job-forwarding: "true"`
(so its PodGroup, which copies the job's annotations, carries it too), and its
pods get that key as a label and an annotation (`createJobPod`).
"""

from __future__ import annotations

from typing import Any

import msgspec

from statemachines.manifests.pod import build_pod, mark_forwarding
from statemachines.manifests.podgroup import build_podgroup
from statemachines.model.status import JobStatus

_record = msgspec.json.Decoder()


class Renderer:
    def __init__(self) -> None:
        self._raw: bytes | None = None
        self._job: dict[str, Any] | None = None

    def job(self, raw: bytes) -> dict[str, Any]:
        if raw is not self._raw:
            value = _record.decode(raw)
            self._job = value["object"] if isinstance(value, dict) and "object" in value else value
            self._raw = raw
        assert self._job is not None
        return self._job

    def pod(self, raw: bytes, task: str, index: int, status: JobStatus, *, job_forwarding: bool = False) -> dict[str, Any]:
        job = dict(self.job(raw))
        job["status"] = msgspec.to_builtins(status)
        if job_forwarding:
            job = mark_forwarding(job)
        return build_pod(
            job, task, index, version=status.version, retry_count=status.retry_count, job_forwarding=job_forwarding
        )

    def podgroup(self, raw: bytes, *, job_forwarding: bool = False) -> dict[str, Any]:
        job = self.job(raw)
        return build_podgroup(mark_forwarding(job) if job_forwarding else job)
