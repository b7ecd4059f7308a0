"""Job validating webhook on UPDATE (validateJobUpdate): what may change, first failure wins, untrimmed."""

from __future__ import annotations

import copy

import pytest

from statemachines.admission import validate_update

OLD = {"metadata": {"name": "j"},
       "spec": {"minAvailable": 2, "queue": "default", "priorityClassName": "low", "maxRetry": 3, "plugins": {"svc": []},
                "volumes": [{"mountPath": "/d", "volumeClaim": {"resources": {"requests": {"storage": "1Gi"}}}}],
                "tasks": [{"name": "a", "replicas": 2, "minAvailable": 1,
                           "template": {"spec": {"containers": [{"name": "c", "image": "x",
                                                                 "resources": {"requests": {"cpu": "1"}}}]}}}]}}


def changed(edit):
    new = copy.deepcopy(OLD)
    edit(new)
    return new


def t0(job):
    return job["spec"]["tasks"][0]


ALLOWED = [
    ("scale_replicas_and_job_min_available", lambda n: (t0(n).update(replicas=5), n["spec"].update(minAvailable=4))),
    ("task_min_available_allowed_though_not_named", lambda n: t0(n).update(minAvailable=2)),
    ("priority_class_name", lambda n: n["spec"].update(priorityClassName="high")),
    ("controller_filled_claim_name", lambda n: n["spec"]["volumes"][0].update(volumeClaimName="j-pvc-abc")),
    ("quantity_compared_by_value", lambda n: t0(n)["template"]["spec"]["containers"][0]["resources"]["requests"].update(cpu="1000m")),
    ("null_and_empty_are_equal", lambda n: n["spec"].update(policies=[])),
    ("status_and_metadata_not_examined", lambda n: (n.update(status={"state": {"phase": "Running"}}), n["metadata"].update(labels={"x": "y"}))),
]


@pytest.mark.parametrize("edit", [c[1] for c in ALLOWED], ids=[c[0] for c in ALLOWED])
def test_update_allowed(edit):
    verdict = validate_update(OLD, changed(edit))
    assert verdict.allowed, verdict.message


FROZEN = "job updates may not change fields other than `minAvailable`, `tasks[*].replicas under spec` and `PriorityClassName`"
DENIED = [
    ("negative_replicas", lambda n: (t0(n).update(replicas=-1, minAvailable=None)), "'replicas' must be >= 0 in task: a"),
    ("negative_task_min_available", lambda n: t0(n).update(minAvailable=-1), "'minAvailable' must be >= 0 in task: a"),
    ("task_min_available_above_replicas", lambda n: t0(n).update(minAvailable=3), "'minAvailable' must be <= 'replicas' in task: a"),
    ("partition_rule", lambda n: t0(n).update(partitionPolicy={"totalPartitions": 0, "partitionSize": 1}),
     "'TotalPartitions' must be greater than 0 in task: a, job: j"),
    ("job_min_available_above_total", lambda n: n["spec"].update(minAvailable=3), "job 'minAvailable' must not be greater than total replicas"),
    ("job_min_available_negative", lambda n: n["spec"].update(minAvailable=-1), "job 'minAvailable' must be >= 0"),
    ("network_topology_both", lambda n: n["spec"].update(networkTopology={"highestTierAllowed": 0, "highestTierName": "x"}),
     "must not specify 'highestTierAllowed' and 'highestTierName' in networkTopology simultaneously"),
    ("add_task", lambda n: n["spec"]["tasks"].append({"name": "b", "replicas": 0}), "job updates may not add or remove tasks"),
    ("queue_frozen", lambda n: n["spec"].update(queue="other"), FROZEN),
    ("plugins_frozen", lambda n: n["spec"].update(plugins={"svc": [], "env": []}), FROZEN),
    ("template_frozen", lambda n: t0(n)["template"]["spec"]["containers"][0].update(image="y"), FROZEN),
    ("max_retry_frozen", lambda n: n["spec"].update(maxRetry=5), FROZEN),
]


@pytest.mark.parametrize(("edit", "text"), [c[1:] for c in DENIED], ids=[c[0] for c in DENIED])
def test_update_denied(edit, text):
    verdict = validate_update(OLD, changed(edit))
    assert not verdict.allowed and verdict.message == text


def test_update_never_mutates_inputs():
    new = changed(lambda n: n["spec"].update(queue="other"))
    old_copy, new_copy = copy.deepcopy(OLD), copy.deepcopy(new)
    validate_update(OLD, new)
    assert old_copy == OLD and new == new_copy
