"""Job validating webhook on CREATE (admit_job.go validateJobCreate): every rule with Volcano's text."""

from __future__ import annotations

import copy

import pytest

from statemachines.admission import QueueIndex, default_queues, validate_create
from statemachines.admission.validate import is_dag

LONG = "a" * 60


def base():
    return {"metadata": {"name": "job", "namespace": "ns"},
            "spec": {"queue": "default", "minAvailable": 1,
                     "tasks": [{"name": "task-1", "replicas": 1,
                                "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}}]}}


def with_(change):
    job = base()
    change(job)
    return job


def t0(job):
    return job["spec"]["tasks"][0]


def add_task(job, **task):
    job["spec"]["tasks"].append({"replicas": 1, "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}, **task})


def message(job, queues=None, **kw):
    return validate_create(job, queues=queues or default_queues(), **kw).message


def test_valid_job_is_allowed():
    verdict = validate_create(base(), queues=default_queues())
    assert verdict.allowed and verdict.message == ""


CASES = [
    ("no_task_specified", lambda j: j["spec"].update(tasks=[]), "No task specified in job spec"),
    ("mpi_master_task_not_found", lambda j: j["spec"].update(plugins={"mpi": ["--master=boss"]}),
     "The specified mpi master task was not found"),
    ("network_topology_both_fields", lambda j: j["spec"].update(networkTopology={"highestTierAllowed": 1, "highestTierName": "r"}),
     "must not specify 'highestTierAllowed' and 'highestTierName' in networkTopology simultaneously"),
    ("task_min_available_greater_than_replicas", lambda j: t0(j).update(minAvailable=2),
     "'minAvailable' is greater than 'replicas' in task: task-1, job: job;"),
    ("duplicated_task_name", lambda j: add_task(j, name="task-1"), "duplicated task name task-1;"),
    ("pod_name_not_qualified", lambda j: j["metadata"].update(name=LONG),
     f"create pod with name {LONG}-task-1-0 validate failed [name part must be no more than 63 bytes];"),
    ("pod_template_validation", lambda j: t0(j)["template"]["spec"].update(containers=[]),
     "spec.task[0].template.spec.containers: Required value."),
    ("topology_policy_needs_integer_cpu", lambda j: t0(j).update(topologyPolicy="single-numa-node"),
     "the cpu request isn't an integer in spec.task[0] container[0]."),
    ("partition_total_partitions", lambda j: t0(j).update(partitionPolicy={"totalPartitions": 0, "partitionSize": 1}),
     "'TotalPartitions' must be greater than 0 in task: task-1, job: job"),
    ("partition_size", lambda j: t0(j).update(partitionPolicy={"totalPartitions": 1, "partitionSize": 0}),
     "'PartitionSize' must be greater than 0 in task: task-1, job: job"),
    ("partition_replicas", lambda j: t0(j).update(partitionPolicy={"totalPartitions": 2, "partitionSize": 2}),
     "'Replicas' are not equal to TotalPartitions*PartitionSize in task: task-1, job: job"),
    ("partition_min_available", lambda j: t0(j).update(replicas=4, minAvailable=3,
                                                       partitionPolicy={"totalPartitions": 2, "partitionSize": 2, "minPartitions": 1}),
     "'MinAvailable' is not equal to MinPartitions*PartitionSize in task: task-1, job: job"),
    ("partition_network_topology", lambda j: t0(j).update(partitionPolicy={"totalPartitions": 1, "partitionSize": 1,
                                                                           "networkTopology": {"highestTierAllowed": 1, "highestTierName": "x"}}),
     "must not specify 'highestTierAllowed' and 'highestTierName' in networkTopology simultaneously"),
    ("job_name_not_qualified", lambda j: j["metadata"].update(name="-bad"), "create job with name -bad validate failed [name part must consist"),
    ("job_min_available_greater_than_total_replicas", lambda j: j["spec"].update(minAvailable=2),
     "job 'minAvailable' should not be greater than total replicas in tasks;"),
    ("job_policy_invalid_event", lambda j: j["spec"].update(policies=[{"event": "PodRunning", "action": "RestartJob"}]),
     'spec.policies: Invalid value: "PodRunning": invalid policy event'),
    ("task_policy_invalid_action", lambda j: t0(j).update(policies=[{"event": "PodFailed", "action": "SyncJob"}]),
     'spec.tasks.policies: Invalid value: "SyncJob": invalid policy action'),
    ("unknown_plugin", lambda j: j["spec"].update(plugins={"big_plugin": []}), "unable to find job plugin: big_plugin;"),
    ("status_mounter_bad_args", lambda j: j["spec"].update(plugins={"status-mounter": ["-values=nope"]}),
     "status-mounter plugin: unknown values [nope]"),
    ("volume_mount_path_required", lambda j: j["spec"].update(volumes=[{"volumeClaimName": "a"}]), "mountPath is required;"),
    ("volume_duplicated_mount_path", lambda j: j["spec"].update(volumes=[{"mountPath": "/var", "volumeClaimName": "a"},
                                                                         {"mountPath": "/var", "volumeClaimName": "b"}]),
     "duplicated mountPath: /var;"),
    ("volume_claim_or_name_required", lambda j: j["spec"].update(volumes=[{"mountPath": "/v"}]),
     "either VolumeClaim or VolumeClaimName must be specified;"),
    ("volume_claim_and_name_conflict", lambda j: j["spec"].update(volumes=[{"mountPath": "/v", "volumeClaimName": "a", "volumeClaim": {}}]),
     "conflict: If you want to use an existing PVC, just specify VolumeClaimName.If you want to create a new PVC, "
     "you do not need to specify VolumeClaimName"),
    ("volume_claim_name_invalid", lambda j: j["spec"].update(volumes=[{"mountPath": "/v", "volumeClaimName": "Bad"}]),
     "invalid VolumeClaimName Bad : [a lowercase RFC 1123 subdomain must consist of"),
    ("queue_not_found", lambda j: j["spec"].update(queue="nope"),
     'unable to find job queue: queue.scheduling.volcano.sh "nope" not found;'),
    ("dag_cycle", lambda j: (add_task(j, name="b", dependsOn={"name": ["task-1"]}), t0(j).update(dependsOn={"name": ["b"]})),
     "job has dependencies between tasks, but doesn't form a directed acyclic graph(DAG);"),
]


@pytest.mark.parametrize(("change", "fragment"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_create_rule_message(change, fragment):
    verdict = validate_create(with_(change), queues=default_queues())
    assert not verdict.allowed
    assert fragment in verdict.message


def test_no_task_and_mpi_checks_return_at_once():
    job = with_(lambda j: j["spec"].update(plugins={"mpi": [], "nope": []}))
    assert message(job) == "The specified mpi master task was not found"


def test_mpi_uses_parsed_master_name_and_missing_worker_is_fine():
    job = with_(lambda j: (j["spec"].update(plugins={"mpi": ["--master=task-1"]})))
    assert validate_create(job, queues=default_queues()).allowed


def test_fragments_are_concatenated_raw_and_trimmed():
    job = with_(lambda j: (j["spec"].update(minAvailable=5, plugins={"x": [], "a": []})))
    assert message(job) == ("job 'minAvailable' should not be greater than total replicas in tasks; "
                            "unable to find job plugin: a; unable to find job plugin: x;")


def test_policy_error_uses_multierror_format_and_fixed_valid_lists():
    job = with_(lambda j: j["spec"].update(policies=[{"events": ["PodFailed"], "exitCode": 3, "action": "AbortJob"}]))
    assert message(job) == (
        "1 error occurred:\n\t* must not specify event and exitCode simultaneously\n\n"
        " valid events are [* PodFailed PodEvicted PodPending Unknown TaskCompleted TaskFailed JobUpdated], "
        "valid actions are [AbortJob RestartJob RestartTask RestartPod RestartPartition TerminateJob CompleteJob ResumeJob];")


def test_duplicate_task_name_stops_the_task_loop():
    job = with_(lambda j: (add_task(j, name="task-1"), add_task(j, name="x", minAvailable=5)))
    assert "task: x" not in message(job)


def test_pod_name_check_uses_task_position_not_replica_index():
    name = "j" * 54  # "<54>-task-1-0" is 63 bytes; replica 10 would be 64 and is not checked
    job = with_(lambda j: (j["metadata"].update(name=name), t0(j).update(replicas=11)))
    assert validate_create(job, queues=default_queues()).allowed


def test_uppercase_underscore_and_dot_pass_the_qualified_name_check():
    job = with_(lambda j: j["metadata"].update(name="My_Job.v1"))
    assert "create job" not in message(job)


@pytest.mark.parametrize(
    ("queue", "fragment"),
    [
        ({"metadata": {"name": "default"}, "status": {"state": "Closed"}},
         "can only submit job to queue with state `Open`, queue `default` status is `Closed`;"),
        ({"metadata": {"name": "default"}, "status": {}}, "queue `default` status is ``;"),
    ],
)
def test_queue_state_must_be_open(queue, fragment):
    assert fragment in message(base(), QueueIndex([queue]))


def test_root_queue_is_refused():
    job = with_(lambda j: j["spec"].update(queue="root"))
    assert message(job, QueueIndex([{"metadata": {"name": "root"}, "status": {"state": "Open"}}])) == "can not submit job to root queue;"


def test_non_leaf_queue_is_refused():
    queues = QueueIndex([{"metadata": {"name": "default"}, "status": {"state": "Open"}},
                         {"metadata": {"name": "a"}, "spec": {"parent": "default"}, "status": {"state": "Open"}},
                         {"metadata": {"name": "b"}, "spec": {"parent": "default"}, "status": {"state": "Open"}}])
    assert message(base(), queues) == "can only submit job to leaf queue, queue `default` has 2 child queues;"


@pytest.mark.parametrize(
    ("deps", "dag"),
    [
        ({"b": ["a"], "c": ["a", "b"]}, True),
        ({"b": ["ghost"]}, False),
        ({"a": ["a"]}, False),
        ({"b": ["a", "a"]}, False),
        ({"a": ["b"], "b": ["a"]}, False),
        ({"b": []}, True),
    ],
    ids=["chain", "dangling_dependency", "self_dependency", "repeated_dependency", "cycle", "empty_list"],
)
def test_depends_on_must_form_a_dag(deps, dag):
    tasks = [{"name": n, **({"dependsOn": {"name": deps[n]}} if n in deps else {})} for n in ("a", "b", "c")]
    assert is_dag(tasks) is dag


def test_pod_level_resources_are_checked_only_with_the_feature_gate():
    def change(j):
        t0(j)["template"]["spec"]["resources"] = {"requests": {"cpu": "2"}}
        t0(j)["template"]["spec"]["containers"] = [
            {"name": f"c{i}", "image": "x", "resources": {"requests": {"cpu": "2"}}} for i in range(2)]
    job = with_(change)
    assert message(job) == ("spec.task[0].template.spec.resources.requests[cpu]: Invalid value: \"2\": "
                            "must be greater than or equal to aggregate container requests of 4.")
    assert validate_create(job, queues=default_queues(), pod_level_resources=False).allowed


def test_pod_level_requests_greater_than_limits():
    def change(j):
        t0(j)["template"]["spec"]["resources"] = {"requests": {"cpu": "6"}, "limits": {"cpu": "4"}}
    assert 'spec.task[0].template.spec.resources.requests: Invalid value: "6": must be less than or equal to cpu limit of 4' in message(with_(change))


def test_validation_never_mutates_the_job():
    job = with_(lambda j: j["spec"].update(minAvailable=9))
    before = copy.deepcopy(job)
    validate_create(job, queues=default_queues())
    assert job == before
