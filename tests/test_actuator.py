"""The actuator on a real API server: commands carried out, idempotent under redelivery."""

from __future__ import annotations

import pathlib

import msgspec
import pytest
import yaml
from kubernetes import client

from statemachines import outputs as o
from statemachines.admission.mutate import mutate_job
from statemachines.manifests.renderer import Renderer
from statemachines.model.status import JobStatus, initial_status
from vcbus.k8s.actuator import JOB_GROUP, JOB_PLURAL, JOB_VERSION, PG_GROUP, PG_PLURAL, PG_VERSION, Actuator

pytestmark = pytest.mark.k8s
SEED = pathlib.Path(__file__).resolve().parents[1] / "examples" / "resnet-dist-train.yaml"


@pytest.fixture
def setup(k8s, k8s_namespace):
    api = k8s.api_client()
    custom = client.CustomObjectsApi(api)
    job = mutate_job(yaml.safe_load(SEED.read_text()))  # what the admission webhook makes of it
    job["metadata"]["namespace"] = k8s_namespace
    job = custom.create_namespaced_custom_object(JOB_GROUP, JOB_VERSION, k8s_namespace, JOB_PLURAL, job)
    raw = msgspec.json.encode({"type": "ADDED", "object": job})
    return api, custom, job, raw, Actuator(api), k8s_namespace


def _key(job: dict) -> str:
    return f"{job['metadata']['namespace']}/{job['metadata']['name']}"


def _status(version: int = 0, retry: int = 0, phase: str = "Pending") -> JobStatus:
    st = initial_status(3, "2026-11-30T08:00:00Z")
    st.version, st.retry_count, st.state.phase = version, retry, phase
    return st


def test_creates_podgroup_and_pods_from_rendered_manifests_and_redelivery_is_harmless(setup):
    api, custom, job, raw, act, ns = setup
    r = Renderer()
    pg = o.CreatePodGroup(job=_key(job), seq=1, name=f"resnet-dist-train-{job['metadata']['uid']}",
                          job_uid=job["metadata"]["uid"], podgroup=r.podgroup(raw))
    assert act.apply(pg) == "applied"
    assert act.apply(pg) == "done"  # redelivered: AlreadyExists counts as done
    got = custom.get_namespaced_custom_object(PG_GROUP, PG_VERSION, ns, PG_PLURAL, pg.name)
    assert got["spec"]["minMember"] == 3 and got["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"]
    status = _status()
    for task, index in (("master", 0), ("worker", 0), ("worker", 1)):
        name = f"resnet-dist-train-{task}-{index}"
        cmd = o.CreatePod(job=_key(job), seq=2, name=name, task=task, index=index, job_uid=job["metadata"]["uid"],
                          pod=r.pod(raw, task, index, status))
        assert act.apply(cmd) == "applied"
        assert act.apply(cmd) == "done"
    pods = client.CoreV1Api(api).list_namespaced_pod(ns, label_selector="volcano.sh/job-name=resnet-dist-train")
    assert sorted(p.metadata.name for p in pods.items) == [
        "resnet-dist-train-master-0", "resnet-dist-train-worker-0", "resnet-dist-train-worker-1"]
    worker1 = next(p for p in pods.items if p.metadata.name.endswith("worker-1"))
    assert worker1.metadata.annotations["volcano.sh/job-version"] == "0"
    assert worker1.metadata.annotations["scheduling.k8s.io/group-name"] == pg.name
    env = {e.name: e.value for e in worker1.spec.containers[0].env}
    assert env["RANK"] == "2" and env["WORLD_SIZE"] == "3" and env["MASTER_PORT"] == "23456"


def test_status_is_replaced_and_an_older_version_never_overwrites_a_newer_one(setup):
    api, custom, job, raw, act, ns = setup
    newer = _status(version=2, retry=1, phase="Running")
    newer.running = 3
    assert act.apply(o.UpdateJobStatus(job=_key(job), seq=5, status=newer)) == "applied"
    got = custom.get_namespaced_custom_object(JOB_GROUP, JOB_VERSION, ns, JOB_PLURAL, "resnet-dist-train")
    assert got["status"]["state"]["phase"] == "Running" and got["status"]["retryCount"] == 1
    older = _status(version=1, retry=1, phase="Restarting")
    assert act.apply(o.UpdateJobStatus(job=_key(job), seq=4, status=older)) == "dropped"
    got = custom.get_namespaced_custom_object(JOB_GROUP, JOB_VERSION, ns, JOB_PLURAL, "resnet-dist-train")
    assert got["status"]["state"]["phase"] == "Running"
    # fields that vanish from the new status vanish on the object too (no merge)
    fewer = _status(version=2, retry=1, phase="Running")
    act.apply(o.UpdateJobStatus(job=_key(job), seq=6, status=fewer))
    got = custom.get_namespaced_custom_object(JOB_GROUP, JOB_VERSION, ns, JOB_PLURAL, "resnet-dist-train")
    assert "running" not in got["status"]


