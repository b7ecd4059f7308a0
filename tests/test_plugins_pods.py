"""Pod construction (createJobPod) and the plugin dispatchers (job_controller_plugins.go)."""

from __future__ import annotations

import copy

import pytest

from statemachines.manifests.pod import build_pod, pvc_name, stable_suffix
from statemachines.plugins import PLUGIN_ORDER, PluginError, is_registered, on_job_add, on_pod_create


def make_job(**spec):
    base = {"metadata": {"name": "j", "namespace": "ns", "uid": "uid-1", "labels": {}, "annotations": {}},
            "spec": {"queue": "q", "schedulerName": "volcano",
                     "tasks": [{"name": "t", "replicas": 2, "template": {
                         "metadata": {"labels": {"app": "x"}, "annotations": {"a": "b"}},
                         "spec": {"containers": [{"name": "c", "image": "x"}], "initContainers": [{"name": "i", "image": "x"}]}}}]}}
    base["spec"].update(spec)
    return base


def test_pod_name_namespace_and_controller_owner():
    pod = build_pod(make_job(), "t", 1, version=0, retry_count=0)
    assert pod["metadata"]["name"] == "j-t-1" and pod["metadata"]["namespace"] == "ns"
    assert pod["metadata"]["ownerReferences"] == [{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "j",
                                                   "uid": "uid-1", "controller": True, "blockOwnerDeletion": True}]


def test_labels_and_annotations_added_to_template_ones():
    pod = build_pod(make_job(), "t", 1, version=4, retry_count=2)
    assert pod["metadata"]["labels"] == {"app": "x", "volcano.sh/task-index": "1", "volcano.sh/job-name": "j",
                                         "volcano.sh/task-spec": "t", "volcano.sh/job-namespace": "ns", "volcano.sh/queue-name": "q"}
    assert pod["metadata"]["annotations"] == {"a": "b", "volcano.sh/task-index": "1", "volcano.sh/task-spec": "t",
                                              "scheduling.k8s.io/group-name": "j-uid-1", "volcano.sh/job-name": "j",
                                              "volcano.sh/queue-name": "q", "volcano.sh/job-version": "4",
                                              "volcano.sh/template-uid": "j-t", "volcano.sh/job-retry-count": "2"}


def test_scheduler_and_priority_class_fall_back_to_the_job():
    pod = build_pod(make_job(priorityClassName="high"), "t", 0, version=0, retry_count=0)
    assert pod["spec"]["schedulerName"] == "volcano" and pod["spec"]["priorityClassName"] == "high"
    job = make_job(priorityClassName="high")
    job["spec"]["tasks"][0]["template"]["spec"].update(schedulerName="other", priorityClassName="low")
    pod = build_pod(job, "t", 0, version=0, retry_count=0)
    assert pod["spec"]["schedulerName"] == "other" and pod["spec"]["priorityClassName"] == "low"


def test_job_labels_and_annotations_copied_selectively():
    job = make_job()
    job["metadata"]["labels"] = {"volcano.sh/preemptable": "true", "other": "x"}
    job["metadata"]["annotations"] = {"volcano.sh/revocable-zone": "*", "volcano.sh/jdb-min-available": "1",
                                      "volcano.sh/jdb-max-unavailable": "2"}
    meta = build_pod(job, "t", 0, version=0, retry_count=0)["metadata"]
    assert meta["labels"]["volcano.sh/preemptable"] == "true" and "other" not in meta["labels"]
    assert meta["annotations"]["volcano.sh/revocable-zone"] == "*"
    assert meta["annotations"]["volcano.sh/jdb-min-available"] == "1" and "volcano.sh/jdb-max-unavailable" not in meta["annotations"]


def test_topology_policy_forwarding_and_partition_id():
    job = make_job()
    job["spec"]["tasks"][0].update(topologyPolicy="best-effort", partitionPolicy={"partitionSize": 2, "totalPartitions": 2})
    meta = build_pod(job, "t", 3, version=0, retry_count=0, job_forwarding=True)["metadata"]
    assert meta["annotations"]["volcano.sh/numa-topology-policy"] == "best-effort"
    assert meta["labels"]["volcano.sh/partition-id"] == "1"
    assert meta["labels"]["volcano.sh/job-forwarding"] == meta["annotations"]["volcano.sh/job-forwarding"] == "true"


def test_job_volumes_mounted_in_regular_containers_with_deterministic_names():
    job = make_job(volumes=[{"mountPath": "/a", "volumeClaimName": "pvc-a"}, {"mountPath": "/b", "volumeClaimName": "pvc-a"},
                            {"mountPath": "/c", "volumeClaim": {"resources": {}}}])
    pod = build_pod(job, "t", 0, version=0, retry_count=0)
    claims = [v["persistentVolumeClaim"]["claimName"] for v in pod["spec"]["volumes"]]
    assert claims == ["pvc-a", pvc_name(job, 2)]  # the duplicate claim is skipped
    assert pvc_name(job, 2).startswith("j-pvc-") and len(pvc_name(job, 2)) == len("j-pvc-") + 12
    assert [m["mountPath"] for m in pod["spec"]["containers"][0]["volumeMounts"]] == ["/a", "/c"]
    assert "volumeMounts" not in pod["spec"]["initContainers"][0]
    again = build_pod(job, "t", 0, version=0, retry_count=0)
    other = build_pod(job, "t", 1, version=0, retry_count=0)
    assert again["spec"]["volumes"] == pod["spec"]["volumes"] != other["spec"]["volumes"]


def test_build_pod_never_mutates_the_job():
    job = make_job(plugins={"svc": [], "env": [], "pytorch": []})
    before = copy.deepcopy(job)
    build_pod(job, "t", 0, version=0, retry_count=0)
    assert job == before


def test_unknown_task_is_a_key_error():
    with pytest.raises(KeyError):
        build_pod(make_job(), "nope", 0, version=0, retry_count=0)


def test_stable_suffix_is_base36_and_deterministic():
    assert stable_suffix("x") == stable_suffix("x") != stable_suffix("y")
    assert set(stable_suffix("x")) <= set("0123456789abcdefghijklmnopqrstuvwxyz")


# ------------------------------------------------------------------ dispatchers


def test_registry_holds_upstream_plugins_and_status_mounter():
    assert set(PLUGIN_ORDER) == {"env", "svc", "ssh", "pytorch", "mpi", "tensorflow", "ray", "hcclrank", "status-mounter"}
    assert not is_registered("big_plugin")


def test_unknown_plugin_fails_every_dispatch_with_failed_to_get_plugin():
    job = make_job(plugins={"zzz": [], "aaa": [], "env": []})
    with pytest.raises(PluginError, match="^failed to get plugin aaa$"):
        on_job_add(job)
    with pytest.raises(PluginError, match="failed to get plugin aaa"):
        on_pod_create(build_pod(job, "t", 0, version=0, retry_count=0, run_plugins=False), job)


def test_plugins_run_in_fixed_order_not_map_order():
    a = make_job(plugins={"svc": [], "env": [], "pytorch": []})
    b = make_job(plugins={"pytorch": [], "env": [], "svc": []})
    pa, pb = (build_pod(j, "t", 0, version=0, retry_count=0) for j in (a, b))
    assert pa == pb


def test_null_controlled_resources_become_a_map():
    job = make_job(plugins={"env": []})
    job["status"] = {"controlledResources": None}
    assert on_job_add(job).controlled_resources == {"plugin-env": "env"}
