"""The vcjob CRD schema (reference 6.4) as `vcbus validate` applies it, checked against a real API server."""

from __future__ import annotations

import json

import pytest

from statemachines.admission.schema import crd_defaults, schema_errors, schema_message


def job(name="s", **spec):
    base = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": name},
            "spec": {"tasks": [{"name": "t", "replicas": 1, "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}]}}
    base["spec"].update(spec)
    return base


def task(**fields):
    return [{"name": "t", "replicas": 1, "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}, **fields}]


SUBDOMAIN = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and "
    "end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)

CASES = [
    ("name_underscore", job("Bad_Name"), f'metadata.name: Invalid value: "Bad_Name": {SUBDOMAIN}'),
    ("name_uppercase", job("Foo-Bar"), f'metadata.name: Invalid value: "Foo-Bar": {SUBDOMAIN}'),
    ("name_trailing_dash", job("foo-"), f'metadata.name: Invalid value: "foo-": {SUBDOMAIN}'),
    ("job_min_available_minimum", job(minAvailable=-1), "spec.minAvailable: Invalid value: -1: spec.minAvailable in body should be greater than or equal to 0"),
    ("min_success_minimum", job(minSuccess=0), "spec.minSuccess: Invalid value: 0: spec.minSuccess in body should be greater than or equal to 1"),
    ("ttl_minimum", job(ttlSecondsAfterFinished=-5), "spec.ttlSecondsAfterFinished: Invalid value: -5: spec.ttlSecondsAfterFinished in body should be greater than or equal to 0"),
    ("task_name_pattern", job(tasks=[{**task()[0], "name": "Worker"}]),
     "spec.tasks[0].name: Invalid value: \"Worker\": spec.tasks[0].name in body should match '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'"),
    ("task_replicas_minimum", job(tasks=task(replicas=-1)), "spec.tasks[0].replicas: Invalid value: -1: spec.tasks[0].replicas in body should be greater than or equal to 0"),
    ("queue_pattern", job(queue="Bad_Queue"),
     "spec.queue: Invalid value: \"Bad_Queue\": spec.queue in body should match '^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$'"),
    ("scheduler_name_length", job(schedulerName="s" * 64), "spec.schedulerName: Too long: may not be more than 63 bytes"),
    ("policy_event_enum", job(policies=[{"event": "Nope", "action": "RestartJob"}]),
     'spec.policies[0].event: Unsupported value: "Nope": supported values: "*", "PodPending", "PodRunning", "PodFailed", '
     '"PodEvicted", "Unknown", "TaskCompleted", "OutOfSync", "CommandIssued", "JobUpdated", "TaskFailed"'),
    ("topology_policy_enum", job(tasks=task(topologyPolicy="all")),
     'spec.tasks[0].topologyPolicy: Unsupported value: "all": supported values: "none", "best-effort", "restricted", "single-numa-node"'),
    ("partition_size_minimum", job(tasks=task(partitionPolicy={"totalPartitions": 1, "partitionSize": 0})),
     "spec.tasks[0].partitionPolicy.partitionSize: Invalid value: 0: spec.tasks[0].partitionPolicy.partitionSize in body should be greater than or equal to 1"),
    ("replicas_type", job(tasks=task(replicas="two")),
     'spec.tasks[0].replicas: Invalid value: "string": spec.tasks[0].replicas in body must be of type integer: "string"'),
    ("queue_type", job(queue=5), 'spec.queue: Invalid value: "integer": spec.queue in body must be of type string: "integer"'),
    ("mount_path_pattern", job(volumes=[{"mountPath": "a:b", "volumeClaimName": "x"}]),
     "spec.volumes[0].mountPath: Invalid value: \"a:b\": spec.volumes[0].mountPath in body should match '^[^:]+$'"),
]


@pytest.mark.parametrize(("obj", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_crd_schema_rule(obj, expected):
    assert [str(e) for e in schema_errors(crd_defaults(obj))] == [expected]


NAME_AND_QUEUE = job("Foo-Bar", queue="Bad_Queue")


def test_a_bad_name_comes_before_the_schema_errors_and_good_names_pass():
    errors = [str(e) for e in schema_errors(crd_defaults(NAME_AND_QUEUE))]
    assert [e.split(":")[0] for e in errors] == ["metadata.name", "spec.queue"]
    assert schema_message(NAME_AND_QUEUE, schema_errors(crd_defaults(NAME_AND_QUEUE))).startswith(
        'Job.batch.volcano.sh "Foo-Bar" is invalid: [metadata.name: Invalid value: "Foo-Bar": a lowercase RFC 1123 subdomain'
    )
    for good in ("a", "resnet-dist-train", "a.b-c.d", "x" * 253):
        assert schema_errors(crd_defaults(job(good))) == [], good


@pytest.mark.k8s
def test_api_server_orders_a_bad_name_before_the_schema_errors(k8s, k8s_namespace):
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    custom = client.CustomObjectsApi(k8s.api_client())
    with pytest.raises(ApiException) as caught:
        custom.create_namespaced_custom_object("batch.volcano.sh", "v1alpha1", k8s_namespace, "jobs", NAME_AND_QUEUE)
    expected = schema_message(NAME_AND_QUEUE, schema_errors(crd_defaults(NAME_AND_QUEUE)))
    assert json.loads(caught.value.body)["message"] == expected


@pytest.mark.k8s
@pytest.mark.parametrize("name", ["Bad_Queue", "Foo-Bar"])
def test_api_server_refuses_a_queue_name_with_the_same_message(k8s, name):
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    from statemachines.admission.schema import QUEUE_KIND, name_errors

    queue = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": name},
             "spec": {"weight": 1}}
    custom = client.CustomObjectsApi(k8s.api_client())
    with pytest.raises(ApiException) as caught:
        custom.create_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues", queue)
    assert json.loads(caught.value.body)["message"] == schema_message(queue, name_errors(queue), QUEUE_KIND)


def test_missing_tasks_and_valid_job():
    assert str(schema_errors({"spec": {}})[0]) == "spec.tasks: Invalid value: 0: spec.tasks in body should have at least 1 items"
    assert schema_errors(crd_defaults(job())) == []


def test_crd_defaults():
    filled = crd_defaults(job(tasks=task(partitionPolicy={"totalPartitions": 1, "partitionSize": 1})))
    assert filled["spec"]["queue"] == "default" and filled["spec"]["maxRetry"] == 3
    assert filled["spec"]["tasks"][0]["partitionPolicy"]["minPartitions"] == 0


@pytest.mark.k8s
@pytest.mark.parametrize(("obj", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_api_server_says_the_same(k8s, k8s_namespace, obj, expected):
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    custom = client.CustomObjectsApi(k8s.api_client())
    with pytest.raises(ApiException) as caught:
        custom.create_namespaced_custom_object("batch.volcano.sh", "v1alpha1", k8s_namespace, "jobs", obj)
    assert json.loads(caught.value.body)["message"] == schema_message(obj, schema_errors(crd_defaults(obj)))
