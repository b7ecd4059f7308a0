"""`hcclrank`: the `hccl/rankIndex` pod annotation (upstream `distributed-framework/hcclrank`).

Flags: `master` (`master`), `worker` (`worker`).

OnPodCreate, unless the annotation is already non-empty: the literal value of
the first env var named RANK found (containers in order; a `valueFrom` RANK
stops the search), else for master/worker pods the task index from the label
`volcano.sh/task-index`: master rank = index, worker rank = master replicas +
index. Errors: `pod <pod> doesn't have volcano.sh/task-index label`,
`failed to parse task index for pod <pod>: <err>`. No bookkeeping, no objects.
"""

from __future__ import annotations

from typing import Any

from statemachines.plugins.args import Flag
from statemachines.plugins.base import TASK_INDEX_KEY, Effect, Plugin, PluginError, containers, go_atoi, task_key, tasks

RANK_ANNOTATION = "hccl/rankIndex"


def first_rank_value(pod: dict[str, Any]) -> str:
    """`getEnv(pod, "RANK")`: the first RANK env var's literal value (may be "")."""
    for container in containers(pod):
        for env in container.get("env") or []:
            if env.get("name") == "RANK":
                return str(env.get("value") or "")
    return ""


class HcclrankPlugin(Plugin):
    NAME = "hcclrank"
    FLAGS = (
        Flag("master", "string", "master", "name of master role task"),
        Flag("worker", "string", "worker", "name of worker role task"),
    )

    def on_pod_create(self, pod: dict[str, Any], job: dict[str, Any]) -> None:
        meta = pod.setdefault("metadata", {})
        annotations = dict(meta.get("annotations") or {})
        if annotations.get(RANK_ANNOTATION):
            return
        rank = first_rank_value(pod)
        if not rank:
            master, worker = self.args.str("master"), self.args.str("worker")
            key = task_key(pod)
            if key not in (master, worker):
                return
            name = meta.get("name", "")
            labels = meta.get("labels") or {}
            if TASK_INDEX_KEY not in labels:
                raise PluginError(f"pod {name} doesn't have {TASK_INDEX_KEY} label")
            try:
                index = go_atoi(str(labels[TASK_INDEX_KEY]))
            except PluginError as err:
                raise PluginError(f"failed to parse task index for pod {name}: {err}") from err
            if key == master:
                rank = str(index)
            else:
                replicas = next((int(t.get("replicas") or 0) for t in tasks(job) if t.get("name") == master), 0)
                rank = str(replicas + index)
        annotations[RANK_ANNOTATION] = rank
        meta["annotations"] = annotations

    def on_job_add(self, job: dict[str, Any], controlled: dict[str, str]) -> list[Effect]:
        return []

    def on_job_delete(self, job: dict[str, Any], controlled: dict[str, str]) -> list[Effect]:
        return []
