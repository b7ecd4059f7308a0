"""A 403 that refuses the object is not a missing permission (issue 31), on a real API server and nats-server.

kube-apiserver answers 403 Forbidden for three different things: RBAC (`User "..." cannot create
resource "pods"...`: vcbus's role lacks a verb, `vcbus up` stops with exit 4 naming it,
tests/test_api_failures.py), the ResourceQuota admission plugin (`pods "x" is forbidden: exceeded
quota: ...`) and the PodSecurity admission plugin (`pods "x" is forbidden: violates PodSecurity
"restricted:latest": ...`). The last two refuse that one object, as a webhook's 422 does: the
actuator appends a REFUSED record to VCBUS_K8S (the decider creates the pod again at the job's next
sync, statemachines/intake/refusals.py), acks the command and goes on. Leader election, which cannot
go on without its Lease, stops on such a 403 with the API server's words, not with a verb to grant.

And the scheduler's `Scheduled` Event about a pod deleted since, or named under the pod's own key
once its PodGroup is gone, is written, as Kubernetes' event recorder writes an Event against the
reference it holds (the API server takes an Event whose involvedObject is gone).
"""

from __future__ import annotations

import asyncio

import msgspec
import pytest
from kubernetes import client

from statemachines import outputs as o
from statemachines.model.records import RefusalRecord, decode
from tests.test_actuator_service import publish
from tests.test_api_failures import T1, run_until, vcjob
from vcbus.bus import subjects as s
from vcbus.bus.connecting import open_bus
from vcbus.k8s.actuating import DURABLE
from vcbus.k8s.actuator import Actuator
from vcbus.k8s.apierrors import admission_refusal, denied, refused_stop
from vcbus.k8s.leader import LeaderElector

pytestmark = [pytest.mark.k8s, pytest.mark.nats]


def pod_manifest(job: dict, name: str) -> dict:
    meta = job["metadata"]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": meta["namespace"],
                         "ownerReferences": [{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
                                              "name": meta["name"], "uid": meta["uid"], "controller": True,
                                              "blockOwnerDeletion": True}]},
            "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}}


def full_quota(api, ns: str) -> None:
    """A ResourceQuota of no pods, its status written as the quota controller would (the test API server runs none)."""
    core = client.CoreV1Api(api)
    core.create_namespaced_resource_quota(ns, {"metadata": {"name": "pods"}, "spec": {"hard": {"pods": "0"}}})
    quota = core.read_namespaced_resource_quota("pods", ns)
    quota.status = client.V1ResourceQuotaStatus(hard={"pods": "0"}, used={"pods": "0"})
    core.replace_namespaced_resource_quota_status("pods", ns, quota)


def restricted(api, ns: str) -> None:
    """PodSecurity's `restricted` level enforced in the namespace: a pod without a securityContext is refused."""
    client.CoreV1Api(api).patch_namespace(ns, {"metadata": {"labels": {
        "pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest"}}})


REFUSALS = {"quota": (full_quota, "exceeded quota"), "podsecurity": (restricted, "violates PodSecurity")}


@pytest.mark.parametrize("refusal", sorted(REFUSALS))
def test_an_admission_403_is_a_refusal_of_the_object_not_a_missing_permission(k8s, k8s_namespace, refusal):
    api, ns = k8s.api_client(), k8s_namespace
    impose, says = REFUSALS[refusal]
    job = vcjob(api, ns)
    impose(api, ns)
    with pytest.raises(client.ApiException) as refused:
        client.CoreV1Api(api).create_namespaced_pod(ns, pod_manifest(job, "j-t-0"))
    assert refused.value.status == 403 and says in refused.value.body
    assert admission_refusal(refused.value) and not denied(refused.value)


def test_an_rbac_403_is_still_a_missing_permission(k8s, k8s_namespace):
    api = k8s.api_client()
    api.set_default_header("Impersonate-User", "vcbus-without-rbac")
    with pytest.raises(client.ApiException) as forbidden:
        client.CoreV1Api(api).create_namespaced_pod(k8s_namespace, {"metadata": {"name": "p"}, "spec": {
            "containers": [{"name": "c", "image": "busybox"}]}})
    assert forbidden.value.status == 403 and "cannot create resource" in forbidden.value.body
    assert denied(forbidden.value) and not admission_refusal(forbidden.value)


