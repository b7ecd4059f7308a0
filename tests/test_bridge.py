"""vcbus.k8s.bridge on a real kube-apiserver and a real nats-server.

The bridge runs in-process (its watcher threads talk to the test apiserver,
its publishes go to the test NATS) and is stopped and started again between
changes, so these tests check what the issue asks of it: every watch event of
the seven resources (the scheduler's cluster-scoped nodes and PriorityClasses
too) lands in VCBUS_K8S once, in order per object, with its
headers and dedup id; a restarted bridge resumes from the position it stored
in the KV bucket `vcbus_bridge`; a 410 Gone (etcd compacted, apiserver
restarted) relists and publishes DELETED for what vanished meanwhile; an
apiserver restart and a dropped connection (a real TCP proxy that resets its
connections) are survived.

"Nothing repeated" is checked twice: the stream holds exactly one message per
change, and the restarted bridge *published* only the changes (JetStream's
duplicate window would hide a re-publish with the same dedup id from the
stream, not from `Bridge.published`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import selectors
import socket
import struct
import threading
import time
import uuid
from typing import Any, NamedTuple

import pytest
from nats.js.errors import KeyNotFoundError

from statemachines.model.records import Ignored, decode
from vcbus.bus import subjects as s
from vcbus.bus.connecting import open_bus
from vcbus.bus.reading import read_stream
from vcbus.k8s import positions
from vcbus.k8s.bridge import BRIDGE_BUCKET, Bridge, position_key, trim
from vcbus.k8s.watching import api_request, resource_kind

pytestmark = [pytest.mark.k8s, pytest.mark.nats]

JOB_LABEL = "volcano.sh/job-name"


# --------------------------------------------------------------------------- objects and API calls


def vcjob(name: str) -> dict:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": name},
        "spec": {"minAvailable": 1, "tasks": [{"name": "t", "replicas": 1, "template": {
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}]},
    }


def command(name: str, job: str = "j", action: str = "AbortJob") -> dict:
    return {
        "apiVersion": "bus.volcano.sh/v1alpha1", "kind": "Command", "metadata": {"name": name},
        "action": action,
        "target": {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": job, "uid": "u-1"},
    }


def pod(name: str, job: str | None) -> dict:
    meta: dict[str, Any] = {"name": name}
    if job:
        meta["labels"] = {JOB_LABEL: job}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


def podgroup(name: str, owner: dict) -> dict:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": name, "ownerReferences": [{
            "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "controller": True,
            "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"]}]},
        "spec": {"minMember": 1},
    }


def queue(name: str) -> dict:
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": name},
            "spec": {"weight": 1}}


async def call(api, method: str, path: str, **kw) -> Any:
    """One API request, off the event loop (the bridge shares the loop)."""
    return await asyncio.to_thread(api_request, api, method, path, **kw)


async def create(api, resource: str, ns: str, body: dict) -> dict:
    return await call(api, "POST", resource_kind(resource).path(ns), body=body)


async def patch(api, resource: str, ns: str, name: str, body: dict) -> dict:
    return await call(api, "PATCH", resource_kind(resource).path(ns, name),
                      content_type="application/merge-patch+json", body=body)


async def delete(api, resource: str, ns: str, name: str) -> dict:
    return await call(api, "DELETE", resource_kind(resource).path(ns, name), query={"gracePeriodSeconds": 0})


def rv(obj: dict) -> int:
    return int(obj["metadata"]["resourceVersion"])


# --------------------------------------------------------------------------- the stream and the KV bucket


class Rec(NamedTuple):
    seq: int
    subject: str
    headers: dict[str, str]
    record: dict

    @property
    def kind(self) -> str:
        return self.record["object"]["kind"]

    @property
    def name(self) -> str:
        return self.record["object"]["metadata"]["name"]

    @property
    def type(self) -> str:
        return self.record["type"]

    @property
    def uid(self) -> str:
        return self.record["object"]["metadata"]["uid"]

    @property
    def rv(self) -> int:
        return int(self.record["object"]["metadata"]["resourceVersion"])

    @property
    def short(self) -> tuple[str, str, str]:
        return (self.type, self.kind, self.name)


async def stream_recs(js) -> list[Rec]:
    out = []
    async for batch in read_stream(js, s.K8S_STREAM, start_seq=1):
        for m in batch:
            out.append(Rec(m.metadata.sequence.stream, m.subject, dict(m.headers or {}), json.loads(m.data)))
    return out


def of_test(recs: list[Rec], ns: str, cluster_names: frozenset[str] = frozenset()) -> list[Rec]:
    """The records of this test: its namespace, and its cluster-scoped objects (queues) by name."""
    return [r for r in recs if r.record["object"]["metadata"].get("namespace") == ns
            or (not r.record["object"]["metadata"].get("namespace") and r.name in cluster_names)]


async def wait_recs(js, ns: str, n: int, *, cluster_names=frozenset(), timeout: float = 20.0) -> list[Rec]:
    """Poll the stream (bounded) until this test has at least `n` records; return them."""
    deadline = time.monotonic() + timeout
    while True:
        mine = of_test(await stream_recs(js), ns, cluster_names)
        if len(mine) >= n:
            return mine
        if time.monotonic() > deadline:
            pytest.fail(f"{len(mine)} of {n} records after {timeout}s: {[r.short for r in mine]}")
        await asyncio.sleep(0.1)


async def quiet_then_recs(js, ns: str, *, cluster_names=frozenset(), seconds: float = 1.0) -> list[Rec]:
    """Give a late duplicate time to show up, then read again."""
    await asyncio.sleep(seconds)
    return of_test(await stream_recs(js), ns, cluster_names)


async def stored(js, resource: str, ns: str) -> dict | None:
    """The position a bridge for namespace `ns` stored for `resource`."""
    kv = await js.key_value(BRIDGE_BUCKET)
    try:
        entry = await kv.get(position_key(resource, ns))
    except KeyNotFoundError:
        return None
    return positions.decode(entry.value)  # plain JSON, or compressed when large


async def wait_settled(js, bridge: Bridge, timeout: float = 10.0) -> None:
    """Wait until every watcher's consumed state is what the bridge stored in the KV bucket (its objects, and
    once it has listed its resourceVersion: a loop that has not saved it yet still runs every `idle_flush`).

    (The bridge stores after the publishes of a batch are acknowledged; stopping it
    before that would make the next one re-publish, deduplicated by JetStream.)
    """
    deadline = time.monotonic() + timeout
    while True:
        behind = []
        for resource, watcher in list(bridge.watchers.items()):
            try:
                consumed = watcher.snapshot(transform=trim)  # what a position holds: each object's metadata
            except RuntimeError:  # changed by the consuming thread while copied: look again
                behind.append(resource)
                continue
            snap = await stored(js, resource, bridge.namespace)
            if ((snap or {}).get("known") or {}) != consumed["known"]:
                behind.append(resource)
            elif watcher.synced.is_set() and (snap or {}).get("resourceVersion") != watcher.resource_version:
                behind.append(resource)  # listed, its position not stored yet: its loop still comes back to save it
        if not behind and len(bridge.watchers) == len(bridge.resources):
            return
        if time.monotonic() > deadline:
            pytest.fail(f"bridge position not stored for {behind} after {timeout}s")
        await asyncio.sleep(0.05)


@contextlib.asynccontextmanager
async def bridge_running(js, api, ns: str, *, nc=None, idle_flush: float = 0.05):
    bridge = Bridge(js, api, namespace=ns, nc=nc, idle_flush=idle_flush)
    stop = asyncio.Event()
    task = asyncio.create_task(bridge.run(stop), name="test-bridge")
    try:
        # changes made before a watcher has listed would only show up folded into its ADDED
        deadline = asyncio.get_running_loop().time() + 20
        while len(bridge.watchers) < len(bridge.resources):
            assert asyncio.get_running_loop().time() < deadline, "the bridge did not start its watchers"
            await asyncio.sleep(0.02)
        for watcher in list(bridge.watchers.values()):
            assert await asyncio.to_thread(watcher.connected.wait, 20), "a watcher never connected"
        yield bridge
        assert not task.done(), "the bridge ended on its own"
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)


@pytest.fixture
async def js(bus_settings):
    async with open_bus(bus_settings) as bus:
        yield bus.js


@pytest.fixture
async def bus(bus_settings):
    async with open_bus(bus_settings) as bus:
        yield bus


def assert_no_repeats(recs: list[Rec]) -> None:
    ids = [r.headers["Nats-Msg-Id"] for r in recs]
    assert len(ids) == len(set(ids)), ids
    changes = [(r.uid, r.rv, r.type) for r in recs]
    assert len(changes) == len(set(changes)), changes
    added = [r.uid for r in recs if r.type == "ADDED"]
    assert len(added) == len(set(added)), "an object was ADDED twice"


# --------------------------------------------------------------------------- the tests


async def test_publishes_every_resource_in_order_with_headers_and_dedup_ids(k8s, k8s_namespace, js):
    api = k8s.api_client()
    ns = k8s_namespace
    qname = f"bridge-q-{uuid.uuid4().hex[:8]}"
    queues = frozenset({qname})
    async with bridge_running(js, api, ns) as bridge:
        job = await create(api, "vcjobs", ns, vcjob("j"))
        expected_rvs: dict[tuple[str, str], list[int]] = {}

        def note(kind, name, obj):
            expected_rvs.setdefault((kind, name), []).append(rv(obj))

        note("Job", "j", job)
        note("Job", "j", await call(api, "PATCH", resource_kind("vcjobs").path(ns, "j", "status"),
                                    content_type="application/merge-patch+json",
                                    body={"status": {"state": {"phase": "Pending"}}}))
        note("Pod", "p", await create(api, "pods", ns, pod("p", "j")))
        # An unlabelled pod, created and changed before the labelled pod's last events.
        await create(api, "pods", ns, pod("stranger", None))
        await patch(api, "pods", ns, "stranger", {"metadata": {"labels": {"x": "1"}}})
        note("Pod", "p", await patch(api, "pods", ns, "p", {"metadata": {"labels": {"x": "1"}}}))
        note("PodGroup", "pg", await create(api, "podgroups", ns, podgroup("pg", job)))
        note("PodGroup", "pg", await patch(api, "podgroups", ns, "pg", {"metadata": {"labels": {"x": "1"}}}))
        note("Queue", qname, await create(api, "queues", ns, queue(qname)))
        note("Queue", qname, await patch(api, "queues", ns, qname, {"spec": {"weight": 2}}))
        note("Command", "c", await create(api, "commands", ns, command("c", "j")))
        note("Command", "c", await patch(api, "commands", ns, "c", {"action": "ResumeJob"}))
        for resource, name in (("pods", "p"), ("pods", "stranger"), ("podgroups", "pg"), ("queues", qname),
                               ("commands", "c"), ("vcjobs", "j")):
            await delete(api, resource, ns, name)

        # A pod's deletion is an update (deletionTimestamp) and then the removal: 16 records.
        await wait_recs(js, ns, 16, cluster_names=queues)
        await wait_settled(js, bridge)
    recs = await quiet_then_recs(js, ns, cluster_names=queues, seconds=0.5)

    assert "stranger" not in {r.name for r in recs}, "an unlabelled pod was published"
    assert len(recs) == 16, " ".join(f"{r.short}@{r.rv}" for r in recs)
    assert_no_repeats(recs)
    by_object: dict[tuple[str, str], list[Rec]] = {}
    for r in recs:
        by_object.setdefault((r.kind, r.name), []).append(r)
    assert set(by_object) == {("Job", "j"), ("Pod", "p"), ("PodGroup", "pg"), ("Queue", qname), ("Command", "c")}
    for (kind, name), evs in by_object.items():
        if kind == "Pod":
            assert [e.type for e in evs] == ["ADDED", "MODIFIED", "MODIFIED", "DELETED"]
            assert evs[2].record["object"]["metadata"]["deletionTimestamp"]
        else:
            assert [e.type for e in evs] == ["ADDED", "MODIFIED", "DELETED"], (kind, name)
        assert [e.rv for e in evs[:2]] == expected_rvs[(kind, name)], (kind, name)
        assert [e.rv for e in evs] == sorted({e.rv for e in evs})  # stream order is the watch order
        assert len({e.uid for e in evs}) == 1
    job_of = {"Job": f"{ns}/j", "Pod": f"{ns}/j", "PodGroup": f"{ns}/j", "Command": f"{ns}/j", "Queue": None}
    for r in recs:
        obj = r.record["object"]
        meta = obj["metadata"]
        namespace = meta.get("namespace", "")
        assert r.headers["Nats-Msg-Id"] == f"{meta['uid']}:{meta['resourceVersion']}:{r.type}"
        assert r.headers["Vcbus-Kind"] == r.kind
        assert r.headers["Vcbus-Type"] == r.type
        assert r.headers["Vcbus-Name"] == r.name
        assert r.headers.get("Vcbus-Namespace", "") == namespace
        assert r.headers["Vcbus-Resource-Version"] == meta["resourceVersion"]
        assert r.headers.get("Vcbus-Job") == job_of[r.kind], r.short
        assert r.subject == s.k8s_subject(r.kind, namespace, r.name)
        assert set(r.record) == {"type", "object", "time"} and r.record["time"].endswith("Z")
        assert "managedFields" not in meta
        assert obj["apiVersion"] and obj["kind"]
    modified_job = by_object[("Job", "j")][1].record["object"]
    assert modified_job["status"]["state"]["phase"] == "Pending" and modified_job["spec"]["tasks"]
    assert by_object[("Command", "c")][1].record["object"]["action"] == "ResumeJob"
    assert bridge.published >= 16


async def test_publishes_the_pods_the_scheduler_needs_and_no_other(k8s, k8s_namespace, js):
    """A vcjob's pod, a pod for the volcano scheduler and any pod on a node reach the bus; others not."""
    api = k8s.api_client()
    ns = k8s_namespace
    async with bridge_running(js, api, ns):
        await create(api, "pods", ns, pod("other", None))  # default-scheduler, not on a node: not ours
        mine = pod("mine", None)
        mine["spec"]["schedulerName"] = "volcano"
        await create(api, "pods", ns, mine)
        bound = pod("bound", None)
        bound["spec"]["nodeName"] = "node-a"  # placed by another scheduler: it uses node-a's resources
        await create(api, "pods", ns, bound)
        await patch(api, "pods", ns, "other", {"metadata": {"labels": {"x": "1"}}})
        await create(api, "pods", ns, pod("last", "j"))  # the pods watch is ordered: "last" comes last
        recs = await wait_recs(js, ns, 3, timeout=60.0)
        deadline = time.monotonic() + 60.0
        while "last" not in {r.name for r in recs}:
            assert time.monotonic() < deadline, "the labelled pod never reached the bus"
            recs = await wait_recs(js, ns, len(recs) + 1, timeout=60.0)
    assert [r.name for r in recs if r.kind == "Pod"] == ["mine", "bound", "last"]
    assert bridge_pod_filter_cases()


