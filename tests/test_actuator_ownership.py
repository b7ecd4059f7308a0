"""The actuator refuses commands about objects vcbus does not control (real API server).

A command on VCBUS_CMDS may be forged (issue: a crafted `cmd.pod.delete.v1` deleted
`kube-system/coredns-...`, and a create with an empty job uid made a privileged hostPID pod).
The actuator checks every target against the live cluster (vcbus.k8s.ownership): the object
must be owned by the vcjob the command names, with that vcjob's uid; the scheduler's commands
act only on pods for the `volcano` scheduler; Secrets are changed only if vcbus created them.
A refusal is logged and counted, and nothing happens on the cluster.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import logging
import pathlib

import msgspec
import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from statemachines import outputs as o
from statemachines.admission.mutate import mutate_job
from statemachines.manifests.renderer import Renderer
from statemachines.model.status import initial_status
from vcbus.k8s.actuator import JOB_GROUP, JOB_PLURAL, JOB_VERSION, PG_GROUP, PG_PLURAL, PG_VERSION, Actuator
from vcbus.k8s.ownership import MANAGED_BY

pytestmark = pytest.mark.k8s
SEED = pathlib.Path(__file__).resolve().parents[1] / "examples" / "resnet-dist-train.yaml"


def create_job(custom, ns: str, name: str, plugins: dict | None = None) -> dict:
    job = mutate_job(yaml.safe_load(SEED.read_text()))
    job["metadata"].update(name=name, namespace=ns)
    if plugins is not None:
        job["spec"]["plugins"] = plugins
    return custom.create_namespaced_custom_object(JOB_GROUP, JOB_VERSION, ns, JOB_PLURAL, job)


def owner(job: dict) -> dict:
    return {"apiVersion": f"{JOB_GROUP}/{JOB_VERSION}", "kind": "Job", "name": job["metadata"]["name"],
            "uid": job["metadata"]["uid"], "controller": True}


def plain_pod(name: str, *, owner_ref: dict | None = None, scheduler: str | None = None) -> dict:
    meta: dict = {"name": name, "labels": {"app": "coredns"}}
    if owner_ref:
        meta["ownerReferences"] = [owner_ref]
    spec: dict = {"containers": [{"name": "c", "image": "busybox"}]}
    if scheduler:
        spec["schedulerName"] = scheduler
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def key(job: dict) -> str:
    return f"{job['metadata']['namespace']}/{job['metadata']['name']}"


@pytest.fixture
def cluster(k8s, k8s_namespace):
    api = k8s.api_client()
    return api, client.CoreV1Api(api), client.CustomObjectsApi(api), k8s_namespace


def test_a_command_for_a_pod_that_belongs_to_no_vcjob_is_refused(cluster, caplog):
    api, core, custom, ns = cluster
    job = create_job(custom, ns, "train")
    other = create_job(custom, ns, "other")
    core.create_namespaced_pod(ns, plain_pod("coredns-7db6d8ff4d-x2x9z"))  # the default scheduler's, as coredns
    core.create_namespaced_pod(ns, plain_pod("other-worker-0", owner_ref=owner(other), scheduler="volcano"))
    act = Actuator(api)
    with caplog.at_level(logging.WARNING, logger="vcbus.actuator"):
        forged = [
            o.DeletePod(job=key(job), seq=1, name="coredns-7db6d8ff4d-x2x9z", reason="kill"),
            o.DeletePod(job=key(job), seq=2, name="coredns-7db6d8ff4d-x2x9z", mark_out_of_sync=False),
            o.DeletePod(job=f"{ns}/no-such-job", seq=3, name="coredns-7db6d8ff4d-x2x9z"),
            o.DeletePod(job=key(job), seq=4, name="other-worker-0"),  # another vcjob's pod
            o.EvictPod(job=key(job), seq=5, name="coredns-7db6d8ff4d-x2x9z", reason="preempt"),
        ]
        assert [act.apply(cmd) for cmd in forged] == ["refused"] * len(forged)
    assert act.refused == len(forged) and act.applied == 0
    names = sorted(p.metadata.name for p in core.list_namespaced_pod(ns).items)
    assert names == ["coredns-7db6d8ff4d-x2x9z", "other-worker-0"]  # nothing deleted
    pod = core.read_namespaced_pod("coredns-7db6d8ff4d-x2x9z", ns)
    assert not (pod.metadata.annotations or {}) and not pod.status.conditions  # not annotated, not evicted
    refusals = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
    assert len(refusals) == len(forged)
    assert "belongs to no vcjob" in refusals[0] and f"owned by vcjob other (uid {other['metadata']['uid']})" in refusals[3]
    # the job's own pod is still deleted as before
    core.create_namespaced_pod(ns, plain_pod("train-worker-0", owner_ref=owner(job)))
    assert act.apply(o.DeletePod(job=key(job), seq=6, name="train-worker-0", reason="kill")) == "applied"



def test_a_pod_name_with_path_characters_never_reaches_another_object(k8s, cluster):
    """DeletePod's requests bypass the client's models (vcbus.k8s.rawcalls): the name is still one
    path segment. A forged name that walks to a pod of a same-named job in another namespace, or
    that would name the job's own pod once its query or fragment were cut off, touches nothing."""
    api, core, custom, ns = cluster
    job = create_job(custom, ns, "train")
    other_ns = k8s.create_namespace(f"{ns[:50]}-b")
    twin = create_job(custom, other_ns, "train")  # same name, other namespace: the owner test alone would pass
    far = core.create_namespaced_pod(other_ns, plain_pod("train-worker-0", owner_ref=owner(twin)))
    near = core.create_namespaced_pod(ns, plain_pod("train-worker-0", owner_ref=owner(job)))
    act = Actuator(api)
    forged = [
        (f"../../{other_ns}/pods/train-worker-0", far), (f"..%2F..%2F{other_ns}%2Fpods%2Ftrain-worker-0", far),
        ("train-worker-0?dryRun=All", near), ("train-worker-0#x", near),
    ]
    for seq, (name, target) in enumerate(forged, 1):
        try:
            result = act.apply(o.DeletePod(job=key(job), seq=seq, name=name, uid=target.metadata.uid, reason="kill"))
        except ApiException as err:  # an invalid name: refused by the API server (the service records it)
            result = err.status
        assert result in ("done", 400), (name, result)
    for target in (far, near):
        pod = core.read_namespaced_pod("train-worker-0", target.metadata.namespace)
        assert pod.metadata.uid == target.metadata.uid and pod.metadata.deletion_timestamp is None
        assert "volcano.sh/controller-out-of-sync" not in (pod.metadata.annotations or {})
    # the job's own pod, named plainly, is annotated and deleted through the same requests
    assert act.apply(o.DeletePod(job=key(job), seq=9, name="train-worker-0", uid=near.metadata.uid, reason="kill")) == "applied"
    with contextlib.suppress(ApiException):
        gone = core.read_namespaced_pod("train-worker-0", ns)  # unscheduled: deleted at once, or terminating
        assert gone.metadata.deletion_timestamp is not None


