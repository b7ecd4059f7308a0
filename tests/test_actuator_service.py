"""The actuator service on real NATS and a real API server: scheduler commands, a crash before the ack.

The "crash" is a real one as far as JetStream can tell: a consumer of the
actuator's durable takes the BindPod, carries it out and goes away without
acking; the running service gets it again after the ack wait and finds it done.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import time

import pytest
from kubernetes import client

from statemachines import outputs as o
from tests.podsim import PodSimulator
from vcbus.bus import subjects as s
from vcbus.bus.cloudevents import headers
from vcbus.bus.connecting import open_bus
from vcbus.k8s.actuating import DURABLE, ActuatorService
from vcbus.k8s.watching import KubeApiError

pytestmark = [pytest.mark.k8s, pytest.mark.nats]
T1 = "2026-11-30T08:05:00Z"


async def publish(js, cmd: o.Output, msg_id: str) -> None:
    ack = await js.publish(s.command_subject(cmd.job), o.encoder.encode(cmd),
                           headers=headers(cmd, ce_id=msg_id, source="/vcbus"))
    assert not ack.duplicate


@contextlib.contextmanager
def a_node(api, name: str):
    """A Node to bind to and nothing more (no pod runs, no vcbus scheduler): PodSimulator's, KWOK would
    run the pod. Deleted after: the test API server is shared."""
    sim = PodSimulator(api)
    try:
        sim.create_node(name)
    except KubeApiError as err:
        if err.status != 409:
            raise
    try:
        yield name
    finally:
        sim.delete_node(name)


async def until(predicate, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"not within {timeout}s: {what}"
        await asyncio.sleep(0.05)


async def test_a_bind_applied_before_a_crash_is_done_when_redelivered_and_sessions_name_their_events(
        k8s, k8s_namespace, bus_settings):
    api = k8s.api_client()
    ns, core = k8s_namespace, client.CoreV1Api(api)
    with a_node(api, f"svc-{k8s_namespace[-6:]}") as node:
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
        assert service.results == {"applied": 2, "done": 1, "dropped": 0, "refused": 0, "superseded": 0, "failed": 0}
        assert core.read_namespaced_pod("p-0", ns).spec.node_name == node
        events = core.list_namespaced_event(ns).items
        assert [(e.reason, e.involved_object.name, e.source.component) for e in events] == [
            ("Scheduled", "p-0", "vc-scheduler")] * 2
        assert len({e.metadata.name for e in events}) == 2


async def test_an_older_durable_is_updated_and_events_applied_beside_the_commands_are_all_acked(
        k8s, k8s_namespace, bus_settings):
    """The durable an older vcbus made (one command in flight) is updated in place; RecordEvents run in the
    background (vcbus.k8s.actuating) yet every command is applied and acked before `until_idle` returns."""
    from nats.js import api as js_api


    api = k8s.api_client()
    ns, core = k8s_namespace, client.CoreV1Api(api)
    owner = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "j",
             "uid": "00000000-0000-0000-0000-00000000000a", "controller": True}
    pods = {name: core.create_namespaced_pod(ns, {"metadata": {"name": name, "ownerReferences": [owner]}, "spec": {
        "schedulerName": "volcano", "containers": [{"name": "c", "image": "busybox"}]}}) for name in ("keep", "gone")}
    job = f"{ns}/j"
    commands = [
        (o.RecordEvent(job=job, seq=7, time=T1, reason="Killing", kind="Pod", name="keep", message="one"), "7:0"),
        # the vcjob does not exist: a pod whose ownerReference names it is its leftover, deleted all the same
        (o.DeletePod(job=job, seq=7, time=T1, name="gone", uid=pods["gone"].metadata.uid), "7:1"),
        (o.RecordEvent(job=job, seq=7, time=T1, reason="Restarting", kind="Pod", name="keep", message="two"), "7:2"),
    ]
    async with open_bus(bus_settings) as bus:
        await bus.js.add_consumer(s.CMDS_STREAM, config=js_api.ConsumerConfig(
            durable_name=DURABLE, ack_policy=js_api.AckPolicy.EXPLICIT, deliver_policy=js_api.DeliverPolicy.ALL,
            max_ack_pending=1, ack_wait=5.0, max_deliver=-1))
        for cmd, msg_id in commands:
            await publish(bus.js, cmd, msg_id)
        service = ActuatorService(bus, api, idle=1.0)
        await asyncio.wait_for(service.run(stop=asyncio.Event(), until_idle=True), 60)
        info = await bus.js.consumer_info(s.CMDS_STREAM, DURABLE)
    assert info.config.max_ack_pending == service.window > 1
    assert (info.num_pending, info.num_ack_pending) == (0, 0)
    assert service.results == {"applied": 3, "done": 0, "dropped": 0, "refused": 0, "superseded": 0, "failed": 0}
    assert sorted(e.reason for e in core.list_namespaced_event(ns).items) == ["Killing", "Restarting"]
    assert [p.metadata.name for p in core.list_namespaced_pod(ns).items
            if not p.metadata.deletion_timestamp] == ["keep"]


def test_a_kill_checks_ownership_in_its_annotation_patch_and_writes_nothing_on_a_pod_it_does_not_own(
        k8s, k8s_namespace):
    """DeletePod (a kill) annotates and deletes in two requests, the patch's tests being the ownership check:
    a forged kill naming another job's pod (with its right uid) is refused and that pod is left untouched;
    a stale uid (the name's next incarnation) is "done" and leaves the new pod alone."""
    from vcbus.k8s.actuator import Actuator

    api = k8s.api_client()
    ns, core = k8s_namespace, client.CoreV1Api(api)

    def pod(name: str, job: str, annotations: dict | None = None):
        owner = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": job,
                 "uid": "00000000-0000-0000-0000-00000000000b", "controller": True}
        meta = {"name": name, "ownerReferences": [owner], **({"annotations": annotations} if annotations else {})}
        return core.create_namespaced_pod(ns, {"metadata": meta, "spec": {
            "nodeName": "nowhere", "containers": [{"name": "c", "image": "busybox"}]}})  # on a node: graceful delete

    mine, bare, theirs, renewed = (pod("mine", "j", {"a": "b"}), pod("bare", "j"), pod("theirs", "other", {"a": "b"}),
                                   pod("renewed", "j", {"a": "b"}))
    act = Actuator(api)
    kill = lambda p, uid=None: o.DeletePod(job=f"{ns}/j", seq=1, time=T1, name=p.metadata.name,  # noqa: E731
                                           uid=uid or p.metadata.uid, reason="kill")
    assert act.apply(kill(mine)) == "applied"
    assert act.apply(kill(bare)) == "applied"  # no annotations yet: the read-check-patch path adds the map
    assert act.apply(kill(theirs)) == "refused"
    assert act.apply(kill(renewed, uid="00000000-0000-0000-0000-0000000000ff")) == "done"
    live = {p.metadata.name: p for p in core.list_namespaced_pod(ns).items}
    for name in ("mine", "bare"):
        assert live[name].metadata.deletion_timestamp is not None
        assert live[name].metadata.annotations["volcano.sh/controller-out-of-sync"] == "true"
    for name in ("theirs", "renewed"):
        assert live[name].metadata.deletion_timestamp is None
        assert live[name].metadata.annotations == {"a": "b"}


