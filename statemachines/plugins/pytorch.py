"""`pytorch`: MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK (upstream `distributed-framework/pytorch`).

Flags: `master` (`master`), `worker` (`worker`), `port` (23456),
`wait-master-enabled` (false), `wait-master-timeout` (300),
`wait-master-image` (`busybox:1.36.1`).

OnPodCreate, when the master task exists (otherwise nothing at all):
MASTER_ADDR is the DNS name of master replica 0; WORLD_SIZE sums the replicas
of the master and worker tasks; RANK is 0 on every master pod and index+1 on
worker pods (none on other tasks; if both names are equal the worker branch
wins). Every regular container gets the port `pytorchjob-port` (unless that
containerPort exists) and the env in the order MASTER_ADDR, MASTER_PORT,
WORLD_SIZE, RANK. With wait-master-enabled, worker pods get a last init
container `wait-for-master` that polls the master address. No objects.
"""

from __future__ import annotations

from typing import Any

from statemachines.plugins.args import Flag
from statemachines.plugins.base import (
    Plugin,
    append_env,
    containers,
    domain_name,
    go_atoi,
    pod_index_by_name,
    task_index,
    task_key,
    tasks,
)

PORT_NAME = "pytorchjob-port"
WAIT_CONTAINER = "wait-for-master"


def wait_for_master_script(addr: str, port: int, timeout: int) -> str:
    """The shell loop of the wait-for-master init container."""
    return "\n".join(
        [
            f'echo "Waiting for master node {addr}:{port} to be ready..."',
            f"TIMEOUT={timeout}",
            "ELAPSED=0",
            f"until {{ nc -z {addr} {port} || echo > /dev/tcp/{addr}/{port}; }} 2>/dev/null; do",
            "  if [ $ELAPSED -ge $TIMEOUT ]; then",
            '    echo "Timeout waiting for master after ${TIMEOUT} seconds"',
            "    exit 1",
            "  fi",
            '  echo "Master not ready yet, retrying in 2 seconds... (elapsed: ${ELAPSED}s)"',
            "  sleep 2",
            "  ELAPSED=$((ELAPSED + 2))",
            "done",
            'echo "Master node is ready!"',
        ]
    )


class PytorchPlugin(Plugin):
    NAME = "pytorch"
    FLAGS = (
        Flag("master", "string", "master", "name of master role task"),
        Flag("worker", "string", "worker", "name of worker role task"),
        Flag("port", "int", 23456, "open port for containers"),
        Flag("wait-master-enabled", "bool", False, "enable init container to wait for master"),
        Flag("wait-master-timeout", "int", 300, "timeout in seconds for waiting master to be ready"),
        Flag("wait-master-image", "string", "busybox:1.36.1", "image for wait-for-master init container"),
    )

    def on_pod_create(self, pod: dict[str, Any], job: dict[str, Any]) -> None:
        master, worker = self.args.str("master"), self.args.str("worker")
        port = self.args.int("port")
        position = task_index(job, master)
        if position == -1:
            return
        addr = domain_name(job, tasks(job)[position], 0)
        key = task_key(pod)
        rank: int | None = None
        if key == worker:
            rank = go_atoi(pod_index_by_name(pod)) + 1
            self._add_wait_for_master(pod, addr, port)
        elif key == master:
            rank = 0
        world = sum(int(t.get("replicas") or 0) for t in tasks(job) if t.get("name", "") in (master, worker))
        env = [
            {"name": "MASTER_ADDR", "value": addr},
            {"name": "MASTER_PORT", "value": str(port)},
            {"name": "WORLD_SIZE", "value": str(world)},
        ]
        if rank is not None:
            env.append({"name": "RANK", "value": str(rank)})
        for container in containers(pod):
            ports = list(container.get("ports") or [])
            if not any(int(p.get("containerPort", 0) or 0) == port for p in ports):
                container["ports"] = ports + [{"name": PORT_NAME, "containerPort": port}]
            append_env(container, env)

    def _add_wait_for_master(self, pod: dict[str, Any], addr: str, port: int) -> None:
        if not self.args.bool("wait-master-enabled"):
            return
        inits = containers(pod, init=True)
        if any(c.get("name") == WAIT_CONTAINER for c in inits):
            return
        script = wait_for_master_script(addr, port, self.args.int("wait-master-timeout"))
        inits.append(
            {"name": WAIT_CONTAINER, "image": self.args.str("wait-master-image"), "command": ["sh", "-c", script]}
        )
        pod["spec"]["initContainers"] = inits