def test_a_create_pod_of_an_older_job_version_is_dropped(setup):
    api, custom, job, raw, act, ns = setup
    act.apply(o.UpdateJobStatus(job=_key(job), seq=5, status=_status(version=1, retry=1)))
    r = Renderer()
    stale = o.CreatePod(job=_key(job), seq=3, name="resnet-dist-train-worker-0", task="worker", index=0,
                        job_version=0, job_uid=job["metadata"]["uid"], pod=r.pod(raw, "worker", 0, _status()))
    assert act.apply(stale) == "dropped"
    pods = client.CoreV1Api(api).list_namespaced_pod(ns)
    assert pods.items == []


def test_kill_annotates_then_deletes_with_a_uid_precondition(setup):
    api, custom, job, raw, act, ns = setup
    core = client.CoreV1Api(api)
    r = Renderer()
    pod = core.create_namespaced_pod(ns, r.pod(raw, "worker", 0, _status()))
    # a DeletePod for another incarnation of that name does nothing
    assert act.apply(o.DeletePod(job=_key(job), seq=7, name=pod.metadata.name, uid="not-this-one")) == "done"
    assert core.read_namespaced_pod(pod.metadata.name, ns).metadata.uid == pod.metadata.uid
    cmd = o.DeletePod(job=_key(job), seq=8, name=pod.metadata.name, uid=pod.metadata.uid, mark_out_of_sync=True)
    assert act.apply(cmd) == "applied"
    assert act.apply(cmd) == "done"
    assert core.list_namespaced_pod(ns).items == []  # unbound pods go at once


def test_events_on_the_vcjob_are_recorded_once(setup):
    api, custom, job, raw, act, ns = setup
    ev = o.RecordEvent(job=_key(job), seq=9, reason="ExecuteAction", message="Start to execute action RestartJob ")
    assert act.apply(ev) == "applied"
    assert act.apply(ev) == "done"
    events = client.CoreV1Api(api).list_namespaced_event(ns).items
    assert [(e.reason, e.message, e.involved_object.kind) for e in events] == [
        ("ExecuteAction", "Start to execute action RestartJob ", "Job")]


def test_plugin_hooks_create_and_delete_the_plugin_objects(setup):
    api, custom, job, raw, act, ns = setup
    # the engine books plugin-<name> in controlledResources before OnJobAdd; OnJobAdd creates the objects
    assert act.apply(o.PluginHook(job=_key(job), seq=10, hook="OnJobAdd", plugins=["pytorch", "status-mounter", "svc"])) == "applied"
    core = client.CoreV1Api(api)
    names = {s.metadata.name for s in core.list_namespaced_service(ns).items}
    assert "resnet-dist-train" in names  # pytorch enables svc: headless Service <job>
    cms = {c.metadata.name for c in core.list_namespaced_config_map(ns).items}
    assert {"resnet-dist-train-svc", "resnet-dist-train-status-mounter"} <= cms
    booked = _status()
    booked.controlled_resources = {"plugin-pytorch": "pytorch", "plugin-svc": "svc", "plugin-status-mounter": "status-mounter"}
    act.apply(o.UpdateJobStatus(job=_key(job), seq=11, status=booked))  # the status the engine wrote meanwhile
    assert act.apply(o.PluginHook(job=_key(job), seq=12, hook="OnJobDelete", plugins=["pytorch", "svc"])) == "applied"
    assert "resnet-dist-train" not in {s.metadata.name for s in core.list_namespaced_service(ns).items}


def test_creates_the_pvc_of_a_volume_claim_template_once(setup):
    api, custom, job, raw, act, ns = setup
    cmd = o.CreatePVC(job=_key(job), seq=13, name="resnet-dist-train-pvc-abc", job_uid=job["metadata"]["uid"],
                      claim={"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}})
    assert act.apply(cmd) == "applied"
    assert act.apply(cmd) == "done"
    pvc = client.CoreV1Api(api).read_namespaced_persistent_volume_claim("resnet-dist-train-pvc-abc", ns)
    assert pvc.metadata.owner_references[0].uid == job["metadata"]["uid"]
    assert pvc.spec.resources.requests["storage"] == "1Gi"
