"""The vcjob CRD's OpenAPI constraints and defaults, as the API server applies them (reference section 6.4).

In a cluster the API server first fills the CRD defaults (`queue: default`,
`maxRetry: 3`, `minPartitions: 0`, networkTopology `mode: hard`), then calls
the mutating webhooks, then checks the schema (these rules) and only then the
validating webhooks. `vcbus validate` runs the same sequence offline, so a
task named `Worker` is refused here as it would be by the cluster.

Messages follow apiextensions-apiserver: `<path>: Invalid value: <v>: <path>
in body should be greater than or equal to <n>`, `... should match '<re>'`,
`Unsupported value: ...`, `Too long: may not be more than <n> bytes`; the
whole answer is `Job.batch.volcano.sh "<name>" is invalid: <errors>`.

Before the schema the API server checks the object's metadata: a custom
resource's name must be a DNS-1123 subdomain (`Bad_Name` and `Foo-Bar` are
refused with `metadata.name: Invalid value: ...: a lowercase RFC 1123 subdomain
...`), and those errors come first in the answer (apiextensions-apiserver's
`customResourceValidator.Validate`). Volcano's own webhook only asks for a
qualified name, which allows both, so without this check `vcbus validate`
would accept a job the cluster refuses.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from typing import Any

from statemachines.admission.fields import FieldError, invalid, is_dns1123_subdomain, not_supported

DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
EVENTS = ("*", "PodPending", "PodRunning", "PodFailed", "PodEvicted", "Unknown", "TaskCompleted", "OutOfSync",
          "CommandIssued", "JobUpdated", "TaskFailed")  # fmt: skip

# path (with [] for every list item) -> constraints
RULES: dict[str, dict[str, Any]] = {
    "spec.minAvailable": {"minimum": 0},
    "spec.maxRetry": {"minimum": 0},
    "spec.ttlSecondsAfterFinished": {"minimum": 0},
    "spec.minSuccess": {"minimum": 1},
    "spec.queue": {"maxLength": 253, "pattern": DNS_SUBDOMAIN},
    "spec.priorityClassName": {"maxLength": 253, "pattern": DNS_SUBDOMAIN},
    "spec.schedulerName": {"maxLength": 63},
    "spec.networkTopology.highestTierAllowed": {"minimum": 0},
    "spec.networkTopology.highestTierName": {"maxLength": 253},
    "spec.networkTopology.mode": {"enum": ("hard", "soft")},
    "spec.tasks[].name": {"maxLength": 63, "pattern": DNS_LABEL},
    "spec.tasks[].replicas": {"minimum": 0},
    "spec.tasks[].minAvailable": {"minimum": 0},
    "spec.tasks[].maxRetry": {"minimum": 0},
    "spec.tasks[].topologyPolicy": {"enum": ("none", "best-effort", "restricted", "single-numa-node")},
    "spec.tasks[].partitionPolicy.totalPartitions": {"minimum": 1},
    "spec.tasks[].partitionPolicy.partitionSize": {"minimum": 1},
    "spec.tasks[].partitionPolicy.minPartitions": {"minimum": 0},
    "spec.tasks[].partitionPolicy.networkTopology.highestTierAllowed": {"minimum": 0},
    "spec.tasks[].partitionPolicy.networkTopology.mode": {"enum": ("hard", "soft")},
    "spec.policies[].event": {"enum": EVENTS},
    "spec.policies[].events[]": {"enum": EVENTS},
    "spec.tasks[].policies[].event": {"enum": EVENTS},
    "spec.tasks[].policies[].events[]": {"enum": EVENTS},
    "spec.volumes[].mountPath": {"minLength": 1, "pattern": "^[^:]+$"},
    "spec.volumes[].volumeClaimName": {"maxLength": 253},
}


def _values(obj: Any, parts: list[str], path: str) -> Iterator[tuple[str, Any]]:
    if not parts:
        yield path, obj
        return
    head, rest = parts[0], parts[1:]
    key, is_list = (head[:-2], True) if head.endswith("[]") else (head, False)
    if not isinstance(obj, dict) or obj.get(key) is None:
        return
    here = f"{path}.{key}" if path else key
    if is_list:
        for i, item in enumerate(obj[key] if isinstance(obj[key], list) else []):
            yield from _values(item, rest, f"{here}[{i}]")
    else:
        yield from _values(obj[key], rest, here)


def _type_name(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    return {str: "string", list: "array", dict: "object"}.get(type(value), "null")


def _check(path: str, value: Any, rule: dict[str, Any]) -> list[FieldError]:
    errs: list[FieldError] = []
    wanted = "integer" if "minimum" in rule else "string"
    is_int = isinstance(value, int) and not isinstance(value, bool)
    if (wanted == "integer" and not is_int) or (wanted == "string" and not isinstance(value, str)):
        got = _type_name(value)
        return [invalid(path, got, f'{path} in body must be of type {wanted}: "{got}"')]
    if "minimum" in rule and isinstance(value, int) and value < rule["minimum"]:
        errs.append(invalid(path, value, f"{path} in body should be greater than or equal to {rule['minimum']}"))
    if isinstance(value, str):
        if "maxLength" in rule and len(value) > rule["maxLength"]:
            errs.append(FieldError(path, "Too long", detail=f"may not be more than {rule['maxLength']} bytes"))
        if "minLength" in rule and len(value) < rule["minLength"]:
            errs.append(invalid(path, value, f"{path} in body should be at least {rule['minLength']} chars long"))
        if "pattern" in rule and not re.search(rule["pattern"], value):
            errs.append(invalid(path, value, f"{path} in body should match '{rule['pattern']}'"))
        if "enum" in rule and value not in rule["enum"]:
            errs.append(not_supported(path, value, rule["enum"]))
    return errs


QUEUE_KIND = "Queue.scheduling.volcano.sh"  # Queues are custom resources too: same name rule


def name_errors(obj: dict[str, Any]) -> list[FieldError]:
    """The API server's check of a custom resource's `metadata.name`: a DNS-1123 subdomain.

    An absent name is left alone (`generateName`, or the caller reports it).
    """
    name = (obj.get("metadata") or {}).get("name")
    if not isinstance(name, str) or not name:
        return []
    return [invalid("metadata.name", name, reason) for reason in is_dns1123_subdomain(name)]


def schema_errors(job: dict[str, Any]) -> list[FieldError]:
    """The API server's refusals of `job` (after defaulting and mutation): its name, then the CRD schema."""
    errs: list[FieldError] = name_errors(job)
    tasks = (job.get("spec") or {}).get("tasks")
    if tasks is not None and not isinstance(tasks, list):
        return errs + [invalid("spec.tasks", _type_name(tasks), f'spec.tasks in body must be of type array: "{_type_name(tasks)}"')]
    for rule_path, rule in RULES.items():
        for path, value in _values(job, rule_path.split("."), ""):
            errs += _check(path, value, rule)
    if not (job.get("spec") or {}).get("tasks"):  # minItems: 1
        errs.insert(len(name_errors(job)), invalid("spec.tasks", 0, "spec.tasks in body should have at least 1 items"))
    return errs


def schema_message(job: dict[str, Any], errors: list[FieldError], kind: str = "Job.batch.volcano.sh") -> str:
    """The API server's answer: `Job.batch.volcano.sh "<name>" is invalid: ...` (`kind`: another resource)."""
    name = (job.get("metadata") or {}).get("name", "")
    texts = [str(e) for e in errors]
    body = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
    return f'{kind} "{name}" is invalid: {body}'


def crd_defaults(job: dict[str, Any]) -> dict[str, Any]:
    """A copy of `job` with the CRD's structural defaults filled (before any webhook runs)."""
    result = copy.deepcopy(job)
    spec = result.setdefault("spec", {})
    spec.setdefault("queue", "default")
    spec.setdefault("maxRetry", 3)
    if isinstance(spec.get("networkTopology"), dict):
        spec["networkTopology"].setdefault("mode", "hard")
    for task in spec.get("tasks") or []:
        partition = task.get("partitionPolicy")
        if isinstance(partition, dict):
            partition.setdefault("minPartitions", 0)
            if isinstance(partition.get("networkTopology"), dict):
                partition["networkTopology"].setdefault("mode", "hard")
    return result
