"""Commands applied ahead of their store (vcbus.k8s.ahead): in order, once, and never past older ones.

The `Ahead` tests drive an offer with an admit function of their own (the
actuator's part it calls: what it admitted, in which order, and an error on
purpose where a test needs one). The others run the real decider and the real
actuator, on a real NATS server and a real API server.
"""

from __future__ import annotations

import asyncio
import json
import time

import pytest
import yaml
from kubernetes import client

from statemachines import outputs as o
from statemachines.admission.mutate import mutate_job
from statemachines.engine import Engine
from statemachines.manifests.renderer import Renderer
from tests.fixtures_nats import Crash, crash_after, publish_file, stream_messages
from tests.test_actuator import SEED
from vcbus.bus import subjects as s
from vcbus.bus.connecting import open_bus
from vcbus.bus.decider import Decider
from vcbus.bus.publisher import Prepared
from vcbus.k8s.actuating import DURABLE
from vcbus.k8s.actuator import JOB_GROUP, JOB_PLURAL, JOB_VERSION, PG_GROUP, PG_PLURAL, PG_VERSION
from vcbus.k8s.ahead import Ahead
from vcbus.k8s.cluster import ClusterSide

T1 = "2026-11-30T08:05:00Z"


def prepared(cmd: o.Output, msg_id: str) -> Prepared:
    return Prepared(s.command_subject(cmd.job), o.encoder.encode(cmd), {"Nats-Msg-Id": msg_id})


def kill(name: str, seq: int = 7) -> o.DeletePod:
    return o.DeletePod(job="ns/j", seq=seq, time=T1, name=name, uid=f"uid-{name}", mark_out_of_sync=True)


class Admitted:
    """The actuator's side an offer admits into: what it was given, in order; a future per command."""

    def __init__(self, fail_on: str | None = None) -> None:
        self.calls: list[tuple[str, int, str]] = []
        self.fail_on = fail_on
        self.futures: list[asyncio.Future] = []

    def __call__(self, cmd, index: int, msg_id: str) -> asyncio.Future:
        if getattr(cmd, "name", None) == self.fail_on:
            raise RuntimeError("not the leader")  # what the fence raises
        self.calls.append((type(cmd).__name__, index, msg_id))
        fut = asyncio.get_running_loop().create_future()
        self.futures.append(fut)
        return fut


async def test_an_offer_is_admitted_in_order_without_its_events_and_holds_the_flight_by_its_first_apply():
    admitted = Admitted()
    lane = Ahead(admitted, lambda after: after <= 10)
    event = o.RecordEvent(job="ns/j", seq=7, time=T1, reason="Restarting", message="pod failed")
    flight = [prepared(event, "7:0"), prepared(kill("a"), "7:1"), prepared(kill("b"), "7:2")]
    first = lane.offer(flight, 10)
    assert first is admitted.futures[0]
    assert admitted.calls == [("DeletePod", 1, "7:1"), ("DeletePod", 2, "7:2")]  # the RecordEvent is the stream's


async def test_a_first_command_waiting_its_turn_holds_nothing_up():
    admitted = Admitted()
    lane = Ahead(admitted, lambda after: True, started=lambda fut: False)
    assert lane.offer([prepared(kill("a"), "7:0")], 0) is None
    assert [c[2] for c in admitted.calls] == ["7:0"]  # admitted all the same


async def test_an_unreadable_command_and_what_follows_it_are_left_to_the_stream():
    admitted = Admitted()
    lane = Ahead(admitted, lambda after: True)
    unreadable = Prepared("vcbus.cmd.ns.j", b"{not json", {"Nats-Msg-Id": "12:1"})
    assert lane.offer([prepared(kill("a"), "12:0"), unreadable, prepared(kill("c"), "12:2")], 0)
    assert [c[2] for c in admitted.calls] == ["12:0"]  # c must not overtake the unreadable one


