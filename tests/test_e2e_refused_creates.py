"""A pod create the API server refused, then allows: Volcano's controller creates the pod at its
next sync, and so does vcbus (issue 31), on the real API server, nats-server and KWOK.

Volcano's syncJob (`pkg/controllers/job/job_controller_actions.go`) creates every pod of the job
that its informer cache does not hold, at every sync; a failed create is an error, recorded as the
job's Warning `FailedCreatePodReason` Event, and the job is synced again with backoff. So a pod
refused once is created as soon as the API server allows it. Two refusals a cluster gives:

- `policy`: an admission policy denies the pod (a ValidatingAdmissionPolicy, run inside the API
  server: 422 Invalid, as a webhook's denial), then the policy is lifted;
- `quota`: the namespace's ResourceQuota of 2 pods is full (403 Forbidden, "exceeded quota"; the
  pods are created at once, so any one of the three may be the one refused), then raised.
  The test API server runs no quota controller, so the test writes the quota's status the
  controller would (hard, used); the API server's quota admission counts each pod it admits.

A job of 3 pods with minAvailable 2 runs on 2 while the third is refused; then the refusal is
lifted and a pod of the job is touched (a label: one more sync, in Volcano as in vcbus), and the
test waits until vcbus has settled (every record decided, every command carried out, nothing
moving) and looks for the third pod.

vcbus: the actuator appends a REFUSED record for the refused CreatePod (a 403 of quota is a
refusal of the object, not a missing permission: `vcbus up` goes on), the decider takes the pod out
of its cache, records Volcano's `FailedCreate` Event and requeues the job's sync with Volcano's
backoff (docs/fidelity.md "The cache reflects our own writes at once"); the touch, or the requeue,
creates the pod once the API server allows it. The test also checks the FailedCreate Event, that
`vcbus up` is still running, and that `vcbus replay` of the bus's log ends at the live status.
"""

from __future__ import annotations

import uuid

import pytest
from kubernetes import client

from statemachines.admission.mutate import mutate_job
from tests import kwok_env
from tests.k8s_env import free_port
from tests.kwok_up import DEADLINE, Waiter, queue_open
from tests.test_e2e_cluster import UpProcess
from tests.test_faults_cluster import Cluster, replayed, up_command
from tests.test_kwok_gang import G, V, vcjob
from vcbus.k8s.watching import KubeApiError, api_request

pytestmark = [pytest.mark.k8s, pytest.mark.nats, pytest.mark.slow]

REFUSED = "worker-2"  # the pod name's end the refusal names