def test_scheduler_commands_act_only_on_pods_for_the_volcano_scheduler(cluster):
    api, core, custom, ns = cluster
    core.create_namespaced_pod(ns, plain_pod("web-0"))  # the default scheduler's
    core.create_namespaced_pod(ns, plain_pod("batch-0", scheduler="volcano"))
    act = Actuator(api)
    queue_key = f"{ns}/batch"  # scheduler commands name the pod's job (or podgroup) key
    assert act.apply(o.BindPod(job=queue_key, seq=1, name="web-0", node="node-a")) == "refused"
    assert act.apply(o.EvictPod(job=queue_key, seq=2, name="web-0", reason="reclaim")) == "refused"
    assert act.apply(o.UpdatePodCondition(job=queue_key, seq=3, name="web-0", reason="Unschedulable")) == "refused"
    web = core.read_namespaced_pod("web-0", ns)
    assert web.spec.node_name is None and web.metadata.deletion_timestamp is None and not web.status.conditions
    assert act.apply(o.BindPod(job=queue_key, seq=4, name="batch-0", node="node-a")) == "applied"
    assert core.read_namespaced_pod("batch-0", ns).spec.node_name == "node-a"


def test_creates_need_the_live_job_uid_and_a_manifest_owned_by_that_job(cluster):
    api, core, custom, ns = cluster
    job = create_job(custom, ns, "train")
    raw = msgspec.json.encode({"type": "ADDED", "object": job})
    r = Renderer()
    pod = r.pod(raw, "worker", 0, initial_status(3, "2026-11-30T08:00:00Z"))
    evil = copy.deepcopy(pod)
    evil["spec"]["hostPID"] = True
    evil["spec"]["containers"][0]["securityContext"] = {"privileged": True}
    act = Actuator(api)
    no_uid = o.CreatePod(job=key(job), seq=1, name=pod["metadata"]["name"], task="worker", index=0, pod=evil)
    assert act.apply(no_uid) == "refused"
    unowned = copy.deepcopy(pod)
    unowned["metadata"].pop("ownerReferences")
    elsewhere = copy.deepcopy(pod)
    elsewhere["metadata"]["namespace"] = "kube-system"
    for manifest in (unowned, elsewhere):
        cmd = o.CreatePod(job=key(job), seq=2, name=pod["metadata"]["name"], task="worker", index=0,
                          job_uid=job["metadata"]["uid"], pod=manifest)
        assert act.apply(cmd) == "refused"
    pg = o.CreatePodGroup(job=key(job), seq=3, name="train-pg", podgroup=r.podgroup(raw))
    assert act.apply(pg) == "refused"  # no job uid
    assert act.apply(o.CreatePVC(job=key(job), seq=4, name="data", claim={"accessModes": ["ReadWriteOnce"]})) == "refused"
    assert act.apply(o.DeleteJob(job=key(job), seq=5)) == "refused"  # no uid: never "whatever has that name"
    assert core.list_namespaced_pod(ns).items == []
    assert custom.list_namespaced_custom_object(PG_GROUP, PG_VERSION, ns, PG_PLURAL)["items"] == []
    assert custom.get_namespaced_custom_object(JOB_GROUP, JOB_VERSION, ns, JOB_PLURAL, "train")
    good = o.CreatePod(job=key(job), seq=6, name=pod["metadata"]["name"], task="worker", index=0,
                       job_uid=job["metadata"]["uid"], pod=pod)
    assert act.apply(good) == "applied"
    assert act.refused == 6


