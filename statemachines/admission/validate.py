"""Job validating admission (`/jobs/validate`, webhook `validatejob.volcano.sh`), CREATE and UPDATE.

`validate_create` runs Volcano's CREATE checks in order and keeps every
message fragment exactly as upstream writes it (leading spaces, `;`, missing
spaces included); the webhook answers the concatenation, trimmed. Each
fragment also carries the field it is about, for `vcbus validate`.
`validate_update` returns the first failing rule's text, untrimmed.

Deterministic where upstream is not: plugin names are checked in sorted order
and the valid event/action lists print in a fixed order. The status-mounter
argument check (` status-mounter plugin: <problem>;`, after the plugin-name
check) is a vcbus addition: that plugin is not upstream.
"""

from __future__ import annotations

from typing import Any

import msgspec

from statemachines.admission.bounds import DEFAULT_MAX_PODS, decode_problems, object_problems, size_problems
from statemachines.admission.fields import go_slice, is_dns1123_subdomain, is_qualified_name
from statemachines.admission.podtemplate import topology_cpu_error, validate_pod_template
from statemachines.admission.policies import validate_policies
from statemachines.admission.queues import QueueIndex
from statemachines.admission.semantic import semantic_equal
from statemachines.plugins import is_registered
from statemachines.plugins.args import parse_flags
from statemachines.plugins.mpi import MpiPlugin
from statemachines.plugins.status_mounter import NAME as STATUS_MOUNTER
from statemachines.plugins.status_mounter import validate_args

NETWORK_TOPOLOGY_BOTH = "must not specify 'highestTierAllowed' and 'highestTierName' in networkTopology simultaneously"
UPDATE_FIELDS = (
    "job updates may not change fields other than `minAvailable`, `tasks[*].replicas under spec` and `PriorityClassName`"
)


class Problem(msgspec.Struct, frozen=True):
    """One message fragment and the field it is about."""

    field: str
    message: str


class Verdict(msgspec.Struct, frozen=True):
    """The webhook's answer: allowed, the `status.message` text and its parts."""

    allowed: bool
    message: str = ""
    problems: tuple[Problem, ...] = ()


def _deny(problems: list[Problem], *, trim: bool = True) -> Verdict:
    if not problems:
        return Verdict(True)
    text = "".join(p.message for p in problems)
    return Verdict(False, text.strip() if trim else text, tuple(problems))


def _topology_error(topology: dict[str, Any] | None) -> str:
    if topology and topology.get("highestTierAllowed") is not None and topology.get("highestTierName"):
        return NETWORK_TOPOLOGY_BOTH
    return ""


def partition_error(task: dict[str, Any], job_name: str) -> str:
    """Step 4h: the first partitionPolicy failure, then the partition networkTopology text."""
    policy = task.get("partitionPolicy")
    if policy is None:
        return ""
    name = task.get("name", "")
    total, size = int(policy.get("totalPartitions") or 0), int(policy.get("partitionSize") or 0)
    minimum = int(policy.get("minPartitions") or 0)
    suffix = f" in task: {name}, job: {job_name}"
    msg = ""
    if total <= 0:
        msg = "'TotalPartitions' must be greater than 0" + suffix
    elif size <= 0:
        msg = "'PartitionSize' must be greater than 0" + suffix
    elif int(task.get("replicas") or 0) != total * size:
        msg = "'Replicas' are not equal to TotalPartitions*PartitionSize" + suffix
    elif task.get("minAvailable") is not None and minimum > 0 and minimum * size != int(task["minAvailable"]):
        msg = "'MinAvailable' is not equal to MinPartitions*PartitionSize" + suffix
    return msg + _topology_error(policy.get("networkTopology"))


def is_dag(tasks: list[dict[str, Any]]) -> bool:
    """Kahn's algorithm over task names; dangling, self and repeated dependencies all fail."""
    graph: dict[str, set[str]] = {}
    in_degree: dict[str, int] = {}
    for task in tasks:
        in_degree[task.get("name", "")] = 0
    for task in tasks:
        for dep in ((task.get("dependsOn") or {}).get("name")) or []:
            graph.setdefault(dep, set()).add(task.get("name", ""))
            in_degree[task.get("name", "")] += 1
    stack = sorted(name for name, degree in in_degree.items() if degree == 0)
    done = 0
    while stack:
        node = stack.pop()
        done += 1
        for target in sorted(graph.pop(node, set())):
            in_degree[target] -= 1
            if in_degree[target] == 0:
                stack.append(target)
    return done == len(tasks)