async def test_nothing_is_taken_behind_commands_not_in_hand_yet_nor_after_close():
    admitted = Admitted()
    received = [5]
    lane = Ahead(admitted, lambda after: received[0] >= after)
    assert lane.offer([prepared(kill("a"), "9:0")], 6) is None  # the actuator has not received seq 6 yet
    assert lane.offer([prepared(kill("a"), "9:0")], 5) is not None
    lane.close()
    assert lane.offer([prepared(kill("d"), "13:0")], 5) is None
    assert [c[2] for c in admitted.calls] == ["9:0"]


async def test_a_lease_lost_before_the_first_command_leaves_the_whole_offer_to_the_stream():
    admitted = Admitted(fail_on="a")
    lane = Ahead(admitted, lambda after: True)
    assert lane.offer([prepared(kill("a"), "8:0"), prepared(kill("b"), "8:1")], 0) is None
    assert admitted.calls == []


# --------------------------------------------------------------------------- the real decider and actuator


async def until(predicate, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"not within {timeout}s: {what}"
        await asyncio.sleep(0.05)


@pytest.mark.k8s
@pytest.mark.nats
async def test_a_decider_and_an_actuator_in_one_process_apply_each_command_once(k8s, k8s_namespace, bus_settings, tmp_path):
    api = k8s.api_client()
    ns = k8s_namespace
    custom = client.CustomObjectsApi(api)
    manifest = mutate_job(yaml.safe_load(SEED.read_text()))
    manifest["metadata"]["namespace"] = ns
    manifest["spec"]["plugins"].pop("status-mounter", None)  # no ConfigMap work: pods, PodGroup and status only
    job = custom.create_namespaced_custom_object(JOB_GROUP, JOB_VERSION, ns, JOB_PLURAL, manifest)
    queue = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
             "metadata": {"name": job["spec"]["queue"], "uid": "q-uid", "resourceVersion": "1"},
             "spec": {"weight": 1}, "status": {"state": "Open"}}
    log = tmp_path / "job.jsonl"
    log.write_text("".join(json.dumps({"type": "ADDED", "object": obj}) + "\n" for obj in (queue, job)))
    await publish_file(bus_settings, log)

    def pods_groups(ns: str) -> list:
        return custom.list_namespaced_custom_object(PG_GROUP, PG_VERSION, ns, PG_PLURAL)["items"]

    async with open_bus(bus_settings) as bus:
        side = ClusterSide(bus, api, namespace=ns)
        renderer = Renderer()
        decider = Decider(bus, engine=Engine(render_pod=renderer.pod, render_podgroup=renderer.podgroup))
        side.feed([decider])
        actuator = side.actuator
        stop = asyncio.Event()
        act = asyncio.create_task(actuator.run(stop=stop))
        await asyncio.wait_for(actuator.ready.wait(), 30)
        dec = asyncio.create_task(decider.run(stop=stop))
        try:
            await until(lambda: pods_groups(ns), "the seed job's PodGroup")  # its pods wait for a scheduler
            stored = [o.command_decoder.decode(body) for *_, body in await stream_messages(bus_settings, s.CMDS_STREAM)]
            commands = [c for c in stored if not isinstance(c, o.RecordEvent)]
            await until(lambda: sum(actuator.results.values()) == len(stored), "every stored copy acked")
        finally:
            stop.set()
            await asyncio.wait_for(asyncio.gather(act, dec), 30)
        info = await bus.js.consumer_info(s.CMDS_STREAM, DURABLE)
    assert {type(c).__name__ for c in commands} >= {"CreatePodGroup", "UpdateJobStatus"}
    assert actuator.ahead.taken == len(commands)  # every one applied as it was decided ...
    assert actuator.results["applied"] == len(stored) and actuator.results["done"] == 0  # ... and once
    assert info.num_pending == 0 and info.num_ack_pending == 0


