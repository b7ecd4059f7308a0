"""The scheduler projection (projections/scheduler.py): a fold of the watch log plus the scheduler's own
decisions; rebuilt == live; determinism of whole sessions."""

from __future__ import annotations

import json

import msgspec
import pytest

from projections.scheduler import BIND_TIMEOUT, SchedulerCache
from statemachines import outputs as o
from statemachines.model.records import RecordError
from statemachines.model.timefmt import add
from statemachines.scheduler.config import DEFAULT_CONFIG
from statemachines.scheduler.session import run_session
from tests.sched_builders import Cluster, node, outs_of, pod, podgroup, queue, record

T = "2026-01-01T00:01:00Z"


def scene() -> Cluster:
    return Cluster(queue(), queue("root", reclaimable=False), node("n1", cpu="4"), node("n2", cpu="4"),
                   podgroup("pg", 2, phase="Inqueue", owner="train"),
                   *[pod(f"pg-w-{i}", "pg", role="w") for i in range(3)])


def rebuilt(log: list[bytes]) -> SchedulerCache:
    cache = SchedulerCache()
    for seq, data in enumerate(log, 1):
        cache.apply(seq, data)
    return cache


def test_rebuilt_from_records_equals_live_with_own_decisions_confirmed():
    cluster = scene()
    for _ in range(3):
        result = cluster.session()
        cluster.write_statuses(result)
        cluster.land_binds(result, phase="Running")
    live = cluster.cache.state()
    assert live == rebuilt(cluster.log).state()
    assert {p["status"] for p in live["pods"].values()} == {"Running"}
    assert live["podgroups"]["default/pg"]["phase"] == "Running"


def test_outputs_then_the_real_records_give_the_state_of_the_records_alone():
    cluster = scene()
    result = cluster.session()
    assumed = cluster.cache.state()
    assert {k: p["status"] for k, p in assumed["pods"].items() if p["status"] == "Binding"}  # assumed now
    assert assumed["podgroups"]["default/pg"]["conditions"]  # as written
    cluster.write_statuses(result)
    cluster.land_binds(result)
    assert cluster.cache.state() == rebuilt(cluster.log).state()


def test_a_bound_pod_is_reported_once_and_only_if_vcbus_bound_it():
    cluster = scene()
    result = cluster.session()
    cluster.land_binds(result)
    other = pod("elsewhere", None, node="n2")  # bound by someone else
    cluster.add(other)
    landed = cluster.session()
    assert sorted(e.pod for e in outs_of(landed.outputs, o.PodBound)) == sorted(b.name for b in result.binds)
    assert not outs_of(cluster.session().outputs, o.PodBound)


def test_an_unconfirmed_bind_expires_by_record_time():
    cluster = scene()
    result = cluster.session()
    key = f"default/{result.binds[0].name}"
    assert cluster.cache.state()["pods"][key]["status"] == "Binding"
    cluster.time = add(T, BIND_TIMEOUT - 1)
    cluster.add(node("n3"))
    assert cluster.cache.state()["pods"][key]["status"] == "Binding"
    cluster.time = add(T, BIND_TIMEOUT + 5)
    cluster.add(node("n4"))
    assert cluster.cache.state()["pods"][key]["status"] == "Pending"


def test_a_recreated_pod_does_not_inherit_the_old_pods_bind():
    cluster = scene()
    result = cluster.session()
    name = result.binds[0].name
    cluster.add(cluster.get("Pod", name), "DELETED")
    cluster.add(pod(name, "pg", role="w", uid="new-uid"))
    assert cluster.cache.state()["pods"][f"default/{name}"]["status"] == "Pending"


def test_create_queue_and_status_writes_are_assumed_until_their_records():
    cluster = Cluster(node("n1"))
    result = cluster.session()
    assert [(c.queue, c.reclaimable) for c in outs_of(result.outputs, o.CreateQueue)] == [("default", True),
                                                                                            ("root", False)]
    assert set(cluster.cache.state()["queues"]) == {"default", "root"}
    assert not outs_of(cluster.session().outputs, o.CreateQueue)


def test_unusable_records_change_nothing():
    cache = SchedulerCache()
    cache.apply(1, record(node("n1")))
    before = (cache.state(), cache.position)
    bad = [
        b"{nope",
        json.dumps({"type": "ADDED", "object": {**node("n2"), "status": {"allocatable": {"cpu": "lots"}}}}).encode(),
        json.dumps({"type": "ADDED", "object": {**pod("p", "g"), "metadata": {"namespace": "x"}}}).encode(),
        json.dumps({"type": "WHAT", "object": node("n3")}).encode(),
        json.dumps({"type": "ADDED", "object": {**podgroup("pg", 1), "spec": {"minMember": "three"}}}).encode(),
    ]
    for data in bad:
        with pytest.raises(RecordError):
            cache.apply(2, data)
        assert (cache.state(), cache.position) == before
    with pytest.raises(RecordError, match=r"Node n2 status.allocatable.cpu: quantities must match"):
        cache.apply(2, bad[1])
    # a time that is not a time is treated as absent: the record is folded, the clock stays
    time_before = cache.time
    cache.apply(2, json.dumps({"type": "ADDED", "object": node("n4"), "time": "yesterday"}).encode())
    assert "n4" in cache.state()["nodes"] and cache.time == time_before and cache.position == 2


def test_other_kinds_and_bookmarks_only_advance_the_position():
    cache = SchedulerCache()
    cache.apply(1, record(node("n1")))
    state = cache.state()
    job = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "j", "namespace": "d"}}
    cache.apply(2, record(job))
    cache.apply(3, json.dumps({"type": "BOOKMARK", "object": {"kind": "Pod", "metadata": {}}}).encode())
    cache.apply(4, record({**node("n9"), "apiVersion": "v2"}))
    assert cache.state() == state and cache.position == 4


def test_apply_object_equals_apply():
    objects = [queue(), node("n1"), podgroup("pg", 1), pod("pg-0", "pg"), pod("pg-0", "pg", node="n1")]
    a, b = SchedulerCache(), SchedulerCache()
    for seq, obj in enumerate(objects, 1):
        a.apply(seq, record(obj, "MODIFIED" if seq == 5 else "ADDED"))
        b.apply_object("MODIFIED" if seq == 5 else "ADDED", obj)
    assert a.state() == b.state() and a.position == b.position == 5
    b.apply_object("DELETED", objects[3])
    assert "default/pg-0" not in b.state()["pods"]


def test_sessions_are_deterministic():
    def run() -> list[bytes]:
        cluster = scene()
        outs = []
        for _ in range(3):
            result = cluster.session()
            outs.append(msgspec.json.encode(result.outputs))
            cluster.write_statuses(result)
            cluster.land_binds(result)
        return outs

    assert run() == run()


def test_run_session_does_not_change_the_cache():
    cluster = scene()
    snapshot = cluster.cache.snapshot()
    before = cluster.cache.state()
    first = run_session(snapshot, DEFAULT_CONFIG, seq=9, number=1, time=T)
    assert cluster.cache.state() == before
    second = run_session(snapshot, DEFAULT_CONFIG, seq=9, number=1, time=T)
    assert msgspec.json.encode(first.outputs) == msgspec.json.encode(second.outputs)
    assert first.uid == second.uid != run_session(snapshot, DEFAULT_CONFIG, seq=9, number=2, time=T).uid
