"""`env`: task-index environment variables (upstream `plugins/env`).

No arguments are parsed (any list is accepted and ignored). OnPodCreate
appends `VK_TASK_INDEX=<i>` then `VC_TASK_INDEX=<i>` to every container and
every init container, where `<i>` is the pod index taken from the pod name.
OnJobAdd/OnJobDelete only do the `plugin-env` bookkeeping; no objects.
"""

from __future__ import annotations

from typing import Any

from statemachines.plugins.base import Plugin, all_containers, append_env, pod_index_by_name

TASK_VK_INDEX = "VK_TASK_INDEX"
TASK_INDEX = "VC_TASK_INDEX"


class EnvPlugin(Plugin):
    NAME = "env"

    def on_pod_create(self, pod: dict[str, Any], job: dict[str, Any]) -> None:
        index = pod_index_by_name(pod)
        env = [{"name": TASK_VK_INDEX, "value": index}, {"name": TASK_INDEX, "value": index}]
        for container in all_containers(pod):
            append_env(container, env)
