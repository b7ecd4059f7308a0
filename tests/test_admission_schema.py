"""The vcjob CRD schema (reference 6.4) as `vcbus validate` applies it, checked against a real API server.

The schema is the generated one (statemachines/admission/crd_schemas.json, the same as
deploy/crds/): the pod template's rules (required names, list-map duplicates, quantities)
are checked too, and every refusal in CASES is compared word for word with the API server's.
"""

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


def pod(*containers, **podspec):
    """One task whose pod template has these containers and pod spec fields."""
    return [{"name": "t", "replicas": 1, "template": {"spec": {"containers": list(containers), **podspec}}}]


QUANTITY = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
C0 = "spec.tasks[0].template.spec.containers[0]"


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
    ("tasks_min_items", job(tasks=[]), "spec.tasks: Invalid value: 0: spec.tasks in body should have at least 1 items"),
    ("max_retry_number", job(maxRetry=3.5), 'spec.maxRetry: Invalid value: "number": spec.maxRetry in body must be of type integer: "number"'),
    ("mount_path_required", job(volumes=[{"volumeClaimName": "x"}]), "spec.volumes[0].mountPath: Required value"),
    # The pod template: Kubernetes' own schema (core/v1 PodTemplateSpec of the pinned version).
    ("container_name_required", job(tasks=pod({"image": "x"})), f"{C0}.name: Required value"),
    ("containers_required", job(tasks=[{"name": "t", "template": {"spec": {}}}]),
     "spec.tasks[0].template.spec.containers: Required value"),
    ("containers_type", job(tasks=[{"name": "t", "template": {"spec": {"containers": "x"}}}]),
     'spec.tasks[0].template.spec.containers: Invalid value: "string": spec.tasks[0].template.spec.containers in body must be of type array: "string"'),
    ("container_duplicate", job(tasks=pod({"name": "c"}, {"name": "c"})),
     'spec.tasks[0].template.spec.containers[1]: Duplicate value: {"name":"c"}'),
    ("port_duplicate_after_protocol_default", job(tasks=pod({"name": "c", "ports": [{"containerPort": 80}, {"containerPort": 80, "protocol": "TCP"}]})),
     f'{C0}.ports[1]: Duplicate value: {{"containerPort":80,"protocol":"TCP"}}'),
    ("port_type", job(tasks=pod({"name": "c", "ports": [{"containerPort": "80"}]})),
     f'{C0}.ports[0].containerPort: Invalid value: "string": {C0}.ports[0].containerPort in body must be of type integer: "string"'),
    ("quantity_pattern", job(tasks=pod({"name": "c", "resources": {"limits": {"cpu": "1x"}}})),
     f"{C0}.resources.limits.cpu: Invalid value: \"1x\": {C0}.resources.limits.cpu in body should match '{QUANTITY}'"),
    ("node_selector_value", job(tasks=pod({"name": "c"}, nodeSelector={"a": 1})),
     'spec.tasks[0].template.spec.nodeSelector.a: Invalid value: "integer": spec.tasks[0].template.spec.nodeSelector.a in body must be of type string: "integer"'),
    ("volume_name_required", job(tasks=pod({"name": "c"}, volumes=[{"emptyDir": {}}])), "spec.tasks[0].template.spec.volumes[0].name: Required value"),
]

# Refusals with several errors (ours in field order; the API server's order varies).
MULTI = [
    ("several", job(volumes=[{"volumeClaimName": "x"}], queue="Bad_Q", maxRetry=-1), [
        "spec.maxRetry: Invalid value: -1: spec.maxRetry in body should be greater than or equal to 0",
        "spec.queue: Invalid value: \"Bad_Q\": spec.queue in body should match "
        "'^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$'",
        "spec.volumes[0].mountPath: Required value"]),
    ("quantity_float", job(tasks=pod({"name": "c", "resources": {"limits": {"cpu": 1.5}}})), [
        f'{C0}.resources.limits.cpu: Invalid value: "number": {C0}.resources.limits.cpu in body must be of type integer,string: "number"',
        f'<nil>: Invalid value: "": "{C0}.resources.limits.cpu" must validate at least one schema (anyOf)',
        f'{C0}.resources.limits.cpu: Invalid value: "number": {C0}.resources.limits.cpu in body must be of type integer: "number"']),
]

# Accepted by the schema (the API server too): no tasks at all (Volcano's webhook refuses that later),
# a null field (defaulted), an integral float, an unknown field (pruned).
ACCEPTED = [
    ("no_tasks", {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "s"}, "spec": {}}),
    ("null_queue", job(queue=None)),
    ("integral_float", job(maxRetry=3.0)),
    ("unknown_field", job(noSuchField=1)),
    ("int_or_string_port", job(tasks=pod({"name": "c", "livenessProbe": {"httpGet": {"port": "http"}}}))),
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


def test_missing_tasks_pass_the_schema_and_valid_job():
    # The API server accepts a Job without tasks (minItems applies to a list that is there);
    # Volcano's validating webhook refuses it ("No task specified in job spec").
    assert schema_errors(crd_defaults({"spec": {}})) == []
    assert schema_errors(crd_defaults(job())) == []


@pytest.mark.parametrize(("obj", "expected"), [c[1:] for c in MULTI], ids=[c[0] for c in MULTI])
def test_crd_schema_several_errors(obj, expected):
    assert [str(e) for e in schema_errors(crd_defaults(obj))] == expected


@pytest.mark.parametrize("obj", [c[1] for c in ACCEPTED], ids=[c[0] for c in ACCEPTED])
def test_crd_schema_accepts(obj):
    assert schema_errors(crd_defaults(obj)) == []


