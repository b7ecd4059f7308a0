"""The scheduler service on a real nats-server: sessions live, restart, rebuilt == live.

The cluster is the one of examples/scheduler/three-nodes.yaml (Volcano scheduler reference
§10.3: three nodes of cpu 5, the seed job's three pods of cpu 3), fed to VCBUS_K8S in the
stages a real cluster goes through: nodes, queue and a Pending PodGroup; then the pods; then
the pods on the nodes the scheduler bound them to (what the actuator and the kubelet would
make happen). No actuator runs here: the test plays the cluster's answers.
"""

from __future__ import annotations

import asyncio
import copy
import json
import pathlib

import pytest
import yaml

from statemachines import outputs as o
from statemachines.model.records import decode
from statemachines.scheduler.config import DEFAULT_CONFIG
from statemachines.scheduler.session import run_session
from tests.fixtures_nats import stream_messages, vcbus_cli
from vcbus.bus import subjects as s
from vcbus.bus.cloudevents import MSG_ID
from vcbus.bus.connecting import open_bus
from vcbus.bus.projector import Projector
from vcbus.bus.publisher import prepare
from vcbus.bus.reading import read_bucket
from vcbus.bus.scheduling import SchedulerService
from vcbus.bus.sessions import parse_id, session_messages

pytestmark = pytest.mark.nats

ROOT = pathlib.Path(__file__).resolve().parents[1]
CLUSTER = ROOT / "examples" / "scheduler" / "three-nodes.yaml"
T0 = "2026-11-30T08:00:30Z"


class Cluster:
    """The example's objects, and watch records of them with growing resourceVersions."""

    def __init__(self) -> None:
        self.objects = [d for d in yaml.safe_load_all(CLUSTER.read_text()) if d]
        self.rv = 100
        self.second = 0

    def of(self, kind: str) -> list[dict]:
        return [copy.deepcopy(d) for d in self.objects if d["kind"] == kind]

    def record(self, rtype: str, obj: dict) -> bytes:
        self.rv += 1
        self.second += 1
        obj = copy.deepcopy(obj)
        obj["metadata"]["resourceVersion"] = str(self.rv)
        return json.dumps({"type": rtype, "object": obj, "time": f"2026-11-30T08:01:{self.second:02d}Z"}).encode()


async def publish(bus, records: list[bytes]) -> None:
    for data in records:
        msg = prepare(data, decode(data))
        assert msg is not None, data[:120]
        ack = await bus.js.publish(msg.subject, msg.body, headers=dict(msg.headers))
        assert not ack.duplicate


async def until(predicate, what: str, timeout: float = 60.0, *, task: asyncio.Task | None = None) -> None:
    """Wait for `predicate()` (sync or async) to hold; fail naming `what` after `timeout` seconds
    (or at once if `task`, the service under test, ended)."""
    try:
        async with asyncio.timeout(timeout):
            while True:
                if task is not None and task.done():
                    task.result()  # raises what ended it
                    pytest.fail(f"the service stopped while waiting for {what}")
                res = predicate()
                if asyncio.iscoroutine(res):
                    res = await res
                if res:
                    return
                await asyncio.sleep(0.05)
    except TimeoutError:
        pytest.fail(f"timed out waiting for {what}")


def outputs_of(messages) -> list[tuple[str, o.Output]]:
    return [(h.get(MSG_ID, ""), o.output_decoder.decode(body)) for _, _, h, body in messages]


async def sched_outputs(settings, stream: str) -> list[tuple[str, o.Output]]:
    return [(i, out) for i, out in outputs_of(await stream_messages(settings, stream)) if i.startswith("sched:")]


def stage_one(c: Cluster) -> list[bytes]:
    pg = c.of("PodGroup")[0]
    pg["status"] = {"phase": "Pending"}
    return [c.record("ADDED", n) for n in c.of("Node")] + [c.record("ADDED", c.of("Queue")[0]), c.record("ADDED", pg)]


