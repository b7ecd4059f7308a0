"""What the engine can hold: the bounds vcbus admission adds to Volcano's rules.

Volcano's webhook decodes a job into Go types before it checks anything, so a
`timeout: soon` (or one beyond int64 nanoseconds) is refused by the decoding,
with Go's message. A job that passes must be one the engine can run without
exhausting memory, and these checks say so with one clear fragment each:

- `object_problems`: the object's shape, checked before anything reads it:
  `metadata` a mapping, `metadata.name` / `namespace` / `generateName` strings,
  and no NUL byte in any key or string (Kubernetes' JSON would carry it; no
  name, label or argument of a real job holds one);
- `decode_problems`: what Go's typed decoding refuses in fields the engine
  reads: policy timeouts that `time.ParseDuration` refuses
  (`statemachines.model.durations`, the engine's own parser). Plugin ports out
  of range are not refused: Volcano admits them (ssh falls back to 22), so
  they are warnings (`statemachines.admission.plugin_warnings`);
- `size_problems`: the pod limit. A job's pods are the sum of its tasks'
  replicas; a job with more than `max_pods` (default `DEFAULT_MAX_PODS`,
  10,000; `vcbus webhook --max-pods-per-job`, `vcbus validate --max-pods-per-job`)
  is refused. The engine refuses (poisons) such a job, and one with a bad
  timeout, when it arrives from a cluster without this webhook
  (`check_job_spec`, `statemachines.engine`).

Integer ranges (the CRD's `format: int32` fields) are checked with the CRD
schema (`statemachines.admission.structural`), stricter than kube-apiserver,
which stores 2^31 that Volcano's Go types cannot decode.
"""

from __future__ import annotations

from typing import Any

from statemachines.model.durations import parse_go_duration

DEFAULT_MAX_PODS = 10_000
"""Most pods (the sum of `tasks[*].replicas`) one job may ask for."""

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
_NUL_REPORT = 3  # NUL-byte paths reported at most
_WALK_BUDGET = 1_000_000  # nodes visited looking for NUL bytes


class BoundsProblem(ValueError):
    """`field: message` of the first bound a job breaks (raised by `check_job_size`)."""


def _nul_paths(obj: Any) -> list[str]:
    """Paths of keys or strings holding a NUL byte (iterative, bounded)."""
    found: list[str] = []
    stack: list[tuple[str, Any]] = [("", obj)]
    visited = 0
    while stack and len(found) < _NUL_REPORT and visited < _WALK_BUDGET:
        path, value = stack.pop()
        visited += 1
        if isinstance(value, str):
            if "\x00" in value:
                found.append(path or "<document>")
        elif isinstance(value, dict):
            for key in reversed(list(value)):
                name = str(key)
                here = f"{path}.{name}" if path else name
                if "\x00" in name:
                    found.append(here)
                stack.append((here, value[key]))
        elif isinstance(value, list):
            for i in range(len(value) - 1, -1, -1):
                stack.append((f"{path}[{i}]", value[i]))
    return found


def object_problems(obj: Any) -> list[tuple[str, str]]:
    """(field, message) for an object too malformed to read: see the module docstring."""
    if not isinstance(obj, dict):
        return [("", f"the object must be a mapping, not {type(obj).__name__}")]
    problems: list[tuple[str, str]] = []
    meta = obj.get("metadata")
    if meta is not None and not isinstance(meta, dict):
        problems.append(("metadata", f"metadata must be a mapping, not {type(meta).__name__}"))
    elif isinstance(meta, dict):
        for key in ("name", "namespace", "generateName", "uid"):
            if key in meta and meta[key] is not None and not isinstance(meta[key], str):
                value = meta[key]
                problems.append(
                    (f"metadata.{key}", f"metadata.{key} must be a string, not {type(value).__name__} {value!r}")
                )
    spec = obj.get("spec")
    if spec is not None and not isinstance(spec, dict):
        problems.append(("spec", f"spec must be a mapping, not {type(spec).__name__}"))
    for path in _nul_paths(obj):
        problems.append((path, f"{path} holds a NUL byte"))
    return problems


def _policy_lists(spec: dict[str, Any]) -> list[tuple[str, Any]]:
    lists = [("spec.policies", spec.get("policies"))]
    tasks = spec.get("tasks")
    for i, task in enumerate(tasks if isinstance(tasks, list) else []):
        if isinstance(task, dict):
            lists.append((f"spec.tasks[{i}].policies", task.get("policies")))
    return lists


def decode_problems(job: dict[str, Any]) -> list[tuple[str, str]]:
    """(field, message) for fields of `job` a typed decoding refuses (policy timeouts)."""
    spec = job.get("spec")
    if not isinstance(spec, dict):
        return []
    problems: list[tuple[str, str]] = []
    for path, policies in _policy_lists(spec):
        for i, policy in enumerate(policies if isinstance(policies, list) else []):
            timeout = policy.get("timeout") if isinstance(policy, dict) else None
            if timeout is None:
                continue
            try:
                parse_go_duration(timeout)
            except ValueError as err:
                problems.append((f"{path}[{i}].timeout", str(err)))
    return problems


def _as_int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def pod_total(spec: Any) -> int:
    """The pods a job spec asks for: the sum of its tasks' replicas (malformed counts as 0)."""
    tasks = spec.get("tasks") if isinstance(spec, dict) else None
    return sum(_as_int(t.get("replicas")) for t in tasks if isinstance(t, dict)) if isinstance(tasks, list) else 0


def size_problems(job: dict[str, Any], max_pods: int = DEFAULT_MAX_PODS) -> list[tuple[str, str]]:
    """(field, message) when the job asks for more than `max_pods` pods."""
    total = pod_total(job.get("spec"))
    if total <= max_pods:
        return []
    return [(
        "spec.tasks[*].replicas",
        f"job asks for {total} pods (the sum of tasks[*].replicas), more than the limit of {max_pods} pods per job",
    )]


def check_job_size(spec: Any, max_pods: int = DEFAULT_MAX_PODS) -> None:
    """Raise BoundsProblem when `spec` (a manifest's dict or the engine's JobSpec) asks for more than `max_pods` pods."""
    tasks = getattr(spec, "tasks", None)
    total = sum(t.replicas for t in tasks) if tasks is not None else pod_total(spec)
    if total > max_pods:
        raise BoundsProblem(
            f"spec.tasks[*].replicas: job asks for {total} pods, more than the limit of {max_pods} pods per job"
            " (admission would deny it: this cluster's webhook is missing or allows more)"
        )


def check_job_spec(spec: Any, max_pods: int = DEFAULT_MAX_PODS) -> None:
    """The engine's guard on a job it is shown: the pod limit, then every policy timeout Go would refuse.

    Raises BoundsProblem before anything changes, so the record is set aside
    whole; a bad timeout found only when a policy matches would poison every
    later record of the job instead.
    """
    check_job_size(spec, max_pods)
    policies = [("spec.policies", getattr(spec, "policies", None))]
    policies += [(f"spec.tasks[{i}].policies", t.policies) for i, t in enumerate(getattr(spec, "tasks", None) or ())]
    for path, items in policies:
        for i, policy in enumerate(items or ()):
            if policy.timeout is not None:
                try:
                    parse_go_duration(policy.timeout)
                except ValueError as err:
                    raise BoundsProblem(f"{path}[{i}].timeout: {err} (admission would deny it)") from None