def test_podgroups_of_another_job_are_not_changed_or_deleted(cluster):
    api, core, custom, ns = cluster
    job = create_job(custom, ns, "train")
    other = create_job(custom, ns, "other")
    body = {"apiVersion": f"{PG_GROUP}/{PG_VERSION}", "kind": "PodGroup",
            "metadata": {"name": "other-pg", "ownerReferences": [owner(other)]}, "spec": {"minMember": 1}}
    custom.create_namespaced_custom_object(PG_GROUP, PG_VERSION, ns, PG_PLURAL, body)
    act = Actuator(api)
    assert act.apply(o.UpdatePodGroup(job=key(job), seq=1, name="other-pg", min_member=9)) == "refused"
    assert act.apply(o.DeletePodGroup(job=key(job), seq=2, name="other-pg")) == "refused"
    got = custom.get_namespaced_custom_object(PG_GROUP, PG_VERSION, ns, PG_PLURAL, "other-pg")
    assert got["spec"]["minMember"] == 1
    assert act.apply(o.DeletePodGroup(job=key(other), seq=3, name="other-pg")) == "applied"


def test_a_secret_is_patched_only_if_vcbus_created_it(cluster):
    api, core, custom, ns = cluster
    # someone else's Secret under the name the ssh plugin uses
    core.create_namespaced_secret(ns, {"metadata": {"name": "train-ssh"}, "data": {"config": base64.b64encode(b"mine").decode()}})
    job = create_job(custom, ns, "train", plugins={"ssh": []})
    act = Actuator(api)
    assert act.apply(o.PluginHook(job=key(job), seq=1, hook="OnJobAdd", plugins=["ssh"])) == "refused"
    assert core.read_namespaced_secret("train-ssh", ns).data == {"config": base64.b64encode(b"mine").decode()}
    # the Secret vcbus creates carries the marker, and a redelivered hook updates it (keys kept)
    mine = create_job(custom, ns, "mine", plugins={"ssh": []})
    hook = o.PluginHook(job=key(mine), seq=2, hook="OnJobAdd", plugins=["ssh"])
    assert act.apply(hook) == "applied"
    created = core.read_namespaced_secret("mine-ssh", ns)
    assert created.metadata.annotations[MANAGED_BY] == "vcbus"
    assert act.apply(hook) == "applied"
    again = core.read_namespaced_secret("mine-ssh", ns)
    assert again.data["id_rsa"] == created.data["id_rsa"] and again.data["config"] == created.data["config"]
    with pytest.raises(ApiException):
        core.read_namespaced_secret("train-ssh-nope", ns)


def _pg(name: str, owner_ref: dict | None = None) -> dict:
    meta: dict = {"name": name}
    if owner_ref:
        meta["ownerReferences"] = [owner_ref]
    return {"apiVersion": f"{PG_GROUP}/{PG_VERSION}", "kind": "PodGroup", "metadata": meta, "spec": {"minMember": 1}}


