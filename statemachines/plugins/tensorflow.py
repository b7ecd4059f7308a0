"""`tensorflow`: TF_CONFIG (upstream `distributed-framework/tensorflow`).

Flags: `ps` (`ps`), `worker` (`worker`), `chief` (`chief`), `evaluator`
(`evaluator`), `port` (2222).

OnPodCreate: a job with exactly one task of one replica is left alone.
Otherwise every regular container gets `TF_CONFIG`, compact JSON with keys
`cluster` then `task`. `cluster` lists `<domain name>:<port>` per replica for
the roles in the fixed order ps, worker, chief, evaluator (a role with no task
or no replicas is omitted; a template hostname repeats for every replica);
`task` is `{"type": <role, or the raw task name>, "index": <pod index>}`.
No ports, no objects.
"""

from __future__ import annotations

import json
from typing import Any

from statemachines.plugins.args import Flag
from statemachines.plugins.base import (
    Plugin,
    append_env,
    containers,
    domain_name,
    go_atoi,
    pod_index_by_name,
    task_key,
    tasks,
)

TF_CONFIG = "TF_CONFIG"
ROLES = ("ps", "worker", "chief", "evaluator")


class TensorflowPlugin(Plugin):
    NAME = "tensorflow"
    FLAGS = (
        Flag("ps", "string", "ps", "name of ps role task"),
        Flag("worker", "string", "worker", "name of ps role task"),
        Flag("chief", "string", "chief", "name of chief role task"),
        Flag("evaluator", "string", "evaluator", "name of evaluator role task"),
        Flag("port", "int", 2222, "service port"),
    )

    def cluster_spec(self, pod: dict[str, Any], job: dict[str, Any]) -> dict[str, Any]:
        index = go_atoi(pod_index_by_name(pod))
        port = self.args.int("port")
        names = {role: self.args.str(role) for role in ROLES}
        lists: dict[str, list[str]] = {}
        for task in tasks(job):
            hosts = [f"{domain_name(job, task, i)}:{port}" for i in range(int(task.get("replicas") or 0))]
            for role in ROLES:  # the Go switch takes the first matching case
                if task.get("name", "") == names[role]:
                    lists[role] = hosts
                    break
        key = task_key(pod)
        role_type = key
        for role in ("chief", "worker", "ps", "evaluator"):  # getTaskType's case order
            if key == names[role]:
                role_type = role
                break
        cluster = {role: lists[role] for role in ROLES if lists.get(role)}
        return {"cluster": cluster, "task": {"type": role_type, "index": index}}

    def on_pod_create(self, pod: dict[str, Any], job: dict[str, Any]) -> None:
        all_tasks = tasks(job)
        if len(all_tasks) == 1 and int(all_tasks[0].get("replicas") or 0) == 1:
            return
        raw = json.dumps(self.cluster_spec(pod, job), separators=(",", ":"), ensure_ascii=False)
        for container in containers(pod):
            append_env(container, [{"name": TF_CONFIG, "value": raw}])
