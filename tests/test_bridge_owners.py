"""A pod for the volcano scheduler comes after its ReplicaSet on the bus, even when the ReplicaSet's watch
is behind the pods' (on a real API server and nats-server): the podgroup controller builds the pod's
PodGroup with the owner's annotations (`scheduling.volcano.sh/group-min-member`), and a pod before its
owner's first record got a PodGroup of one (tests/test_e2e_workloads.py's gang, now and then)."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from tests.test_bridge import bridge_running, create, js, owner, pod, stream_recs, wait_recs, wait_settled  # noqa: F401

pytestmark = [pytest.mark.k8s, pytest.mark.nats]


async def test_a_pod_is_published_after_its_owner_whose_watch_is_behind(k8s, k8s_namespace, js):  # noqa: F811
    api = k8s.api_client()
    ns = k8s_namespace
    async with bridge_running(js, api, ns) as bridge:
        await wait_settled(js, bridge, timeout=30)
        # the fault: the ReplicaSets' watch lags (a real API server's does, now and then, by less): its
        # events are held back from the bridge's loop until released (a mock, standing in for the lag)
        watcher = bridge.watchers["replicasets"]
        held, poll = threading.Event(), watcher.poll
        held.set()
        watcher.poll = lambda: None if held.is_set() else poll()  # type: ignore[method-assign]
        rs = await create(api, "replicasets", ns, {**owner("ReplicaSet", "gang"), "metadata": {
            "name": "gang", "annotations": {"scheduling.volcano.sh/group-min-member": "3"}}})
        member = pod("gang-abcde", None)
        member["spec"]["schedulerName"] = "volcano"
        member["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "gang",
                                                  "uid": rs["metadata"]["uid"], "controller": True}]
        await create(api, "pods", ns, member)
        deadline = time.monotonic() + 60  # until the pod is on the bus, or the bridge holds it for its owner
        while not bridge.owner_waits and not [r for r in await stream_recs(js) if r.name == "gang-abcde"]:
            assert time.monotonic() < deadline, "the pod was neither published nor held"
            await asyncio.sleep(0.05)
        held.clear()
        watcher.on_item()  # wake the ReplicaSets' loop, asleep since its watch had nothing for it
        recs = await wait_recs(js, ns, 2, timeout=60)
    assert [r.short for r in recs if r.name.startswith("gang")] == [("ADDED", "ReplicaSet", "gang"),
                                                                    ("ADDED", "Pod", "gang-abcde")]
