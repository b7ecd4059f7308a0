"""The cronjob controller's commands on a real API server (vcbus/k8s/cronjob_commands.py).

The engine decides from the CronJob as the API server returns it; the actuator makes the run,
writes the status and deletes runs, idempotent under redelivery, and leaves alone what is not the
CronJob's: another CronJob of the same name, a vcjob it does not control, a name not a run's.
"""

from __future__ import annotations

import msgspec
import pytest
from kubernetes import client

from statemachines import outputs as o
from statemachines.engine import Engine
from statemachines.model.cronjob import CronJobStatus, ObjectReference
from statemachines.model.records import TimerRecord, TimerSpec, decode
from vcbus.cronjobs.zonedata import cronjob_zones
from vcbus.k8s.actuator import Actuator

pytestmark = pytest.mark.k8s
G, V = "batch.volcano.sh", "v1alpha1"
SPEC = {"minAvailable": 1, "schedulerName": "volcano", "queue": "default",
        "tasks": [{"name": "t", "replicas": 1, "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}}]}


@pytest.fixture
def cluster(k8s, k8s_namespace):
    api = k8s.api_client()
    return client.CustomObjectsApi(api), Actuator(api), k8s_namespace


def make_cronjob(custom, ns: str, name: str = "tick") -> dict:
    return custom.create_namespaced_custom_object(G, V, ns, "cronjobs", {
        "apiVersion": f"{G}/{V}", "kind": "CronJob", "metadata": {"name": name},
        "spec": {"schedule": "@every 5s", "timeZone": "Europe/Paris",
                 "jobTemplate": {"metadata": {"labels": {"app": name}}, "spec": SPEC}}})


def decided(cronjob: dict) -> list[o.Output]:
    """The engine's outputs for the CronJob record and its first timer."""
    engine = Engine(timers="recorded")
    rec = {"type": "ADDED", "object": cronjob, "time": cronjob["metadata"]["creationTimestamp"],
           "zones": cronjob_zones(cronjob)}
    out = engine.apply(1, decode(msgspec.json.encode(rec)))
    (timer,) = [x for x in out if isinstance(x, o.TimerScheduled)]
    out += engine.apply(2, TimerRecord(TimerSpec(job=timer.job, id=timer.timer, due=timer.due), time=timer.due))
    return out


def test_a_run_is_made_as_volcano_makes_it_once_and_only_for_the_cronjob_it_names(cluster):
    custom, act, ns = cluster
    cj = make_cronjob(custom, ns)
    (create,) = [x for x in decided(cj) if isinstance(x, o.CreateCronJobRun)]
    assert act.apply(create) == "applied"
    assert act.apply(create) == "done"  # redelivered: AlreadyExists
    run = custom.get_namespaced_custom_object(G, V, ns, "jobs", create.name)
    assert run["metadata"]["ownerReferences"] == [{"apiVersion": f"{G}/{V}", "kind": "CronJob", "name": "tick",
                                                   "uid": cj["metadata"]["uid"], "controller": True,
                                                   "blockOwnerDeletion": True}]
    assert run["metadata"]["labels"] == {"app": "tick"}
    stamp = run["metadata"]["annotations"]["volcano.sh/cronjob-scheduled-timestamp"]
    assert stamp.endswith(("+01:00", "+02:00"))  # the scheduled time in the CronJob's zone (Paris)
    assert run["spec"]["tasks"][0]["name"] == "t"
    # the CronJob deleted and made again: the old CronJob's run is not made for the new one
    custom.delete_namespaced_custom_object(G, V, ns, "cronjobs", "tick")
    make_cronjob(custom, ns)
    later = msgspec.structs.replace(create, name="tick-1")
    assert act.apply(later) == "dropped"
    # not a run's name, or another CronJob's key: refused before any call
    assert act.apply(msgspec.structs.replace(create, name="other")) == "refused"
    assert act.apply(msgspec.structs.replace(create, job=f"{ns}/cronjob:other")) == "refused"
    # under the key of a vcjob of the tick's name (its own is `<ns>/cronjob:<name>`): refused too
    assert act.apply(msgspec.structs.replace(create, job=f"{ns}/tick")) == "refused"


def test_status_is_written_whole_for_the_cronjob_it_was_computed_from(cluster):
    custom, act, ns = cluster
    cj = make_cronjob(custom, ns)
    uid = cj["metadata"]["uid"]
    ref = ObjectReference(kind="Job", namespace=ns, name="tick-1", uid="u-1", api_version=f"{G}/{V}")
    write = o.UpdateCronJobStatus(job=f"{ns}/cronjob:tick", seq=1, name="tick", uid=uid, status=CronJobStatus(
        active=[ref], last_schedule_time="2026-01-01T00:00:00Z"))
    assert act.apply(write) == "applied"
    assert custom.get_namespaced_custom_object(G, V, ns, "cronjobs", "tick")["status"] == {
        "active": [msgspec.to_builtins(ref)], "lastScheduleTime": "2026-01-01T00:00:00Z"}
    done = msgspec.structs.replace(write, status=CronJobStatus(last_schedule_time="2026-01-01T00:00:00Z",
                                                               last_successful_time="2026-01-01T00:01:00Z"))
    assert act.apply(done) == "applied"  # `active` gone: the status is replaced, not merged
    assert custom.get_namespaced_custom_object(G, V, ns, "cronjobs", "tick")["status"] == {
        "lastScheduleTime": "2026-01-01T00:00:00Z", "lastSuccessfulTime": "2026-01-01T00:01:00Z"}
    custom.delete_namespaced_custom_object(G, V, ns, "cronjobs", "tick")
    make_cronjob(custom, ns)
    stale_before = act.stale
    assert act.apply(write) == "dropped" and act.stale == stale_before + 1
    assert "status" not in custom.get_namespaced_custom_object(G, V, ns, "cronjobs", "tick")


def test_only_a_run_the_cronjob_controls_is_deleted_and_only_that_incarnation(cluster):
    custom, act, ns = cluster
    cj = make_cronjob(custom, ns)
    (create,) = [x for x in decided(cj) if isinstance(x, o.CreateCronJobRun)]
    assert act.apply(create) == "applied"
    run = custom.get_namespaced_custom_object(G, V, ns, "jobs", create.name)
    delete = o.DeleteCronJobRun(job=f"{ns}/cronjob:tick", seq=3, name=create.name, uid="another-uid")
    assert act.apply(delete) == "done"  # another vcjob of the name now: left alone
    assert custom.get_namespaced_custom_object(G, V, ns, "jobs", create.name)
    theirs = custom.create_namespaced_custom_object(G, V, ns, "jobs", {
        "apiVersion": f"{G}/{V}", "kind": "Job", "metadata": {"name": "tick-7"}, "spec": SPEC})
    assert act.apply(o.DeleteCronJobRun(job=f"{ns}/cronjob:tick", seq=4, name="tick-7",
                                        uid=theirs["metadata"]["uid"])) == "refused"
    assert act.apply(msgspec.structs.replace(delete, uid=run["metadata"]["uid"])) == "applied"
    with pytest.raises(client.ApiException) as gone:
        custom.get_namespaced_custom_object(G, V, ns, "jobs", create.name)
    assert gone.value.status == 404
    assert act.apply(msgspec.structs.replace(delete, uid=run["metadata"]["uid"])) == "done"  # redelivered
