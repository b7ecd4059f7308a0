"""`vcbus up` on KWOK nodes for an end-to-end test: the child process, waiting on the cluster, cleanup.

- `start_up(k8s, tmp_path, namespace, *args)`: `vcbus up --kubeconfig` with its own data dir, a free
  `--metrics-addr` (returned) and `--namespace`; more flags in `args` (`--schedule-period 200ms`);
- `Waiter`: polls a condition until it holds (tests.test_e2e_cluster.wait_until), failing at once when
  KWOK or vcbus up died, and draining the test's watches before each look;
- `queue_open(custom, name)`: the queue exists and its status says Open (vcbus's queue controller);
- `running_on(core, namespace, pod, nodes)`: the pod, once it is Running on one of `nodes`, else None;
- `cleanup(up, watches, api, nodes)`: stops the watches and vcbus up, deletes the nodes.
"""

from __future__ import annotations

import os
import pathlib
import sys
from collections.abc import Callable, Iterable
from typing import Any

import pytest
from kubernetes import client

from tests import kwok_env
from tests.k8s_env import free_port
from tests.test_e2e_cluster import UpProcess, wait_until

SG, SV = "scheduling.volcano.sh", "v1beta1"
DEADLINE = float(os.environ.get("VCBUS_E2E_DEADLINE", "300"))  # seconds for one stage; the machine is shared


def start_up(k8s, tmp_path: pathlib.Path, namespace: str, *args: str) -> tuple[UpProcess, str]:
    metrics_addr = f"127.0.0.1:{free_port()}"
    exe = str(pathlib.Path(sys.executable).with_name("vcbus"))
    up = UpProcess([exe, "up", "--kubeconfig", str(k8s.kubeconfig), "--data-dir", str(tmp_path / "data"),
                    "--metrics-addr", metrics_addr, "--namespace", namespace, *args, "-v"], tmp_path / "vcbus-up.log")
    return up, metrics_addr


class Waiter:
    def __init__(self, kwok: kwok_env.Kwok, up: UpProcess, explain: Callable[[], str] = lambda: "") -> None:
        self.kwok, self.up, self.explain = kwok, up, explain
        self.drains: list[Callable[[], None]] = []  # the watches' `drain`, called before each look

    def __call__(self, what: str, predicate: Callable[[], Any], *, poll: float = 0.2) -> Any:
        def alive_and() -> Any:
            self.kwok.check()
            proc = self.up.proc
            if proc is not None and proc.poll() is not None:
                pytest.fail(f"vcbus up exited with {proc.returncode} while waiting for {what}:\n{self.up.tail()}")
            for drain in self.drains:
                drain()
            return predicate()

        return wait_until(what, alive_and, deadline=DEADLINE, poll=poll,
                          explain=lambda: f"{self.explain()}\nvcbus up log (tail):\n{self.up.tail()}")


def queue_open(custom: client.CustomObjectsApi, name: str) -> bool:
    try:
        q = custom.get_cluster_custom_object(SG, SV, "queues", name)
    except client.ApiException as err:
        if err.status == 404:
            return False
        raise
    return (q.get("status") or {}).get("state") == "Open"


def running_on(core: client.CoreV1Api, namespace: str, pod: str, nodes: Iterable[str]) -> Any:
    """The pod once it is Running on one of `nodes` (bound and started by KWOK), else None (gone included)."""
    try:
        p = core.read_namespaced_pod(pod, namespace)
    except client.ApiException as err:
        if err.status == 404:
            return None
        raise
    return p if p.status.phase == "Running" and p.spec.node_name in nodes else None


def cleanup(up: UpProcess | None, watches: Iterable[Any], api, nodes: list[str]) -> None:
    for watch in watches:
        if watch is not None:
            watch.stop()
    if up is not None:
        up.stop()
    kwok_env.delete_nodes(api, nodes)
