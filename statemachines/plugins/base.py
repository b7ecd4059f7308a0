"""The plugin framework: hook results, object effects and the helpers plugins share.

A Volcano job plugin has four hooks (OnPodCreate, OnJobAdd, OnJobUpdate,
OnJobDelete). Upstream they call the API server directly; here they are pure:

- `on_pod_create(pod, job)` edits a pod manifest that the caller owns (a fresh
  copy made by `statemachines.manifests.pod.build_pod`);
- `on_job_add/update/delete(job, controlled)` return a list of *effects*
  (`ApplyObject`, `DeleteObject`) and edit `controlled`, the caller's copy of
  `status.controlledResources`.

An adapter applies the effects in order, with the create/update rule named by
`ApplyObject.mode`, and writes the new controlledResources with the status.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any, ClassVar, Final, Literal, Union

import msgspec

from statemachines.plugins.args import Flag, ParsedArgs, parse_flags

JOB_API_VERSION = "batch.volcano.sh/v1alpha1"
JOB_NAME_KEY = "volcano.sh/job-name"
JOB_NAMESPACE_KEY = "volcano.sh/job-namespace"
TASK_SPEC_KEY = "volcano.sh/task-spec"
TASK_INDEX_KEY = "volcano.sh/task-index"
DEFAULT_TASK_SPEC = "default"

# How an adapter applies an ApplyObject (upstream helper in brackets):
CREATE_IF_ABSENT: Final = "create-if-absent"  # create; an existing object is left alone [svc/ray Service, NetworkPolicy]
CREATE_OR_UPDATE_DATA: Final = "create-or-update-data"  # create; else replace `data` if it differs [CreateOrUpdateConfigMap]
CREATE_OR_UPDATE_SECRET: Final = "create-or-update-secret"  # create; else replace all data unless `config` is equal [CreateOrUpdateSecret]
ApplyMode = Literal["create-if-absent", "create-or-update-data", "create-or-update-secret"]


class ApplyObject(msgspec.Struct, frozen=True, tag="apply", kw_only=True):
    """Create (or update, per `mode`) one namespaced object owned by the job.

    `fill_ssh_keys` is set on the ssh Secret when no key was given as a plugin
    argument: the adapter generates a fresh RSA key pair (`vcbus.sshkeys`) and
    adds `id_rsa`, `id_rsa.pub` and `authorized_keys` before creating it. The
    domain never generates keys (no randomness here).
    """

    manifest: dict[str, Any]
    mode: ApplyMode
    plugin: str
    fill_ssh_keys: bool = False


class DeleteObject(msgspec.Struct, frozen=True, tag="delete", kw_only=True):
    """Delete one object; NotFound is success."""

    api_version: str
    kind: str
    namespace: str
    name: str
    plugin: str


Effect = Union[ApplyObject, DeleteObject]


class HookResult(msgspec.Struct, frozen=True):
    """What a job-level hook dispatch produced."""

    effects: tuple[Effect, ...]
    controlled_resources: dict[str, str]


class PluginError(Exception):
    """A plugin hook failed; the message is the upstream error text."""


# ------------------------------------------------------------------ shared helpers


def owner_reference(job: dict[str, Any]) -> dict[str, Any]:
    """The controller ownerReference every job-owned object carries."""
    meta = job.get("metadata") or {}
    return {
        "apiVersion": JOB_API_VERSION,
        "kind": "Job",
        "name": meta.get("name", ""),
        "uid": meta.get("uid", ""),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def object_meta(job: dict[str, Any], name: str) -> dict[str, Any]:
    meta = job.get("metadata") or {}
    return {"name": name, "namespace": meta.get("namespace", ""), "ownerReferences": [owner_reference(job)]}


def job_name(job: dict[str, Any]) -> str:
    return str((job.get("metadata") or {}).get("name", ""))


def job_namespace(job: dict[str, Any]) -> str:
    return str((job.get("metadata") or {}).get("namespace", ""))


def tasks(job: dict[str, Any]) -> list[dict[str, Any]]:
    return list((job.get("spec") or {}).get("tasks") or [])


def task_index(job: dict[str, Any], name: str) -> int:
    """Position of the task called `name`, or -1 (`GetTaskIndexUnderJob`)."""
    for position, task in enumerate(tasks(job)):
        if task.get("name", "") == name:
            return position
    return -1


def template_spec(task: dict[str, Any]) -> dict[str, Any]:
    return ((task.get("template") or {}).get("spec")) or {}


def pod_name(job: str, task: str, index: int) -> str:
    return f"{job}-{task}-{index}"


def pod_index_by_name(pod: dict[str, Any]) -> str:
    """Split the pod name on `-`: the last part if there are >= 3 parts, else ``""``."""
    parts = str((pod.get("metadata") or {}).get("name", "")).split("-")
    return parts[-1] if len(parts) >= 3 else ""


def task_key(pod: dict[str, Any]) -> str:
    """Annotation `volcano.sh/task-spec`, or `default` when absent or empty."""
    value = ((pod.get("metadata") or {}).get("annotations") or {}).get(TASK_SPEC_KEY, "")
    return value or DEFAULT_TASK_SPEC


def go_atoi(text: str) -> int:
    """`strconv.Atoi`, raising PluginError with Go's message."""
    body = text[1:] if text[:1] in "+-" else text
    if not body or not body.isascii() or not body.isdigit():
        raise PluginError(f'strconv.Atoi: parsing "{text}": invalid syntax')
    value = int(text)
    if not -(1 << 63) <= value < (1 << 63):
        raise PluginError(f'strconv.Atoi: parsing "{text}": value out of range')
    return value


