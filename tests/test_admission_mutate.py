"""Job mutating webhook (mutate_job.go): every default, in Volcano's patch order."""

from __future__ import annotations

import copy

import pytest

from statemachines.admission import apply_patch, job_patch, mutate_job
from statemachines.admission.queues import queue_patch


def job(**spec):
    return {"metadata": {"name": "j"}, "spec": {"tasks": [{"name": "t", "replicas": 2, "template": {"spec": {}}}], **spec}}


def paths(patch):
    return [(op["op"], op["path"]) for op in patch]


def test_patch_order_queue_scheduler_maxretry_tasks_minavailable_plugins():
    assert paths(job_patch(job(plugins={}))) == [
        ("add", "/spec/queue"), ("add", "/spec/schedulerName"), ("add", "/spec/maxRetry"),
        ("replace", "/spec/tasks"), ("add", "/spec/minAvailable"), ("replace", "/spec/plugins")]


def test_defaults_values():
    mutated = mutate_job(job())
    assert mutated["spec"]["queue"] == "default" and mutated["spec"]["schedulerName"] == "volcano"
    assert mutated["spec"]["maxRetry"] == 3 and mutated["spec"]["minAvailable"] == 2
    assert mutated["spec"]["tasks"][0]["minAvailable"] == 2 and mutated["spec"]["tasks"][0]["maxRetry"] == 3


def test_scheduler_name_comes_from_the_webhook_setting():
    assert mutate_job(job(), scheduler_name="my-sched")["spec"]["schedulerName"] == "my-sched"


def test_explicit_zero_max_retry_and_min_available_count_as_unset():
    assert paths(job_patch(job(maxRetry=0, minAvailable=0, queue="q", schedulerName="s")))[0] == ("add", "/spec/maxRetry")
    assert mutate_job(job(maxRetry=0, minAvailable=0))["spec"]["minAvailable"] == 2


def test_nothing_to_do_gives_an_empty_patch():
    done = {"metadata": {"name": "j"}, "spec": {"queue": "q", "schedulerName": "s", "maxRetry": 1, "minAvailable": 1,
                                               "tasks": [{"name": "t", "replicas": 1, "minAvailable": 1, "maxRetry": 1}]}}
    assert job_patch(done) == []


def test_empty_task_names_become_default_index():
    spec = mutate_job(job(tasks=[{"replicas": 1}, {"name": "x", "replicas": 1}, {"replicas": 1}]))["spec"]
    assert [t["name"] for t in spec["tasks"]] == ["default0", "x", "default2"]


def test_host_network_without_dns_policy_gets_cluster_first_with_host_net():
    tasks = [{"name": "a", "replicas": 1, "template": {"spec": {"hostNetwork": True}}},
             {"name": "b", "replicas": 1, "template": {"spec": {"hostNetwork": True, "dnsPolicy": "Default"}}}]
    spec = mutate_job(job(tasks=tasks))["spec"]
    assert [t["template"]["spec"].get("dnsPolicy") for t in spec["tasks"]] == ["ClusterFirstWithHostNet", "Default"]


def test_task_min_available_from_partition_policy_and_job_sum_uses_defaulted_values():
    tasks = [{"name": "a", "replicas": 9, "partitionPolicy": {"totalPartitions": 3, "partitionSize": 3, "minPartitions": 2}},
             {"name": "b", "replicas": 4, "partitionPolicy": {"totalPartitions": 2, "partitionSize": 2}}]
    spec = mutate_job(job(tasks=tasks))["spec"]
    assert [t["minAvailable"] for t in spec["tasks"]] == [6, 4] and spec["minAvailable"] == 10


def test_job_min_available_kept_when_set():
    assert mutate_job(job(minAvailable=1))["spec"]["minAvailable"] == 1


@pytest.mark.parametrize(
    ("plugins", "expected"),
    [
        ({"pytorch": ["--port=1"]}, {"pytorch": ["--port=1"], "svc": []}),
        ({"tensorflow": []}, {"svc": [], "tensorflow": []}),
        ({"ray": []}, {"ray": [], "svc": []}),
        ({"mpi": []}, {"mpi": [], "ssh": [], "svc": []}),
        ({"mpi": [], "svc": ["--disable-network-policy"]}, {"mpi": [], "ssh": [], "svc": ["--disable-network-policy"]}),
        ({"env": []}, {"env": []}),
        ({}, {}),
    ],
)
def test_implicit_svc_and_ssh_plugins(plugins, expected):
    assert mutate_job(job(plugins=plugins))["spec"]["plugins"] == expected


def test_null_plugins_are_not_patched():
    assert "/spec/plugins" not in [op["path"] for op in job_patch(job())]


def test_mutate_never_changes_its_input():
    original = job(plugins={"mpi": []})
    before = copy.deepcopy(original)
    mutate_job(original)
    assert original == before


def test_queue_mutate_hierarchy_reclaimable_weight():
    queue = {"metadata": {"name": "q", "annotations": {"volcano.sh/hierarchy": "a/b", "volcano.sh/hierarchy-weights": "1/2"}},
             "spec": {}}
    patch = queue_patch(queue)
    assert patch == [
        {"op": "add", "path": "/metadata/annotations/volcano.sh~1hierarchy", "value": "root/a/b"},
        {"op": "add", "path": "/metadata/annotations/volcano.sh~1hierarchy-weights", "value": "1/1/2"},
        {"op": "add", "path": "/spec/reclaimable", "value": True},
        {"op": "add", "path": "/spec/weight", "value": 1},
    ]
    assert apply_patch(queue, patch)["metadata"]["annotations"]["volcano.sh/hierarchy"] == "root/a/b"


def test_queue_mutate_hierarchy_prefix_test_is_plain():
    queue = {"metadata": {"annotations": {"volcano.sh/hierarchy": "rootx/a", "volcano.sh/hierarchy-weights": "1/2"}},
             "spec": {"reclaimable": False, "weight": 2}}
    assert queue_patch(queue) == []
