"""`vcbus webhook` registered with a real kube-apiserver: invalid vcjobs are refused, valid ones get the defaults.

The webhook configurations point at `https://127.0.0.1:<port>` (clientConfig.url)
with the test CA as caBundle. They only select this test's namespace (jobs) and
objects labelled with this test's token (queues), and are deleted afterwards,
so other tests sharing the API server never reach a webhook that is gone.
"""

from __future__ import annotations

import base64
import json
import time
import uuid

import pytest

from tests.test_webhook import make_tls
from vcbus.webhook.queues import ClusterQueues
from vcbus.webhook.server import AdmissionServer

pytestmark = pytest.mark.k8s

GROUP, VERSION = "batch.volcano.sh", "v1alpha1"


@pytest.fixture
def webhook(k8s, k8s_namespace, tmp_path):
    """Our server, plus Mutating/ValidatingWebhookConfigurations scoped to this test."""
    from kubernetes import client

    tls = make_tls(tmp_path)
    api_client = k8s.api_client()
    server = AdmissionServer(("127.0.0.1", 0), cert_file=tls.cert_file, key_file=tls.key_file,
                             queues=ClusterQueues(api_client, ttl=0))
    server.start_background()
    token = uuid.uuid4().hex[:8]
    ca = base64.b64encode(tls.ca_pem).decode()
    url = f"https://127.0.0.1:{server.port}"
    namespace_only = {"matchLabels": {"kubernetes.io/metadata.name": k8s_namespace}}
    labelled = {"matchLabels": {"vcbus-webhook-test": token}}

    def hook(name, path, resource, operations, **selectors):
        group, version, plural = resource
        return {"name": name, "admissionReviewVersions": ["v1"], "sideEffects": "None", "failurePolicy": "Fail",
                "timeoutSeconds": 10, "clientConfig": {"url": url + path, "caBundle": ca},
                "rules": [{"operations": operations, "apiGroups": [group], "apiVersions": [version], "resources": [plural]}],
                **selectors}

    jobs = (GROUP, VERSION, "jobs")
    queues = ("scheduling.volcano.sh", "v1beta1", "queues")
    admission = client.AdmissionregistrationV1Api(api_client)
    mutating = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
                "metadata": {"name": f"vcbus-test-{token}"},
                "webhooks": [hook("mutatejob.volcano.sh", "/jobs/mutate", jobs, ["CREATE"], namespaceSelector=namespace_only),
                             hook("mutatequeue.volcano.sh", "/queues/mutate", queues, ["CREATE"], objectSelector=labelled)]}
    validating = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
                  "metadata": {"name": f"vcbus-test-{token}"},
                  "webhooks": [hook("validatejob.volcano.sh", "/jobs/validate", jobs, ["CREATE", "UPDATE"], namespaceSelector=namespace_only),
                               hook("validatecronjob.volcano.sh", "/cronjobs/validate", (GROUP, VERSION, "cronjobs"),
                                    ["CREATE", "UPDATE"], namespaceSelector=namespace_only),
                               hook("validatejobflow.volcano.sh", "/jobflows/validate",
                                    ("flow.volcano.sh", "v1alpha1", "jobflows"), ["CREATE", "UPDATE"],
                                    namespaceSelector=namespace_only),
                               hook("validatequeue.volcano.sh", "/queues/validate", queues, ["CREATE", "UPDATE", "DELETE"],
                                    objectSelector=labelled)]}
    admission.create_mutating_webhook_configuration(mutating)
    admission.create_validating_webhook_configuration(validating)
    try:
        yield {"api": api_client, "namespace": k8s_namespace, "token": token}
    finally:
        admission.delete_mutating_webhook_configuration(f"vcbus-test-{token}")
        admission.delete_validating_webhook_configuration(f"vcbus-test-{token}")
        server.shutdown()
        server.server_close()


def open_queue(api_client, name, token):
    from kubernetes import client

    custom = client.CustomObjectsApi(api_client)
    custom.create_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues", {
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
        "metadata": {"name": name, "labels": {"vcbus-webhook-test": token}}, "spec": {"weight": 1}})
    custom.patch_cluster_custom_object_status("scheduling.volcano.sh", "v1beta1", "queues", name, {"status": {"state": "Open"}})
    return custom.get_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues", name)