def bridge_pod_filter_cases() -> bool:
    from vcbus.k8s.bridge import pod_wanted

    assert pod_wanted({"metadata": {"labels": {"volcano.sh/job-name": "j"}}, "spec": {"schedulerName": "x"}})
    assert pod_wanted({"metadata": {}, "spec": {"schedulerName": "volcano"}})
    assert pod_wanted({"metadata": {}, "spec": {"nodeName": "n"}})
    assert not pod_wanted({"metadata": {}, "spec": {"schedulerName": "default-scheduler"}})
    assert not pod_wanted({})
    return True


async def test_nothing_polls(k8s, k8s_namespace, js):
    """An idle resource's loop sleeps until its watcher has something: while commands come and go,
    the loops of the other six resources do not run (a loop that looked every `idle_flush`, 50 ms,
    would have run at least ten times in the quiet half second alone). A bookmark may wake one."""
    api = k8s.api_client()
    ns = k8s_namespace
    async with bridge_running(js, api, ns) as bridge:
        await wait_settled(js, bridge)
        before = dict(bridge.waits)
        for i in range(5):
            await create(api, "commands", ns, command(f"idle-{i}"))
        await wait_recs(js, ns, 5)
        await wait_settled(js, bridge)
        await asyncio.sleep(0.5)  # a quiet window: what must not happen in it needs one
        after = dict(bridge.waits)
    woke = {r: after[r] - before[r] for r in bridge.resources if r != "commands"}
    assert all(n <= 2 for n in woke.values()), woke
    assert after["commands"] > before["commands"]  # it slept between the commands, and after them


