"""The cluster side of `vcbus up`: the watch bridge, and the actuator unless observing only.

`api_client_for(kubeconfig)` finds the cluster the way kubectl users expect:
an explicit kubeconfig, else the in-cluster service account (inside a pod),
else `$KUBECONFIG` / `~/.kube/config` and its current context.

Modes:
- full (`vcbus up --kubeconfig K`): bridge + decider + projector + actuator;
  vcbus *is* the job controller (Volcano's job controller must not run).
- observe only (`--observe-only`): no actuator. vcbus runs beside a real
  Volcano, records every watch event, decides what it would have done, and
  the decider reports where the status Volcano wrote differs from its own
  decision (`job.divergence.v1` events; `vcbus divergences` lists them).
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any

from kubernetes import client, config

from vcbus.errors import UserError
from vcbus.k8s.actuating import ActuatorService
from vcbus.k8s.bridge import Bridge

log = logging.getLogger("vcbus.cluster")


def api_client_for(kubeconfig: str | None, *, context: str | None = None) -> client.ApiClient:
    try:
        if kubeconfig:
            if not os.path.exists(kubeconfig):
                raise UserError(f"--kubeconfig {kubeconfig}: no such file")
            return config.new_client_from_config(config_file=kubeconfig, context=context)
        if os.environ.get("KUBERNETES_SERVICE_HOST"):
            config.load_incluster_config()
            return client.ApiClient()
        return config.new_client_from_config(context=context)
    except UserError:
        raise
    except config.ConfigException as err:
        raise UserError(
            f"no Kubernetes cluster configured ({err}); pass --kubeconfig PATH, set KUBECONFIG, "
            "or run inside a pod with a service account"
        ) from None


class ClusterSide:
    def __init__(self, bus: Any, api_client: client.ApiClient, *, observe_only: bool = False, namespace: str | None = None,
                 fence: Any = None, actuator_bus: Any = None, ahead: bool = True):
        """`bus` is the bridge's; `actuator_bus` the actuator's when it connects as its own NATS user;
        `ahead` False: the actuator applies only stored commands (vcbus.k8s.ahead)."""
        self.bridge = Bridge(bus.js, api_client, namespace=namespace)
        self.actuator = None if observe_only else ActuatorService(actuator_bus or bus, api_client, fence=fence, ahead=ahead)

    def feed(self, deciders: list[Any]) -> None:
        """Let the actuator apply what these deciders, in this process, decide as they store it (vcbus.k8s.ahead)."""
        if self.actuator is not None and self.actuator.ahead is not None:
            for decider in deciders:
                decider.ahead = self.actuator.offer

    def tasks(self, stop: asyncio.Event) -> list[asyncio.Task]:
        tasks = [asyncio.create_task(self.bridge.run(stop), name="bridge")]
        if self.actuator is not None:
            tasks.append(asyncio.create_task(self.actuator.run(stop=stop), name="actuator"))
        return tasks
