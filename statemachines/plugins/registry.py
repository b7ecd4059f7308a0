"""The plugin registry and the four hook dispatchers (upstream `plugins/factory.go`, `job_controller_plugins.go`).

Upstream loops over `spec.plugins`, a Go map, so the order in which plugins
run is random on every call. That order is observable (env var order, what the
pytorch wait-for-master init container receives, hcclrank's rank), so vcbus
fixes it: plugins run in `PLUGIN_ORDER`, which is

    pytorch, tensorflow, mpi, ray, hcclrank, env, svc, ssh, status-mounter

- framework plugins first, so an init container they add (wait-for-master)
  then gets the env vars and mounts of env/svc/ssh like every other init
  container;
- hcclrank right after them, so `hccl/rankIndex` always equals pytorch's RANK;
- status-mounter last, so its env vars close the list.

An unregistered name fails the whole dispatch with `failed to get plugin
<name>` before any plugin runs (upstream may have run some plugins first).
The same registry answers the admission webhook's plugin-name check.
"""

from __future__ import annotations

import copy
from typing import Any

from statemachines.plugins.base import Effect, HookResult, Plugin, PluginError
from statemachines.plugins.env import EnvPlugin
from statemachines.plugins.hcclrank import HcclrankPlugin
from statemachines.plugins.mpi import MpiPlugin
from statemachines.plugins.pytorch import PytorchPlugin
from statemachines.plugins.ray import RayPlugin
from statemachines.plugins.ssh import SshPlugin
from statemachines.plugins.status_mounter import StatusMounterPlugin
from statemachines.plugins.svc import SvcPlugin
from statemachines.plugins.tensorflow import TensorflowPlugin

PLUGINS: dict[str, type[Plugin]] = {
    cls.NAME: cls
    for cls in (
        PytorchPlugin,
        TensorflowPlugin,
        MpiPlugin,
        RayPlugin,
        HcclrankPlugin,
        EnvPlugin,
        SvcPlugin,
        SshPlugin,
        StatusMounterPlugin,
    )
}
PLUGIN_ORDER: tuple[str, ...] = tuple(PLUGINS)


def is_registered(name: str) -> bool:
    return name in PLUGINS


def job_plugins(job: dict[str, Any]) -> dict[str, list[str]]:
    return dict((job.get("spec") or {}).get("plugins") or {})


def instances(job: dict[str, Any]) -> list[Plugin]:
    """One fresh plugin per `spec.plugins` entry, in PLUGIN_ORDER.

    Raises:
        PluginError: `failed to get plugin <name>` for the first unregistered
            name (sorted), before anything runs.
    """
    plugins = job_plugins(job)
    unknown = sorted(name for name in plugins if name not in PLUGINS)
    if unknown:
        raise PluginError(f"failed to get plugin {unknown[0]}")
    return [PLUGINS[name](plugins[name]) for name in PLUGIN_ORDER if name in plugins]


def on_pod_create(pod: dict[str, Any], job: dict[str, Any]) -> dict[str, Any]:
    """Run every plugin's OnPodCreate on a copy of `pod`; return the new pod.

    Raises:
        PluginError: a plugin refused (ray without head task, pytorch/tensorflow
            index parse errors, hcclrank label errors, unknown plugin).
    """
    new_pod = copy.deepcopy(pod)
    for plugin in instances(job):
        plugin.on_pod_create(new_pod, job)
    return new_pod


def _dispatch(job: dict[str, Any], hook: str) -> HookResult:
    controlled = dict(((job.get("status") or {}).get("controlledResources")) or {})
    effects: list[Effect] = []
    for plugin in instances(job):
        effects += getattr(plugin, hook)(job, controlled)
    return HookResult(tuple(effects), controlled)


def on_job_add(job: dict[str, Any]) -> HookResult:
    """OnJobAdd of every plugin: runs on every sync while the phase is `""` or Pending."""
    return _dispatch(job, "on_job_add")


def on_job_update(job: dict[str, Any]) -> HookResult:
    """OnJobUpdate of every plugin: runs on every sync in the other non-final phases."""
    return _dispatch(job, "on_job_update")


def on_job_delete(job: dict[str, Any]) -> HookResult:
    """OnJobDelete of every plugin: runs inside every KillJob/KillTarget."""
    return _dispatch(job, "on_job_delete")