@pytest.mark.nats
async def test_a_decider_offers_nothing_behind_stored_commands_nor_from_records_an_earlier_run_received(
        bus_settings, many_jobs_log, tmp_path):
    await publish_file(bus_settings, many_jobs_log)
    async with open_bus(bus_settings) as bus:
        older = o.RecordEvent(job="ns/j", seq=1, time=T1, reason="Older", message="stored before these runs")
        await bus.js.publish(s.command_subject(older.job), o.encoder.encode(older), headers={"Nats-Msg-Id": "old:1"})
        first = Decider(bus, clock=lambda: "1970-01-01T00:00:00Z")
        crash_after(first, 400)
        with pytest.raises(Crash):
            await first.run(until_idle=True)
        offers: list[tuple[int, int]] = []  # (K8S seq of the offer's first command, after_seq)

        def offer(commands: list[Prepared], after_seq: int) -> asyncio.Future | None:
            offers.append((int(commands[0].headers["Nats-Msg-Id"].split(":")[0]), after_seq))
            return None  # not taken

        stored_before = (await bus.js.stream_info(s.CMDS_STREAM)).state.last_seq  # the older one, and the first run's
        second = Decider(bus, clock=lambda: "1970-01-01T00:00:00Z")
        second.ahead = offer
        stop = asyncio.Event()
        task = asyncio.create_task(second.run(stop=stop))
        try:
            last = (await bus.js.stream_info(s.K8S_STREAM)).state.last_seq
            await until(lambda: second.applied >= last and not second.outbox.flights, "the second run to catch up")
            # one more job, decided with nothing in flight: its commands are offered
            job = next(json.loads(line) for line in many_jobs_log.read_text().splitlines()
                       if '"kind":"Job"' in line.replace(" ", "") and '"ADDED"' in line)
            job["object"]["metadata"].update(name="one-more", uid="one-more-uid", resourceVersion="999999")
            more = tmp_path / "more.jsonl"
            more.write_text(json.dumps(job) + "\n")
            await publish_file(bus_settings, more)
            await until(lambda: any(seq > last for seq, _ in offers), "the new job's commands offered")
        finally:
            stop.set()
            await asyncio.wait_for(task, 60)
    assert all(seq > second.outbox.careful_until for seq, _ in offers)  # received by the first run: never offered
    assert min(after for _, after in offers) >= stored_before  # behind everything stored before it started
    afters = [after for _, after in offers]
    assert afters == sorted(afters)


@pytest.mark.nats
async def test_a_taken_offers_flight_is_stored_once_its_first_command_is_applied(bus_settings, many_jobs_log, tmp_path):
    """A light load's reaction: the first API call goes before the flight's stores (`Decider.ahead_hold`)."""
    job = next(json.loads(line) for line in many_jobs_log.read_text().splitlines()
               if '"kind":"Job"' in line.replace(" ", "") and '"ADDED"' in line)
    log = tmp_path / "one.jsonl"
    log.write_text(json.dumps(job) + "\n")
    await publish_file(bus_settings, log)
    async with open_bus(bus_settings) as bus:

        async def stored() -> int:
            return (await bus.js.stream_info(s.CMDS_STREAM)).state.last_seq

        before = await stored()
        applied = asyncio.get_running_loop().create_future()  # the first command's apply, ended by the test
        offers: list[list[Prepared]] = []

        def offer(commands: list[Prepared], after_seq: int) -> asyncio.Future | None:
            offers.append(list(commands))
            return applied

        decider = Decider(bus, clock=lambda: "1970-01-01T00:00:00Z")
        decider.ahead = offer
        decider.ahead_hold = 600.0  # longer than the test: only the apply's end lets the flight go
        stop = asyncio.Event()
        task = asyncio.create_task(decider.run(stop=stop))
        try:
            await until(lambda: offers, "the job's commands offered")
            assert await stored() == before  # held while the first command is applied
            assert decider.applied == 1 and not decider.outbox.flights
            applied.set_result(("applied", 1.0))
            deadline = time.monotonic() + 60
            while await stored() < before + len(offers[0]):
                assert time.monotonic() < deadline, "the flight was not stored after the apply"
                await asyncio.sleep(0.05)
        finally:
            stop.set()
            await asyncio.wait_for(task, 60)
    assert len(offers) == 1
