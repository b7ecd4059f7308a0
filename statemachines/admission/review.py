"""AdmissionReview v1 in, AdmissionReview v1 out: the webhook's routing, without any I/O.

`handle(path, review, queues=...)` answers one request for the paths
`/jobs/mutate`, `/jobs/validate`, `/queues/mutate`, `/queues/validate` and
`/cronjobs/validate` (Volcano's CronJob webhook, statemachines/admission/cronjobs.py: CREATE and
UPDATE, the time zones the CronJob names given by the caller as `zones`) and `/jobflows/validate`
(Volcano's JobFlow webhook, statemachines/admission/jobflows.py: the flows form a DAG).
Anything it cannot understand (unknown path, no request, a wrong resource, a
bad object) is answered `allowed: false`, so the webhook fails closed.

An admitted job whose plugin arguments Volcano would log and not use as
written (an ssh port out of range, which falls back to 22) comes back with
`warnings`, which kubectl prints as `Warning: ...`
(`statemachines.admission.plugin_warnings`).

Mutations come back as a base64 JSON Patch with `patchType: JSONPatch`; when
no operation applies, the response carries no patch (upstream sends the
literal `null`, which the API server treats the same way).

An object whose fields have the wrong types (`replicas: two`) is refused with
the CRD schema's words, which name the field and the type: Volcano's webhook
fails to decode it. Unknown and duplicated fields never reach a webhook: the
API server's strict decoding refuses them, or prunes them (field validation
Ignore/Warn) before calling it (`statemachines.admission.decoding`).

A vcjob or Queue CREATE whose name is not a DNS-1123 subdomain is refused with
the API server's message: in a cluster the API server refuses it before any webhook,
and a caller of this webhook alone must not get an `allowed` for it.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from statemachines.admission.bounds import DEFAULT_MAX_PODS, object_problems
from statemachines.admission.cronjobs import validate_cronjob
from statemachines.admission.decoding import type_errors
from statemachines.admission.jobflows import validate_jobflow
from statemachines.admission.mutate import DEFAULT_SCHEDULER, job_patch
from statemachines.admission.plugin_warnings import plugin_warnings
from statemachines.admission.queues import QueueIndex, queue_patch, validate_queue
from statemachines.admission.schema import (
    CRONJOB_KIND,
    CRONJOB_SCHEMA,
    JOB_SCHEMA,
    JOBFLOW_KIND,
    JOBFLOW_SCHEMA,
    QUEUE_KIND,
    QUEUE_SCHEMA,
    meta_errors,
    schema_message,
)
from statemachines.admission.validate import validate_create, validate_update
from statemachines.model.zone import Zone

JOBS = ("batch.volcano.sh", "v1alpha1", "jobs")
QUEUES = ("scheduling.volcano.sh", "v1beta1", "queues")
CRONJOBS = ("batch.volcano.sh", "v1alpha1", "cronjobs")
JOBFLOWS = ("flow.volcano.sh", "v1alpha1", "jobflows")
PATHS = ("/jobs/mutate", "/jobs/validate", "/queues/mutate", "/queues/validate", "/cronjobs/validate",
         "/jobflows/validate")


@dataclass(frozen=True)
class Settings:
    """Webhook options (the upstream flag in brackets)."""

    scheduler_name: str = DEFAULT_SCHEDULER  # [--scheduler-name] job mutate default
    pod_level_resources: bool = True  # Kubernetes feature gate PodLevelResources (beta, on since 1.34)
    max_queue_depth: int = 5  # [--max-queue-depth]
    root_queue_protection: bool = True  # [--enable-root-queue-protection]
    queue_allocated_pods_check: bool = False  # [--enable-queue-allocated-pods-check]
    max_pods_per_job: int = DEFAULT_MAX_PODS  # vcbus bound [--max-pods-per-job]


def _gvr_text(gvr: tuple[str, str, str]) -> str:
    return f"{gvr[0]}/{gvr[1]}, Resource={gvr[2]}"


def _response(uid: str, *, allowed: bool, message: str = "", patch: list[dict[str, Any]] | None = None,
              warnings: list[str] | None = None) -> dict[str, Any]:
    response: dict[str, Any] = {"uid": uid, "allowed": allowed}
    if not allowed:
        response["status"] = {"metadata": {}, "message": message}
    if warnings:
        response["warnings"] = warnings
    if patch:
        response["patch"] = base64.b64encode(json.dumps(patch, separators=(",", ":")).encode()).decode()
        response["patchType"] = "JSONPatch"
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}


def _object(request: dict[str, Any], key: str, gvr: tuple[str, str, str]) -> dict[str, Any]:
    resource = request.get("resource") or {}
    if (resource.get("group", ""), resource.get("version", ""), resource.get("resource", "")) != gvr:
        raise ValueError(f"expect resource to be {_gvr_text(gvr)}")
    obj = request.get(key)
    if not isinstance(obj, dict):
        raise ValueError(f"the request has no {key}")
    broken = object_problems(obj)
    if broken:
        raise ValueError("; ".join(message for _, message in broken))
    schema, kind = {JOBS: (JOB_SCHEMA, "Job.batch.volcano.sh"), CRONJOBS: (CRONJOB_SCHEMA, CRONJOB_KIND),
                    JOBFLOWS: (JOBFLOW_SCHEMA, JOBFLOW_KIND)}.get(gvr, (QUEUE_SCHEMA, QUEUE_KIND))
    mistyped = type_errors(obj, schema)  # what Volcano's typed decoding refuses, named by field and type
    if mistyped:
        raise ValueError(schema_message(obj, mistyped, kind))
    return obj


def handle(path: str, review: Any, *, queues: QueueIndex, settings: Settings | None = None,
           zones: Mapping[str, Zone] | None = None) -> dict[str, Any]:
    """Answer one AdmissionReview for `path`; never raises for bad input. `zones`: the time zones a
    CronJob names, as data (the adapter reads them: vcbus/cronjobs/zonedata.py)."""
    settings = settings or Settings()
    request = review.get("request") if isinstance(review, dict) else None
    if not isinstance(request, dict):
        return _response("", allowed=False, message="the AdmissionReview has no request")
    uid = str(request.get("uid", ""))
    operation = str(request.get("operation", ""))
    try:
        if path == "/jobs/mutate":
            job = _object(request, "object", JOBS)
            if operation != "CREATE":
                return _response(uid, allowed=False, message="expect operation to be 'CREATE' ")
            return _response(uid, allowed=True, patch=job_patch(job, scheduler_name=settings.scheduler_name))
        if path == "/jobs/validate":
            job = _object(request, "object", JOBS)
            if operation == "CREATE":
                refused = meta_errors(job)  # the API server's own check, which it runs before any webhook
                if refused:
                    return _response(uid, allowed=False, message=schema_message(job, refused))
                verdict = validate_create(
                    job, queues=queues, pod_level_resources=settings.pod_level_resources, max_pods=settings.max_pods_per_job
                )
            elif operation == "UPDATE":
                verdict = validate_update(_object(request, "oldObject", JOBS), job, max_pods=settings.max_pods_per_job)
            else:
                return _response(uid, allowed=False, message="expect operation to be 'CREATE' or 'UPDATE'")
            warnings = [text for _, text in plugin_warnings(job)] if verdict.allowed else []
            return _response(uid, allowed=verdict.allowed, message=verdict.message, warnings=warnings)
        if path == "/cronjobs/validate":  # Volcano's AdmitCronjobs: decoded first, then the operation
            cronjob = _object(request, "object", CRONJOBS)
            if operation not in ("CREATE", "UPDATE"):
                return _response(uid, allowed=False, message="expect operation to be 'CREATE' or 'UPDATE'")
            message = validate_cronjob(cronjob, zones or {})
            return _response(uid, allowed=not message, message=message.strip())
        if path == "/jobflows/validate":  # Volcano's AdmitJobFlows: decoded first, then the operation
            jobflow = _object(request, "object", JOBFLOWS)
            if operation not in ("CREATE", "UPDATE"):
                return _response(uid, allowed=False, message="expect operation to be 'CREATE' or 'UPDATE'")
            message = validate_jobflow(jobflow)
            return _response(uid, allowed=not message, message=message)
        if path == "/queues/mutate":
            queue = _object(request, "object", QUEUES)
            if operation != "CREATE":
                return _response(
                    uid, allowed=False, message=f"invalid operation `{operation}`, expect operation to be `CREATE`"
                )
            return _response(uid, allowed=True, patch=queue_patch(queue))
        if path == "/queues/validate":
            key = "oldObject" if operation == "DELETE" else "object"
            queue = _object(request, key, QUEUES)
            old = _object(request, "oldObject", QUEUES) if operation == "UPDATE" else None
            refused = meta_errors(queue, create=operation == "CREATE")
            if refused:
                return _response(uid, allowed=False, message=schema_message(queue, refused, QUEUE_KIND))
            if operation == "DELETE" and not (queue.get("metadata") or {}).get("name"):
                queue = {**queue, "metadata": {**(queue.get("metadata") or {}), "name": request.get("name", "")}}
            error = validate_queue(
                operation,
                queue,
                old,
                queues,
                max_depth=settings.max_queue_depth,
                root_protection=settings.root_queue_protection,
                allocated_pods_check=settings.queue_allocated_pods_check,
            )
            return _response(uid, allowed=error is None, message=error or "")
    except (ValueError, TypeError, KeyError, AttributeError) as err:
        return _response(uid, allowed=False, message=str(err))
    return _response(uid, allowed=False, message=f"no admission service for path {path}")
