"""deploy/helm/vcbus: rendered by a real `helm template`, applied by a server-side dry run to a real API server.

helm is built from the Go module proxy by scripts/install-helm.sh (`make helm`,
part of `make test`); without it these tests skip with a message, or fail when
VCBUS_REQUIRE_K8S=1. For several value sets the chart renders, every object
passes the API server's schema (server-side apply, dry run, strict fields) and
the `restricted` Pod Security profile, and what the chart shares with the
kustomize base (deploy/vcbus/) is the base's: the controller's ClusterRole
rules, the NATS configuration and users. The chart's leader-election Role is
enough for vcbus's elector, run as the chart's service account.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import time
import uuid

import pytest
import yaml
from kubernetes import client

from tests.test_deploy import kubectl_binary, obj, render
from vcbus.k8s.leader import LeaderElector

REPO = pathlib.Path(__file__).resolve().parents[1]
CHART = REPO / "deploy" / "helm" / "vcbus"
CERT_MANAGER = ("Issuer", "Certificate")  # no cert-manager CRDs on the test API server

VALUE_SETS: dict[str, dict] = {
    "defaults": {},
    "observe-only, external NATS with credentials, webhook certificate from a Secret": {
        "controller": {"observeOnly": True, "replicas": 3, "logFormat": "text"},
        "nats": {"embedded": False, "external": {"url": "tls://nats.example:4222", "existingSecret": "nats-login",
                                                 "caKey": "ca.crt", "replicas": 3}},
        "webhook": {"certificate": {"mode": "secret", "secretName": "my-tls", "caBundle": "Q0E="}},
        "image": {"digest": "sha256:" + "ab" * 32},
    },
    "one replica without leader election, no metrics, no scheduler, NATS Secrets made by hand": {
        "controller": {"replicas": 1, "leaderElection": {"enabled": False}, "scheduler": {"enabled": False}},
        "metrics": {"enabled": False},
        "nats": {"generateSecrets": False, "replicas": 5, "storage": {"size": "50Gi", "storageClassName": "fast"}},
        "webhook": {"enabled": False},
    },
    "cert-manager, NATS encrypted at rest": {"webhook": {"certificate": {"mode": "cert-manager"}},
                                             "metrics": {"serviceMonitor": {}}, "nats": {"encryption": {"enabled": True}}},
}


@pytest.fixture(scope="module")
def helm() -> str:
    out = subprocess.run([str(REPO / "scripts" / "install-helm.sh"), "--check"], capture_output=True, text=True)
    if out.returncode != 0:
        message = "no helm: run `make helm` (scripts/install-helm.sh builds it from the Go module proxy)"
        if os.environ.get("VCBUS_REQUIRE_K8S", "") not in ("", "0", "false", "no"):
            pytest.fail(f"VCBUS_REQUIRE_K8S=1 but {message}", pytrace=False)
        pytest.skip(message)
    return out.stdout.strip().splitlines()[-1]


def template(helm: str, tmp_path: pathlib.Path, values: dict, namespace: str = "vcbus-system") -> list[dict]:
    path = tmp_path / f"values-{uuid.uuid4().hex[:6]}.yaml"
    path.write_text(yaml.safe_dump(values))
    out = subprocess.run([helm, "template", "vcbus", str(CHART), "-n", namespace, "-f", str(path)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def template_error(helm: str, tmp_path: pathlib.Path, values: dict) -> str:
    path = tmp_path / "bad-values.yaml"
    path.write_text(yaml.safe_dump(values))
    out = subprocess.run([helm, "template", "vcbus", str(CHART), "-f", str(path)], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode != 0
    return out.stderr


def controller_args(docs: list[dict]) -> list[str]:
    return obj(docs, "Deployment", "vcbus")["spec"]["template"]["spec"]["containers"][0]["args"]


def test_helm_lint_passes(helm):
    out = subprocess.run([helm, "lint", "--strict", str(CHART)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr


def test_defaults_run_two_leader_elected_replicas_with_probes_and_metrics(helm, tmp_path):
    docs = template(helm, tmp_path, {})
    deployment = obj(docs, "Deployment", "vcbus")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    args = container["args"]
    assert deployment["spec"]["replicas"] == 2
    assert args[:4] == ["up", "--cluster", "--nats", "tls://nats.vcbus-system:4222"]
    for flag, value in (("--metrics-addr", ":9464"), ("--log-format", "json"), ("--lease-namespace", "vcbus-system"),
                        ("--lease-name", "vcbus-controller"), ("--lease-duration", "15s")):
        assert args[args.index(flag) + 1] == value
    assert "--leader-elect" in args and "--observe-only" not in args and "--no-scheduler" not in args
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert container["image"] == "ghcr.io/vcbus/vcbus:0.1.0"
    role = obj(docs, "Role", "vcbus-leader-election")
    assert {r["verbs"][0] for r in role["rules"]} == {"create", "get"}
    assert obj(docs, "Service", "vcbus-metrics")["spec"]["ports"][0]["port"] == 9464


def test_what_the_chart_shares_with_the_kustomize_base_is_the_bases(helm, tmp_path):
    base, observe = render(), render("observe-only")
    chart = template(helm, tmp_path, {})
    assert obj(chart, "ClusterRole", "vcbus-controller")["rules"] == obj(base, "ClusterRole", "vcbus-controller")["rules"]
    observing = template(helm, tmp_path, {"controller": {"observeOnly": True}})
    assert obj(observing, "ClusterRole", "vcbus-controller")["rules"] == obj(
        observe, "ClusterRole", "vcbus-controller")["rules"]
    assert "--observe-only" in controller_args(observing)
    # Secrets vcbus did not create stay out of its reach: the same admission policy, for its account.
    ours_vap, base_vap = obj(chart, "ValidatingAdmissionPolicy", "vcbus-secrets"), obj(base, "ValidatingAdmissionPolicy",
                                                                                       "vcbus-secrets")
    assert ours_vap["spec"] == base_vap["spec"]
    # vcjobs only as CronJob runs: the same policy too.
    assert obj(chart, "ValidatingAdmissionPolicy", "vcbus-cronjob-and-jobflow-vcjobs")["spec"] == obj(
        base, "ValidatingAdmissionPolicy", "vcbus-cronjob-and-jobflow-vcjobs")["spec"]
    assert "ValidatingAdmissionPolicy" not in {d["kind"] for d in observing}
    # The NATS cluster: the same configuration (routes, TLS, users and their permissions) and server.
    assert obj(chart, "ConfigMap", "nats-config")["data"] == obj(base, "ConfigMap", "nats-config")["data"], (
        "deploy/helm/vcbus/files/ differ from deploy/vcbus/base/nats.yaml's ConfigMap: run "
        "scripts/helm-nats-files.py")
    ours, theirs = obj(chart, "StatefulSet", "nats"), obj(base, "StatefulSet", "nats")
    assert ours["spec"]["template"]["spec"]["containers"][0]["env"] == theirs["spec"]["template"]["spec"]["containers"][0]["env"]
    assert ours["spec"]["template"]["spec"]["containers"][0]["image"] == theirs["spec"]["template"]["spec"]["containers"][0]["image"]
    # The controller talks to it as the base's does.
    env = {e["name"]: e for e in obj(chart, "Deployment", "vcbus")["spec"]["template"]["spec"]["containers"][0]["env"]}
    base_env = {e["name"]: e for e in obj(base, "Deployment", "vcbus")["spec"]["template"]["spec"]["containers"][0]["env"]}
    base_env.pop("VCBUS_CE_SOURCE")  # a value to set per cluster in both (test_the_cloudevents_source_is_one_per_cluster)
    assert {k: env[k] for k in base_env} == base_env
    # Run alike: leader election on the same Lease with the same rights, probes on the metrics port.
    assert obj(chart, "Role", "vcbus-leader-election")["rules"] == obj(base, "Role", "vcbus-leader-election")["rules"]
    base_dep, chart_dep = obj(base, "Deployment", "vcbus"), obj(chart, "Deployment", "vcbus")
    assert base_dep["spec"]["replicas"] == chart_dep["spec"]["replicas"] == 2
    assert "strategy" not in base_dep["spec"] and "strategy" not in chart_dep["spec"]
    base_c, chart_c = base_dep["spec"]["template"]["spec"]["containers"][0], chart_dep["spec"]["template"]["spec"]["containers"][0]
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert base_c[probe] == chart_c[probe], probe
    assert base_c["ports"] == chart_c["ports"]
    for flag in ("--leader-elect", "--metrics-addr", "--log-format"):
        assert flag in base_c["args"] and flag in chart_c["args"], flag
    # Five NATS servers: five routes.
    five = template(helm, tmp_path, {"nats": {"replicas": 5}})
    assert obj(five, "ConfigMap", "nats-config")["data"]["nats.conf"].count("nats-route://") == 5


def test_encryption_at_rest_is_the_encrypted_overlays(helm, tmp_path):
    overlay = render("encrypted")
    chart = template(helm, tmp_path, {"nats": {"encryption": {"enabled": True}}})
    ours, theirs = (obj(d, "ConfigMap", "nats-config")["data"] for d in (chart, overlay))
    assert {k: v.strip() for k, v in ours.items()} == {k: v.strip() for k, v in theirs.items()}  # (the overlay's ends without \n)
    ours, theirs = (obj(d, "StatefulSet", "nats")["spec"]["template"]["spec"]["containers"][0]["env"] for d in (chart, overlay))
    assert ours == theirs
    assert len(obj(chart, "Secret", "nats-encryption")["data"]["key"]) > 40
    plain = template(helm, tmp_path, {})
    assert "nats-encryption" not in {d["metadata"]["name"] for d in plain if d["kind"] == "Secret"}


def test_the_cloudevents_source_is_one_per_cluster(helm, tmp_path):
    def source(values: dict) -> str | None:
        container = obj(template(helm, tmp_path, values), "Deployment", "vcbus")["spec"]["template"]["spec"]["containers"][0]
        return next((e["value"] for e in container["env"] if e["name"] == "VCBUS_CE_SOURCE"), None)

    assert source({"clusterName": "prod-eu"}) == "/vcbus/clusters/prod-eu"
    assert source({"clusterName": "prod-eu", "cloudEventsSource": "urn:acme:prod"}) == "urn:acme:prod"
    assert source({}) is None  # `helm template` cannot look kube-system up: vcbus's default, and NOTES.txt says so


def test_generated_secrets_are_what_make_secrets_makes(helm, tmp_path):
    docs = template(helm, tmp_path, {})
    users = obj(docs, "Secret", "nats-users")["data"]
    assert sorted(users) == sorted(["setup", "bridge", "decider", "projector", "scheduler", "actuator", "subscriber",
                                    "admin"])
    assert len(set(users.values())) == len(users)  # one password each
    assert sorted(obj(docs, "Secret", "nats-tls")["data"]) == ["ca.crt", "tls.crt", "tls.key"]
    hook = obj(docs, "MutatingWebhookConfiguration", "vcbus-webhook-mutating")["webhooks"][0]
    assert hook["clientConfig"]["caBundle"] == obj(docs, "Secret", "vcbus-webhook-tls")["data"]["ca.crt"]


def test_bad_values_are_refused_with_a_reason(helm, tmp_path):
    err = template_error(helm, tmp_path, {"controller": {"replicas": 3, "leaderElection": {"enabled": False}}})
    assert "controller.replicas > 1 needs controller.leaderElection.enabled" in err
    err = template_error(helm, tmp_path, {"webhook": {"certificate": {"mode": "acme"}}})
    assert 'webhook.certificate.mode "acme"' in err
    err = template_error(helm, tmp_path, {"nats": {"embedded": False}})
    assert "nats.external.url is required" in err


@pytest.mark.k8s
@pytest.mark.parametrize("name", sorted(VALUE_SETS))
def test_every_value_set_passes_a_server_side_dry_run_and_the_restricted_profile(helm, k8s, tmp_path, name):
    namespace = f"helm-{uuid.uuid4().hex[:8]}"
    client.CoreV1Api(k8s.api_client()).create_namespace(
        {"metadata": {"name": namespace, "labels": {"pod-security.kubernetes.io/warn": "restricted"}}})
    docs = template(helm, tmp_path, VALUE_SETS[name], namespace=namespace)
    kinds = {d["kind"] for d in docs}
    if name.startswith("cert-manager"):
        assert set(CERT_MANAGER) <= kinds and "Secret" not in {d["kind"] for d in docs if "webhook" in d["metadata"]["name"]}
    applied = [d for d in docs if d["kind"] not in CERT_MANAGER]
    manifest = tmp_path / "chart.yaml"
    manifest.write_text(yaml.safe_dump_all(applied))
    out = subprocess.run(
        # --force-conflicts: the chart's cluster-scoped objects (ClusterRole(Binding) vcbus-controller, the
        # admission policy) may exist already, made by tests/test_deploy.py in the same session; a dry run
        # changes nothing either way
        [kubectl_binary(), "--kubeconfig", str(k8s.kubeconfig), "apply", "--server-side", "--dry-run=server",
         "--force-conflicts", "--field-manager=helm-chart-test", "-f", str(manifest)],
        capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("(server dry run)") == len(applied)
    assert "restricted" not in out.stderr, out.stderr


@pytest.mark.k8s
def test_the_leader_election_role_is_enough_for_the_elector(helm, k8s, tmp_path):
    namespace = f"helm-le-{uuid.uuid4().hex[:6]}"
    admin = k8s.api_client()
    client.CoreV1Api(admin).create_namespace({"metadata": {"name": namespace}})
    docs = template(helm, tmp_path, {}, namespace=namespace)
    rbac = [d for d in docs if d["kind"] in ("ServiceAccount", "Role", "RoleBinding")]
    manifest = tmp_path / "rbac.yaml"
    manifest.write_text(yaml.safe_dump_all(rbac))
    out = subprocess.run([kubectl_binary(), "--kubeconfig", str(k8s.kubeconfig), "apply", "--server-side",
                          "-f", str(manifest)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    sa = k8s.api_client()
    sa.set_default_header("Impersonate-User", f"system:serviceaccount:{namespace}:vcbus")
    elector = LeaderElector(sa, namespace=namespace, name="vcbus-controller", identity="pod-0", lease_duration=5)
    deadline = time.monotonic() + 30  # RBAC reaches the authorizer through an informer
    while True:
        try:
            assert elector.try_acquire_or_renew() is True
            break
        except client.ApiException as err:
            assert err.status == 403 and time.monotonic() < deadline, err
            time.sleep(0.2)
    assert elector.try_acquire_or_renew() is True  # a renewal: get + update of that one Lease
    other = LeaderElector(sa, namespace=namespace, name="another-lease", identity="pod-0", lease_duration=5)
    with pytest.raises(client.ApiException) as denied:
        other.try_acquire_or_renew()  # reading another Lease is not allowed
    assert denied.value.status == 403