def probe_pod(ns: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"probe-{REFUSED}", "namespace": ns},
            "spec": {"containers": [{"name": "c", "image": "busybox:1.36",
                                     "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "1"}}}]}}


def admitted(api, ns: str) -> bool:
    """Whether the API server would create a pod of the refused name now (a dry run)."""
    try:
        api_request(api, "POST", f"/api/v1/namespaces/{ns}/pods", query={"dryRun": "All"}, body=probe_pod(ns))
    except KubeApiError as err:
        if err.status in (403, 422):
            return False
        raise
    return True


class PolicyRefusal:
    """A ValidatingAdmissionPolicy denying pods named `*-worker-2` in the namespace, and its binding."""

    def __init__(self, api, ns: str) -> None:
        self.api, self.ns = api, ns
        self.name = f"deny-{REFUSED}-{uuid.uuid4().hex[:6]}"
        self.base = "/apis/admissionregistration.k8s.io/v1"

    def impose(self) -> None:
        api_request(self.api, "POST", f"{self.base}/validatingadmissionpolicies", body={
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": self.name},
            "spec": {"failurePolicy": "Fail",
                     "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                             "operations": ["CREATE"], "resources": ["pods"]}]},
                     "validations": [{"expression": f"!object.metadata.name.endsWith('-{REFUSED}')",
                                      "message": f"pods named *-{REFUSED} are not allowed here (the test's policy)"}]}})
        api_request(self.api, "POST", f"{self.base}/validatingadmissionpolicybindings", body={
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": self.name},
            "spec": {"policyName": self.name, "validationActions": ["Deny"],
                     "matchResources": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": self.ns}}}}})

    def lift(self) -> None:
        for kind in ("validatingadmissionpolicybindings", "validatingadmissionpolicies"):
            try:
                api_request(self.api, "DELETE", f"{self.base}/{kind}/{self.name}")
            except KubeApiError as err:
                if err.status != 404:
                    raise


class QuotaRefusal:
    """The namespace's ResourceQuota of 2 pods, its status written as the quota controller would."""

    def __init__(self, api, ns: str) -> None:
        self.api, self.ns = api, ns
        self.path = f"/api/v1/namespaces/{ns}/resourcequotas/pods"

    def _status(self, hard: int) -> None:
        quota = api_request(self.api, "GET", self.path)
        used = ((quota.get("status") or {}).get("used") or {}).get("pods", "0")
        quota["status"] = {"hard": {"pods": str(hard)}, "used": {"pods": used}}
        api_request(self.api, "PUT", self.path + "/status", body=quota)

    def impose(self) -> None:
        api_request(self.api, "POST", f"/api/v1/namespaces/{self.ns}/resourcequotas", body={
            "apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "pods", "namespace": self.ns},
            "spec": {"hard": {"pods": "2"}}})
        self._status(2)

    def lift(self) -> None:
        quota = api_request(self.api, "GET", self.path)
        quota["spec"]["hard"]["pods"] = "10"
        api_request(self.api, "PUT", self.path, body=quota)
        self._status(10)


@pytest.mark.parametrize("refusal", ["policy", "quota"])
def test_a_refused_pod_is_created_once_the_api_server_allows_it(k8s, kwok, nats_server, k8s_namespace, tmp_path,
                                                                refusal):
    ns, api = k8s_namespace, k8s.api_client()
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    for node in core.list_node().items:  # other modules' fake nodes would take these pods
        core.delete_node(node.metadata.name)
    nodes = kwok_env.create_nodes(api, 3, cpu="2", memory="8Gi", pods="110", labels={"pool": "ab"},
                                  prefix=f"refused-{uuid.uuid4().hex[:4]}")
    metrics_addr = f"127.0.0.1:{free_port()}"
    up = UpProcess(up_command(k8s.kubeconfig, nats_server.url, ns, metrics_addr), tmp_path / "vcbus-up.log")
    refuse = (PolicyRefusal if refusal == "policy" else QuotaRefusal)(api, ns)
    wait = Waiter(kwok, up)
    cluster = Cluster(api, ns)
    name = "refused"
    try:
        kwok_env.wait_nodes_ready(api, nodes, timeout=DEADLINE, kwok=kwok)
        refuse.impose()
        if refusal == "policy":
            wait("the policy in force", lambda: not admitted(api, ns))
        up.start()
        wait("default queue Open", lambda: queue_open(custom, "default"))
        job = mutate_job(vcjob(name, ns, 3, "ab"))
        job["metadata"]["namespace"] = ns
        job["spec"]["minAvailable"] = 2
        job["spec"]["tasks"][0]["minAvailable"] = 2
        custom.create_namespaced_custom_object(G, V, ns, "jobs", job)
        wait("the job Running on its 2 allowed pods",
             lambda: cluster.phases([name]) == {name: "Running"}
             and sum(p["status"].get("phase") == "Running" for p in cluster.pods([name])) == 2)
        pods = sorted(p["metadata"]["name"] for p in cluster.pods([name]))
        assert len(pods) == 2 and (refusal != "policy" or f"{name}-{REFUSED}" not in pods), pods  # one refused
        refuse.lift()
        wait("the refusal lifted", lambda: admitted(api, ns))
        core.patch_namespaced_pod(pods[0], ns, {"metadata": {"labels": {"touched": "1"}}})  # one more sync
        # created at that sync, or, when the create it answers was refused just before the lift (its REFUSED
        # record comes after the touch), at the requeue that refusal set: Volcano's backoff, up to 82 s
        want = [f"{name}-worker-{i}" for i in range(3)]
        wait("the refused pod created after the refusal was lifted",
             lambda: sorted(p["metadata"]["name"] for p in cluster.pods([name])) == want)
        # and running, the job's status saying so: KWOK moves the new pod on after vcbus has caught up
        wait("the three pods Running in the job's status",
             lambda: sum(p["status"].get("phase") == "Running" for p in cluster.pods([name])) == 3
             and (cluster.job(name).get("status") or {}).get("running") == 3)
        wait("vcbus settled", lambda: cluster.settled(nats_server.url))
        created = sorted(p["metadata"]["name"] for p in cluster.pods([name]))
        assert created == want, f"after the refusal was lifted the job has only {created}"
        failed = [e for e in core.list_namespaced_event(ns).items
                  if e.reason == "FailedCreate" and e.involved_object.kind == "Job" and e.involved_object.name == name]
        assert failed and all(e.type == "Warning" and "Error creating pods: [failed to create pod" in e.message
                              for e in failed), [(e.type, e.message) for e in failed]
        assert up.proc.poll() is None, "vcbus up stopped"
        # the same log in, the same decisions out: the bus's log (its REFUSED and TIMER records) replayed
        assert replayed(nats_server.url, tmp_path, ns).get(name) == cluster.job(name)["status"]
    finally:
        up.stop()
        if refusal == "policy":  # cluster-wide objects; the quota goes with the test's namespace
            refuse.lift()
        kwok_env.delete_nodes(api, nodes)