@pytest.mark.slow
async def test_commands_waiting_longer_than_the_ack_wait_are_kept_alive_not_redelivered(bus_settings, monkeypatch):
    # An API server that is not there: the job's first command (a barrier) is retried, and the pod
    # commands behind it wait in their lane for several ack waits; kept alive, JetStream delivers
    # each of them once.
    from kubernetes.client import ApiClient, Configuration

    from tests.k8s_env import free_port
    from vcbus.k8s import actuating

    monkeypatch.setattr(actuating, "ACK_WAIT", 4.0)
    monkeypatch.setattr(actuating, "KEEP_ALIVE", 0.5)
    cfg = Configuration()
    cfg.host = f"http://127.0.0.1:{free_port()}"
    job = "ns1/j"
    cmds = [o.CreatePod(job=job, seq=3, time=T1, name=f"j-w-{i}", task="w", index=i, pod={"metadata": {"name": f"j-w-{i}"}})
            for i in range(5)]
    async with open_bus(bus_settings) as bus:
        await publish(bus.js, o.DeleteJob(job=job, seq=2, time=T1, uid="u-1"), "2:0")
        for i, cmd in enumerate(cmds):
            await publish(bus.js, cmd, f"3:{i}")
        service = ActuatorService(bus, ApiClient(cfg), max_backoff=0.5)
        stop = asyncio.Event()
        task = asyncio.create_task(service.run(stop=stop))
        try:
            await until(lambda: service.peak_waiting >= 6, "six commands in hand")
            began = time.monotonic()
            while time.monotonic() - began < 2 * actuating.ACK_WAIT:
                info = await bus.js.consumer_info(s.CMDS_STREAM, DURABLE)
                assert info.num_redelivered == 0, "a command waiting in hand was delivered again"
                await asyncio.sleep(0.2)
            assert info.num_ack_pending == 6
        finally:
            stop.set()
            await asyncio.wait_for(task, 30)


