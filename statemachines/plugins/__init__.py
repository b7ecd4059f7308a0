"""Volcano job plugins as pure functions (env, svc, ssh, pytorch, mpi, tensorflow, ray, hcclrank, status-mounter).

Public surface:

- `on_pod_create(pod, job) -> pod`: every plugin's OnPodCreate, in the fixed
  order of `registry.PLUGIN_ORDER` (upstream's order is random);
- `on_job_add(job)`, `on_job_update(job)`, `on_job_delete(job) -> HookResult`:
  the effects (objects to apply or delete) and the new
  `status.controlledResources`;
- `status_mounter_configmap(job, status)`: the live status-file ConfigMap;
- `is_registered(name)`: the registry the admission webhook checks names against.
"""

from __future__ import annotations

from statemachines.plugins.base import (
    CREATE_IF_ABSENT,
    CREATE_OR_UPDATE_DATA,
    CREATE_OR_UPDATE_SECRET,
    ApplyObject,
    DeleteObject,
    Effect,
    HookResult,
    PluginError,
)
from statemachines.plugins.registry import (
    PLUGIN_ORDER,
    PLUGINS,
    is_registered,
    on_job_add,
    on_job_delete,
    on_job_update,
    on_pod_create,
)
from statemachines.plugins.status_mounter import status_mounter_configmap

__all__ = [
    "CREATE_IF_ABSENT",
    "CREATE_OR_UPDATE_DATA",
    "CREATE_OR_UPDATE_SECRET",
    "PLUGINS",
    "PLUGIN_ORDER",
    "ApplyObject",
    "DeleteObject",
    "Effect",
    "HookResult",
    "PluginError",
    "is_registered",
    "on_job_add",
    "on_job_delete",
    "on_job_update",
    "on_pod_create",
    "status_mounter_configmap",
]