def vcjob(name, queue, **spec):
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Job", "metadata": {"name": name},
            "spec": {"queue": queue, "plugins": {"pytorch": []},
                     "tasks": [{"name": "master", "replicas": 1, "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}},
                               {"name": "worker", "replicas": 2, "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}}],
                     **spec}}


def create_until_webhook_answers(custom, namespace, body, *, denied, timeout=30.0):
    """The API server picks webhook configurations up asynchronously: retry until ours answers."""
    from kubernetes.client.exceptions import ApiException

    deadline = time.monotonic() + timeout
    while True:
        name = f"{body['metadata']['name']}-{uuid.uuid4().hex[:5]}"
        try:
            created = custom.create_namespaced_custom_object(GROUP, VERSION, namespace, "jobs", {**body, "metadata": {"name": name}})
        except ApiException as err:
            if denied and "validatejob.volcano.sh" in (err.body or ""):
                return err
            raise
        if not denied and created["spec"].get("schedulerName"):
            return created
        custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, "jobs", name)
        if time.monotonic() > deadline:
            pytest.fail("the API server never called the vcbus webhook")
        time.sleep(0.3)


def test_invalid_vcjob_is_refused_with_volcano_message(webhook):
    from kubernetes import client

    queue = f"q-{webhook['token']}"
    open_queue(webhook["api"], queue, webhook["token"])
    custom = client.CustomObjectsApi(webhook["api"])
    err = create_until_webhook_answers(custom, webhook["namespace"], vcjob("bad", queue, minAvailable=5), denied=True)
    assert err.status == 400
    assert message(err) == ('admission webhook "validatejob.volcano.sh" denied the request: '
                            "job 'minAvailable' should not be greater than total replicas in tasks;")


def test_vcjob_to_a_missing_queue_is_refused(webhook):
    from kubernetes import client

    custom = client.CustomObjectsApi(webhook["api"])
    err = create_until_webhook_answers(custom, webhook["namespace"], vcjob("lost", "no-such-queue"), denied=True)
    assert message(err).endswith('unable to find job queue: queue.scheduling.volcano.sh "no-such-queue" not found;')


def test_valid_vcjob_comes_back_with_the_defaults(webhook):
    from kubernetes import client

    queue = f"q-{webhook['token']}"
    stored = open_queue(webhook["api"], queue, webhook["token"])
    assert stored["spec"]["reclaimable"] is True  # our queue mutate webhook ran too
    custom = client.CustomObjectsApi(webhook["api"])
    job = create_until_webhook_answers(custom, webhook["namespace"], vcjob("good", queue), denied=False)
    spec = job["spec"]
    assert spec["schedulerName"] == "volcano" and spec["maxRetry"] == 3 and spec["minAvailable"] == 3
    assert [(t["name"], t["minAvailable"], t["maxRetry"]) for t in spec["tasks"]] == [("master", 1, 3), ("worker", 2, 3)]
    assert spec["plugins"] == {"pytorch": [], "svc": []}


def test_update_of_a_frozen_field_is_refused(webhook):
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    queue = f"q-{webhook['token']}"
    open_queue(webhook["api"], queue, webhook["token"])
    custom = client.CustomObjectsApi(webhook["api"])
    job = create_until_webhook_answers(custom, webhook["namespace"], vcjob("upd", queue), denied=False)
    name = job["metadata"]["name"]
    with pytest.raises(ApiException) as caught:
        custom.patch_namespaced_custom_object(GROUP, VERSION, webhook["namespace"], "jobs", name, {"spec": {"maxRetry": 7}})
    assert message(caught.value) == (
        'admission webhook "validatejob.volcano.sh" denied the request: job updates may not change fields other than '
        "`minAvailable`, `tasks[*].replicas under spec` and `PriorityClassName`")
    scaled = custom.patch_namespaced_custom_object(GROUP, VERSION, webhook["namespace"], "jobs", name,
                                                   {"spec": {"minAvailable": 2}})
    assert scaled["spec"]["minAvailable"] == 2


def test_queue_with_children_cannot_be_deleted(webhook):
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    token = webhook["token"]
    custom = client.CustomObjectsApi(webhook["api"])
    open_queue(webhook["api"], f"p-{token}", token)
    custom.create_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues", {
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
        "metadata": {"name": f"c-{token}", "labels": {"vcbus-webhook-test": token}}, "spec": {"weight": 1, "parent": f"p-{token}"}})
    with pytest.raises(ApiException) as caught:
        custom.delete_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues", f"p-{token}")
    assert message(caught.value) == (f'admission webhook "validatequeue.volcano.sh" denied the request: '
                                     f"queue p-{token} can not be deleted because it has 1 child queues: c-{token}")
    custom.delete_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues", f"c-{token}")
    custom.delete_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues", f"p-{token}")


def message(err):
    return json.loads(err.body)["message"]