def _volume_problem(volumes: list[dict[str, Any]]) -> Problem | None:
    seen: set[str] = set()
    for i, volume in enumerate(volumes):
        here = f"spec.volumes[{i}]"
        mount = volume.get("mountPath") or ""
        claim, claim_name = volume.get("volumeClaim"), volume.get("volumeClaimName") or ""
        if not mount:
            return Problem(f"{here}.mountPath", " mountPath is required;")
        if mount in seen:
            return Problem(f"{here}.mountPath", f" duplicated mountPath: {mount};")
        if claim is None and not claim_name:
            return Problem(here, " either VolumeClaim or VolumeClaimName must be specified;")
        if claim_name:
            if claim is not None:
                return Problem(
                    here,
                    "conflict: If you want to use an existing PVC, just specify VolumeClaimName."
                    "If you want to create a new PVC, you do not need to specify VolumeClaimName",
                )
            reasons = is_dns1123_subdomain(claim_name)
            if reasons:
                return Problem(f"{here}.volumeClaimName", f"invalid VolumeClaimName {claim_name} : {go_slice(reasons)}")
        seen.add(mount)
    return None


def _queue_problems(queue_name: str, queues: QueueIndex) -> list[Problem]:
    queue = queues.get(queue_name)
    if queue is None:
        return [Problem("spec.queue", f" unable to find job queue: {QueueIndex.not_found(queue_name)};")]
    problems = []
    state = ((queue.get("status") or {}).get("state")) or ""
    if state != "Open":
        problems.append(
            Problem("spec.queue", f" can only submit job to queue with state `Open`, queue `{queue_name}` status is `{state}`;")
        )
    if queue_name == "root":
        problems.append(Problem("spec.queue", " can not submit job to root queue;"))
    else:
        children = queues.children(queue_name)
        if children:
            problems.append(
                Problem("spec.queue", f" can only submit job to leaf queue, queue `{queue_name}` has {len(children)} child queues;")
            )
    return problems


def _task_problems(job: dict[str, Any], *, pod_level_resources: bool) -> tuple[list[Problem], int, bool]:
    """Step 4 for each task; also the replica total and whether a visited task has dependsOn."""
    meta, spec = job.get("metadata") or {}, job.get("spec") or {}
    name, namespace = str(meta.get("name", "")), str(meta.get("namespace", ""))
    problems: list[Problem] = []
    seen: set[str] = set()
    total = 0
    has_deps = False
    for p, task in enumerate(spec.get("tasks") or []):
        here = f"spec.tasks[{p}]"
        has_deps = has_deps or task.get("dependsOn") is not None
        task_name = str(task.get("name", ""))
        replicas = int(task.get("replicas") or 0)
        if task.get("minAvailable") is not None and int(task["minAvailable"]) > replicas:
            problems.append(
                Problem(f"{here}.minAvailable", f" 'minAvailable' is greater than 'replicas' in task: {task_name}, job: {name};")
            )
        total += replicas
        if task_name in seen:
            problems.append(Problem(f"{here}.name", f" duplicated task name {task_name};"))
            break
        seen.add(task_name)
        policy_text = validate_policies(task.get("policies"), "spec.tasks.policies")
        if policy_text:
            problems.append(Problem(f"{here}.policies", policy_text))
        reasons = is_qualified_name(f"{name}-{task_name}-{p}")
        if reasons:
            problems.append(
                Problem(f"{here}.name", f"create pod with name {name}-{task_name}-{p} validate failed {go_slice(reasons)};")
            )
        errors = validate_pod_template(
            task.get("template") or {}, name=task_name, namespace=namespace, pod_level_resources=pod_level_resources
        )
        if errors:
            problems.append(Problem(f"{here}.template", f"spec.task[{p}]." + "".join(f"{e}. " for e in errors)))
        else:
            cpu = topology_cpu_error(task, p)
            if cpu:
                problems.append(Problem(f"{here}.template.spec.containers", cpu))
        partition = partition_error(task, name)
        if partition:
            problems.append(Problem(f"{here}.partitionPolicy", partition))
    return problems, total, has_deps


def unreadable(job: Any) -> Verdict | None:
    """The denial of a job a typed decoding refuses (`statemachines.admission.bounds`), else None.

    Volcano's webhook decodes the object before any rule, so such a job gets
    that one message (Go's, for a duration), and none of the rules' fragments.
    """
    problems = object_problems(job) or decode_problems(job)
    if not problems:
        return None
    return Verdict(False, "; ".join(m for _, m in problems), tuple(Problem(f, m) for f, m in problems))


