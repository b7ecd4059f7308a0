"""PodGroup creation/update and minResources (createOrUpdatePodGroup, calcPGMinResources)."""

from __future__ import annotations

from statemachines.manifests.podgroup import build_podgroup, min_resources, min_task_member, update_podgroup


def task(name, replicas, cpu="1", memory="1Gi", min_available=None, priority_class="", **extra):
    t = {"name": name, "replicas": replicas, "template": {"spec": {
        "priorityClassName": priority_class,
        "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}}}
    if min_available is not None:
        t["minAvailable"] = min_available
    t.update(extra)
    return t


def job(tasks, min_available, **spec):
    return {"metadata": {"name": "j", "namespace": "ns", "uid": "u", "labels": {"l": "1"}, "annotations": {"a": "2"}},
            "spec": {"queue": "q", "minAvailable": min_available, "tasks": tasks, **spec}}


def test_podgroup_name_owner_labels_annotations_and_members():
    pg = build_podgroup(job([task("a", 2, min_available=1), task("b", 3)], 4, priorityClassName="p"))
    assert pg["metadata"]["name"] == "j-u" and pg["metadata"]["labels"] == {"l": "1"} and pg["metadata"]["annotations"] == {"a": "2"}
    assert pg["metadata"]["ownerReferences"][0]["controller"] is True
    assert pg["spec"]["minMember"] == 4 and pg["spec"]["minTaskMember"] == {"a": 1, "b": 3}
    assert pg["spec"]["queue"] == "q" and pg["spec"]["priorityClassName"] == "p"
    assert "status" not in pg


def test_min_task_member_partition_rule():
    assert min_task_member({"replicas": 6, "partitionPolicy": {"minPartitions": 2, "partitionSize": 2}}) == 4
    assert min_task_member({"replicas": 6, "partitionPolicy": {"minPartitions": 0, "partitionSize": 2}}) == 6


def test_min_resources_sums_quota_usage_of_min_available_pods():
    assert min_resources(job([task("a", 2, cpu="500m", min_available=2), task("b", 2, min_available=1)], 3)) == {
        "count/pods": "3", "cpu": "2", "memory": "3Gi", "pods": "3", "requests.cpu": "2", "requests.memory": "3Gi"}


def test_min_resources_below_sum_takes_highest_priority_tasks_first():
    tasks = [task("low", 2, cpu="1", min_available=2), task("high", 2, cpu="3", min_available=2, priority_class="vip")]
    assert min_resources(job(tasks, 3), {"vip": 100})["cpu"] == "7"


def test_min_resources_fills_up_from_replicas_beyond_min_available():
    tasks = [task("a", 4, cpu="1", min_available=1), task("b", 1, cpu="2", min_available=1)]
    assert min_resources(job(tasks, 4))["cpu"] == "5"


def test_extended_resources_also_counted_under_bare_name_and_limits_counted():
    t = task("a", 1)
    t["template"]["spec"]["containers"][0]["resources"] = {"requests": {"nvidia.com/gpu": "1"}, "limits": {"cpu": "2", "nvidia.com/gpu": "1"}}
    assert min_resources(job([t], 1)) == {"count/pods": "1", "limits.cpu": "2", "nvidia.com/gpu": "1", "pods": "1",
                                          "requests.nvidia.com/gpu": "1"}


def test_network_topology_copies_tier_allowed_else_name_and_subgroup_policy():
    pg = build_podgroup(job([task("a", 4, partitionPolicy={"totalPartitions": 2, "partitionSize": 2, "minPartitions": 1,
                                                           "networkTopology": {"mode": "hard", "highestTierAllowed": 1}})], 4,
                            networkTopology={"mode": "soft", "highestTierName": "rack"}))
    assert pg["spec"]["networkTopology"] == {"mode": "soft", "highestTierName": "rack"}
    assert pg["spec"]["subGroupPolicy"] == [{"name": "a", "subGroupSize": 2, "minSubGroups": 1,
                                             "labelSelector": {"matchLabels": {"volcano.sh/task-spec": "a"}},
                                             "matchLabelKeys": ["volcano.sh/partition-id"],
                                             "networkTopology": {"mode": "hard", "highestTierAllowed": 1}}]


def test_update_only_when_something_differs_and_never_labels():
    j = job([task("a", 2)], 2)
    pg = build_podgroup(j)
    assert update_podgroup(pg, j) is None
    scaled = job([task("a", 3)], 3)
    scaled["metadata"]["labels"] = {"new": "x"}
    updated = update_podgroup(pg, scaled)
    assert updated["spec"]["minMember"] == 3 and updated["spec"]["minTaskMember"] == {"a": 3}
    assert updated["spec"]["minResources"]["cpu"] == "3" and updated["metadata"]["labels"] == {"l": "1"}