async def test_events_are_taken_as_the_event_recorder_takes_them_acked_at_once_and_the_overflow_dropped(
        k8s, k8s_namespace, bus_settings, monkeypatch):
    """RecordEvents are acked as they are received (they never hold the consumer's window) and at most
    EVENT_QUEUE of them wait to be written; the rest are dropped and counted, as client-go's broadcaster
    drops events when its queue is full. The queue is made 3 long here (a setting, not a stand-in)."""
    from vcbus.k8s import actuating

    monkeypatch.setattr(actuating, "EVENT_QUEUE", 3)
    api = k8s.api_client()
    ns, core = k8s_namespace, client.CoreV1Api(api)
    job = f"{ns}/j"
    core.create_namespaced_pod(ns, {"metadata": {"name": "p"}, "spec": {
        "schedulerName": "volcano", "containers": [{"name": "c", "image": "busybox"}]}})
    async with open_bus(bus_settings) as bus:
        for i in range(12):
            await publish(bus.js, o.RecordEvent(job=job, seq=9, time=T1, reason="Killing", kind="Pod", name="p",
                                                message=f"event {i}"), f"9:{i}")
        service = ActuatorService(bus, api, idle=1.0, concurrency=1)
        await asyncio.wait_for(service.run(stop=asyncio.Event(), until_idle=True), 60)
        info = await bus.js.consumer_info(s.CMDS_STREAM, DURABLE)
    assert (info.num_pending, info.num_ack_pending) == (0, 0)  # every one acked, written or not
    written = len(core.list_namespaced_event(ns).items)
    assert service.results["applied"] == written and service.results["dropped"] == 12 - written
    assert 3 <= written < 12, (written, service.results)