async def test_restart_resumes_from_the_stored_position(k8s, k8s_namespace, js):
    api = k8s.api_client()
    ns = k8s_namespace
    async with bridge_running(js, api, ns) as first:
        job = await create(api, "vcjobs", ns, vcjob("a"))
        await create(api, "commands", ns, command("b", "a"))
        await create(api, "pods", ns, pod("c", "a"))
        before = await wait_recs(js, ns, 3)
        await wait_settled(js, first)
    positions = {r: await stored(js, r, ns) for r in ("vcjobs", "commands", "pods")}
    for r, snap in positions.items():
        assert snap is not None and snap["resourceVersion"], r
        assert len(snap["known"]) == 1, r
        (obj,) = snap["known"].values()
        assert set(obj) == {"apiVersion", "kind", "metadata"}  # trimmed to what a DELETED needs
    assert int(positions["vcjobs"]["resourceVersion"]) >= rv(job)

    # While no bridge runs: modify one, delete another, create a third.
    modified = await patch(api, "vcjobs", ns, "a", {"metadata": {"labels": {"x": "1"}}})
    await delete(api, "commands", ns, "b")
    created = await create(api, "commands", ns, command("d", "a"))

    async with bridge_running(js, api, ns) as second:
        recs = await wait_recs(js, ns, 6)
        await wait_settled(js, second)
        for r in ("vcjobs", "commands", "pods"):
            assert second.watchers[r].relists == 0, f"{r}: relisted instead of resuming"
    recs = await quiet_then_recs(js, ns)

    assert [r.short for r in recs[:3]] == [r.short for r in before]
    assert sorted(r.short for r in recs[:3]) == [("ADDED", "Command", "b"), ("ADDED", "Job", "a"),
                                                  ("ADDED", "Pod", "c")]
    after = recs[3:]
    assert sorted(r.short for r in after) == [("ADDED", "Command", "d"), ("DELETED", "Command", "b"),
                                              ("MODIFIED", "Job", "a")], [r.short for r in recs]
    cmds = [r.short for r in after if r.kind == "Command"]
    assert cmds == [("DELETED", "Command", "b"), ("ADDED", "Command", "d")]  # watch order
    assert next(r for r in after if r.kind == "Job").rv == rv(modified)
    assert next(r for r in after if r.name == "d").rv == rv(created)
    assert_no_repeats(recs)
    assert [r.seq for r in recs] == sorted(r.seq for r in recs)
    assert second.published == 3, "the restarted bridge re-published what the first had stored"


