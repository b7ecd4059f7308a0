"""The CRD schemas' defaults and checks, as the API server applies them (reference section 6.4).

In a cluster the API server first fills the CRD defaults (`queue: default`,
`maxRetry: 3`, `minPartitions: 0`, networkTopology `mode: hard`, and the pod
template's, e.g. a port's `protocol: TCP`), then calls the mutating webhooks,
then checks the schema and only then the validating webhooks. `vcbus validate`
runs the same sequence offline, so a task named `Worker` or a container without
a name is refused here as it would be by the cluster.

The schemas are not written here: they are `crd_schemas.json`, generated with
deploy/crds/*.yaml by scripts/gen-crds.py from deploy/crds/src/ (Volcano's
fields) and the pinned Kubernetes version's OpenAPI (the pod template, the PVC
spec), so the cluster and `vcbus validate` read one source. `structural`
applies them.

Messages follow apiextensions-apiserver: `<path>: Invalid value: <v>: <path>
in body should be greater than or equal to <n>`, `... should match '<re>'`,
`Unsupported value: ...`, `Too long: may not be more than <n> bytes`,
`Required value`; the whole answer is `Job.batch.volcano.sh "<name>" is
invalid: <errors>`.

Before the schema the API server checks the object's metadata: a custom
resource's name must be a DNS-1123 subdomain (`Bad_Name` and `Foo-Bar` are
refused with `metadata.name: Invalid value: ...: a lowercase RFC 1123 subdomain
...`), and those errors come first in the answer (apiextensions-apiserver's
`customResourceValidator.Validate`). Volcano's own webhook only asks for a
qualified name, which allows both, so without this check `vcbus validate`
would accept a job the cluster refuses. The annotations' total size (256 KiB,
`statemachines.admission.limits`) is checked with the name.
"""

from __future__ import annotations

import copy
import json
from importlib import resources
from typing import Any

from statemachines.admission import structural
from statemachines.admission.fields import FieldError, invalid, is_dns1123_subdomain
from statemachines.admission.limits import annotation_errors

CRD_SCHEMAS: dict[str, dict[str, Any]] = json.loads(
    resources.files("statemachines.admission").joinpath("crd_schemas.json").read_text(encoding="utf-8")
)["crds"]
"""CRD name (`jobs.batch.volcano.sh`, ...) -> its generated openAPIV3Schema (no descriptions)."""
JOB_SCHEMA = CRD_SCHEMAS["jobs.batch.volcano.sh"]
QUEUE_SCHEMA = CRD_SCHEMAS["queues.scheduling.volcano.sh"]
CRONJOB_SCHEMA = CRD_SCHEMAS["cronjobs.batch.volcano.sh"]
JOBFLOW_SCHEMA = CRD_SCHEMAS["jobflows.flow.volcano.sh"]


QUEUE_KIND = "Queue.scheduling.volcano.sh"  # Queues are custom resources too: same name rule
CRONJOB_KIND = "CronJob.batch.volcano.sh"
JOBFLOW_KIND = "JobFlow.flow.volcano.sh"


def name_errors(obj: dict[str, Any]) -> list[FieldError]:
    """The API server's check of a custom resource's `metadata.name`: a DNS-1123 subdomain.

    An absent name is left alone (`generateName`, or the caller reports it).
    """
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    if not isinstance(name, str) or not name:
        return []
    return [invalid("metadata.name", name, reason) for reason in is_dns1123_subdomain(name)]


def meta_errors(obj: dict[str, Any], *, create: bool = True) -> list[FieldError]:
    """The API server's checks of a custom resource's metadata: the name (on create), then the annotations' size."""
    return (name_errors(obj) if create else []) + annotation_errors(obj)


def schema_errors(job: dict[str, Any]) -> list[FieldError]:
    """The API server's refusals of `job` (after defaulting and mutation): its name, then the CRD schema."""
    errs: list[FieldError] = meta_errors(job)
    body = {k: v for k, v in job.items() if k != "metadata"}
    return errs + structural.errors(body, JOB_SCHEMA, "")


def schema_message(job: dict[str, Any], errors: list[FieldError], kind: str = "Job.batch.volcano.sh") -> str:
    """The API server's answer: `Job.batch.volcano.sh "<name>" is invalid: ...` (`kind`: another resource)."""
    meta = job.get("metadata")
    name = meta.get("name", "") if isinstance(meta, dict) else ""
    texts = [str(e) for e in errors]
    body = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
    return f'{kind} "{name}" is invalid: {body}'


def crd_defaults(job: dict[str, Any]) -> dict[str, Any]:
    """A copy of `job` with the CRD's structural defaults filled (before any webhook runs)."""
    result = copy.deepcopy(job)
    result.setdefault("spec", {})
    return structural.apply_defaults(result, JOB_SCHEMA)


def queue_schema_errors(queue: dict[str, Any]) -> list[FieldError]:
    """The Queue CRD schema's refusals of `queue` (after defaulting and mutation; its name is `name_errors`)."""
    return structural.errors({k: v for k, v in queue.items() if k != "metadata"}, QUEUE_SCHEMA, "")


def crd_queue_defaults(queue: dict[str, Any]) -> dict[str, Any]:
    """A copy of `queue` with the Queue CRD's defaults filled (`weight: 1`, `dequeueStrategy: traverse`)."""
    return structural.apply_defaults(copy.deepcopy(queue), QUEUE_SCHEMA)