def domain_name(job: dict[str, Any], task: dict[str, Any], index: int) -> str:
    """`<hostname or <job>-<task>-<i>>.<subdomain or <job>>` (`MakeDomainName`)."""
    spec = template_spec(task)
    host = spec.get("hostname") or pod_name(job_name(job), task.get("name", ""), index)
    sub = spec.get("subdomain") or job_name(job)
    return f"{host}.{sub}"


def task_hosts(job: dict[str, Any], task: dict[str, Any]) -> list[str]:
    """Domain names of replicas 0..replicas-1; only the first if the template sets a hostname."""
    count = int(task.get("replicas") or 0)
    if template_spec(task).get("hostname"):
        count = min(count, 1)
    return [domain_name(job, task, index) for index in range(count)]


def containers(pod: dict[str, Any], *, init: bool = False) -> list[dict[str, Any]]:
    spec = pod.setdefault("spec", {})
    key = "initContainers" if init else "containers"
    return list(spec.get(key) or [])


def all_containers(pod: dict[str, Any]) -> list[dict[str, Any]]:
    """Regular containers, then init containers (upstream's loop order)."""
    return containers(pod) + containers(pod, init=True)


def append_env(container: dict[str, Any], env: Sequence[dict[str, Any]]) -> None:
    container["env"] = list(container.get("env") or []) + [copy.deepcopy(e) for e in env]


def append_mount(container: dict[str, Any], mount: dict[str, Any]) -> None:
    container["volumeMounts"] = list(container.get("volumeMounts") or []) + [dict(mount)]


def append_volume(pod: dict[str, Any], volume: dict[str, Any]) -> None:
    spec = pod.setdefault("spec", {})
    spec["volumes"] = list(spec.get("volumes") or []) + [copy.deepcopy(volume)]


def ensure_port(container: dict[str, Any], name: str, port: int) -> None:
    """Add `{name, containerPort}` unless a port with that containerPort exists."""
    ports = list(container.get("ports") or [])
    if any(int(p.get("containerPort", 0) or 0) == port for p in ports):
        return
    container["ports"] = ports + [{"name": name, "containerPort": port}]


# ------------------------------------------------------------------ the base class


class Plugin:
    """One plugin instance: the parsed arguments of `spec.plugins.<NAME>`.

    Subclasses set NAME and FLAGS and override the hooks they need. The default
    job hooks do Volcano's bookkeeping: OnJobAdd records `plugin-<name>` (and
    returns at once if it is already there), OnJobDelete removes it.
    """

    NAME: ClassVar[str] = ""
    FLAGS: ClassVar[tuple[Flag, ...]] = ()

    def __init__(self, args: Sequence[str] | None) -> None:
        self.raw_args = list(args or [])
        self.args: ParsedArgs = parse_flags(self.raw_args, self.FLAGS)

    @property
    def key(self) -> str:
        return f"plugin-{self.NAME}"

    def on_pod_create(self, pod: dict[str, Any], job: dict[str, Any]) -> None:
        """Edit `pod` in place. Raise PluginError to stop pod creation."""

    def add_objects(self, job: dict[str, Any]) -> list[Effect]:
        """Objects OnJobAdd creates the first time (guarded by the bookkeeping key)."""
        return []

    def on_job_add(self, job: dict[str, Any], controlled: dict[str, str]) -> list[Effect]:
        if controlled.get(self.key) == self.NAME:
            return []
        effects = self.add_objects(job)
        controlled[self.key] = self.NAME
        return effects

    def on_job_update(self, job: dict[str, Any], controlled: dict[str, str]) -> list[Effect]:
        return []

    def delete_objects(self, job: dict[str, Any]) -> list[Effect]:
        """Objects OnJobDelete removes (only when the bookkeeping key is recorded)."""
        return []

    def on_job_delete(self, job: dict[str, Any], controlled: dict[str, str]) -> list[Effect]:
        if controlled.get(self.key) != self.NAME:
            return []
        effects = self.delete_objects(job)
        controlled.pop(self.key, None)
        return effects

    def delete(self, job: dict[str, Any], api_version: str, kind: str, name: str) -> DeleteObject:
        return DeleteObject(
            api_version=api_version, kind=kind, namespace=job_namespace(job), name=name, plugin=self.NAME
        )