@pytest.mark.parametrize("refusal", sorted(REFUSALS))
async def test_a_refused_create_goes_to_the_log_and_the_actuator_goes_on(k8s, k8s_namespace, bus_settings, refusal):
    api, ns = k8s.api_client(), k8s_namespace
    job = vcjob(api, ns)
    REFUSALS[refusal][0](api, ns)
    uid = job["metadata"]["uid"]
    create = o.CreatePod(job=f"{ns}/j", seq=7, time=T1, name="j-t-0", task="t", index=0, job_version=0,
                         job_uid=uid, pod=pod_manifest(job, "j-t-0"))
    after = o.DeletePod(job=f"{ns}/j", seq=8, time=T1, name="j-t-9", task="t")  # gone already: done
    async with open_bus(bus_settings) as bus:
        await publish(bus.js, create, "7:0")
        await publish(bus.js, after, "8:0")
        service = await run_until(bus, api, "done")  # no PermissionDenied: the run ends as asked
        info = await bus.js.consumer_info(s.CMDS_STREAM, DURABLE)
        stored = await bus.js.get_last_msg(s.K8S_STREAM, s.refusal_subject(f"{ns}/j"))
    assert service.results["refused"] == 1 and info.ack_floor.stream_seq == 2  # both acked
    assert stored.headers["Nats-Msg-Id"] == "refused:7:0" and stored.headers["Vcbus-Job"] == f"{ns}/j"
    record = decode(stored.data)
    assert isinstance(record, RefusalRecord)
    r = record.refusal
    assert (r.job, r.command, r.name, r.task, r.seq, r.job_uid, r.code, r.reason) == (
        f"{ns}/j", "CreatePod", "j-t-0", "t", 7, uid, 403, "Forbidden")
    assert REFUSALS[refusal][1] in r.message
    assert client.CoreV1Api(api).list_namespaced_pod(ns).items == []
    # the decider records Volcano's FailedCreate for a refused create: the actuator's CommandRefused is not written
    assert [e for e in client.CoreV1Api(api).list_namespaced_event(ns).items if e.reason == "CommandRefused"] == []
    assert msgspec.json.decode(stored.data)["type"] == "REFUSED"


def test_a_scheduled_event_for_a_pod_deleted_since_is_written(k8s, k8s_namespace):
    """Kubernetes takes an Event whose involvedObject is gone; the recorder writes one against the reference."""
    api, ns = k8s.api_client(), k8s_namespace
    event = o.RecordEvent(job=f"{ns}/j", seq=5, time=T1, event_type="Normal", reason="Scheduled",
                          message=f"Successfully assigned {ns}/j-t-0 to n1", kind="Pod", name="j-t-0",
                          api_version="v1", component="volcano")
    assert Actuator(api).apply(event, index=0, msg_id="sched:5:1:0") == "applied"
    (written,) = [e for e in client.CoreV1Api(api).list_namespaced_event(ns).items if e.reason == "Scheduled"]
    assert (written.involved_object.kind, written.involved_object.name) == ("Pod", "j-t-0")


def test_a_scheduled_event_under_the_pods_own_key_is_written(k8s, k8s_namespace):
    """The scheduler names a pod whose PodGroup it no longer holds under the pod's key (`<ns>/<pod>`); the pod
    is a vcjob's. Was refused with "vcjob <ns>/<pod> does not exist", which named nothing that is missing."""
    api, ns = k8s.api_client(), k8s_namespace
    job = vcjob(api, ns)
    manifest = pod_manifest(job, "j-t-0")
    manifest["spec"]["schedulerName"] = "volcano"
    client.CoreV1Api(api).create_namespaced_pod(ns, manifest)
    event = o.RecordEvent(job=f"{ns}/j-t-0", seq=5, time=T1, event_type="Normal", reason="Scheduled",
                          message=f"Successfully assigned {ns}/j-t-0 to n1", kind="Pod", name="j-t-0",
                          api_version="v1", component="volcano")
    assert Actuator(api).apply(event, index=0, msg_id="sched:5:1:0") == "applied"
    (written,) = [e for e in client.CoreV1Api(api).list_namespaced_event(ns).items if e.reason == "Scheduled"]
    assert written.involved_object.uid == client.CoreV1Api(api).read_namespaced_pod("j-t-0", ns).metadata.uid


async def test_a_lease_refused_by_quota_stops_leader_election_saying_so(k8s, k8s_namespace):
    """A quota on Leases: the Lease create is a 403 of admission, not RBAC's; leader election cannot go on
    without it and stops with the API server's words (exit 4), not with a verb to grant."""
    api, ns = k8s.api_client(), k8s_namespace
    core = client.CoreV1Api(api)
    resource = "count/leases.coordination.k8s.io"
    core.create_namespaced_resource_quota(ns, {"metadata": {"name": "leases"}, "spec": {"hard": {resource: "0"}}})
    quota = core.read_namespaced_resource_quota("leases", ns)
    quota.status = client.V1ResourceQuotaStatus(hard={resource: "0"}, used={resource: "0"})
    core.replace_namespaced_resource_quota_status("leases", ns, quota)
    elector = LeaderElector(api, namespace=ns, name="vcbus-test", identity="a", lease_duration=2.0)
    with pytest.raises(client.ApiException) as refused:
        await asyncio.wait_for(elector.acquire(asyncio.Event()), 60)
    assert admission_refusal(refused.value) and not denied(refused.value)
    stop = refused_stop(refused.value, component="leader election", doing="the Lease")
    assert stop.exit_code == 4
    assert str(stop).startswith("leader election: the API server refused the Lease (403 Forbidden: ")
    assert "exceeded quota" in str(stop) and "grant" not in str(stop)