async def test_a_burst_is_one_atomic_batch_and_a_relist_stores_nothing_twice(k8s, k8s_namespace, bus):
    """Given the bus's connection, as `vcbus up` runs it, the bridge stores a burst of records as one
    JetStream atomic batch (one fsync for all of them); a relist after the position was lost sends
    every pod again under its msg id: the batch holding repeats is stored message by message and
    JetStream drops each one."""
    js, api, ns = bus.js, k8s.api_client(), k8s_namespace
    for i in range(40):  # while no bridge runs: its first list is one burst
        await create(api, "pods", ns, pod(f"burst-{i}", "a"))
    # a quiet spell of 2 s before a flush, so that a loaded machine's watch thread, handing the list over
    # item by item, does not have it flushed in pieces too small for a batch (fewer than 16 go one by one)
    async with bridge_running(js, api, ns, nc=bus.nc, idle_flush=2.0) as first:
        pods = [r for r in await wait_recs(js, ns, 40, timeout=60) if r.kind == "Pod"]
        await wait_settled(js, first)
    assert len(pods) == 40
    batches = {r.headers.get("Nats-Batch-Id") for r in pods}
    assert None not in batches and len(batches) == 1, batches  # one atomic batch, not 40 single publishes

    kv = await js.key_value(BRIDGE_BUCKET)
    await kv.delete(position_key("pods", ns))  # the next bridge lists the pods again
    async with bridge_running(js, api, ns, nc=bus.nc) as second:
        await wait_settled(js, second)
    recs = await quiet_then_recs(js, ns)
    if sum(r.kind == "Pod" for r in recs) < 40:  # (one read of the suite's long stream came back without them)
        recs = await wait_recs(js, ns, 40, timeout=60)
    assert sorted(r.name for r in recs if r.kind == "Pod") == sorted(f"burst-{i}" for i in range(40))
    assert_no_repeats(recs)


async def test_a_stored_position_that_cannot_be_read_is_a_fresh_list(k8s, k8s_namespace, js, caplog):
    """A corrupt value under a resource's key (vcbus.k8s.positions): a warning, a list from scratch,
    the bridge goes on; the next position it stores can be read again."""
    api = k8s.api_client()
    ns = k8s_namespace
    await create(api, "commands", ns, command("b", "a"))
    async with bridge_running(js, api, ns) as first:  # makes the bucket
        await wait_recs(js, ns, 1)
        await wait_settled(js, first)
    kv = await js.key_value(BRIDGE_BUCKET)
    await kv.put(position_key("commands", ns), b"vcbus-zlib:\x00 torn")
    await create(api, "commands", ns, command("c", "a"))
    with caplog.at_level(logging.WARNING, logger="vcbus.bridge"):
        async with bridge_running(js, api, ns) as second:
            recs = await wait_recs(js, ns, 2)
            await wait_settled(js, second)
            assert second.watchers["commands"].relists == 1  # listed from scratch
    assert "cannot be read" in caplog.text and "listing from scratch" in caplog.text
    assert sorted(r.short for r in recs) == [("ADDED", "Command", "b"), ("ADDED", "Command", "c")]
    snap = await stored(js, "commands", ns)
    assert snap is not None and len(snap["known"]) == 2


@pytest.mark.slow
async def test_410_while_away_relists_and_publishes_deleted(k8s, k8s_namespace, js):
    api = k8s.api_client()
    ns = k8s_namespace
    async with bridge_running(js, api, ns) as first:
        for n in ("keep", "gone", "changed"):
            await create(api, "commands", ns, command(n, "v"))
        await create(api, "vcjobs", ns, vcjob("v"))
        before = await wait_recs(js, ns, 4)
        await wait_settled(js, first)
    old_rv = int((await stored(js, "commands", ns))["resourceVersion"])
    last_known = {r.name: r for r in before}

    # While away: delete, change, create; then make the stored position unavailable
    # (compact etcd past it, restart the apiserver so its watch cache starts later).
    await delete(api, "commands", ns, "gone")
    await delete(api, "vcjobs", ns, "v")
    await patch(api, "commands", ns, "changed", {"action": "ResumeJob"})
    await create(api, "commands", ns, command("new", "v"))
    assert await asyncio.to_thread(k8s.compact_etcd) > old_rv
    await asyncio.to_thread(k8s.stop_apiserver)
    await asyncio.to_thread(k8s.start_apiserver)

    async with bridge_running(js, api, ns) as second:
        await wait_recs(js, ns, 8, timeout=30)
        assert second.watchers["commands"].relists == 1 and second.watchers["vcjobs"].relists == 1
        # It goes on watching after the relist.
        await delete(api, "commands", ns, "keep")
        await wait_recs(js, ns, 9)
        await wait_settled(js, second)
    recs = await quiet_then_recs(js, ns)

    assert [r.short for r in recs[:4]] == [r.short for r in before]
    after = recs[4:]
    assert sorted(r.short for r in after[:4]) == [
        ("ADDED", "Command", "new"), ("DELETED", "Command", "gone"),
        ("DELETED", "Job", "v"), ("MODIFIED", "Command", "changed"),
    ], [r.short for r in recs]
    assert after[4].short == ("DELETED", "Command", "keep")
    # The DELETED of a relist carries the last state the bridge had stored (trimmed to metadata).
    for name in ("gone", "v"):
        deleted = next(r for r in after if r.name == name)
        assert deleted.uid == last_known[name].uid and deleted.rv == last_known[name].rv
        assert deleted.headers["Nats-Msg-Id"] == f"{deleted.uid}:{deleted.rv}:DELETED"
        assert deleted.headers["Vcbus-Kind"] == last_known[name].kind
    changed = next(r for r in after if r.type == "MODIFIED")
    assert changed.record["object"]["action"] == "ResumeJob" and changed.rv > old_rv
    assert_no_repeats(recs)  # "keep" (unchanged) is not re-published by the relist
    assert second.published == 5, "the relist re-published objects already published"
    snap = await stored(js, "commands", ns)
    assert sorted(o["metadata"]["name"] for o in snap["known"].values()) == ["changed", "new"]


@pytest.mark.slow
async def test_survives_an_apiserver_restart_while_running(k8s, k8s_namespace, js):
    api = k8s.api_client()
    ns = k8s_namespace
    async with bridge_running(js, api, ns) as bridge:
        await create(api, "commands", ns, command("before"))
        await wait_recs(js, ns, 1)
        watcher = bridge.watchers["commands"]
        assert await asyncio.to_thread(watcher.connected.wait, 5)
        await asyncio.to_thread(k8s.stop_apiserver)
        await asyncio.sleep(0.5)  # the watchers fail and back off
        await asyncio.to_thread(k8s.start_apiserver)
        await create(api, "commands", ns, command("after"))
        await patch(api, "commands", ns, "before", {"action": "ResumeJob"})
        await wait_recs(js, ns, 3, timeout=30)
        assert watcher.reconnects >= 1 and watcher.last_error is not None
        await wait_settled(js, bridge)
    recs = await quiet_then_recs(js, ns)
    assert [r.short for r in recs] == [("ADDED", "Command", "before"), ("ADDED", "Command", "after"),
                                       ("MODIFIED", "Command", "before")]
    assert_no_repeats(recs)


