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
from vcbus.k8s.actuating import DEFAULT_CONCURRENCY, ActuatorService
from vcbus.k8s.bridge import Bridge
from vcbus.k8s.throttle import Throttle
from vcbus.k8s.watchcache import WatchCache

log = logging.getLogger("vcbus.cluster")


# Volcano's controller-manager defaults to 50 qps / 100 burst and its scheduler to 2000/2000
# (cmd/controller-manager/app/options/options.go, cmd/scheduler/app/options/options.go). vcbus's one
# actuator sends both components' requests (the controller's pods and status writes, the scheduler's
# binds), so its client takes the scheduler's limit: the controller's would cap a 1,000-pod gang's
# creates and binds at 50 requests/s.
DEFAULT_QPS = 2000.0
DEFAULT_BURST = 2000
DEFAULT_TIMEOUT = 30.0  # seconds a request may take (watches set their own)


class ClusterClient(client.ApiClient):
    """The `kubernetes` client with client-go's rate limit and a timeout on every request.

    `throttle` (vcbus.k8s.throttle) is taken before each request, here and on vcbus.k8s.rawcalls'
    own connections; a request without a timeout of its own gets `request_timeout` (a hung call
    must not hold up a worker for ever), except a watch, which sets its own.
    """

    def __init__(self, configuration: client.Configuration, *, qps: float = DEFAULT_QPS,
                 burst: int = DEFAULT_BURST, timeout: float = DEFAULT_TIMEOUT) -> None:
        super().__init__(configuration)
        self.throttle = Throttle(qps, burst)
        self.request_timeout = timeout

    def call_api(self, method, url, header_params=None, body=None, post_params=None, _request_timeout=None):
        self.throttle.wait()
        if _request_timeout is None and "watch=" not in url:
            _request_timeout = self.request_timeout
        return super().call_api(method, url, header_params=header_params, body=body, post_params=post_params,
                                _request_timeout=_request_timeout)


def api_client_for(kubeconfig: str | None, *, context: str | None = None, qps: float = DEFAULT_QPS,
                   burst: int = DEFAULT_BURST, timeout: float = DEFAULT_TIMEOUT,
                   connections: int | None = None) -> ClusterClient:
    """The cluster's client; `connections` sizes its connection pool (the actuator's concurrency and more)."""
    cfg = type.__call__(client.Configuration)  # a fresh one, not a copy of the process-wide default
    try:
        if kubeconfig:
            if not os.path.exists(kubeconfig):
                raise UserError(f"--kubeconfig {kubeconfig}: no such file")
            config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=cfg)
        elif os.environ.get("KUBERNETES_SERVICE_HOST"):
            config.load_incluster_config(client_configuration=cfg)
        else:
            config.load_kube_config(context=context, client_configuration=cfg)
    except UserError:
        raise
    except config.ConfigException as err:
        raise UserError(
            f"no Kubernetes cluster configured ({err}); pass --kubeconfig PATH, set KUBECONFIG, "
            "or run inside a pod with a service account"
        ) from None
    if connections:
        cfg.connection_pool_maxsize = max(cfg.connection_pool_maxsize or 0, connections)
    # no retries inside urllib3 (three silent tries and a warning line each): every caller retries with
    # its own jittered backoff and says so once (vcbus.k8s.apierrors, vcbus.k8s.reach, the watches)
    cfg.retries = False
    return ClusterClient(cfg, qps=qps, burst=burst, timeout=timeout)


class ClusterSide:
    def __init__(self, bus: Any, api_client: client.ApiClient, *, observe_only: bool = False, namespace: str | None = None,
                 fence: Any = None, actuator_bus: Any = None, ahead: bool = True,
                 concurrency: int = DEFAULT_CONCURRENCY):
        """`bus` is the bridge's; `actuator_bus` the actuator's when it connects as its own NATS user;
        `ahead` False: the actuator applies only stored commands (vcbus.k8s.ahead); `concurrency`: the
        actuator's API commands in flight at once."""
        self.bridge = Bridge(bus.js, api_client, namespace=namespace, nc=bus.nc)
        self.actuator = None if observe_only else ActuatorService(
            actuator_bus or bus, api_client, fence=fence, ahead=ahead, concurrency=concurrency,
            cache=WatchCache(self.bridge.watchers))  # what the bridge watches, the actuator reads first

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