def test_events_are_recorded_only_on_objects_vcbus_controls(cluster):
    api, core, custom, ns = cluster
    job = create_job(custom, ns, "train")
    other = create_job(custom, ns, "other")
    core.create_namespaced_pod(ns, plain_pod("other-worker-0", owner_ref=owner(other), scheduler="volcano"))
    core.create_namespaced_pod(ns, plain_pod("web-0"))  # the default scheduler's, no vcjob
    core.create_namespaced_pod(ns, plain_pod("batch-0", scheduler="volcano"))  # a plain pod for volcano
    for body in (_pg("other-pg", owner(other)), _pg("plain-pg")):
        custom.create_namespaced_custom_object(PG_GROUP, PG_VERSION, ns, PG_PLURAL, body)
    act = Actuator(api)

    def event(key: str, kind: str = "", name: str = "", api_version: str = "", seq: int = 1) -> o.RecordEvent:
        return o.RecordEvent(job=key, seq=seq, reason="Forged", message="x", kind=kind, name=name, api_version=api_version)

    forged = [
        event(key(job), "Job", "other"),  # another vcjob under this job's key
        event(key(job), "Pod", "other-worker-0"),  # another vcjob's pod
        event(key(job), "Pod", "web-0"),  # a pod of no vcjob, not for volcano
        event(key(job), "PodGroup", "other-pg"),  # another vcjob's PodGroup
        event(key(job), "PodGroup", "plain-pg"),  # a PodGroup of no vcjob, under another key
        event(key(job), "ConfigMap", "kube-root-ca.crt", "v1"),  # a kind vcbus never records events on
        event(key(job), "Queue", "default", "scheduling.volcano.sh/v1beta1"),  # a Queue under a namespaced key
        event(key(job), "Pod", "other-worker-0", "apps/v1"),  # a Pod of another API group
    ]
    assert [act.apply(cmd, index=i) for i, cmd in enumerate(forged)] == ["refused"] * len(forged)
    assert act.refused == len(forged)
    assert core.list_namespaced_event(ns).items == []
    good = [
        event(key(job)),  # the job itself
        event(key(other), "Pod", "other-worker-0"),
        event(key(job), "Pod", "batch-0"),  # a plain pod for the volcano scheduler (the scheduler's events)
        event(key(other), "PodGroup", "other-pg"),
        event(f"{ns}/plain-pg", "PodGroup", "plain-pg"),  # a plain PodGroup under its own key
    ]
    assert [act.apply(cmd, index=i) for i, cmd in enumerate(good)] == ["applied"] * len(good)
    about = sorted((e.involved_object.kind, e.involved_object.name) for e in core.list_namespaced_event(ns).items)
    assert about == [("Job", "train"), ("Pod", "batch-0"), ("Pod", "other-worker-0"), ("PodGroup", "other-pg"),
                     ("PodGroup", "plain-pg")]


def test_a_podgroup_status_is_written_only_under_its_owners_key(cluster):
    api, core, custom, ns = cluster
    job = create_job(custom, ns, "train")
    other = create_job(custom, ns, "other")
    for body in (_pg("other-pg", owner(other)), _pg("plain-pg")):
        custom.create_namespaced_custom_object(PG_GROUP, PG_VERSION, ns, PG_PLURAL, body)
    act = Actuator(api)
    status = {"phase": "Running", "running": 1}
    forged = [
        o.UpdatePodGroupStatus(job=key(job), seq=1, name="other-pg", status=status),  # another vcjob's
        o.UpdatePodGroupStatus(job=key(job), seq=2, name="plain-pg", status=status),  # no vcjob's, another key
        o.UpdatePodGroupStatus(job=f"{ns}/gone", seq=3, name="other-pg", status=status),  # a key of no vcjob
    ]
    assert [act.apply(cmd) for cmd in forged] == ["refused"] * len(forged)
    for name in ("other-pg", "plain-pg"):
        assert "status" not in custom.get_namespaced_custom_object(PG_GROUP, PG_VERSION, ns, PG_PLURAL, name)
    assert act.apply(o.UpdatePodGroupStatus(job=key(other), seq=4, name="other-pg", status=status)) == "applied"
    assert act.apply(o.UpdatePodGroupStatus(job=f"{ns}/plain-pg", seq=5, name="plain-pg", status=status)) == "applied"
    for name in ("other-pg", "plain-pg"):
        got = custom.get_namespaced_custom_object(PG_GROUP, PG_VERSION, ns, PG_PLURAL, name)
        assert got["status"]["phase"] == "Running", name
    # the patch carries the uid it read: a PodGroup replaced meanwhile is not written
    with pytest.raises(ApiException) as exc:
        custom.patch_namespaced_custom_object(PG_GROUP, PG_VERSION, ns, PG_PLURAL, "plain-pg",
                                              {"metadata": {"uid": "not-this-one"}, "status": {"phase": "Pending"}})
    assert exc.value.status == 422 and "uid" in exc.value.body, exc.value.body


