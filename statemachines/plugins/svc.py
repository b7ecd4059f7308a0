"""`svc`: headless Service, hosts ConfigMap and NetworkPolicy (upstream `plugins/svc`).

Flags: `publish-not-ready-addresses` (false), `disable-network-policy` (false),
`inject-hosts-env` (true).

OnPodCreate: hostname := pod name and subdomain := job name when empty; with
inject-hosts-env, `VC_<TASK>_HOSTS` and `VC_<TASK>_NUM` (from ConfigMap
`<job>-svc`) for every task in spec order, appended to every container and init
container; the ConfigMap is mounted at `/etc/volcano` (no subPath, so live).

OnJobAdd (guarded by `plugin-svc`): ConfigMap `<job>-svc` (create or update its
data), headless Service `<job>` (created if absent), NetworkPolicy `<job>`
(created if absent, unless disabled). OnJobUpdate: the ConfigMap again (this is
how scale up/down reaches `/etc/volcano`). OnJobDelete: delete the ConfigMap,
the Service and (unless disabled) the NetworkPolicy.
"""

from __future__ import annotations

from typing import Any

from statemachines.plugins.args import Flag
from statemachines.plugins.base import (
    CREATE_IF_ABSENT,
    CREATE_OR_UPDATE_DATA,
    JOB_NAME_KEY,
    JOB_NAMESPACE_KEY,
    ApplyObject,
    Effect,
    Plugin,
    all_containers,
    append_env,
    append_mount,
    append_volume,
    job_name,
    job_namespace,
    object_meta,
    task_hosts,
    tasks,
)

CONFIGMAP_MOUNT_PATH = "/etc/volcano"


def env_key(task_name: str) -> str:
    """`my-task` -> `MY_TASK`."""
    return task_name.replace("-", "_").upper()


def configmap_name(job: dict[str, Any]) -> str:
    return f"{job_name(job)}-svc"


def generate_hosts(job: dict[str, Any]) -> dict[str, str]:
    """The `<job>-svc` ConfigMap data (`GenerateHosts`)."""
    data: dict[str, str] = {}
    for task in tasks(job):
        hosts = task_hosts(job, task)
        raw_key = task.get("name", "").replace("-", "_")
        data[f"{raw_key}.host"] = "\n".join(hosts)
        data[f"VC_{raw_key.upper()}_HOSTS"] = ",".join(hosts)
        data[f"VC_{raw_key.upper()}_NUM"] = str(len(hosts))
    return data


def job_selector(job: dict[str, Any]) -> dict[str, str]:
    return {JOB_NAME_KEY: job_name(job), JOB_NAMESPACE_KEY: job_namespace(job)}


class SvcPlugin(Plugin):
    NAME = "svc"
    FLAGS = (
        Flag("publish-not-ready-addresses", "bool", False, "set publishNotReadyAddresses of svc to true"),
        Flag("disable-network-policy", "bool", False, "set disableNetworkPolicy of svc to true"),
        Flag("inject-hosts-env", "bool", True, "set injectHostsEnv of svc to false"),
    )

    def on_pod_create(self, pod: dict[str, Any], job: dict[str, Any]) -> None:
        spec = pod.setdefault("spec", {})
        if not spec.get("hostname"):
            spec["hostname"] = (pod.get("metadata") or {}).get("name", "")
        if not spec.get("subdomain"):
            spec["subdomain"] = job_name(job)
        cm_name = configmap_name(job)
        if self.args.bool("inject-hosts-env"):
            names: list[str] = []
            for task in tasks(job):
                key = env_key(task.get("name", ""))
                names += [f"VC_{key}_HOSTS", f"VC_{key}_NUM"]
            env = [
                {"name": name, "valueFrom": {"configMapKeyRef": {"name": cm_name, "key": name}}}
                for name in names
            ]
            for container in all_containers(pod):
                append_env(container, env)
        append_volume(pod, {"name": cm_name, "configMap": {"name": cm_name}})
        for container in all_containers(pod):
            append_mount(container, {"name": cm_name, "mountPath": CONFIGMAP_MOUNT_PATH})

    def configmap(self, job: dict[str, Any]) -> ApplyObject:
        manifest = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": object_meta(job, configmap_name(job)),
            "data": generate_hosts(job),
        }
        return ApplyObject(manifest=manifest, mode=CREATE_OR_UPDATE_DATA, plugin=self.NAME)

    def service(self, job: dict[str, Any]) -> ApplyObject:
        manifest = {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": object_meta(job, job_name(job)),
            "spec": {
                "clusterIP": "None",
                "selector": job_selector(job),
                "publishNotReadyAddresses": self.args.bool("publish-not-ready-addresses"),
            },
        }
        return ApplyObject(manifest=manifest, mode=CREATE_IF_ABSENT, plugin=self.NAME)

    def network_policy(self, job: dict[str, Any]) -> ApplyObject:
        manifest = {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": object_meta(job, job_name(job)),
            "spec": {
                "podSelector": {"matchLabels": job_selector(job)},
                "ingress": [{"from": [{"podSelector": {"matchLabels": job_selector(job)}}]}],
                "policyTypes": ["Ingress"],
            },
        }
        return ApplyObject(manifest=manifest, mode=CREATE_IF_ABSENT, plugin=self.NAME)

    def add_objects(self, job: dict[str, Any]) -> list[Effect]:
        effects: list[Effect] = [self.configmap(job), self.service(job)]
        if not self.args.bool("disable-network-policy"):
            effects.append(self.network_policy(job))
        return effects

    def on_job_update(self, job: dict[str, Any], controlled: dict[str, str]) -> list[Effect]:
        return [self.configmap(job)]

    def delete_objects(self, job: dict[str, Any]) -> list[Effect]:
        effects: list[Effect] = [
            self.delete(job, "v1", "ConfigMap", configmap_name(job)),
            self.delete(job, "v1", "Service", job_name(job)),
        ]
        if not self.args.bool("disable-network-policy"):
            effects.append(self.delete(job, "networking.k8s.io/v1", "NetworkPolicy", job_name(job)))
        return effects
