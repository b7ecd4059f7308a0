"""The actuator service on real NATS and a real API server: scheduler commands, a crash before the ack.

The "crash" is a real one as far as JetStream can tell: a consumer of the
actuator's durable takes the BindPod, carries it out and goes away without
acking; the running service gets it again after the ack wait and finds it done.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from kubernetes import client

from statemachines import outputs as o
from vcbus.bus import subjects as s
from vcbus.bus.cloudevents import headers
from vcbus.bus.connecting import open_bus
from vcbus.k8s.actuating import DURABLE, ActuatorService
from vcbus.k8s.podsim import PodSimulator
from vcbus.k8s.watching import KubeApiError

pytestmark = [pytest.mark.k8s, pytest.mark.nats]
T1 = "2026-11-30T08:05:00Z"


async def publish(js, cmd: o.Output, msg_id: str) -> None:
    ack = await js.publish(s.command_subject(cmd.job), o.encoder.encode(cmd),
                           headers=headers(cmd, ce_id=msg_id, source="/vcbus"))
    assert not ack.duplicate


async def until(predicate, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"not within {timeout}s: {what}"
        await asyncio.sleep(0.05)


async def test_a_bind_applied_before_a_crash_is_done_when_redelivered_and_sessions_name_their_events(
        k8s, k8s_namespace, bus_settings):
    api = k8s.api_client()
    ns, core = k8s_namespace, client.CoreV1Api(api)
    sim, node = PodSimulator(api), f"svc-{k8s_namespace[-6:]}"
    try:
        sim.create_node(node)
    except KubeApiError as err:
        if err.status != 409:
            raise
    try:
        pod = core.create_namespaced_pod(ns, {"metadata": {"name": "p-0"}, "spec": {
            "schedulerName": "volcano", "containers": [{"name": "c", "image": "busybox"}]}})
        job = f"{ns}/j"
        bind = o.BindPod(job=job, seq=5, time=T1, name="p-0", uid=pod.metadata.uid, node=node)
        scheduled = o.RecordEvent(job=job, seq=5, time=T1, reason="Scheduled", kind="Pod", name="p-0",
                                  message=f"Successfully assigned {ns}/p-0 to {node}", component="vc-scheduler")
        async with open_bus(bus_settings) as bus:
            await publish(bus.js, bind, "sched:5:1:0")
            await publish(bus.js, scheduled, "sched:5:1:1")
            await publish(bus.js, scheduled, "sched:5:2:1")  # the next session at the same cut: a second event

            service = ActuatorService(bus, api)
            await service._consumer()
            crashed = await bus.js.pull_subscribe_bind(durable=DURABLE, stream=s.CMDS_STREAM)
            (msg,) = await crashed.fetch(1, timeout=5)
            assert msg.headers["Nats-Msg-Id"] == "sched:5:1:0"
            assert await asyncio.to_thread(service.actuator.apply, o.command_decoder.decode(msg.data)) == "applied"
            await crashed.unsubscribe()  # gone without an ack

            stop = asyncio.Event()
            task = asyncio.create_task(service.run(stop=stop))
            try:
                await until(lambda: service.results["done"] + service.results["applied"] >= 3, "three commands")
            finally:
                stop.set()
                await asyncio.wait_for(task, 30)
        assert service.results == {"applied": 2, "done": 1, "dropped": 0, "failed": 0}
        assert core.read_namespaced_pod("p-0", ns).spec.node_name == node
        events = core.list_namespaced_event(ns).items
        assert [(e.reason, e.involved_object.name, e.source.component) for e in events] == [
            ("Scheduled", "p-0", "vc-scheduler")] * 2
        assert len({e.metadata.name for e in events}) == 2
    finally:
        sim.delete_node(node)