def _book(custom, ns: str, name: str, booked: bool) -> None:
    """The bookkeeping the engine writes: OnJobDelete deletes only what is booked, OnJobAdd adds only what is not."""
    value = {"plugin-svc": "svc", "plugin-ssh": "ssh"} if booked else None
    custom.patch_namespaced_custom_object_status(
        JOB_GROUP, JOB_VERSION, ns, JOB_PLURAL, name, {"status": {"controlledResources": value}})


def test_plugin_objects_that_are_not_the_jobs_are_neither_deleted_nor_patched(cluster):
    api, core, custom, ns = cluster
    net = client.NetworkingV1Api(api)
    job = create_job(custom, ns, "train", plugins={"svc": [], "ssh": []})
    other = create_job(custom, ns, "other")
    act = Actuator(api)
    # OnJobAdd would patch the data of a ConfigMap of its name: only if it is the job's
    core.create_namespaced_config_map(ns, {"metadata": {"name": "train-svc"}, "data": {"hosts": "mine"}})
    assert act.apply(o.PluginHook(job=key(job), seq=1, hook="OnJobAdd", plugins=["svc", "ssh"])) == "refused"
    assert core.read_namespaced_config_map("train-svc", ns).data == {"hosts": "mine"}
    core.delete_namespaced_config_map("train-svc", ns)
    for leftover in (core.delete_namespaced_secret, core.delete_namespaced_service, net.delete_namespaced_network_policy):
        with contextlib.suppress(ApiException):  # what the refused hook created before the ConfigMap
            leftover("train-ssh" if leftover == core.delete_namespaced_secret else "train", ns)
    _book(custom, ns, "train", True)
    theirs = {"name": "", "ownerReferences": [owner(other)]}
    foreign = {  # what OnJobDelete of train deletes, each made by someone else under the name it uses
        "ConfigMap": (lambda m: core.create_namespaced_config_map(ns, {"metadata": m, "data": {"hosts": "mine"}}),
                      lambda n: core.read_namespaced_config_map(n, ns), core.delete_namespaced_config_map,
                      "train-svc", {"name": ""}),
        "Service": (lambda m: core.create_namespaced_service(ns, {"metadata": m, "spec": {"clusterIP": "None"}}),
                    lambda n: core.read_namespaced_service(n, ns), core.delete_namespaced_service, "train", theirs),
        "NetworkPolicy": (lambda m: net.create_namespaced_network_policy(ns, {"metadata": m, "spec": {"podSelector": {}}}),
                          lambda n: net.read_namespaced_network_policy(n, ns), net.delete_namespaced_network_policy,
                          "train", {"name": ""}),
        # created "by vcbus" (the annotation) but for another vcjob: the ownerReference decides
        "Secret": (lambda m: core.create_namespaced_secret(ns, {"metadata": {**m, "annotations": {MANAGED_BY: "vcbus"}},
                                                                "data": {"config": base64.b64encode(b"k").decode()}}),
                   lambda n: core.read_namespaced_secret(n, ns), core.delete_namespaced_secret, "train-ssh", theirs),
    }
    for kind, (create, read, delete, name, meta) in foreign.items():
        made = create({**meta, "name": name})
        assert act.apply(o.PluginHook(job=key(job), seq=1, hook="OnJobDelete", plugins=["svc", "ssh"])) == "refused", kind
        assert read(name).metadata.uid == made.metadata.uid, kind  # still there
        delete(name, ns)
    assert act.refused == len(foreign) + 1
    # the job's own objects are created, patched again and deleted as before
    _book(custom, ns, "train", False)
    add = o.PluginHook(job=key(job), seq=3, hook="OnJobAdd", plugins=["svc", "ssh"])
    assert act.apply(add) == "applied" and act.apply(add) == "applied"
    for kind, (_, read, _, name, _) in foreign.items():
        assert read(name).metadata.owner_references[0].uid == job["metadata"]["uid"], kind
    _book(custom, ns, "train", True)
    assert act.apply(o.PluginHook(job=key(job), seq=4, hook="OnJobDelete", plugins=["svc", "ssh"])) == "applied"
    for kind, (_, read, _, name, _) in foreign.items():
        with pytest.raises(ApiException) as exc:
            read(name)
        assert exc.value.status == 404, kind