async def test_each_components_events_are_written_one_at_a_time_beside_the_commands(
        k8s, k8s_namespace, bus_settings, monkeypatch):
    """Each source component has one recorder, as each of Volcano's components has one event sink
    writing its events one after another: the scheduler's and the controller's RecordEvents are
    written at most one at a time each, and each component's queue drops its own overflow. The
    actuator's apply is wrapped to watch how many of a component's events are in flight (a spy around
    the real call, which still writes every event); the queue is made 3 long here (a setting)."""
    import threading

    from vcbus.k8s import actuating

    monkeypatch.setattr(actuating, "EVENT_QUEUE", 3)
    api = k8s.api_client()
    ns, core = k8s_namespace, client.CoreV1Api(api)
    job = f"{ns}/j"
    core.create_namespaced_pod(ns, {"metadata": {"name": "p"}, "spec": {
        "schedulerName": "volcano", "containers": [{"name": "c", "image": "busybox"}]}})
    async with open_bus(bus_settings) as bus:
        for i in range(24):
            component = "vc-scheduler" if i % 2 else ""  # "": the controller's (vc-controller-manager)
            await publish(bus.js, o.RecordEvent(job=job, seq=9, time=T1, reason="Killing", kind="Pod", name="p",
                                                message=f"event {i}", component=component), f"9:{i}")
        service = ActuatorService(bus, api, idle=1.0, concurrency=8)
        lock, in_flight, most = threading.Lock(), collections.Counter(), collections.Counter()
        real_apply = service.actuator.apply

        def apply(cmd, *args, **kwargs):
            source = cmd.component or "vc-controller-manager"
            with lock:
                in_flight[source] += 1
                most[source] = max(most[source], in_flight[source])
            try:
                return real_apply(cmd, *args, **kwargs)
            finally:
                with lock:
                    in_flight[source] -= 1

        service.actuator.apply = apply
        await asyncio.wait_for(service.run(stop=asyncio.Event(), until_idle=True), 60)
    events = core.list_namespaced_event(ns).items
    by_source = collections.Counter(e.source.component for e in events)
    assert set(by_source) == {"vc-scheduler", "vc-controller-manager"}, by_source
    assert all(3 <= n < 12 for n in by_source.values()), by_source  # each queue dropped its own overflow
    assert service.results["applied"] == len(events) and service.results["dropped"] == 24 - len(events)
    assert dict(most) == {"vc-scheduler": 1, "vc-controller-manager": 1}, most


async def test_a_condition_still_waiting_when_the_pods_bind_arrives_is_never_written(k8s, k8s_namespace, bus_settings):
    """Issue 32 item 3 on the real API server: a session that saw the gang half created wrote
    PodScheduled=False for the pod, the next one binds it; the condition, still waiting behind a
    job-wide command of its lane when the bind arrives, is superseded (acked, counted, never sent)
    and the bind lands. Concurrency 1 and one batch: the three are in hand before the first ends."""
    api = k8s.api_client()
    ns, core = k8s_namespace, client.CoreV1Api(api)
    with a_node(api, f"cond-{k8s_namespace[-6:]}") as node:
        pod = core.create_namespaced_pod(ns, {"metadata": {"name": "p-0"}, "spec": {
            "schedulerName": "volcano", "containers": [{"name": "c", "image": "busybox"}]}})
        job, uid = f"{ns}/j", pod.metadata.uid
        ahead = o.CreatePodGroup(job=job, seq=4, time=T1, name="j-pg")  # job-wide: the lane waits for it
        condition = o.UpdatePodCondition(job=job, seq=5, time=T1, name="p-0", uid=uid, reason="Unschedulable",
                                         message="1/2 tasks in gang unschedulable")
        bind = o.BindPod(job=job, seq=6, time=T1, name="p-0", uid=uid, node=node)
        async with open_bus(bus_settings) as bus:
            for cmd, msg_id in ((ahead, "4:0"), (condition, "sched:5:1:0"), (bind, "sched:6:2:0")):
                await publish(bus.js, cmd, msg_id)
            service = ActuatorService(bus, api, idle=1.0, concurrency=1)
            await asyncio.wait_for(service.run(stop=asyncio.Event(), until_idle=True), 60)
            info = await bus.js.consumer_info(s.CMDS_STREAM, DURABLE)
        assert (info.num_pending, info.num_ack_pending) == (0, 0)
        assert service.results["superseded"] == 1 and service.results["applied"] >= 1, service.results
        got = core.read_namespaced_pod("p-0", ns)
        assert got.spec.node_name == node
        assert not [c for c in got.status.conditions or [] if c.reason == "Unschedulable"]