class ResettingProxy:
    """A real TCP proxy to the apiserver that can reset every connection and refuse new ones.

    One thread owns every socket (selectors), so a reset (SO_LINGER 0, close) is
    sent at once: the client sees a connection reset by peer mid-stream.
    """

    def __init__(self, target_port: int) -> None:
        self.target = ("127.0.0.1", target_port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.setblocking(False)
        self.port = self.listener.getsockname()[1]
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.listener, selectors.EVENT_READ, None)
        self.peers: dict[socket.socket, socket.socket] = {}
        self.refusing = False
        self.resets = 0
        self._reset_now = threading.Event()
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="resetting-proxy", daemon=True)
        self._thread.start()

    def cut(self) -> None:
        """Reset every open connection and refuse new ones until `restore()`."""
        self.refusing = True
        self._reset_now.set()
        deadline = time.monotonic() + 5
        while self._reset_now.is_set() and time.monotonic() < deadline:
            time.sleep(0.01)

    def restore(self) -> None:
        self.refusing = False

    def close(self) -> None:
        self._closed.set()
        self._thread.join(5)

    @staticmethod
    def _reset(sock: socket.socket) -> None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()

    def _drop(self, sock: socket.socket) -> None:
        peer = self.peers.pop(sock, None)
        for x in (sock, peer):
            if x is None:
                continue
            self.peers.pop(x, None)
            with contextlib.suppress(KeyError, ValueError):
                self.sel.unregister(x)
            self._reset(x)

    def _loop(self) -> None:
        try:
            while not self._closed.is_set():
                if self._reset_now.is_set():
                    client_side = [c for c, u in self.peers.items() if self.sel.get_key(c).data == "client"]
                    for c in client_side:
                        self._drop(c)
                        self.resets += 1
                    self._reset_now.clear()
                for key, _ in self.sel.select(0.05):
                    if key.data is None:
                        self._accept()
                    elif key.fileobj in self.peers:
                        self._forward(key.fileobj)  # type: ignore[arg-type]
        finally:
            for c in list(self.peers):
                self._drop(c)
            self.listener.close()
            self.sel.close()

    def _accept(self) -> None:
        try:
            conn, _ = self.listener.accept()
        except BlockingIOError:
            return
        if self.refusing:
            self._reset(conn)
            return
        try:
            upstream = socket.create_connection(self.target, timeout=2)
        except OSError:
            self._reset(conn)
            return
        for x in (conn, upstream):
            x.setblocking(False)
        self.peers[conn], self.peers[upstream] = upstream, conn
        self.sel.register(conn, selectors.EVENT_READ, "client")
        self.sel.register(upstream, selectors.EVENT_READ, "upstream")

    def _forward(self, sock: socket.socket) -> None:
        peer = self.peers[sock]
        try:
            data = sock.recv(65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._drop(sock)
            return
        try:
            peer.settimeout(5)
            peer.sendall(data)
            peer.setblocking(False)
        except OSError:
            self._drop(sock)


async def test_survives_a_dropped_connection_mid_watch(k8s, k8s_namespace, js):
    ns = k8s_namespace
    direct = k8s.api_client()
    proxy = ResettingProxy(k8s.port)
    try:
        via_proxy = k8s.api_client()
        via_proxy.configuration.host = f"https://127.0.0.1:{proxy.port}"  # the serving cert is for 127.0.0.1
        async with bridge_running(js, via_proxy, ns) as bridge:
            await create(direct, "commands", ns, command("one"))
            await wait_recs(js, ns, 1)
            watcher = bridge.watchers["commands"]
            assert await asyncio.to_thread(watcher.connected.wait, 5)
            await asyncio.to_thread(proxy.cut)
            assert proxy.resets >= len(bridge.resources)  # every watch was cut mid-stream
            # Changes while the bridge cannot reach the apiserver.
            await create(direct, "commands", ns, command("two"))
            await patch(direct, "commands", ns, "one", {"action": "ResumeJob"})
            await asyncio.sleep(0.5)  # reconnect attempts are refused: backoff
            proxy.restore()
            await wait_recs(js, ns, 3)
            await create(direct, "commands", ns, command("three"))
            await wait_recs(js, ns, 4)
            assert watcher.reconnects >= 1 and watcher.last_error is not None
            assert watcher.relists == 1, "resumed from its position: no relist"
            await wait_settled(js, bridge)
        recs = await quiet_then_recs(js, ns, seconds=0.5)
    finally:
        await asyncio.to_thread(proxy.close)
    assert [r.short for r in recs] == [("ADDED", "Command", "one"), ("ADDED", "Command", "two"),
                                       ("MODIFIED", "Command", "one"), ("ADDED", "Command", "three")]
    assert_no_repeats(recs)


async def test_positions_are_stored_per_namespace(k8s, k8s_namespace, js):
    api = k8s.api_client()
    ns_a = k8s_namespace
    ns_b = await asyncio.to_thread(k8s.create_namespace, f"{ns_a[:50]}-b")
    await create(api, "vcjobs", ns_b, vcjob("early"))  # exists before the first bridge's position
    async with bridge_running(js, api, ns_a) as first:
        await create(api, "vcjobs", ns_a, vcjob("a"))
        await wait_recs(js, ns_a, 1)
        await wait_settled(js, first)
    # A bridge for the other namespace on the same bus: it must list its namespace, not resume
    # the first one's watch (which would never show `early`).
    async with bridge_running(js, api, ns_b) as second:
        recs = await wait_recs(js, ns_b, 1, timeout=5)
        await wait_settled(js, second)
    assert [r.short for r in recs] == [("ADDED", "Job", "early")]
    # And the first namespace's bridge still resumes from its own position.
    async with bridge_running(js, api, ns_a) as third:
        await create(api, "vcjobs", ns_a, vcjob("a2"))
        recs_a = await wait_recs(js, ns_a, 2)
        await wait_settled(js, third)
        assert third.watchers["vcjobs"].relists == 0
    recs_a = await quiet_then_recs(js, ns_a, seconds=0.5)
    assert [r.short for r in recs_a] == [("ADDED", "Job", "a"), ("ADDED", "Job", "a2")]
    assert_no_repeats(await stream_recs(js))


# --------------------------------------------------------------------------- nodes and PriorityClasses (the scheduler's)


def node(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}


def priority_class(name: str, value: int = 1000) -> dict:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value}