def validate_create(
    job: dict[str, Any], *, queues: QueueIndex, pod_level_resources: bool = True, max_pods: int = DEFAULT_MAX_PODS
) -> Verdict:
    """The validating webhook's answer to a CREATE of `job` (after mutation).

    Args:
        job: the vcjob manifest.
        queues: the queues the webhook's lister would see.
        pod_level_resources: the Kubernetes PodLevelResources feature gate.
        max_pods: most pods (sum of replicas) a job may have (a vcbus bound, `bounds.size_problems`).
    """
    refused = unreadable(job)
    if refused is not None:
        return refused
    meta, spec = job.get("metadata") or {}, job.get("spec") or {}
    name = str(meta.get("name", ""))
    tasks = list(spec.get("tasks") or [])
    plugins = spec.get("plugins") or {}
    if not tasks:
        return _deny([Problem("spec.tasks", "No task specified in job spec")])
    if "mpi" in plugins:
        master = parse_flags(plugins["mpi"], MpiPlugin.FLAGS).str("master")
        if all(t.get("name", "") != master for t in tasks):
            return _deny([Problem("spec.plugins.mpi", "The specified mpi master task was not found")])
    problems: list[Problem] = []
    if _topology_error(spec.get("networkTopology")):
        problems.append(Problem("spec.networkTopology", NETWORK_TOPOLOGY_BOTH))
    task_problems, total, has_deps = _task_problems(job, pod_level_resources=pod_level_resources)
    problems += task_problems
    reasons = is_qualified_name(name)
    if reasons:
        problems.append(Problem("metadata.name", f"create job with name {name} validate failed {go_slice(reasons)}"))
    if total < int(spec.get("minAvailable") or 0):
        problems.append(Problem("spec.minAvailable", " job 'minAvailable' should not be greater than total replicas in tasks;"))
    policy_text = validate_policies(spec.get("policies"), "spec.policies")
    if policy_text:
        problems.append(Problem("spec.policies", policy_text))
    for plugin in sorted(plugins):
        if not is_registered(plugin):
            problems.append(Problem(f"spec.plugins.{plugin}", f" unable to find job plugin: {plugin};"))
    if STATUS_MOUNTER in plugins:
        for problem in validate_args(plugins[STATUS_MOUNTER]):
            problems.append(Problem(f"spec.plugins.{STATUS_MOUNTER}", f" {STATUS_MOUNTER} plugin: {problem};"))
    volume = _volume_problem(list(spec.get("volumes") or []))
    if volume is not None:
        problems.append(volume)
    problems += _queue_problems(str(spec.get("queue", "")), queues)
    if has_deps and not is_dag(tasks):
        problems.append(
            Problem("spec.tasks[*].dependsOn", " job has dependencies between tasks, but doesn't form a directed acyclic graph(DAG);")
        )
    problems += [Problem(field, f" {message};") for field, message in size_problems(job, max_pods)]
    return _deny(problems)


def _update_problem(old: dict[str, Any], new: dict[str, Any]) -> Problem | None:
    new_spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
    total = 0
    for p, task in enumerate(new_spec.get("tasks") or []):
        here, task_name = f"spec.tasks[{p}]", task.get("name", "")
        replicas = int(task.get("replicas") or 0)
        if replicas < 0:
            return Problem(f"{here}.replicas", f"'replicas' must be >= 0 in task: {task_name}")
        if task.get("minAvailable") is not None:
            if int(task["minAvailable"]) < 0:
                return Problem(f"{here}.minAvailable", f"'minAvailable' must be >= 0 in task: {task_name}")
            if int(task["minAvailable"]) > replicas:
                return Problem(f"{here}.minAvailable", f"'minAvailable' must be <= 'replicas' in task: {task_name}")
        partition = partition_error(task, str((new.get("metadata") or {}).get("name", "")))
        if partition:
            return Problem(f"{here}.partitionPolicy", partition)
        total += replicas
    minimum = int(new_spec.get("minAvailable") or 0)
    if minimum > total:
        return Problem("spec.minAvailable", "job 'minAvailable' must not be greater than total replicas")
    if minimum < 0:
        return Problem("spec.minAvailable", "job 'minAvailable' must be >= 0")
    if _topology_error(new_spec.get("networkTopology")):
        return Problem("spec.networkTopology", NETWORK_TOPOLOGY_BOTH)
    if len(old_spec.get("tasks") or []) != len(new_spec.get("tasks") or []):
        return Problem("spec.tasks", "job updates may not add or remove tasks")
    if not semantic_equal(_frozen_view(new_spec, old_spec), _frozen_view(old_spec, old_spec)):
        return Problem("spec", UPDATE_FIELDS)
    return None


def _frozen_view(spec: dict[str, Any], old: dict[str, Any]) -> dict[str, Any]:
    """`spec` with the mutable fields copied from `old` and generated claim names blanked."""
    view = dict(spec)
    view["minAvailable"] = old.get("minAvailable")
    view["priorityClassName"] = old.get("priorityClassName")
    old_tasks = list(old.get("tasks") or [])
    view["tasks"] = [
        {**task, "replicas": old_tasks[i].get("replicas"), "minAvailable": old_tasks[i].get("minAvailable")}
        for i, task in enumerate(spec.get("tasks") or [])
    ]
    view["volumes"] = [
        {**v, "volumeClaimName": ""} if v.get("volumeClaim") is not None else v for v in spec.get("volumes") or []
    ]
    return view


def validate_update(old: dict[str, Any], new: dict[str, Any], *, max_pods: int = DEFAULT_MAX_PODS) -> Verdict:
    """The validating webhook's answer to an UPDATE from `old` to `new` (first failure, untrimmed).

    A scale-up beyond `max_pods` pods is refused like a CREATE beyond it.
    """
    refused = unreadable(new) or unreadable(old)
    if refused is not None:
        return refused
    problem = _update_problem(old, new)
    if problem is None:
        problem = next((Problem(f, m) for f, m in size_problems(new, max_pods)), None)
    return _deny([problem] if problem else [], trim=False)
