"""`ray`: head/worker commands and the head Service (upstream `distributed-framework/ray`).

Flags: `head` (`head`), `headContainer` (`head`), `worker` (`worker`),
`workerContainer` (`worker`), `port` (6379, GCS), `dashboardPort` (8265),
`clientPort` (10001).

OnPodCreate fails with `job <job> doesn't have head task <head>` when the head
task is missing (for every pod). In a head-task pod the container named
headContainer gets the ports gcs/dashboard/client-server (unless present) and
its `command` is overwritten with `ray start --head ...`; in a worker-task pod
the container named workerContainer gets `ray start --block
--address=<head replica-0 DNS name>:<port>`. Other containers are unchanged.

OnJobAdd (guarded by `plugin-ray`): ClusterIP Service `<job>-head-svc`
(not headless) selecting the head task's pods, created if absent.
OnJobDelete deletes it.
"""

from __future__ import annotations

from typing import Any

from statemachines.plugins.args import Flag
from statemachines.plugins.base import (
    CREATE_IF_ABSENT,
    JOB_NAME_KEY,
    JOB_NAMESPACE_KEY,
    TASK_SPEC_KEY,
    ApplyObject,
    Effect,
    Plugin,
    PluginError,
    containers,
    domain_name,
    ensure_port,
    job_name,
    job_namespace,
    object_meta,
    task_index,
    task_key,
    tasks,
)

GCS_PORT_NAME = "gcs"
DASHBOARD_PORT_NAME = "dashboard"
CLIENT_SERVER_PORT_NAME = "client-server"


def head_service_name(job: dict[str, Any]) -> str:
    return f"{job_name(job)}-head-svc"


class RayPlugin(Plugin):
    NAME = "ray"
    FLAGS = (
        Flag("head", "string", "head", "name of head node in ray cluster"),
        Flag("headContainer", "string", "head", "The container name in a head task pod"),
        Flag("worker", "string", "worker", "name of worker node in ray cluster"),
        Flag("workerContainer", "string", "worker", "The container name in a worker task pod"),
        Flag("port", "int", 6379, "The port for GCS"),
        Flag("dashboardPort", "int", 8265, "The port for the Ray dashboard"),
        Flag("clientPort", "int", 10001, "The port for the Ray client server"),
    )

    def _ports(self) -> list[tuple[str, int]]:
        return [
            (GCS_PORT_NAME, self.args.int("port")),
            (DASHBOARD_PORT_NAME, self.args.int("dashboardPort")),
            (CLIENT_SERVER_PORT_NAME, self.args.int("clientPort")),
        ]

    def on_pod_create(self, pod: dict[str, Any], job: dict[str, Any]) -> None:
        head = self.args.str("head")
        position = task_index(job, head)
        if position == -1:
            raise PluginError(f"job {job_name(job)} doesn't have head task {head}")
        key = task_key(pod)
        port, dashboard, client = (value for _, value in self._ports())
        for container in containers(pod):
            if key == head and container.get("name") == self.args.str("headContainer"):
                for name, value in self._ports():
                    ensure_port(container, name, value)
                container["command"] = [
                    "sh",
                    "-c",
                    f"ray start --head --block --dashboard-host=0.0.0.0 --port={port} "
                    f"--dashboard-port={dashboard} --ray-client-server-port={client}",
                ]
            if key == self.args.str("worker") and container.get("name") == self.args.str("workerContainer"):
                addr = domain_name(job, tasks(job)[position], 0)
                container["command"] = ["sh", "-c", f"ray start --block --address={addr}:{port}"]

    def add_objects(self, job: dict[str, Any]) -> list[Effect]:
        ports = [
            {"name": name, "port": value, "targetPort": name, "protocol": "TCP"} for name, value in self._ports()
        ]
        manifest = {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": object_meta(job, head_service_name(job)),
            "spec": {
                "selector": {
                    JOB_NAME_KEY: job_name(job),
                    JOB_NAMESPACE_KEY: job_namespace(job),
                    TASK_SPEC_KEY: self.args.str("head"),
                },
                "ports": ports,
            },
        }
        return [ApplyObject(manifest=manifest, mode=CREATE_IF_ABSENT, plugin=self.NAME)]

    def delete_objects(self, job: dict[str, Any]) -> list[Effect]:
        return [self.delete(job, "v1", "Service", head_service_name(job))]
