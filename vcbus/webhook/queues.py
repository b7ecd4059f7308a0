"""Where the webhook gets its queues from: a file, or the cluster's Queue objects.

The job validating webhook needs the queue of each job (existence, state,
children). `StaticQueues` reads Queue objects once from files; `ClusterQueues`
lists `scheduling.volcano.sh/v1beta1` queues through the Kubernetes API with a
short cache (upstream reads an informer cache, so a queue created a moment ago
may also be missing there). A listing error propagates, and the server then
denies the request: fail closed.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from statemachines.admission import QueueIndex
from vcbus.manifests import load_all


class StaticQueues:
    """Queue objects from manifest files, read once."""

    def __init__(self, paths: list[str]) -> None:
        self.index = QueueIndex([d.obj for d in load_all(paths) if d.kind == "Queue"])

    def __call__(self) -> QueueIndex:
        return self.index


class ClusterQueues:
    """Queues listed from the API server, cached for `ttl` seconds."""

    def __init__(self, api_client: Any, *, ttl: float = 1.0) -> None:
        from kubernetes import client

        self.api = client.CustomObjectsApi(api_client)
        self.ttl = ttl
        self._lock = threading.Lock()
        self._cached: tuple[float, QueueIndex] | None = None

    def __call__(self) -> QueueIndex:
        with self._lock:
            now = time.monotonic()
            if self._cached is not None and now - self._cached[0] < self.ttl:
                return self._cached[1]
            listing = self.api.list_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues")
            index = QueueIndex(list(listing.get("items") or []))
            self._cached = (now, index)
            return index


def cluster_queues(kubeconfig: str | None, *, ttl: float = 1.0, context: str | None = None) -> ClusterQueues:
    """Queues from the cluster of `kubeconfig` and `context` (or the in-cluster service account)."""
    from kubernetes import client, config

    if kubeconfig or context:
        api_client = config.new_client_from_config(config_file=kubeconfig, context=context)
    else:
        config.load_incluster_config()
        api_client = client.ApiClient()
    return ClusterQueues(api_client, ttl=ttl)