@pytest.fixture
def cluster_scoped(k8s):
    """Names for this test's nodes and PriorityClasses; whatever is left of them is deleted after it."""
    tag = uuid.uuid4().hex[:8]
    yield tag
    api = k8s.api_client()
    for resource in ("nodes", "priorityclasses", "storageclasses", "persistentvolumes", "csinodes", "volumeattachments"):
        for obj in api_request(api, "GET", resource_kind(resource).path())["items"]:
            if tag in obj["metadata"]["name"]:
                api_request(api, "DELETE", resource_kind(resource).path(None, obj["metadata"]["name"]))


def assert_cluster_scoped(recs: list[Rec]) -> None:
    for r in recs:
        meta = r.record["object"]["metadata"]
        assert r.subject == f"vcbus.k8s.{r.kind.lower()}._.{r.name}", r.subject
        assert r.headers["Nats-Msg-Id"] == f"{meta['uid']}:{meta['resourceVersion']}:{r.type}"
        assert (r.headers["Vcbus-Kind"], r.headers["Vcbus-Name"], r.headers.get("Vcbus-Namespace", "")) == (
            r.kind, r.name, "")
        assert "Vcbus-Job" not in r.headers
        assert isinstance(decode(json.dumps(r.record).encode()), Ignored)  # the job controller skips them


async def test_nodes_and_priority_classes_are_bridged_and_resumed(k8s, k8s_namespace, js, cluster_scoped):
    api = k8s.api_client()
    ns = k8s_namespace
    tag = cluster_scoped
    n1, n2, pc = f"bridge-n1-{tag}", f"bridge-n2-{tag}", f"bridge-pc-{tag}"
    names = frozenset({n1, n2, pc})
    async with bridge_running(js, api, ns) as first:
        await create(api, "nodes", ns, node(n1))
        await patch(api, "nodes", ns, n1, {"metadata": {"labels": {"zone": "a"}}})
        await create(api, "priorityclasses", ns, priority_class(pc))
        await patch(api, "priorityclasses", ns, pc, {"description": "high"})
        before = await wait_recs(js, ns, 4, cluster_names=names)
        await wait_settled(js, first)
    assert sorted(r.short for r in before) == [
        ("ADDED", "Node", n1), ("ADDED", "PriorityClass", pc), ("MODIFIED", "Node", n1),
        ("MODIFIED", "PriorityClass", pc)]
    # One position per cluster-scoped resource, whatever the bridge's namespace.
    assert position_key("nodes", ns) == "nodes" and position_key("priorityclasses", ns) == "priorityclasses"
    assert (await stored(js, "nodes", ns))["resourceVersion"]

    # While no bridge runs: a node goes, another comes, the class changes.
    await delete(api, "nodes", ns, n1)
    await create(api, "nodes", ns, node(n2))
    changed = await patch(api, "priorityclasses", ns, pc, {"description": "higher"})
    async with bridge_running(js, api, ns) as second:
        recs = await wait_recs(js, ns, 7, cluster_names=names)
        await wait_settled(js, second)
        assert second.watchers["nodes"].relists == 0 and second.watchers["priorityclasses"].relists == 0
    recs = await quiet_then_recs(js, ns, cluster_names=names, seconds=0.5)
    after = recs[4:]
    assert [r.short for r in after if r.kind == "Node"] == [("DELETED", "Node", n1), ("ADDED", "Node", n2)]
    assert [r.short for r in after if r.kind == "PriorityClass"] == [("MODIFIED", "PriorityClass", pc)]
    assert next(r for r in after if r.kind == "PriorityClass").rv == rv(changed)
    assert second.published == 3, "the restarted bridge re-published what the first had stored"
    assert_cluster_scoped(recs)
    assert_no_repeats(recs)


async def test_the_schedulers_namespaces_and_volume_objects_are_bridged(k8s, k8s_namespace, js, cluster_scoped):
    """Namespaces (their labels: pod affinity's namespaceSelector), PVs, StorageClasses and PVCs (the
    volume checks) reach the stream, and the scheduler's cache folds them."""
    from projections.scheduler import SchedulerCache

    api = k8s.api_client()
    ns, name = k8s_namespace, f"bridge-ns-{cluster_scoped}"
    async with bridge_running(js, api, ns) as bridge:
        await create(api, "namespaces", ns, {"metadata": {"name": name, "labels": {"team": "x"}}})
        await patch(api, "namespaces", ns, name, {"metadata": {"labels": {"team": "y"}}})
        await create(api, "storageclasses", ns, {"metadata": {"name": name}, "provisioner": "example.com/none",
                                                 "volumeBindingMode": "WaitForFirstConsumer"})
        await create(api, "persistentvolumes", ns, {"metadata": {"name": name, "labels": {
            "topology.kubernetes.io/zone": "zb"}}, "spec": {"capacity": {"storage": "1Gi"},
                                                            "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/x"}}})
        await create(api, "persistentvolumeclaims", ns, {"metadata": {"name": "data"}, "spec": {
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}, "storageClassName": name}})
        await create(api, "csinodes", ns, {"metadata": {"name": name}, "spec": {"drivers": [
            {"name": "csi.example.com", "nodeID": name, "allocatable": {"count": 3}}]}})
        await create(api, "volumeattachments", ns, {"metadata": {"name": name}, "spec": {
            "attacher": "csi.example.com", "nodeName": name, "source": {"persistentVolumeName": name}}})
        recs = await wait_recs(js, ns, 7, cluster_names=frozenset({name}))
        await wait_settled(js, bridge)
    await delete(api, "namespaces", ns, name)
    assert sorted(r.short for r in recs) == sorted([
        ("ADDED", "Namespace", name), ("MODIFIED", "Namespace", name), ("ADDED", "StorageClass", name),
        ("ADDED", "PersistentVolume", name), ("ADDED", "PersistentVolumeClaim", "data"), ("ADDED", "CSINode", name),
        ("ADDED", "VolumeAttachment", name)])
    assert_cluster_scoped([r for r in recs if r.kind != "PersistentVolumeClaim"])
    [claim] = [r for r in recs if r.kind == "PersistentVolumeClaim"]
    assert claim.subject == f"vcbus.k8s.persistentvolumeclaim.{ns}.data"
    assert claim.headers["Vcbus-Namespace"] == ns and "Vcbus-Job" not in claim.headers
    assert isinstance(decode(json.dumps(claim.record).encode()), Ignored)  # the job controller skips it
    cache = SchedulerCache()  # what the scheduler folds from them
    for r in recs:
        cache.apply(r.seq, json.dumps(r.record).encode())
    snapshot = cache.snapshot()
    assert snapshot.namespaces[name]["team"] == "y"
    assert snapshot.storage_classes[name] == "WaitForFirstConsumer"
    assert snapshot.volumes[name].topologies == (("topology.kubernetes.io/zone", frozenset({"zb"})),)
    assert snapshot.claims[f"{ns}/data"].storage_class == name
    assert snapshot.csinodes[name] == {"csi.example.com": 3}
    assert snapshot.attachments[name] == (name, name, "csi.example.com")


