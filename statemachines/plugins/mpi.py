"""`mpi`: MPI_HOST and the ssh port (upstream `distributed-framework/mpi`).

Flags: `master` (`master`), `worker` (`worker`), `port` (22).

OnPodCreate: on a master-task pod, if the worker task is absent nothing at all
happens (not even ports); otherwise MPI_HOST = the worker DNS names joined by
`,` (only the first when the worker template sets a hostname; `""` with zero
replicas). Every init container and then every container of every pod gets
the port `mpijob-port` (unless that containerPort exists); master pods also
get MPI_HOST. Worker pods never get MPI_HOST. No objects.

The admission webhook reuses the parsed `master` name (see
`statemachines.admission.validate`).
"""

from __future__ import annotations

from typing import Any

from statemachines.plugins.args import Flag
from statemachines.plugins.base import (
    Plugin,
    append_env,
    containers,
    ensure_port,
    task_hosts,
    task_index,
    task_key,
    tasks,
)

PORT_NAME = "mpijob-port"
MPI_HOST = "MPI_HOST"


class MpiPlugin(Plugin):
    NAME = "mpi"
    FLAGS = (
        Flag("master", "string", "master", "name of master role task"),
        Flag("worker", "string", "worker", "name of worker role task"),
        Flag("port", "int", 22, "open port for containers"),
    )

    @property
    def master(self) -> str:
        return self.args.str("master")

    def on_pod_create(self, pod: dict[str, Any], job: dict[str, Any]) -> None:
        env: list[dict[str, Any]] = []
        if task_key(pod) == self.master:
            position = task_index(job, self.args.str("worker"))
            if position == -1:
                return
            hosts = task_hosts(job, tasks(job)[position])
            env = [{"name": MPI_HOST, "value": ",".join(hosts)}]
        port = self.args.int("port")
        for container in containers(pod, init=True) + containers(pod):
            ensure_port(container, PORT_NAME, port)
            if env:
                append_env(container, env)
