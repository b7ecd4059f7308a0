"""The jobflow and jobtemplate controllers' commands on a real API server (vcbus/k8s/jobflow_commands.py).

The engine decides from the JobFlow and JobTemplate as the API server returns them; the actuator makes
the flow's vcjob, writes the statuses, deletes the vcjobs of a Succeed flow, records the Event on the
JobFlow, idempotent under redelivery, and leaves alone what is not the JobFlow's.
"""

from __future__ import annotations

import msgspec
import pytest
from kubernetes import client

from statemachines import outputs as o
from statemachines.engine import Engine
from statemachines.model.jobflow import FlowState, JobFlowStatus, JobTemplateStatus
from statemachines.model.records import decode
from vcbus.k8s.actuator import Actuator

pytestmark = pytest.mark.k8s
F, V = "flow.volcano.sh", "v1alpha1"
SPEC = {"minAvailable": 1, "schedulerName": "volcano", "queue": "default",
        "tasks": [{"name": "t", "replicas": 1, "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}}]}


@pytest.fixture
def cluster(k8s, k8s_namespace):
    api = k8s.api_client()
    return client.CustomObjectsApi(api), client.CoreV1Api(api), Actuator(api), k8s_namespace


def make(custom, ns):
    template = custom.create_namespaced_custom_object(F, V, ns, "jobtemplates", {
        "apiVersion": f"{F}/{V}", "kind": "JobTemplate", "metadata": {"name": "a"}, "spec": SPEC})
    flow = custom.create_namespaced_custom_object(F, V, ns, "jobflows", {
        "apiVersion": f"{F}/{V}", "kind": "JobFlow", "metadata": {"name": "flow"},
        "spec": {"flows": [{"name": "a"}], "jobRetainPolicy": "delete"}})
    return template, flow


def decided(*objects) -> list[o.Output]:
    engine = Engine(timers="recorded")
    out: list[o.Output] = []
    for seq, obj in enumerate(objects, 1):
        out += engine.apply(seq, decode(msgspec.json.encode({"type": "ADDED", "object": obj})))
    return out


def test_the_flows_vcjob_is_made_as_volcano_makes_it_once_with_its_event(cluster):
    custom, core, act, ns = cluster
    template, flow = make(custom, ns)
    out = decided(template, flow)
    (create,) = [x for x in out if isinstance(x, o.CreateJobFlowJob)]
    assert act.apply(create) == "applied"
    assert act.apply(create) == "done"  # redelivered: AlreadyExists
    job = custom.get_namespaced_custom_object("batch.volcano.sh", "v1alpha1", ns, "jobs", "flow-a")
    assert job["metadata"]["ownerReferences"] == [{"apiVersion": f"{F}/{V}", "kind": "JobFlow", "name": "flow",
                                                   "uid": flow["metadata"]["uid"], "controller": True,
                                                   "blockOwnerDeletion": True}]
    marks = {"volcano.sh/createdByJobTemplate": f"{ns}.a", "volcano.sh/createdByJobFlow": f"{ns}.flow"}
    assert job["metadata"]["labels"] == marks and job["metadata"]["annotations"] == marks
    assert job["spec"]["tasks"][0]["name"] == "t"
    (event,) = [x for x in out if isinstance(x, o.RecordEvent)]
    assert act.apply(event, msg_id="1:0") == "applied"
    (recorded,) = core.list_namespaced_event(ns, field_selector="involvedObject.kind=JobFlow").items
    assert (recorded.reason, recorded.message, recorded.involved_object.uid) == (
        "Created", "create a job named flow-a!", flow["metadata"]["uid"])
    # not the flow's vcjob name, or another JobFlow's key: refused before any call
    assert act.apply(msgspec.structs.replace(create, name="other")) == "refused"
    assert act.apply(msgspec.structs.replace(create, job=f"{ns}/jobflow:other")) == "refused"
    # under the key of a vcjob of the flow's name (its own is `<ns>/jobflow:<name>`): refused too
    assert act.apply(msgspec.structs.replace(create, job=f"{ns}/flow")) == "refused"
    # the JobFlow deleted and made again: the old one's vcjob is not made for the new one
    custom.delete_namespaced_custom_object(F, V, ns, "jobflows", "flow")
    custom.delete_namespaced_custom_object("batch.volcano.sh", "v1alpha1", ns, "jobs", "flow-a")
    make_again = {"apiVersion": f"{F}/{V}", "kind": "JobFlow", "metadata": {"name": "flow"}, "spec": {"flows": []}}
    custom.create_namespaced_custom_object(F, V, ns, "jobflows", make_again)
    assert act.apply(create) == "dropped"


def test_statuses_are_written_whole_for_the_object_they_were_computed_from(cluster):
    custom, _, act, ns = cluster
    template, flow = make(custom, ns)
    status = JobFlowStatus(running_jobs=["flow-a"], state=FlowState(phase="Running"))
    write = o.UpdateJobFlowStatus(job=f"{ns}/jobflow:flow", seq=1, name="flow", uid=flow["metadata"]["uid"], status=status)
    assert act.apply(write) == "applied"
    assert custom.get_namespaced_custom_object(F, V, ns, "jobflows", "flow")["status"] == {
        "runningJobs": ["flow-a"], "state": {"phase": "Running"}}
    done = msgspec.structs.replace(write, status=JobFlowStatus(completed_jobs=["flow-a"], state=FlowState("Succeed")))
    assert act.apply(done) == "applied"  # runningJobs gone: replaced, not merged
    assert custom.get_namespaced_custom_object(F, V, ns, "jobflows", "flow")["status"] == {
        "completedJobs": ["flow-a"], "state": {"phase": "Succeed"}}
    listed = o.UpdateJobTemplateStatus(job=f"{ns}/jobtemplate:a", seq=2, name="a", uid=template["metadata"]["uid"],
                                       status=JobTemplateStatus(job_depends_on_list=["flow-a"]))
    assert act.apply(listed) == "applied"
    assert custom.get_namespaced_custom_object(F, V, ns, "jobtemplates", "a")["status"] == {"jobDependsOnList": ["flow-a"]}
    custom.delete_namespaced_custom_object(F, V, ns, "jobflows", "flow")
    custom.create_namespaced_custom_object(F, V, ns, "jobflows", {
        "apiVersion": f"{F}/{V}", "kind": "JobFlow", "metadata": {"name": "flow"}, "spec": {"flows": []}})
    stale_before = act.stale
    assert act.apply(write) == "dropped" and act.stale == stale_before + 1
    assert "status" not in custom.get_namespaced_custom_object(F, V, ns, "jobflows", "flow")


def test_only_a_vcjob_the_jobflow_controls_is_deleted(cluster):
    custom, _, act, ns = cluster
    template, flow = make(custom, ns)
    (create,) = [x for x in decided(template, flow) if isinstance(x, o.CreateJobFlowJob)]
    assert act.apply(create) == "applied"
    job = custom.get_namespaced_custom_object("batch.volcano.sh", "v1alpha1", ns, "jobs", "flow-a")
    delete = o.DeleteJobFlowJob(job=f"{ns}/jobflow:flow", seq=3, name="flow-a", uid="another-uid")
    assert act.apply(delete) == "done"  # another vcjob of the name: left alone
    theirs = custom.create_namespaced_custom_object("batch.volcano.sh", "v1alpha1", ns, "jobs", {
        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "flow-b"}, "spec": SPEC})
    assert act.apply(o.DeleteJobFlowJob(job=f"{ns}/jobflow:flow", seq=4, name="flow-b", uid=theirs["metadata"]["uid"])) == "refused"
    assert act.apply(msgspec.structs.replace(delete, uid=job["metadata"]["uid"])) == "applied"
    assert act.apply(msgspec.structs.replace(delete, uid=job["metadata"]["uid"])) == "done"  # redelivered