async def test_the_services_and_controllers_that_select_pods_are_bridged(k8s, k8s_namespace, js):
    """Services and ReplicationControllers (with the ReplicaSets already bridged for the podgroup
    controller; an RC, as they, only when its pods are for our scheduler) reach the stream under their
    namespace, the job controller skips them, and the scheduler's cache folds their selectors into a
    pod's system-default spreading selector."""
    from projections.scheduler import SchedulerCache
    from statemachines.scheduler.workloads import Workloads
    from tests.sched_builders import pod

    api = k8s.api_client()
    ns = k8s_namespace
    template = {"metadata": {"labels": {"app": "web"}},
                "spec": {"schedulerName": "volcano", "containers": [{"name": "c", "image": "busybox"}]}}
    theirs = {**template, "spec": {**template["spec"], "schedulerName": "default-scheduler"}}
    async with bridge_running(js, api, ns) as bridge:
        await create(api, "services", ns, {"metadata": {"name": "web"}, "spec": {
            "selector": {"app": "web"}, "ports": [{"port": 80}]}})
        await create(api, "replicationcontrollers", ns, {"metadata": {"name": "old"}, "spec": {
            "replicas": 0, "selector": {"app": "web"}, "template": template}})
        await create(api, "replicationcontrollers", ns, {"metadata": {"name": "theirs"}, "spec": {
            "replicas": 0, "selector": {"app": "web"}, "template": theirs}})  # not for our scheduler: not bridged
        await create(api, "replicasets", ns, {"metadata": {"name": "web"}, "spec": {
            "replicas": 0, "selector": {"matchLabels": {"app": "web"}, "matchExpressions": [
                {"key": "tier", "operator": "Exists"}]}, "template": {**template, "metadata": {
                    "labels": {"app": "web", "tier": "x"}}}}})
        recs = await wait_recs(js, ns, 3)
        await wait_settled(js, bridge)
        recs = await quiet_then_recs(js, ns, seconds=0.5)
    assert sorted(r.short for r in recs) == sorted([
        ("ADDED", "Service", "web"), ("ADDED", "ReplicationController", "old"), ("ADDED", "ReplicaSet", "web")])
    for r in recs:
        assert r.subject == f"vcbus.k8s.{r.kind.lower()}.{ns}.{r.record['object']['metadata']['name']}"
        assert r.headers["Vcbus-Namespace"] == ns and "Vcbus-Job" not in r.headers
    assert all(isinstance(decode(json.dumps(r.record).encode()), Ignored) for r in recs if r.kind != "ReplicaSet")
    cache = SchedulerCache()
    for r in recs:
        cache.apply(r.seq, json.dumps(r.record).encode())
    p = pod("web-1", None, namespace=ns, labels={"app": "web", "tier": "x"})
    p["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "u",
                                         "controller": True}]
    cache.apply_object("ADDED", p)
    snapshot = cache.snapshot()
    # the Service's labels, then the ReplicaSet's requirements added (as DefaultSelector, repeats and all)
    assert Workloads(snapshot.workloads).selector(snapshot.tasks[f"{ns}/web-1"]) == (
        ("app", "In", ("web",)), ("app", "In", ("web",)), ("tier", "Exists", ()))


@pytest.mark.slow
async def test_410_relists_nodes_and_priority_classes(k8s, k8s_namespace, js, cluster_scoped):
    api = k8s.api_client()
    ns = k8s_namespace
    tag = cluster_scoped
    gone, kept, pc = f"bridge-gone-{tag}", f"bridge-kept-{tag}", f"bridge-pc-{tag}"
    names = frozenset({gone, kept, pc})
    async with bridge_running(js, api, ns) as first:
        await create(api, "nodes", ns, node(gone))
        await create(api, "nodes", ns, node(kept))
        await create(api, "priorityclasses", ns, priority_class(pc))
        before = await wait_recs(js, ns, 3, cluster_names=names)
        await wait_settled(js, first)
    old_rv = max([int((await stored(js, r, ns))["resourceVersion"]) for r in ("nodes", "priorityclasses")])
    last_known = {r.name: r for r in before}

    await delete(api, "nodes", ns, gone)
    await patch(api, "nodes", ns, kept, {"metadata": {"labels": {"zone": "b"}}})
    await delete(api, "priorityclasses", ns, pc)
    assert await asyncio.to_thread(k8s.compact_etcd) > old_rv
    await asyncio.to_thread(k8s.stop_apiserver)
    await asyncio.to_thread(k8s.start_apiserver)

    async with bridge_running(js, api, ns) as second:
        recs = await wait_recs(js, ns, 6, cluster_names=names, timeout=30)
        await wait_settled(js, second)
        assert second.watchers["nodes"].relists == 1 and second.watchers["priorityclasses"].relists == 1
    recs = await quiet_then_recs(js, ns, cluster_names=names, seconds=0.5)
    after = recs[3:]
    assert sorted(r.short for r in after) == [
        ("DELETED", "Node", gone), ("DELETED", "PriorityClass", pc), ("MODIFIED", "Node", kept)]
    for name in (gone, pc):  # the DELETED of a relist: the last state the bridge had stored
        deleted = next(r for r in after if r.name == name)
        assert deleted.uid == last_known[name].uid and deleted.rv == last_known[name].rv
    assert_cluster_scoped(recs)
    assert_no_repeats(recs)


