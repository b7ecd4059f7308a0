"""Status writes computed for an object deleted and re-created under its name are refused (issue 32, item 1).

Every status write names the uid (and resourceVersion) of the object it was computed from: the
scheduler's PodGroup and Queue writes, the job controller's vcjob status, the queue controller's
Queue status. On the real API server the actuator refuses a write whose object is now another
incarnation, and counts it; the scheduler's projection does not assume it on the new object either.
"""

from __future__ import annotations

import uuid

import msgspec
import pytest
import yaml
from kubernetes import client

from projections.scheduler import SchedulerCache
from statemachines import outputs as o
from statemachines.admission.mutate import mutate_job
from statemachines.model.status import initial_status
from tests import builders as b
from tests import sched_builders as sb
from tests.test_actuator import SEED
from tests.test_sm_queues import queue_obj
from vcbus.k8s.actuator import JOB_GROUP, JOB_PLURAL, JOB_VERSION, PG_GROUP, PG_PLURAL, PG_VERSION, Actuator

T0 = "2026-11-30T08:00:00Z"


def _podgroup(custom, ns: str, name: str, phase: str) -> dict:
    custom.create_namespaced_custom_object(PG_GROUP, PG_VERSION, ns, PG_PLURAL, {
        "apiVersion": f"{PG_GROUP}/{PG_VERSION}", "kind": "PodGroup", "metadata": {"name": name},
        "spec": {"minMember": 1, "queue": "default"}})
    return custom.patch_namespaced_custom_object(PG_GROUP, PG_VERSION, ns, PG_PLURAL, name, {"status": {"phase": phase}})


def _delete_podgroup(custom, ns: str, name: str) -> None:
    custom.delete_namespaced_custom_object(PG_GROUP, PG_VERSION, ns, PG_PLURAL, name)


@pytest.mark.k8s
def test_a_podgroup_status_computed_for_a_deleted_podgroup_is_not_written_on_its_successor(k8s, k8s_namespace):
    api, ns = k8s.api_client(), k8s_namespace
    custom, act = client.CustomObjectsApi(api), Actuator(api)
    old = _podgroup(custom, ns, "pg", "Running")
    running = {"phase": "Running", "running": 1,
               "conditions": [{"type": "Scheduled", "status": "True", "transitionID": "s-1", "lastTransitionTime": T0}]}
    write = o.UpdatePodGroupStatus(job=f"{ns}/pg", seq=7, name="pg", status=running, uid=old["metadata"]["uid"],
                                   resource_version=old["metadata"]["resourceVersion"])
    _delete_podgroup(custom, ns, "pg")
    new = _podgroup(custom, ns, "pg", "Pending")  # the same name, another incarnation
    assert act.apply(write) == "dropped"
    assert act.stale == 1
    got = custom.get_namespaced_custom_object(PG_GROUP, PG_VERSION, ns, PG_PLURAL, "pg")
    assert got["metadata"]["uid"] == new["metadata"]["uid"] and got["status"] == {"phase": "Pending"}
    # the successor's own status is written, as a whole
    own = o.UpdatePodGroupStatus(job=f"{ns}/pg", seq=8, name="pg", status={"phase": "Inqueue"},
                                 uid=new["metadata"]["uid"], resource_version=new["metadata"]["resourceVersion"])
    assert act.apply(own) == "applied"
    assert custom.get_namespaced_custom_object(PG_GROUP, PG_VERSION, ns, PG_PLURAL, "pg")["status"] == {"phase": "Inqueue"}
    assert act.stale == 1


@pytest.mark.k8s
def test_a_vcjob_status_computed_for_a_deleted_vcjob_is_not_written_on_its_successor(k8s, k8s_namespace):
    api, ns = k8s.api_client(), k8s_namespace
    custom, act = client.CustomObjectsApi(api), Actuator(api)
    manifest = mutate_job(yaml.safe_load(SEED.read_text()))
    manifest["metadata"]["namespace"] = ns
    name = manifest["metadata"]["name"]
    old = custom.create_namespaced_custom_object(JOB_GROUP, JOB_VERSION, ns, JOB_PLURAL, manifest)
    status = initial_status(3, T0)
    status.state.phase, status.version = "Running", 0
    write = o.UpdateJobStatus(job=f"{ns}/{name}", seq=5, status=status, uid=old["metadata"]["uid"],
                              resource_version=old["metadata"]["resourceVersion"])
    custom.delete_namespaced_custom_object(JOB_GROUP, JOB_VERSION, ns, JOB_PLURAL, name)
    new = custom.create_namespaced_custom_object(JOB_GROUP, JOB_VERSION, ns, JOB_PLURAL, manifest)
    assert act.apply(write) == "dropped" and act.stale == 1
    got = custom.get_namespaced_custom_object(JOB_GROUP, JOB_VERSION, ns, JOB_PLURAL, name)
    assert got["metadata"]["uid"] == new["metadata"]["uid"] and "status" not in got
    own = o.UpdateJobStatus(job=f"{ns}/{name}", seq=6, status=status, uid=new["metadata"]["uid"])
    assert act.apply(own) == "applied"
    got = custom.get_namespaced_custom_object(JOB_GROUP, JOB_VERSION, ns, JOB_PLURAL, name)
    assert got["status"]["state"]["phase"] == "Running"