def bound_pods(c: Cluster, binds: dict[str, str]) -> list[bytes]:
    out = []
    for pod in c.of("Pod"):
        pod["spec"]["nodeName"] = binds[pod["metadata"]["name"]]
        pod["status"] = {"phase": "Running", "startTime": T0}
        out.append(c.record("MODIFIED", pod))
    return out


async def test_sessions_live_then_a_restart_rebuilds_the_same_projection(bus_settings):
    c = Cluster()
    stop = asyncio.Event()
    async with open_bus(bus_settings) as bus:
        live = SchedulerService(bus, period=0.05)
        task = asyncio.create_task(live.run(stop=stop))
        await publish(bus, stage_one(c))

        async def enqueued():
            outs = await sched_outputs(bus_settings, s.JOBS_STREAM)
            return any(isinstance(x, o.JobEnqueued) for _, x in outs)

        await until(enqueued, "the PodGroup enqueued", task=task)
        # the enqueue decision is applied to the projection: the next session sees Inqueue
        await until(lambda: live.settled, "the scheduler settled after enqueue", task=task)
        pg_key = next(iter(live.cache.state()["podgroups"]))
        assert live.cache.state()["podgroups"][pg_key]["phase"] == "Inqueue"

        await publish(bus, [c.record("ADDED", p) for p in c.of("Pod")])

        async def three_binds():
            return sum(isinstance(x, o.BindPod) for _, x in await sched_outputs(bus_settings, s.CMDS_STREAM)) == 3

        await until(three_binds, "three binds", task=task)
        binds = {x.name: x.node for _, x in await sched_outputs(bus_settings, s.CMDS_STREAM) if isinstance(x, o.BindPod)}
        assert sorted(binds.values()) == ["node-1", "node-2", "node-3"]  # one pod per node
        await until(lambda: live.settled, "the scheduler settled after the binds", task=task)

        await publish(bus, bound_pods(c, binds))

        async def running():
            return any(
                isinstance(x, o.UpdatePodGroupStatus) and x.status.get("phase") == "Running"
                for _, x in await sched_outputs(bus_settings, s.CMDS_STREAM)
            )

        await until(running, "the PodGroup Running", task=task)
        await until(lambda: live.settled, "the scheduler settled after Running", task=task)
        stop.set()
        await task
        assert live.stats.sessions >= 3 and live.stats.skipped == 0

        # every session is on the bus, numbered 1..n, with its mark; ids are sched:<seq>:<number>:<index>
        events = await sched_outputs(bus_settings, s.JOBS_STREAM)
        marks = [x for _, x in events if isinstance(x, o.SchedulingSession)]
        assert [m.session for m in marks] == list(range(1, live.number + 1))
        # within VCBUS_JOBS, each session's own event is stored after the session's other events
        last_of: dict[int, str] = {}
        for msg_id, out in events:
            last_of[parse_id(msg_id)[1]] = type(out).__name__
        assert set(last_of.values()) == {"SchedulingSession"}
        for msg_id, out in events + await sched_outputs(bus_settings, s.CMDS_STREAM):
            seq, number, _ = parse_id(msg_id)
            assert out.seq == seq
            if isinstance(out, o.SchedulingSession):
                assert out.session == number

        rebuilt = SchedulerService(bus)
        await rebuilt.rebuild()
        assert rebuilt.cache.state() == live.cache.state()
        assert rebuilt.cache.emitted == live.cache.emitted  # what was said is not said again
        assert rebuilt.number == live.number and rebuilt.read == live.read
        # nothing changed since the last session saw the projection: a restart runs no session
        stats = await rebuilt.run(until_idle=True)
        assert stats.sessions == 0


