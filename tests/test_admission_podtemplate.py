"""Task template validation (step 4f: Kubernetes ValidatePodTemplate, the restated subset) and step 4g (topologyPolicy CPU)."""

from __future__ import annotations

import pytest

from statemachines.admission.podtemplate import topology_cpu_error, validate_pod_template


def errors(spec, *, name="task", namespace="ns", labels=None, **kw):
    template = {"spec": spec}
    if labels is not None:
        template["metadata"] = {"labels": labels}
    return [str(e) for e in validate_pod_template(template, name=name, namespace=namespace, **kw)]


def ok_container(**extra):
    return {"name": "c", "image": "busybox", **extra}


CASES = [
    ("containers_required", {"containers": []}, "template.spec.containers: Required value"),
    ("container_name_required", {"containers": [{"image": "x"}]}, "template.spec.containers[0].name: Required value"),
    ("container_name_dns_label", {"containers": [ok_container(name="Bad_Name")]},
     'template.spec.containers[0].name: Invalid value: "Bad_Name": a lowercase RFC 1123 label must consist of lower case '
     "alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', "
     "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"),
    ("duplicate_container_names_across_init", {"containers": [ok_container()], "initContainers": [ok_container()]},
     'template.spec.initContainers[0].name: Duplicate value: "c"'),
    ("image_required", {"containers": [{"name": "c"}]}, "template.spec.containers[0].image: Required value"),
    ("container_port_range", {"containers": [ok_container(ports=[{"containerPort": 70000}])]},
     "template.spec.containers[0].ports[0].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive"),
    ("container_port_required", {"containers": [ok_container(ports=[{"name": "http"}])]},
     "template.spec.containers[0].ports[0].containerPort: Required value"),
    ("port_name_iana", {"containers": [ok_container(ports=[{"name": "123", "containerPort": 80}])]},
     'template.spec.containers[0].ports[0].name: Invalid value: "123": must contain at least one letter (a-z)'),
    ("port_protocol", {"containers": [ok_container(ports=[{"containerPort": 80, "protocol": "ICMP"}])]},
     'template.spec.containers[0].ports[0].protocol: Unsupported value: "ICMP": supported values: "SCTP", "TCP", "UDP"'),
    ("env_name", {"containers": [ok_container(env=[{"name": "1X", "value": "v"}])]},
     'template.spec.containers[0].env[0].name: Invalid value: "1X": a valid environment variable name must consist of'),
    ("volume_mount_unknown_volume", {"containers": [ok_container(volumeMounts=[{"name": "v", "mountPath": "/v"}])]},
     'template.spec.containers[0].volumeMounts[0].name: Not found: "v"'),
    ("volume_mount_path_unique", {"volumes": [{"name": "v", "emptyDir": {}}],
                                  "containers": [ok_container(volumeMounts=[{"name": "v", "mountPath": "/v"}, {"name": "v", "mountPath": "/v"}])]},
     'template.spec.containers[0].volumeMounts[1].mountPath: Invalid value: "/v": must be unique'),
    ("volume_one_type_only", {"volumes": [{"name": "v", "emptyDir": {}, "secret": {}}], "containers": [ok_container()]},
     "template.spec.volumes[0].secret: Forbidden: may not specify more than 1 volume type"),
    ("volume_duplicate_name", {"volumes": [{"name": "v", "emptyDir": {}}, {"name": "v", "emptyDir": {}}], "containers": [ok_container()]},
     'template.spec.volumes[1].name: Duplicate value: "v"'),
    ("image_pull_policy", {"containers": [ok_container(imagePullPolicy="Sometimes")]},
     'template.spec.containers[0].imagePullPolicy: Unsupported value: "Sometimes": supported values: "Always", "IfNotPresent", "Never"'),
    ("requests_over_limits", {"containers": [ok_container(resources={"requests": {"cpu": "2"}, "limits": {"cpu": "1"}})]},
     'template.spec.containers[0].resources.requests: Invalid value: "2": must be less than or equal to cpu limit of 1'),
    ("negative_quantity", {"containers": [ok_container(resources={"limits": {"memory": "-1Gi"}})]},
     'template.spec.containers[0].resources.limits[memory]: Invalid value: "-1Gi": must be greater than or equal to 0'),
    ("extended_resource_request_equals_limit", {"containers": [ok_container(resources={"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "2"}})]},
     'template.spec.containers[0].resources.requests: Invalid value: "1": must be equal to nvidia.com/gpu limit of 2'),
    ("extended_resource_needs_limit", {"containers": [ok_container(resources={"requests": {"nvidia.com/gpu": "1"}})]},
     "template.spec.containers[0].resources.limits: Required value: Limit must be set for non overcommitable resources"),
    ("extended_resource_integer", {"containers": [ok_container(resources={"requests": {"x.io/y": "500m"}, "limits": {"x.io/y": "500m"}})]},
     'template.spec.containers[0].resources.requests[x.io/y]: Invalid value: "500m": must be an integer'),
    ("restart_policy", {"restartPolicy": "Sometimes", "containers": [ok_container()]},
     'template.spec.restartPolicy: Unsupported value: "Sometimes": supported values: "Always", "OnFailure", "Never"'),
    ("dns_policy", {"dnsPolicy": "Mine", "containers": [ok_container()]},
     'template.spec.dnsPolicy: Unsupported value: "Mine": supported values: "ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"'),
    ("hostname_dns_label", {"hostname": "a.b", "containers": [ok_container()]},
     'template.spec.hostname: Invalid value: "a.b": must not contain dots'),
]


@pytest.mark.parametrize(("spec", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_kubernetes_pod_template_rule(spec, expected):
    assert any(e.startswith(expected) for e in errors(spec)), errors(spec)


def test_volume_without_type_is_defaulted_to_empty_dir():
    assert errors({"volumes": [{"name": "v"}], "containers": [ok_container(volumeMounts=[{"name": "v", "mountPath": "/v"}])]}) == []


def test_valid_template_has_no_errors():
    spec = {"restartPolicy": "OnFailure", "volumes": [{"name": "v", "emptyDir": {}}],
            "containers": [ok_container(ports=[{"name": "http", "containerPort": 80}], env=[{"name": "A_B", "value": "1"}],
                                        volumeMounts=[{"name": "v", "mountPath": "/v"}],
                                        resources={"requests": {"cpu": "500m"}, "limits": {"cpu": "1"}})]}
    assert errors(spec) == []


def test_object_meta_name_namespace_and_labels():
    found = errors({"containers": [ok_container()]}, name="Bad", namespace="", labels={"a/b/c": "ok", "k": "bad value"})
    assert found[0].startswith('metadata.name: Invalid value: "Bad": a lowercase RFC 1123 subdomain')
    assert "metadata.namespace: Required value" in found
    assert any(e.startswith('template.labels: Invalid value: "a/b/c": a valid label key') for e in found)
    assert any(e.startswith('template.labels: Invalid value: "bad value": a valid label must be') for e in found)


def test_pod_level_container_limit_above_pod_limit():
    spec = {"resources": {"limits": {"cpu": "1"}}, "containers": [ok_container(resources={"limits": {"cpu": "2"}})]}
    assert 'template.spec.resources.containers[0][cpu].limits: Invalid value: "2": must be less than or equal to pod limits of 1' in errors(spec)
    assert errors(spec, pod_level_resources=False) == []


@pytest.mark.parametrize(
    ("resources", "error"),
    [
        ({"requests": {"cpu": "2"}}, ""),
        ({"limits": {"cpu": "1"}}, ""),
        ({"requests": {"cpu": "1500m"}}, "the cpu request isn't an integer in spec.task[3] container[0]."),
        ({"requests": {"memory": "1Gi"}}, "the cpu request isn't an integer in spec.task[3] container[0]."),
    ],
    ids=["integer", "limits_stand_in", "fraction", "missing_cpu"],
)
def test_topology_policy_needs_integer_nonzero_cpu(resources, error):
    task = {"topologyPolicy": "restricted", "template": {"spec": {"containers": [ok_container(resources=resources)]}}}
    assert topology_cpu_error(task, 3) == error


def test_topology_policy_none_skips_the_cpu_check():
    assert topology_cpu_error({"topologyPolicy": "none", "template": {"spec": {"containers": [ok_container()]}}}, 0) == ""


def test_init_containers_are_indexed_after_containers():
    task = {"topologyPolicy": "best-effort", "template": {"spec": {
        "containers": [ok_container(resources={"requests": {"cpu": "1"}})],
        "initContainers": [ok_container(name="i", resources={"requests": {"cpu": "0.5"}})]}}}
    assert topology_cpu_error(task, 0) == "the cpu request isn't an integer in spec.task[0] container[1]."


API_SERVER_DIFFERS = {
    # The API server validates env names with the relaxed rule (any printable ASCII but '='); Volcano's
    # webhook passes explicit PodValidationOptions without it, so it keeps the strict rule: asserted
    # by the env-name tests below.
    "env_name",
}
STRICT_ENV_NAME = (
    "a valid environment variable name must consist of alphabetic characters, digits, '_', '-', or '.', "
    "and must not start with a digit (e.g. 'my.env-name',  or 'MY_ENV.NAME',  or 'MyEnvName1', regex used for "
    "validation is '[-._a-zA-Z][-._a-zA-Z0-9]*')"
)
RELAXED_ENV_NAME = "a valid environment variable name must consist only of printable ASCII characters other than '='"


def env_spec(name: str) -> dict:
    return {"containers": [ok_container(env=[{"name": name, "value": "v"}])]}


def podtemplate(spec: dict) -> dict:
    return {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "task"}, "template": {"spec": spec}}


@pytest.mark.k8s
@pytest.mark.parametrize(("spec", "expected"), [c[1:] for c in CASES if c[0] not in API_SERVER_DIFFERS],
                         ids=[c[0] for c in CASES if c[0] not in API_SERVER_DIFFERS])
def test_kubernetes_itself_reports_the_same_errors(k8s, k8s_namespace, spec, expected):
    """Create the template as a core/v1 PodTemplate: the API server runs the same ValidatePodTemplate."""
    body = podtemplate(spec)
    status = post_raw(k8s, f"/api/v1/namespaces/{k8s_namespace}/podtemplates", body)
    assert status["code"] == 422, status
    causes = status["details"]["causes"]
    theirs = {f"{c['field']}: {c['message']}" for c in causes}
    ours = set(errors(spec, namespace=k8s_namespace))
    assert any(e.startswith(expected) for e in theirs), theirs
    assert ours == theirs


@pytest.mark.k8s
@pytest.mark.parametrize("name", ["1X", "my var", "x:y"], ids=["leading_digit", "space", "colon"])
def test_env_names_the_api_server_takes_and_volcano_refuses(k8s, k8s_namespace, name):
    """The documented difference: the API server's relaxed rule takes these names, Volcano's strict rule does not."""
    created = post_raw(k8s, f"/api/v1/namespaces/{k8s_namespace}/podtemplates", podtemplate(env_spec(name)))
    assert created.get("kind") == "PodTemplate", created
    assert created["template"]["spec"]["containers"][0]["env"][0]["name"] == name
    assert errors(env_spec(name), namespace=k8s_namespace) == [
        f'template.spec.containers[0].env[0].name: Invalid value: "{name}": {STRICT_ENV_NAME}']


@pytest.mark.k8s
def test_an_env_name_with_equals_is_refused_by_both_rules_each_in_its_own_words(k8s, k8s_namespace):
    status = post_raw(k8s, f"/api/v1/namespaces/{k8s_namespace}/podtemplates", podtemplate(env_spec("A=B")))
    assert status["code"] == 422, status
    theirs = {f"{c['field']}: {c['message']}" for c in status["details"]["causes"]}
    assert theirs == {f'template.spec.containers[0].env[0].name: Invalid value: "A=B": {RELAXED_ENV_NAME}'}
    assert errors(env_spec("A=B"), namespace=k8s_namespace) == [
        f'template.spec.containers[0].env[0].name: Invalid value: "A=B": {STRICT_ENV_NAME}']


POD_LEVEL = [
    ("pod_requests_below_aggregate", {"resources": {"requests": {"cpu": "1"}},
                                      "containers": [ok_container(resources={"requests": {"cpu": "2"}})]}),
    ("container_limit_above_pod_limit", {"resources": {"limits": {"cpu": "1"}},
                                         "containers": [ok_container(resources={"limits": {"cpu": "2"}})]}),
    ("pod_requests_above_pod_limits", {"resources": {"requests": {"cpu": "6"}, "limits": {"cpu": "4"}},
                                       "containers": [ok_container(resources={"requests": {"cpu": "1"}})]}),
    ("labels_and_several_container_errors", {"containers": [{"name": "A", "ports": [{"containerPort": 0, "name": "x--y"}]}]}),
]


@pytest.mark.k8s
@pytest.mark.parametrize("spec", [c[1] for c in POD_LEVEL], ids=[c[0] for c in POD_LEVEL])
def test_kubernetes_agrees_on_pod_level_resources_and_error_lists(k8s, k8s_namespace, spec):
    body = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "task"},
            "template": {"metadata": {"labels": {"k": "bad value"}}, "spec": spec}}
    status = post_raw(k8s, f"/api/v1/namespaces/{k8s_namespace}/podtemplates", body)
    theirs = {f"{c['field']}: {c['message']}" for c in status["details"]["causes"]}
    assert set(errors(spec, namespace=k8s_namespace, labels={"k": "bad value"})) == theirs


def post_raw(k8s, path, body):
    """POST without the Python client's own checks (it refuses a container without a name)."""
    import json
    import ssl
    import urllib.error
    import urllib.request

    import yaml

    config = yaml.safe_load(k8s.kubeconfig.read_text())
    cluster, user = config["clusters"][0]["cluster"], config["users"][0]["user"]
    context = ssl.create_default_context(cafile=cluster["certificate-authority"])
    context.load_cert_chain(user["client-certificate"], user["client-key"])
    request = urllib.request.Request(cluster["server"] + path, json.dumps(body).encode(), {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, context=context, timeout=30) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as err:
        return json.loads(err.read())