@pytest.mark.k8s
@pytest.mark.parametrize("with_status", [True, False], ids=["status", "no-status"])
def test_a_queue_status_computed_for_a_deleted_queue_is_not_written_on_its_successor(k8s, with_status):
    api = k8s.api_client()
    custom, act = client.CustomObjectsApi(api), Actuator(api)
    name = f"stale-q-{uuid.uuid4().hex[:8]}"
    job = f"_/{name}"
    assert act.apply(o.CreateQueue(job=job, seq=1, queue=name)) == "applied"
    old = custom.get_cluster_custom_object(PG_GROUP, PG_VERSION, "queues", name)
    write = o.UpdateQueueStatus(job=job, seq=2, queue=name, state="Open", allocated={"cpu": "3"},
                                uid=old["metadata"]["uid"], resource_version=old["metadata"]["resourceVersion"])
    custom.delete_cluster_custom_object(PG_GROUP, PG_VERSION, "queues", name)
    try:
        assert act.apply(o.CreateQueue(job=job, seq=3, queue=name)) == "applied"
        if with_status:  # the JSON patch's own uid test refuses it; else the read before the merge patch does
            assert act.apply(o.UpdateQueueStatus(job=job, seq=4, queue=name, state="Closed")) == "applied"
        assert act.apply(write) == "dropped" and act.stale == 1
        got = custom.get_cluster_custom_object(PG_GROUP, PG_VERSION, "queues", name)
        assert got.get("status") == ({"state": "Closed"} if with_status else None)
        own = o.UpdateQueueStatus(job=job, seq=5, queue=name, state="Open", uid=got["metadata"]["uid"])
        assert act.apply(own) == "applied"
        assert custom.get_cluster_custom_object(PG_GROUP, PG_VERSION, "queues", name)["status"]["state"] == "Open"
    finally:
        custom.delete_cluster_custom_object(PG_GROUP, PG_VERSION, "queues", name)


# ------------------------------------------------------------------ the deciding side (no cluster)


def _record(rtype: str, obj: dict) -> bytes:
    return msgspec.json.encode({"type": rtype, "object": obj})


def _pg_object(uid: str, rv: str, phase: str) -> dict:
    return {"apiVersion": f"{PG_GROUP}/{PG_VERSION}", "kind": "PodGroup",
            "metadata": {"name": "pg", "namespace": "ns", "uid": uid, "resourceVersion": rv},
            "spec": {"minMember": 1, "queue": "default"}, "status": {"phase": phase}}


def test_the_scheduler_projection_does_not_assume_an_old_incarnations_status_on_the_new_one():
    cache = SchedulerCache()
    cache.apply(1, _record("ADDED", _pg_object("uid-1", "10", "Running")))
    stale = o.UpdatePodGroupStatus(job="ns/pg", seq=1, name="pg", status={"phase": "Running"}, uid="uid-1",
                                   resource_version="10")
    cache.apply(2, _record("DELETED", _pg_object("uid-1", "11", "Running")))
    cache.apply(3, _record("ADDED", _pg_object("uid-2", "12", "Pending")))
    cache.apply_outputs([stale])  # the session that saw uid-1 closes after uid-2 was folded
    assert cache.groups["ns/pg"].phase == "Pending" and cache.groups["ns/pg"].uid == "uid-2"
    cache.apply_outputs([o.UpdatePodGroupStatus(job="ns/pg", seq=3, name="pg", status={"phase": "Inqueue"}, uid="uid-2")])
    assert cache.groups["ns/pg"].phase == "Inqueue"


def test_every_status_write_names_the_object_it_was_computed_from():
    # the scheduler: the PodGroup's and the Queue's uid and resourceVersion as the session saw them
    q = sb.queue("default")
    q["metadata"]["resourceVersion"] = "41"
    pg = sb.podgroup("pg", 1, phase="Inqueue")
    pg["metadata"]["resourceVersion"] = "42"
    cluster = sb.Cluster(sb.node("n1"), q, pg, sb.pod("p-0", "pg"))
    outs = cluster.session().outputs
    [pg_write] = sb.outs_of(outs, o.UpdatePodGroupStatus)
    assert (pg_write.uid, pg_write.resource_version) == ("uid-pg-pg", "42")
    [queue_write] = sb.outs_of(outs, o.UpdateQueueStatus)
    assert (queue_write.uid, queue_write.resource_version) == ("uid-q-default", "41")

    # the job controller: the vcjob's
    h = b.Harness(b.job())
    [job_write] = h.outputs.of(o.UpdateJobStatus)
    assert (job_write.uid, job_write.resource_version) == (b.job_uid(), h.get("Job", "j")["metadata"]["resourceVersion"])

    # the queue controller: the Queue's
    h = b.Harness()
    [queue_write] = [x for x in h.feed("ADDED", queue_obj("q", state=None)) if isinstance(x, o.UpdateQueueStatus)]
    assert queue_write.uid and queue_write.uid == h.get("Queue", "q")["metadata"]["uid"]
    assert queue_write.resource_version == h.get("Queue", "q")["metadata"]["resourceVersion"]