async def test_a_session_cut_short_by_a_crash_is_completed_on_restart(bus_settings):
    c = Cluster()
    async with open_bus(bus_settings) as bus:
        await publish(bus, stage_one(c) + [c.record("ADDED", p) for p in c.of("Pod")])
        first = SchedulerService(bus)
        await first.run(until_idle=True)  # enqueue, then the binds
        assert first.stats.binds == 3
        await publish(bus, bound_pods(c, {x.name: x.node for _, x in await sched_outputs(bus_settings, s.CMDS_STREAM)
                                           if isinstance(x, o.BindPod)}))
        # The next session is stored but for its mark: the process died between the two writes.
        crashed = SchedulerService(bus)
        await crashed.rebuild()
        number, seq = crashed.number + 1, crashed.cache.position
        result = run_session(crashed.cache.snapshot(), DEFAULT_CONFIG, seq=seq, number=number, time=crashed.cache.time)
        assert any(isinstance(x, o.UpdatePodGroupStatus) for x in result.outputs)
        head, mark = session_messages(result.outputs, seq=seq, number=number, source=bus.settings.ce_source)
        assert len(mark) == 1
        for _, m in head:
            await bus.js.publish(m.subject, m.body, headers=dict(m.headers))
        crashed.cache.apply_outputs(result.outputs)  # what the live one would have had

        restarted = SchedulerService(bus)
        await restarted.rebuild()
        assert restarted.stats.resumed == 1 and restarted.number == number
        assert restarted.cache.state() == crashed.cache.state()
        ids = [h[MSG_ID] for _, _, h, _ in await stream_messages(bus_settings, s.JOBS_STREAM)]
        assert f"sched:{seq}:{number}:{mark[0][0]}" in ids  # the mark is stored now, once
        assert len(ids) == len(set(ids))
        again = SchedulerService(bus)
        await again.rebuild()
        assert again.stats.resumed == 0 and again.cache.state() == restarted.cache.state()


async def test_unusable_records_are_skipped_and_scheduling_goes_on(bus_settings, caplog):
    c = Cluster()
    async with open_bus(bus_settings) as bus:
        await bus.js.publish("vcbus.k8s.pod.default.broken", b"{not json", headers={MSG_ID: "broken-1"})
        bad_node = c.of("Node")[0]
        bad_node["metadata"]["name"] = "node-bad"
        bad_node["status"]["allocatable"]["cpu"] = "five"
        await bus.js.publish(s.k8s_subject("Node", "", "node-bad"), c.record("ADDED", bad_node), headers={MSG_ID: "bad-2"})
        await publish(bus, stage_one(c) + [c.record("ADDED", p) for p in c.of("Pod")])
        service = SchedulerService(bus)
        with caplog.at_level("WARNING", logger="vcbus.scheduler"):
            stats = await service.run(until_idle=True)
        assert stats.skipped == 2 and stats.binds == 3
        assert "2 records of VCBUS_K8S could not be used" in caplog.text
        assert "seq 1: invalid JSON" in caplog.text and "seq 2: " in caplog.text
        # records arriving while it runs are reported one by one
        await bus.js.publish("vcbus.k8s.pod.default.broken", b"[]", headers={MSG_ID: "broken-3"})
        with caplog.at_level("WARNING", logger="vcbus.scheduler"):
            await service.run(until_idle=True)
        assert service.stats.skipped == 3 and f"record seq {service.read} skipped" in caplog.text
        assert "node-bad" not in service.cache.state()["nodes"]


async def test_scheduler_events_make_no_job_keys_in_the_views(bus_settings):
    c = Cluster()
    async with open_bus(bus_settings) as bus:
        await publish(bus, stage_one(c) + [c.record("ADDED", p) for p in c.of("Pod")])
        await SchedulerService(bus).run(until_idle=True)
        await Projector(bus).run(until_idle=True)
        for bucket in (s.STATUS_BUCKET, s.HISTORY_BUCKET):
            assert sorted(await read_bucket(bus.js, bucket)) == [s.POSITION_KEY]
    res = vcbus_cli("status", "--nats", bus_settings.nats_url)
    assert res.returncode == 0, res.stderr.decode()
    assert b"scheduler" not in res.stdout and b"resnet" not in res.stdout