def test_pod_template_defaults_are_filled():
    filled = crd_defaults(job(tasks=pod({"name": "c", "ports": [{"containerPort": 80}]}, imagePullSecrets=[{}])))
    spec = filled["spec"]["tasks"][0]["template"]["spec"]
    assert spec["containers"][0]["ports"] == [{"containerPort": 80, "protocol": "TCP"}]
    assert spec["imagePullSecrets"] == [{"name": ""}]
    assert crd_defaults(job(queue=None))["spec"]["queue"] == "default"


@pytest.mark.k8s
@pytest.mark.parametrize(("obj", "expected"), [c[1:] for c in MULTI], ids=[c[0] for c in MULTI])
def test_api_server_says_the_same_several(k8s, k8s_namespace, obj, expected):
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    custom = client.CustomObjectsApi(k8s.api_client())
    with pytest.raises(ApiException) as caught:
        custom.create_namespaced_custom_object("batch.volcano.sh", "v1alpha1", k8s_namespace, "jobs", obj)
    message = json.loads(caught.value.body)["message"]
    # The API server visits properties in Go map order, so the order of errors in different fields varies
    # from call to call: the same errors, each once, and the same length.
    ours = [str(e) for e in schema_errors(crd_defaults(obj))]
    assert all(message.count(e) == 1 for e in ours), message
    assert len(message) == len(schema_message(obj, schema_errors(crd_defaults(obj))))


@pytest.mark.k8s
@pytest.mark.parametrize("obj", [c[1] for c in ACCEPTED], ids=[c[0] for c in ACCEPTED])
def test_api_server_accepts_the_same(k8s, k8s_namespace, obj):
    from kubernetes import client

    custom = client.CustomObjectsApi(k8s.api_client())
    got = custom.create_namespaced_custom_object("batch.volcano.sh", "v1alpha1", k8s_namespace, "jobs", obj,
                                                 dry_run="All")
    expected = crd_defaults(obj)
    expected["spec"].pop("noSuchField", None)
    assert {k: v for k, v in got["spec"].items()} == {k: v for k, v in expected["spec"].items() if v is not None}


@pytest.mark.k8s
def test_int32_is_stricter_than_the_api_server(k8s, k8s_namespace):
    """Known, deliberate difference: kube-apiserver 1.34 stores `maxRetry: 2^40` in the CRD, but Volcano's Go
    types (int32) cannot decode it, so `vcbus validate` refuses it (helper B's bound, kept)."""
    from kubernetes import client

    big = job(maxRetry=2**40)
    custom = client.CustomObjectsApi(k8s.api_client())
    got = custom.create_namespaced_custom_object("batch.volcano.sh", "v1alpha1", k8s_namespace, "jobs", big,
                                                 dry_run="All")
    assert got["spec"]["maxRetry"] == 2**40
    assert [str(e) for e in schema_errors(crd_defaults(big))] == [
        'spec.maxRetry: Invalid value: 1099511627776: spec.maxRetry in body must be of type int32: "1099511627776"']


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


# The Queue CRD's schema, from the same generated file (checked after the CRD defaults, as the API server does).
def queue(**spec):
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "schema-q"}, "spec": spec}


QUEUE_CASES = [
    ("weight_maximum", queue(weight=70000), "spec.weight: Invalid value: 70000: spec.weight in body should be less than or equal to 65535"),
    ("dequeue_enum", queue(dequeueStrategy="lifo"), 'spec.dequeueStrategy: Unsupported value: "lifo": supported values: "fifo", "traverse"'),
    ("capability_quantity", queue(capability={"cpu": "lots"}),
     "spec.capability.cpu: Invalid value: \"lots\": spec.capability.cpu in body should match '" + QUANTITY + "'"),
    ("parent_pattern", queue(parent="Root_Q"),
     "spec.parent: Invalid value: \"Root_Q\": spec.parent in body should match "
     "'^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$'"),
]


@pytest.mark.parametrize(("obj", "expected"), [c[1:] for c in QUEUE_CASES], ids=[c[0] for c in QUEUE_CASES])
def test_queue_schema_rule(obj, expected):
    from statemachines.admission.schema import crd_queue_defaults, queue_schema_errors

    assert [str(e) for e in queue_schema_errors(crd_queue_defaults(obj))] == [expected]


def test_queue_defaults_and_a_valid_queue():
    from statemachines.admission.schema import crd_queue_defaults, queue_schema_errors

    filled = crd_queue_defaults(queue(reclaimable=True))
    assert filled["spec"]["weight"] == 1 and filled["spec"]["dequeueStrategy"] == "traverse"
    assert queue_schema_errors(filled) == []


@pytest.mark.k8s
@pytest.mark.parametrize(("obj", "expected"), [c[1:] for c in QUEUE_CASES], ids=[c[0] for c in QUEUE_CASES])
def test_api_server_says_the_same_for_queues(k8s, obj, expected):
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    from statemachines.admission.schema import QUEUE_KIND, crd_queue_defaults, queue_schema_errors

    custom = client.CustomObjectsApi(k8s.api_client())
    with pytest.raises(ApiException) as caught:
        custom.create_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues", obj, dry_run="All")
    assert json.loads(caught.value.body)["message"] == schema_message(
        obj, queue_schema_errors(crd_queue_defaults(obj)), QUEUE_KIND)


def test_validate_cli_refuses_a_queue_by_the_crd_schema(tmp_path, capsys):
    import yaml as pyyaml

    from vcbus.cli.main import main

    path = tmp_path / "q.yaml"
    path.write_text(pyyaml.safe_dump(queue(weight=70000)))
    code = main(["validate", str(path)])
    out = capsys.readouterr()
    assert code == 1
    assert "spec.weight in body should be less than or equal to 65535" in out.out + out.err