async def test_jobs_are_published_after_the_first_list_of_everything_else(k8s, k8s_namespace, js):
    """Like Volcano's WaitForCacheSync: the decider never sees a job before the queues (pods, ...) that exist.

    Queues are cluster-scoped and listed in name order, so a job decided between
    two queues of the list could miss its queue; with many queues listed the job's
    single record would almost always overtake them if the bridge did not hold it.
    """
    api = k8s.api_client()
    ns = k8s_namespace
    token = uuid.uuid4().hex[:6]
    queues = frozenset(f"aaa-hold-{token}-{i:02d}" for i in range(30))
    for name in sorted(queues):
        await create(api, "queues", ns, queue(name))
    job = await create(api, "vcjobs", ns, vcjob("j"))
    await create(api, "pods", ns, pod("j-t-0", "j"))
    await create(api, "podgroups", ns, podgroup("j", job))
    await create(api, "commands", ns, command("c", "j"))
    try:
        async with bridge_running(js, api, ns) as bridge:
            recs = await wait_recs(js, ns, 34, cluster_names=queues, timeout=60)
            await wait_settled(js, bridge, timeout=30)
            assert all(bridge.listed[r].is_set() for r in bridge.resources)
        everything = await stream_recs(js)
    finally:
        for name in queues:
            await delete(api, "queues", ns, name)
    first_job = next(i for i, r in enumerate(everything) if r.kind == "Job")
    before = everything[:first_job]
    assert queues <= {r.name for r in before if r.kind == "Queue"}, "a job overtook the queue list"
    assert {r.kind for r in before if r.kind != "Queue" and r.record["object"]["metadata"].get("namespace") == ns} \
        >= {"Pod", "PodGroup", "Command"}
    assert not [r.short for r in everything[first_job:] if r.kind == "Queue"], "queues listed after the job"
    assert [r.short for r in recs if r.kind == "Job"] == [("ADDED", "Job", "j")]


def owner(kind: str, name: str, scheduler: str = "volcano", annotations: dict | None = None) -> dict:
    """A ReplicaSet, StatefulSet or DaemonSet (no controller-manager here: no pods come of it)."""
    labels = {"app": name}
    spec: dict[str, Any] = {"selector": {"matchLabels": labels}, "template": {
        "metadata": {"labels": labels},
        "spec": {"schedulerName": scheduler, "containers": [{"name": "c", "image": "busybox"}]}}}
    if kind != "DaemonSet":
        spec["replicas"] = 0
    if kind == "StatefulSet":
        spec["serviceName"] = name
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name, "annotations": annotations or {}},
            "spec": spec}


async def test_a_pods_owners_are_bridged_for_our_scheduler_and_pods_come_after_their_first_list(
        k8s, k8s_namespace, js):
    """The podgroup controller reads a pod's ReplicaSet, StatefulSet, DaemonSet or batch/v1 Job annotations:
    those whose pod template is for the volcano scheduler reach the bus, and the pods listed at start-up
    come after the owners' first lists (a pod's PodGroup is built with its owner's annotations)."""
    api = k8s.api_client()
    ns = k8s_namespace
    mine = {"scheduling.volcano.sh/group-min-member": "3"}
    await create(api, "replicasets", ns, owner("ReplicaSet", "web", annotations=mine))
    await create(api, "replicasets", ns, owner("ReplicaSet", "theirs", scheduler="default-scheduler"))
    await create(api, "statefulsets", ns, owner("StatefulSet", "db"))
    await create(api, "daemonsets", ns, owner("DaemonSet", "agent"))
    await create(api, "batchjobs", ns, {"apiVersion": "batch/v1", "kind": "Job", "metadata": {
        "name": "pi", "annotations": mine}, "spec": {"suspend": True, "template": {"spec": {
            "schedulerName": "volcano", "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}})
    listed = pod("web-abcde", None)
    listed["spec"]["schedulerName"] = "volcano"
    await create(api, "pods", ns, listed)
    async with bridge_running(js, api, ns) as bridge:
        await wait_recs(js, ns, 5, timeout=60)
        await wait_settled(js, bridge, timeout=30)
        await patch(api, "replicasets", ns, "web", {"metadata": {"annotations": {"volcano.sh/x": "1"}}})
        await patch(api, "replicasets", ns, "theirs", {"metadata": {"annotations": {"volcano.sh/x": "1"}}})
        await delete(api, "statefulsets", ns, "db")
        recs = await wait_recs(js, ns, 7, timeout=60)
    assert sorted(r.short for r in recs[:4]) == [("ADDED", "DaemonSet", "agent"), ("ADDED", "Job", "pi"),
                                                 ("ADDED", "ReplicaSet", "web"), ("ADDED", "StatefulSet", "db")]
    assert recs[4].short == ("ADDED", "Pod", "web-abcde"), "the pod came before its owners' first list was in"
    assert sorted(r.short for r in recs[5:]) == [("DELETED", "StatefulSet", "db"), ("MODIFIED", "ReplicaSet", "web")]
    batch = next(r for r in recs if r.short == ("ADDED", "Job", "pi"))  # a batch/v1 Job: not on a vcjob's subject
    assert batch.subject == f"vcbus.k8s.batchjob.{ns}.pi" and batch.record["object"]["apiVersion"] == "batch/v1"
    web = next(r for r in recs if r.short == ("ADDED", "ReplicaSet", "web"))
    assert web.subject.startswith("vcbus.k8s.replicaset.") and web.record["object"]["metadata"]["annotations"] == mine
    assert "theirs" not in {r.name for r in recs}
    assert owner_filter_cases()


def owner_filter_cases() -> bool:
    from vcbus.k8s.bridge import owner_wanted

    assert owner_wanted({"spec": {"template": {"spec": {"schedulerName": "volcano"}}}})
    assert not owner_wanted({"spec": {"template": {"spec": {}}}})
    assert owner_wanted({"metadata": {"name": "gone"}})  # a DELETED from a stored position: only metadata
    return True


def test_the_observation_time_is_the_wall_clock_second_and_follows_it():
    """A record's `time` is formatted once a second: it must still be the current second, every second."""
    import datetime as dt

    from vcbus.k8s.bridge import observed_now

    def wall(second: int) -> str:
        return dt.datetime.fromtimestamp(second, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    seen = set()
    deadline = time.monotonic() + 30
    while len(seen) < 3 and time.monotonic() < deadline:
        before = int(time.time())
        text = observed_now()
        after = int(time.time())
        assert text in {wall(before), wall(after)}
        seen.add(text)
    assert len(seen) == 3, f"the observation time did not follow the clock: {sorted(seen)}"