async def test_vcbus_scheduler_once_binds_the_gang(bus_settings, tmp_path):
    c = Cluster()
    async with open_bus(bus_settings) as bus:
        await publish(bus, stage_one(c) + [c.record("ADDED", p) for p in c.of("Pod")])
    res = vcbus_cli("scheduler", "--once", "--nats", bus_settings.nats_url)
    assert res.returncode == 0, res.stderr.decode()
    assert b"3 binds" in res.stderr
    binds = [x for _, x in await sched_outputs(bus_settings, s.CMDS_STREAM) if isinstance(x, o.BindPod)]
    assert sorted(b.node for b in binds) == ["node-1", "node-2", "node-3"]
    # a second run (the service inside `vcbus up`) finds the sessions on the bus, nothing to add
    res = vcbus_cli("up", "--once", "--service", "scheduler", "--nats", bus_settings.nats_url)
    assert res.returncode == 0 and b"0 sessions" in res.stderr, res.stderr.decode()
    assert b"rebuilt from" in res.stderr and b"next session" in res.stderr


def test_a_bad_config_exits_2_naming_the_file_and_the_field(tmp_path):
    bad = tmp_path / "sched.yaml"
    bad.write_text("actions: enqueue, allocate\ntiers:\n- plugins:\n  - name: gang\n  - name: foo\n")
    res = vcbus_cli("scheduler", "--config", str(bad), "--nats", "nats://127.0.0.1:1")
    assert res.returncode == 2
    assert res.stderr.decode().strip() == (
        f"error: {bad}: tiers[0].plugins[1].name: unknown plugin 'foo' "
        "(vcbus implements priority, gang, conformance, overcommit, drf, predicates, proportion, nodeorder, binpack)"
    )
    bomb = tmp_path / "bomb.yaml"
    lines = ['a0: &a0 ["x","x","x","x","x","x","x","x","x","x"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 8)]
    bomb.write_text("\n".join(lines) + "\n")
    res = vcbus_cli("up", "--scheduler-conf", str(bomb), "--service", "scheduler", "--nats", "nats://127.0.0.1:1")
    assert res.returncode == 2 and b"alias bomb" in res.stderr and str(bomb).encode() in res.stderr
    assert b"Traceback" not in res.stderr
    res = vcbus_cli("up", "--schedule-period", "soon", "--service", "scheduler", "--nats", "nats://127.0.0.1:1")
    assert res.returncode == 2 and b"--schedule-period 'soon'" in res.stderr
    res = vcbus_cli("up", "--scheduler-conf", str(bad), "--nats", "nats://127.0.0.1:1")  # no scheduler runs
    assert res.returncode == 2 and b"the scheduler does not run here" in res.stderr


def test_the_configmap_of_a_volcano_install_is_a_config(tmp_path):
    from statemachines.scheduler.config import DEFAULT_CONFIG_YAML
    from vcbus.schedconf import load_config

    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "volcano-scheduler-configmap"},
          "data": {"volcano-scheduler.conf": DEFAULT_CONFIG_YAML}}
    path = tmp_path / "cm.yaml"
    path.write_text(yaml.safe_dump(cm))
    assert load_config(str(path)) == DEFAULT_CONFIG


def test_which_services_up_runs():
    from vcbus.errors import UserError
    from vcbus.services import choose_services

    assert choose_services((), cluster=True, observe_only=False, no_scheduler=False) == ("decider", "projector", "scheduler")
    assert choose_services((), cluster=True, observe_only=False, no_scheduler=True) == ("decider", "projector")
    assert choose_services((), cluster=True, observe_only=True, no_scheduler=False) == ("decider", "projector")
    assert choose_services((), cluster=False, observe_only=False, no_scheduler=False) == ("decider", "projector")
    assert choose_services(("scheduler",), cluster=False, observe_only=False, no_scheduler=False) == ("scheduler",)
    with pytest.raises(UserError, match="bind them too"):
        choose_services(("scheduler",), cluster=True, observe_only=True, no_scheduler=False)
    with pytest.raises(UserError, match="contradict"):
        choose_services(("scheduler",), cluster=True, observe_only=False, no_scheduler=True)