def test_a_cronjob_is_admitted_or_denied_as_volcanos_webhook_does(webhook):
    """validatecronjob.volcano.sh through the API server: a zone vcbus cannot load is denied on CREATE,
    a TZ in the schedule on UPDATE; a valid CronJob with a time zone is admitted."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    custom, ns = client.CustomObjectsApi(webhook["api"]), webhook["namespace"]

    def cronjob(name, **spec):
        return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "CronJob", "metadata": {"name": name},
                "spec": {"schedule": "*/5 * * * *", "jobTemplate": {"spec": {"tasks": [{"name": "t", "replicas": 1}]}},
                         **spec}}

    deadline = time.monotonic() + 30  # the API server picks webhook configurations up asynchronously
    while True:
        name = f"bad-{uuid.uuid4().hex[:5]}"
        try:
            custom.create_namespaced_custom_object(GROUP, VERSION, ns, "cronjobs", cronjob(name, timeZone="Mars/Olympus"))
        except ApiException as err:
            assert message(err) == ('admission webhook "validatecronjob.volcano.sh" denied the request: '
                                    "invalid timeZone"), err.body
            break
        custom.delete_namespaced_custom_object(GROUP, VERSION, ns, "cronjobs", name)
        assert time.monotonic() < deadline, "the API server never called the vcbus CronJob webhook"
        time.sleep(0.3)
    custom.create_namespaced_custom_object(GROUP, VERSION, ns, "cronjobs", cronjob("tokyo", timeZone="Asia/Tokyo"))
    with pytest.raises(ApiException) as caught:
        custom.patch_namespaced_custom_object(GROUP, VERSION, ns, "cronjobs", "tokyo",
                                              {"spec": {"schedule": "TZ=UTC */5 * * * *"}})
    assert message(caught.value) == ('admission webhook "validatecronjob.volcano.sh" denied the request: '
                                     "schedule should not contain TZ or CRON_TZ, TZ should only be set in the "
                                     "timeZone field")


def test_a_jobflow_is_admitted_or_denied_as_volcanos_webhook_does(webhook):
    """validatejobflow.volcano.sh through the API server: a target that names no flow is denied on CREATE,
    a cycle on UPDATE; a DAG is admitted."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    custom, ns = client.CustomObjectsApi(webhook["api"]), webhook["namespace"]
    flow = ("flow.volcano.sh", "v1alpha1")

    def jobflow(name, flows):
        return {"apiVersion": "flow.volcano.sh/v1alpha1", "kind": "JobFlow", "metadata": {"name": name},
                "spec": {"flows": flows}}

    undefined = [{"name": "a"}, {"name": "b", "dependsOn": {"targets": ["x"]}}]
    deadline = time.monotonic() + 30  # the API server picks webhook configurations up asynchronously
    while True:
        name = f"bad-{uuid.uuid4().hex[:5]}"
        try:
            custom.create_namespaced_custom_object(*flow, ns, "jobflows", jobflow(name, undefined))
        except ApiException as err:
            assert message(err) == ('admission webhook "validatejobflow.volcano.sh" denied the request: '
                                    "jobflow Flow is not DAG: vertex is not defined: x"), err.body
            break
        custom.delete_namespaced_custom_object(*flow, ns, "jobflows", name)
        assert time.monotonic() < deadline, "the API server never called the vcbus JobFlow webhook"
        time.sleep(0.3)
    custom.create_namespaced_custom_object(*flow, ns, "jobflows", jobflow("dag", [
        {"name": "a"}, {"name": "b", "dependsOn": {"targets": ["a"]}}]))
    with pytest.raises(ApiException) as caught:
        custom.patch_namespaced_custom_object(*flow, ns, "jobflows", "dag", {"spec": {"flows": [
            {"name": "a", "dependsOn": {"targets": ["b"]}}, {"name": "b", "dependsOn": {"targets": ["a"]}}]}})
    assert message(caught.value) == 'admission webhook "validatejobflow.volcano.sh" denied the request: jobflow Flow is not DAG'


def _kubectl_create(k8s, namespace, job, tmp_path):
    import subprocess

    import yaml

    from tests.test_deploy import kubectl_binary

    path = tmp_path / f"{job['metadata']['name']}.yaml"
    path.write_text(yaml.safe_dump({**job, "metadata": {**job["metadata"], "namespace": namespace}}))
    return subprocess.run([kubectl_binary(), "--kubeconfig", str(k8s.kubeconfig), "create", "-f", str(path)],
                          capture_output=True, text=True, timeout=120)


def test_kubectl_shows_the_webhooks_warning_for_a_port_volcano_admits(webhook, k8s, tmp_path):
    from kubernetes import client

    queue = f"q-{webhook['token']}"
    open_queue(webhook["api"], queue, webhook["token"])
    create_until_webhook_answers(client.CustomObjectsApi(webhook["api"]), webhook["namespace"], vcjob("ready", queue),
                                 denied=False)  # our webhooks answer from here on
    done = _kubectl_create(k8s, webhook["namespace"], vcjob("port", queue, plugins={"pytorch": ["--port=70000"]}),
                           tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ("Warning: pytorch plugin: -port=70000 is not a port (1-65535): Volcano admits the job as it "
                           "is, but the API server will refuse its pods (containerPort: Invalid value: 70000: must be "
                           "between 1 and 65535, inclusive)\n")


def test_a_wrong_type_is_refused_by_the_mutating_webhook_naming_field_and_type(webhook, k8s, tmp_path):
    from kubernetes import client

    queue = f"q-{webhook['token']}"
    open_queue(webhook["api"], queue, webhook["token"])
    create_until_webhook_answers(client.CustomObjectsApi(webhook["api"]), webhook["namespace"], vcjob("ready", queue),
                                 denied=False)
    job = vcjob("typed", queue)
    job["spec"]["tasks"][1]["replicas"] = "two"
    done = _kubectl_create(k8s, webhook["namespace"], job, tmp_path)
    assert done.returncode == 1
    assert ('admission webhook "mutatejob.volcano.sh" denied the request: Job.batch.volcano.sh "typed" is invalid: '
            'spec.tasks[1].replicas: Invalid value: "string": spec.tasks[1].replicas in body must be of type integer: '
            '"string"') in done.stderr
