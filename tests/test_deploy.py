"""deploy/vcbus/: the manifests parse, and the controller's role is exactly what its code needs.

On a real API server (RBAC on), as the service account `vcbus-system:vcbus` (impersonated):
the watch bridge lists and watches every resource it watches, and the actuator applies every
command type - nothing is refused; what the controller never does is refused. The observe-only
role lets the bridge watch and nothing else. A second API server on the same etcd, with the
OwnerReferencesPermissionEnforcement admission plugin, shows why `jobs/finalizers` is in the
role. The Deployment and the NATS StatefulSet pass the API's schema (dry run, strict fields)
and the `restricted` Pod Security profile, and so does the webhook's Deployment. The Lease Role
of leader election lets vcbus's elector, as the service account, take and renew its one Lease
and nothing more.
"""

from __future__ import annotations

import copy
import json
import os
import pathlib
import shutil
import subprocess
import time
import tomllib
import urllib.error
import urllib.request
import uuid

import msgspec
import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from statemachines import outputs as o
from statemachines.admission.mutate import mutate_job
from statemachines.manifests.renderer import Renderer
from statemachines.model.cronjob import CronJobStatus, ObjectReference
from statemachines.model.jobflow import FlowState, JobFlowStatus, JobTemplateStatus
from statemachines.model.status import initial_status
from tests import k8s_env
from tests.test_actuator_workload_podgroups import decided, live, pod_manifest
from vcbus.k8s import bridge
from vcbus.k8s.actuator import (
    CMD_GROUP,
    CMD_PLURAL,
    CMD_VERSION,
    JOB_GROUP,
    JOB_PLURAL,
    JOB_VERSION,
    PG_GROUP,
    PG_PLURAL,
    PG_VERSION,
    Actuator,
)
from vcbus.k8s.watching import RESOURCES, ResourceWatcher

pytestmark = pytest.mark.k8s

REPO = pathlib.Path(__file__).resolve().parents[1]
DEPLOY = REPO / "deploy" / "vcbus"
SEED = REPO / "examples" / "resnet-dist-train.yaml"
NS = "vcbus-system"
SA_USER = f"system:serviceaccount:{NS}:vcbus"
KUSTOMIZATION = "kustomization.yaml"
RBAC_KINDS = ("Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ValidatingAdmissionPolicy",
              "ValidatingAdmissionPolicyBinding", "Role", "RoleBinding")


# --------------------------------------------------------------------------- the manifests


def _docs(path: pathlib.Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]


def render(overlay: str = "") -> list[dict]:
    """What `kubectl kustomize deploy/vcbus[/overlay]` makes, for the patch kinds these overlays use:
    resources (files and directories), JSON 6902 patches with a target, and whole-list patches of a
    ClusterRole's rules (a strategic merge patch replaces `rules`: it has no merge key)."""

    def build(d: pathlib.Path) -> list[dict]:
        k = yaml.safe_load((d / KUSTOMIZATION).read_text())
        objs: list[dict] = []
        for res in k.get("resources") or []:
            p = (d / res).resolve()
            objs.extend(build(p) if p.is_dir() else _docs(p))
        for patch in k.get("patches") or []:
            if "path" in patch:
                for body in _docs(d / patch["path"]):
                    assert body["kind"] == "ClusterRole", "only ClusterRole rules patches are rendered here"
                    obj(objs, body["kind"], body["metadata"]["name"])["rules"] = body["rules"]
                continue
            t = patch["target"]
            target = obj(objs, t["kind"], t["name"])
            for op in yaml.safe_load(patch["patch"]):
                assert op["op"] in ("add", "replace"), "only adds and replaces are rendered here"
                assert op["op"] == "replace" or op["path"].endswith("/-"), "only list appends are rendered here"
                node = target
                *parents, last = op["path"].strip("/").split("/")
                for part in parents:
                    node = node[int(part)] if isinstance(node, list) else node[part]
                if op["op"] == "add":
                    node.append(op["value"])
                else:
                    node[int(last) if isinstance(node, list) else last] = op["value"]
        return objs

    return copy.deepcopy(build(DEPLOY / overlay if overlay else DEPLOY))


def obj(objs: list[dict], kind: str, name: str) -> dict:
    return next(x for x in objs if x["kind"] == kind and x["metadata"]["name"] == name)


def test_every_manifest_parses_and_every_kustomization_lists_files_that_exist():
    listed: set[pathlib.Path] = set()
    kustomizations = sorted(DEPLOY.rglob(KUSTOMIZATION))
    assert {p.parent.relative_to(DEPLOY).as_posix() for p in kustomizations} == {
        ".", "base", "observe-only", "standalone", "encrypted"}
    for kfile in kustomizations:
        k = yaml.safe_load(kfile.read_text())
        assert k["kind"] == "Kustomization", kfile
        for res in k.get("resources") or []:
            p = (kfile.parent / res).resolve()
            assert p.exists(), f"{kfile}: resource {res} does not exist"
            assert p.is_file() or (p / KUSTOMIZATION).is_file(), f"{kfile}: {res} is neither a file nor a kustomization"
            assert p.is_relative_to(DEPLOY), f"{kfile}: {res} is outside deploy/vcbus (kustomize refuses it)"
            if p.is_file():
                assert p.is_relative_to(kfile.parent), f"{kfile}: file {res} is not in or below its kustomization"
                listed.add(p)
        for patch in k.get("patches") or []:
            if "path" in patch:
                p = (kfile.parent / patch["path"]).resolve()
                assert p.is_file() and p.is_relative_to(kfile.parent), f"{kfile}: patch {patch['path']}"
                listed.add(p)
            else:
                assert yaml.safe_load(patch["patch"]), f"{kfile}: empty inline patch"
    for path in sorted(DEPLOY.rglob("*.yaml")):
        docs = _docs(path)
        assert docs, f"{path} is empty"
        if path.name == KUSTOMIZATION:
            continue
        assert path in listed, f"{path} is listed by no kustomization"
        for d in docs:
            assert d.get("apiVersion") and d.get("kind") and d["metadata"].get("name"), f"{path}: {d}"

    full, observe = render(), render("observe-only")
    assert [(x["kind"], x["metadata"]["name"]) for x in full] == [(x["kind"], x["metadata"]["name"]) for x in observe]
    dep = obj(full, "Deployment", "vcbus")
    # Two replicas, one leader (the Lease of leader-election.yaml), as the Helm chart's defaults.
    assert dep["spec"]["replicas"] == 2 and "strategy" not in dep["spec"]
    container = dep["spec"]["template"]["spec"]["containers"][0]
    assert container["args"] == ["up", "--cluster", "--no-scheduler", "--nats", "tls://nats.vcbus-system:4222",
                                 "--metrics-addr", "0.0.0.0:9464", "--log-format", "json", "--leader-elect"]
    # Probes on the named metrics port: the address --metrics-addr serves on.
    assert container["ports"] == [{"name": "metrics", "containerPort": 9464}]
    for probe, path in (("startupProbe", "/healthz"), ("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        assert container[probe]["httpGet"] == {"path": path, "port": "metrics"}, probe
    role = obj(full, "Role", "vcbus-leader-election")
    assert role["metadata"]["namespace"] == NS and {r["resources"][0] for r in role["rules"]} == {"leases"}
    assert obj(full, "RoleBinding", "vcbus-leader-election")["subjects"] == [
        {"kind": "ServiceAccount", "name": "vcbus", "namespace": NS}]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert dep["spec"]["template"]["spec"]["securityContext"]["runAsNonRoot"] is True
    observe_args = obj(observe, "Deployment", "vcbus")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert observe_args == [*container["args"], "--observe-only"]
    standalone = render("standalone")
    assert [(x["kind"], x["metadata"]["name"]) for x in standalone] == [(x["kind"], x["metadata"]["name"]) for x in full]
    standalone_args = obj(standalone, "Deployment", "vcbus")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert standalone_args == [a for a in container["args"] if a != "--no-scheduler"]  # the vcbus scheduler runs
    nats_conf = obj(full, "ConfigMap", "nats-config")["data"]["nats.conf"]
    assert "sync_interval: always" in nats_conf
    # a 3-server cluster, TLS everywhere, authorization, streams at 3 replicas (tests/test_deploy_nats.py
    # runs these files on real nats-servers)
    assert all(f"nats-route://nats-{i}.nats.vcbus-system.svc:6222" in nats_conf for i in range(3))
    assert nats_conf.count("tls {") == 2 and "include ./auth.conf" in nats_conf
    env = {e["name"]: e for e in container["env"]}
    assert env["VCBUS_REPLICAS"]["value"] == "3" and env["NATS_USER"]["value"] == "setup"
    assert env["VCBUS_CE_SOURCE"]["value"].startswith("/vcbus/clusters/")  # one per cluster: set in an overlay
    assert env["NATS_PASSWORD"]["valueFrom"]["secretKeyRef"] == {"name": "nats-users", "key": "setup"}
    encrypted = render("encrypted")
    assert [(x["kind"], x["metadata"]["name"]) for x in encrypted] == [(x["kind"], x["metadata"]["name"]) for x in full]
    assert "cipher: chachapoly" in obj(encrypted, "ConfigMap", "nats-config")["data"]["encryption.conf"]
    sts = obj(full, "StatefulSet", "nats")
    assert sts["spec"]["replicas"] == 3
    assert sts["spec"]["template"]["spec"]["containers"][0]["image"] == "nats:2.11-alpine"
    assert obj(full, "Service", "nats")["spec"]["clusterIP"] == "None"
    observe_verbs = {v for rule in obj(observe, "ClusterRole", "vcbus-controller")["rules"] for v in rule["verbs"]}
    assert observe_verbs == {"list", "watch"}


def kubectl_binary() -> str:
    """The kubectl scripts/envtest.sh builds beside kube-apiserver (`make test` builds it), else PATH's."""
    assets = k8s_env.asset_dir()
    if assets is not None and os.access(assets / "kubectl", os.X_OK):
        return str(assets / "kubectl")
    found = shutil.which("kubectl")
    assert found, "no kubectl: run `make envtest` (it builds kubectl) or put one on PATH"
    return found


def test_kustomize_builds_every_variant_as_this_test_reads_them():
    for overlay in ("", "observe-only", "standalone", "encrypted"):
        out = subprocess.run(
            [kubectl_binary(), "kustomize", str(DEPLOY / overlay if overlay else DEPLOY)],
            capture_output=True, text=True, timeout=60,
        )
        assert out.returncode == 0, out.stderr
        built = {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(out.stdout) if d}
        ours = {(d["kind"], d["metadata"]["name"]): d for d in render(overlay)}
        assert built == ours, overlay or "base"


def test_the_dockerfile_copies_what_pyproject_packages():
    """No Docker engine in the test environment: at least the image cannot miss a package."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    dockerfile = (REPO / "Dockerfile").read_text()
    copied = {part for line in dockerfile.splitlines() if line.startswith("COPY ") for part in line.split()[1:-1]}
    packages = {p.rstrip("*") for p in project["tool"]["setuptools"]["packages"]["find"]["include"]}
    assert packages | {"pyproject.toml", project["project"]["readme"]} <= copied
    assert "vcbus" in project["project"]["scripts"] and 'ENTRYPOINT ["vcbus"]' in dockerfile
    # The base is python:3.11-slim pinned by digest (tests/test_image.py checks the pins).
    assert "ARG PYTHON_IMAGE=python:3.11-slim@sha256:" in dockerfile and "FROM ${PYTHON_IMAGE}" in dockerfile
    assert "\nUSER 10001" in dockerfile


# --------------------------------------------------------------------------- API server helpers


def _create(fn, *args, **kw):
    """Create; an object left by an earlier run of the session is replaced or kept."""
    try:
        return fn(*args, **kw)
    except ApiException as err:
        if err.status != 409:
            raise
        return None


def _apply_rbac(api: client.ApiClient, objs: list[dict], *, role_name: str | None = None,
                sa_name: str | None = None) -> None:
    """Namespace, ServiceAccount, ClusterRole and ClusterRoleBinding of `objs` (optionally renamed)."""
    core, rbac = client.CoreV1Api(api), client.RbacAuthorizationV1Api(api)
    admission = client.AdmissionregistrationV1Api(api)
    for d in objs:
        d = copy.deepcopy(d)
        kind = d["kind"]
        if kind == "Namespace":
            _create(core.create_namespace, d)
        elif kind == "ServiceAccount":
            if sa_name:
                d["metadata"]["name"] = sa_name
            _create(core.create_namespaced_service_account, d["metadata"]["namespace"], d)
        elif kind == "ClusterRole":
            if role_name:
                d["metadata"]["name"] = role_name
            if _create(rbac.create_cluster_role, d) is None:
                rbac.replace_cluster_role(d["metadata"]["name"], d)
        elif kind == "ValidatingAdmissionPolicy":
            if _create(admission.create_validating_admission_policy, d) is None:
                d["metadata"]["resourceVersion"] = admission.read_validating_admission_policy(
                    d["metadata"]["name"]).metadata.resource_version
                admission.replace_validating_admission_policy(d["metadata"]["name"], d)
        elif kind == "ValidatingAdmissionPolicyBinding":
            _create(admission.create_validating_admission_policy_binding, d)
        elif kind == "ClusterRoleBinding":
            if role_name:
                d["metadata"]["name"] = role_name
                d["roleRef"]["name"] = role_name
            if sa_name:
                d["subjects"][0]["name"] = sa_name
            if _create(rbac.create_cluster_role_binding, d) is None:
                rbac.replace_cluster_role_binding(d["metadata"]["name"], d)
        elif kind == "Role":
            if _create(rbac.create_namespaced_role, d["metadata"]["namespace"], d) is None:
                rbac.replace_namespaced_role(d["metadata"]["name"], d["metadata"]["namespace"], d)
        elif kind == "RoleBinding":
            if sa_name:
                d["subjects"][0]["name"] = sa_name
            if _create(rbac.create_namespaced_role_binding, d["metadata"]["namespace"], d) is None:
                rbac.replace_namespaced_role_binding(d["metadata"]["name"], d["metadata"]["namespace"], d)


def _as(k8s, user: str) -> client.ApiClient:
    """An ApiClient that impersonates `user` (the test admin is system:masters: it may)."""
    api = k8s.api_client()
    api.set_default_header("Impersonate-User", user)
    return api


def _wait_for_rules(api: client.ApiClient, rules: list[dict], timeout: float = 15.0) -> None:
    """Until the authorizer (informer-fed) allows every verb of `rules` to the impersonated user."""
    authz = client.AuthorizationV1Api(api)
    checks = [
        (group, res, verb)
        for rule in rules
        for group in rule["apiGroups"]
        for res in rule["resources"]
        for verb in rule["verbs"]
    ]
    deadline = time.monotonic() + timeout
    while checks:
        group, res, verb = checks[0]
        resource, _, sub = res.partition("/")
        review = client.V1SelfSubjectAccessReview(spec=client.V1SelfSubjectAccessReviewSpec(
            resource_attributes=client.V1ResourceAttributes(group=group, resource=resource, subresource=sub or None,
                                                            verb=verb, namespace="any")))
        if authz.create_self_subject_access_review(review).status.allowed:
            checks.pop(0)
            continue
        assert time.monotonic() < deadline, f"RBAC never allowed {verb} {res}.{group or 'core'}"
        time.sleep(0.1)


def _refused_by_policy(create, message: str, timeout: float = 30.0) -> None:
    """`create(name)` is refused by a ValidatingAdmissionPolicy (422 with `message`). The policy reaches
    the admission chain through an informer, so the first tries may pass: each tries a new name."""
    deadline = time.monotonic() + timeout
    for attempt in range(10_000):
        try:
            create(f"x-{attempt}")
        except ApiException as err:
            assert err.status == 422 and message in err.body, err
            return
        assert time.monotonic() < deadline, "the admission policy never refused it"
        time.sleep(0.2)


def _forbidden(fn, *args, **kw) -> ApiException:
    with pytest.raises(ApiException) as exc:
        fn(*args, **kw)
    assert exc.value.status == 403, exc.value
    return exc.value


@pytest.fixture(scope="module")
def deployed(k8s):
    """The base's Namespace, ServiceAccount, ClusterRole and ClusterRoleBinding, on the API server."""
    objs = render()
    admin = k8s.api_client()
    _apply_rbac(admin, [d for d in objs if d["kind"] in RBAC_KINDS])
    sa = _as(k8s, SA_USER)
    _wait_for_rules(sa, obj(objs, "ClusterRole", "vcbus-controller")["rules"])
    return admin, sa, objs


def _seed_job(custom: client.CustomObjectsApi, ns: str, name: str = "resnet-dist-train") -> dict:
    """The seed vcjob as the webhook leaves it, with every plugin whose objects need a verb:
    svc (ConfigMap, Service, NetworkPolicy), ssh (Secret), status-mounter (ConfigMap)."""
    job = yaml.safe_load(SEED.read_text())
    job["spec"]["plugins"].update({"ssh": [], "svc": []})
    job = mutate_job(job)
    job["metadata"].update(name=name, namespace=ns)
    return custom.create_namespaced_custom_object(JOB_GROUP, JOB_VERSION, ns, JOB_PLURAL, job)


def _one_of_each(admin: client.ApiClient, ns: str) -> None:
    """An object of every resource the bridge watches, so each watcher's list has something."""
    custom, core = client.CustomObjectsApi(admin), client.CoreV1Api(admin)
    job = _seed_job(custom, ns, "watched")
    owner = {"apiVersion": f"{JOB_GROUP}/{JOB_VERSION}", "kind": "Job", "name": "watched",
             "uid": job["metadata"]["uid"]}
    core.create_namespaced_pod(ns, {"metadata": {"name": "watched-t-0", "labels": {"volcano.sh/job-name": "watched"}},
                                    "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    custom.create_namespaced_custom_object(PG_GROUP, PG_VERSION, ns, PG_PLURAL, {
        "apiVersion": f"{PG_GROUP}/{PG_VERSION}", "kind": "PodGroup",
        "metadata": {"name": "watched", "ownerReferences": [owner]}, "spec": {"minMember": 1}})
    custom.create_cluster_custom_object(PG_GROUP, PG_VERSION, "queues", {
        "apiVersion": f"{PG_GROUP}/{PG_VERSION}", "kind": "Queue", "metadata": {"name": ns}, "spec": {"weight": 1}})
    custom.create_namespaced_custom_object(CMD_GROUP, CMD_VERSION, ns, CMD_PLURAL, _command("watched", owner))
    _node(core, ns)
    client.SchedulingV1Api(admin).create_priority_class({"metadata": {"name": ns}, "value": 1000})
    _CLUSTER_SCOPED.append(("PriorityClass", ns))
    # the scheduler's volume facts: a claim, a volume and a class
    client.StorageV1Api(admin).create_storage_class({"metadata": {"name": ns}, "provisioner": "example.com/none"})
    _CLUSTER_SCOPED.append(("StorageClass", ns))
    core.create_persistent_volume({"metadata": {"name": ns}, "spec": {
        "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/tmp/x"}}})
    _CLUSTER_SCOPED.append(("PersistentVolume", ns))
    core.create_namespaced_persistent_volume_claim(ns, {"metadata": {"name": "watched"}, "spec": {
        "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}})
    # the nodes' volume limits and attached volumes (NodeVolumeLimits)
    storage = client.StorageV1Api(admin)
    storage.create_csi_node({"metadata": {"name": ns}, "spec": {"drivers": [
        {"name": "csi.example.com", "nodeID": ns, "allocatable": {"count": 2}}]}})
    _CLUSTER_SCOPED.append(("CSINode", ns))
    storage.create_volume_attachment({"metadata": {"name": ns}, "spec": {
        "attacher": "csi.example.com", "nodeName": ns, "source": {"persistentVolumeName": ns}}})
    _CLUSTER_SCOPED.append(("VolumeAttachment", ns))
    # the selectors of the scheduler's system-default spreading: a Service and a ReplicationController
    core.create_namespaced_service(ns, {"metadata": {"name": "watched"}, "spec": {
        "selector": {"app": "watched"}, "ports": [{"port": 80}]}})
    core.create_namespaced_replication_controller(ns, {"metadata": {"name": "watched"}, "spec": {
        "replicas": 0, "selector": {"app": "watched"}, "template": {"metadata": {"labels": {"app": "watched"}},
                                                                    "spec": {"containers": [{"name": "c",
                                                                                             "image": "busybox"}]}}}})
    apps = client.AppsV1Api(admin)  # a pod's owners (no controller-manager here: only their objects)
    selector = {"matchLabels": {"app": "watched"}}
    template = {"metadata": {"labels": {"app": "watched"}},
                "spec": {"schedulerName": "volcano", "containers": [{"name": "c", "image": "busybox"}]}}
    apps.create_namespaced_replica_set(ns, {"metadata": {"name": "watched"}, "spec": {
        "replicas": 0, "selector": selector, "template": template}})
    apps.create_namespaced_stateful_set(ns, {"metadata": {"name": "watched"}, "spec": {
        "replicas": 0, "serviceName": "watched", "selector": selector, "template": template}})
    apps.create_namespaced_daemon_set(ns, {"metadata": {"name": "watched"}, "spec": {
        "selector": selector, "template": template}})
    client.BatchV1Api(admin).create_namespaced_job(ns, {"metadata": {"name": "watched"}, "spec": {  # batch/v1
        "suspend": True, "template": {"spec": {**template["spec"], "restartPolicy": "Never"}}}})
    custom.create_namespaced_custom_object(JOB_GROUP, JOB_VERSION, ns, CRONJOBS, _cronjob("watched", job))
    custom.create_namespaced_custom_object(FLOW_GROUP, FLOW_VERSION, ns, "jobtemplates", _jobtemplate("watched", job))
    custom.create_namespaced_custom_object(FLOW_GROUP, FLOW_VERSION, ns, "jobflows", _jobflow("watched"))


_CLUSTER_SCOPED: list[tuple[str, str]] = []  # (kind, name) made here, deleted after the module
CRONJOBS = "cronjobs"


def _cronjob(name: str, job: dict) -> dict:
    """A suspended CronJob whose runs would be `job` (a vcjob as the API server returned it)."""
    return {"apiVersion": f"{JOB_GROUP}/{JOB_VERSION}", "kind": "CronJob", "metadata": {"name": name},
            "spec": {"schedule": "0 0 1 1 *", "suspend": True, "jobTemplate": {"spec": job["spec"]}}}


FLOW_GROUP, FLOW_VERSION = "flow.volcano.sh", "v1alpha1"


def _jobtemplate(name: str, job: dict) -> dict:
    return {"apiVersion": f"{FLOW_GROUP}/{FLOW_VERSION}", "kind": "JobTemplate", "metadata": {"name": name},
            "spec": job["spec"]}


def _jobflow(name: str, *flows: str) -> dict:
    return {"apiVersion": f"{FLOW_GROUP}/{FLOW_VERSION}", "kind": "JobFlow", "metadata": {"name": name},
            "spec": {"flows": [{"name": f} for f in flows]}}


def _node(core: client.CoreV1Api, name: str) -> str:
    """A Node (no kubelet: only its object), for the bridge to list and a BindPod to target."""
    _create(core.create_node, {"metadata": {"name": name}})
    _CLUSTER_SCOPED.append(("Node", name))
    return name


@pytest.fixture(scope="module", autouse=True)
def _delete_nodes_and_priority_classes(k8s):
    """Other tests schedule onto whatever nodes exist: leave none behind."""
    yield
    admin = k8s.api_client()
    delete = {"Node": client.CoreV1Api(admin).delete_node,
              "PriorityClass": client.SchedulingV1Api(admin).delete_priority_class,
              "StorageClass": client.StorageV1Api(admin).delete_storage_class,
              "CSINode": client.StorageV1Api(admin).delete_csi_node,
              "VolumeAttachment": client.StorageV1Api(admin).delete_volume_attachment,
              "PersistentVolume": client.CoreV1Api(admin).delete_persistent_volume}
    for kind, name in _CLUSTER_SCOPED:
        try:
            delete[kind](name)
        except ApiException as err:
            if err.status != 404:
                raise


def _command(name: str, target: dict) -> dict:
    return {"apiVersion": f"{CMD_GROUP}/{CMD_VERSION}", "kind": "Command", "metadata": {"name": name},
            "action": "AbortJob", "target": target}


def _watch_every_bridge_resource(api: client.ApiClient, namespace: str | None = None) -> dict[str, dict]:
    """Start a ResourceWatcher per bridge resource; each must list, then establish its watch."""
    watchers = {r: ResourceWatcher(api, r, namespace=namespace, backoff_max=0.5).start() for r in bridge.RESOURCES}
    try:
        first = {}
        for resource, w in watchers.items():
            try:
                first[resource] = w.next_event(timeout=10)
            except TimeoutError:
                pytest.fail(f"no {resource} event as {SA_USER}: {w.last_error}")
            assert w.connected.wait(10), f"{resource}: no watch established: {w.last_error}"
            assert w.last_error is None, f"{resource}: {w.last_error}"
        return first
    finally:
        for w in watchers.values():
            w.stop(timeout=5)


# --------------------------------------------------------------------------- the role, used


def test_the_bridge_lists_and_watches_every_resource_it_watches_as_the_service_account(k8s, deployed):
    admin, sa, _ = deployed
    ns = k8s.create_namespace(f"deploy-watch-{uuid.uuid4().hex[:6]}")
    _one_of_each(admin, ns)
    first = _watch_every_bridge_resource(sa)  # all namespaces, as `vcbus up --cluster`
    assert {r: e["object"]["kind"] for r, e in first.items()} == {r: RESOURCES[r].kind for r in bridge.RESOURCES}
    assert all(e["type"] == "ADDED" for e in first.values())
    _watch_every_bridge_resource(sa, namespace=ns)  # and `--namespace NS`


def test_the_actuator_applies_every_command_type_as_the_service_account(k8s, deployed):
    admin, sa, _ = deployed
    ns = k8s.create_namespace(f"deploy-act-{uuid.uuid4().hex[:6]}")
    custom, core = client.CustomObjectsApi(admin), client.CoreV1Api(admin)
    job = _seed_job(custom, ns)
    uid, key = job["metadata"]["uid"], f"{ns}/resnet-dist-train"
    raw = msgspec.json.encode({"type": "ADDED", "object": job})
    r, act = Renderer(), Actuator(sa)
    applied: list[tuple[type, str]] = []

    def apply(cmd: o.Output, expected: str = "applied") -> None:
        result = act.apply(cmd)
        assert result == expected, (type(cmd).__name__, result)
        applied.append((type(cmd), result))

    pg_name = f"resnet-dist-train-{uid}"
    apply(o.CreatePodGroup(job=key, seq=1, name=pg_name, job_uid=uid, podgroup=r.podgroup(raw)))
    apply(o.UpdatePodGroup(job=key, seq=2, name=pg_name, min_member=2, min_task_member={"master": 1, "worker": 1}))
    # The scheduler writes the PodGroup's status and records Events on it (found by a list on its name).
    apply(o.UpdatePodGroupStatus(job=key, seq=2, name=pg_name, status={"phase": "Inqueue"}))
    apply(o.RecordEvent(job=key, seq=2, reason="Unschedulable", message="0/3 tasks in gang unschedulable",
                        event_type="Warning", kind="PodGroup", name=pg_name, component="vc-scheduler"))
    status = initial_status(3, "2026-11-30T08:00:00Z")
    for task, index in (("master", 0), ("worker", 0), ("worker", 1)):
        apply(o.CreatePod(job=key, seq=3, name=f"resnet-dist-train-{task}-{index}", task=task, index=index,
                          job_uid=uid, pod=r.pod(raw, task, index, status)))
    worker = core.read_namespaced_pod("resnet-dist-train-worker-1", ns)
    apply(o.DeletePod(job=key, seq=4, name=worker.metadata.name, uid=worker.metadata.uid, mark_out_of_sync=True))
    apply(o.UpdateJobStatus(job=key, seq=5, status=status))
    apply(o.RecordEvent(job=key, seq=6, reason="ExecuteAction", message="Start to execute action RestartJob "))

    # Plugins: create everything; again (AlreadyExists -> data patched); update; delete.
    plugins = ["pytorch", "ssh", "status-mounter", "svc"]
    apply(o.PluginHook(job=key, seq=7, hook="OnJobAdd", plugins=plugins))
    made = {
        "configmaps": {c.metadata.name for c in core.list_namespaced_config_map(ns).items},
        "secrets": {s.metadata.name for s in core.list_namespaced_secret(ns).items},
        "services": {s.metadata.name for s in core.list_namespaced_service(ns).items},
        "networkpolicies": {
            n.metadata.name for n in client.NetworkingV1Api(admin).list_namespaced_network_policy(ns).items
        },
    }
    assert made == {
        "configmaps": {"resnet-dist-train-svc", "resnet-dist-train-status-mounter"},
        "secrets": {"resnet-dist-train-ssh"},
        "services": {"resnet-dist-train"},
        "networkpolicies": {"resnet-dist-train"},
    }
    apply(o.PluginHook(job=key, seq=8, hook="OnJobAdd", plugins=plugins))
    apply(o.PluginHook(job=key, seq=9, hook="OnJobUpdate", plugins=plugins))
    booked = initial_status(3, "2026-11-30T08:00:00Z")
    booked.controlled_resources = {f"plugin-{p}": p for p in plugins}
    apply(o.UpdateJobStatus(job=key, seq=10, status=booked))
    apply(o.PluginHook(job=key, seq=11, hook="OnJobDelete", plugins=plugins))
    assert core.list_namespaced_secret(ns).items == []
    assert core.list_namespaced_service(ns).items == []

    apply(o.DeletePodGroup(job=key, seq=12, name=pg_name))
    owner = {"apiVersion": f"{JOB_GROUP}/{JOB_VERSION}", "kind": "Job", "name": "resnet-dist-train", "uid": uid}
    custom.create_namespaced_custom_object(CMD_GROUP, CMD_VERSION, ns, CMD_PLURAL, _command("abort", owner))
    apply(o.DeleteBusCommand(job=key, seq=13, name="abort", namespace=ns))
    apply(o.CreatePVC(job=key, seq=14, name="resnet-dist-train-pvc-rbac", job_uid=uid,
                      claim={"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}))

    # The scheduler's pod commands: PodScheduled (pods/status), a bind (pods/binding), an eviction
    # (pods/status for its conditions, then delete), an Event on a pod.
    node = _node(core, f"deploy-act-{ns[-6:]}")
    master, worker = (core.read_namespaced_pod(f"resnet-dist-train-{p}", ns) for p in ("master-0", "worker-0"))
    apply(o.UpdatePodCondition(job=key, seq=15, time="2026-11-30T08:00:00Z", name=master.metadata.name,
                               uid=master.metadata.uid, reason="Unschedulable", message="all nodes are unavailable"))
    # with a static PV for a claim: the PV's claimRef (get, patch persistentvolumes; get the claim) first
    pv_name = f"deploy-act-{ns[-6:]}"
    core.create_persistent_volume({"metadata": {"name": pv_name}, "spec": {
        "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/tmp/x"}}})
    _CLUSTER_SCOPED.append(("PersistentVolume", pv_name))
    claim = core.read_namespaced_persistent_volume_claim("resnet-dist-train-pvc-rbac", ns)
    apply(o.BindPod(job=key, seq=16, name=master.metadata.name, uid=master.metadata.uid, node=node,
                    volumes=[o.VolumeBinding(claim=claim.metadata.name, claim_uid=claim.metadata.uid, volume=pv_name)]))
    assert core.read_namespaced_pod(master.metadata.name, ns).spec.node_name == node
    assert core.read_persistent_volume(pv_name).spec.claim_ref.uid == claim.metadata.uid
    apply(o.RecordEvent(job=key, seq=16, reason="Scheduled", message=f"Successfully assigned {ns}/x to {node}",
                        kind="Pod", name=master.metadata.name, component="vc-scheduler"))
    apply(o.EvictPod(job=key, seq=17, time="2026-11-30T08:00:00Z", name=worker.metadata.name,
                     uid=worker.metadata.uid, reason="preempt"))
    # The queue controller: the default queue, its status (first without, then with a status), an Event
    # on the cluster-scoped Queue (namespace default).
    queue = f"deploy-act-{ns[-6:]}"
    apply(o.CreateQueue(job=f"_/{queue}", seq=18, queue=queue))
    apply(o.UpdateQueueStatus(job=f"_/{queue}", seq=19, queue=queue, state="Open"))
    apply(o.UpdateQueueStatus(job=f"_/{queue}", seq=20, queue=queue, allocated={"cpu": "1"}, counts={"running": 1}))
    assert custom.get_cluster_custom_object(PG_GROUP, PG_VERSION, "queues", queue)["status"] == {
        "state": "Open", "allocated": {"cpu": "1"}, "running": 1}
    apply(o.RecordEvent(job=f"_/{queue}", seq=21, reason="OpenQueue", message="Open queue succeed",
                        kind="Queue", name=queue))
    # The podgroup controller: a plain pod of Volcano's scheduler gets its PodGroup and the annotation.
    core.create_namespaced_pod(ns, pod_manifest("plain"))
    for cmd in decided([live(admin, ns, "plain")]):
        apply(cmd)
    # ... and a ReplicaSet scaled to 0 has its PodGroup deleted (read first: whose it is).
    rs = client.AppsV1Api(admin).create_namespaced_replica_set(ns, {"metadata": {"name": "scaled"}, "spec": {
        "replicas": 0, "selector": {"matchLabels": {"app": "scaled"}},
        "template": {"metadata": {"labels": {"app": "scaled"}}, "spec": pod_manifest("x")["spec"]}}})
    scaled_pg = f"podgroup-{rs.metadata.uid}"
    custom.create_namespaced_custom_object(PG_GROUP, PG_VERSION, ns, PG_PLURAL, {
        "apiVersion": f"{PG_GROUP}/{PG_VERSION}", "kind": "PodGroup", "metadata": {"name": scaled_pg, "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "scaled", "uid": rs.metadata.uid}]},
        "spec": {"minMember": 1}})
    apply(o.DeleteWorkloadPodGroup(job=f"{ns}/{scaled_pg}", seq=21, name=scaled_pg, owner_uid=rs.metadata.uid))
    # The cronjob controller: a run made as the CronJob's, the status written (the run active, then not),
    # an Event on the CronJob, the run deleted.
    cj = custom.create_namespaced_custom_object(JOB_GROUP, JOB_VERSION, ns, CRONJOBS, _cronjob("nightly", job))
    cj_key, cj_uid, run = f"{ns}/cronjob:nightly", cj["metadata"]["uid"], "nightly-29453760"
    apply(o.CreateCronJobRun(job=cj_key, seq=22, name=run, cronjob="nightly", cronjob_uid=cj_uid, labels={"a": "b"},
                             annotations={"volcano.sh/cronjob-scheduled-timestamp": "2026-01-01T00:00:00Z"},
                             spec=job["spec"]))
    made_run = custom.get_namespaced_custom_object(JOB_GROUP, JOB_VERSION, ns, JOB_PLURAL, run)
    assert [(r["kind"], r["uid"], r["controller"]) for r in made_run["metadata"]["ownerReferences"]] == [
        ("CronJob", cj_uid, True)]
    run_uid = made_run["metadata"]["uid"]
    ref = ObjectReference(kind="Job", namespace=ns, name=run, uid=run_uid, api_version=f"{JOB_GROUP}/{JOB_VERSION}")
    apply(o.UpdateCronJobStatus(job=cj_key, seq=23, name="nightly", uid=cj_uid, status=CronJobStatus(
        active=[ref], last_schedule_time="2026-01-01T00:00:00Z")))
    assert custom.get_namespaced_custom_object(JOB_GROUP, JOB_VERSION, ns, CRONJOBS, "nightly")["status"] == {
        "active": [msgspec.to_builtins(ref)], "lastScheduleTime": "2026-01-01T00:00:00Z"}
    apply(o.RecordEvent(job=cj_key, seq=24, reason="SuccessfulCreate", message=f"Created job {run}", kind="CronJob",
                        name="nightly", api_version=f"{JOB_GROUP}/{JOB_VERSION}", component="vc-controller-manager"))
    apply(o.DeleteCronJobRun(job=cj_key, seq=25, name=run, uid=run_uid))
    apply(o.UpdateCronJobStatus(job=cj_key, seq=26, name="nightly", uid=cj_uid, status=CronJobStatus(
        last_schedule_time="2026-01-01T00:00:00Z")))
    assert custom.get_namespaced_custom_object(JOB_GROUP, JOB_VERSION, ns, CRONJOBS, "nightly")["status"] == {
        "lastScheduleTime": "2026-01-01T00:00:00Z"}
    # The jobflow and jobtemplate controllers: a flow's vcjob made as the JobFlow's, both statuses written,
    # an Event on the JobFlow, the vcjob deleted (jobRetainPolicy delete).
    custom.create_namespaced_custom_object(FLOW_GROUP, FLOW_VERSION, ns, "jobtemplates", _jobtemplate("prep", job))
    jt_uid = custom.get_namespaced_custom_object(FLOW_GROUP, FLOW_VERSION, ns, "jobtemplates", "prep")["metadata"]["uid"]
    jf = custom.create_namespaced_custom_object(FLOW_GROUP, FLOW_VERSION, ns, "jobflows", _jobflow("nightly", "prep"))
    jf_key, jf_uid = f"{ns}/jobflow:nightly", jf["metadata"]["uid"]
    marks = {"volcano.sh/createdByJobTemplate": f"{ns}.prep", "volcano.sh/createdByJobFlow": f"{ns}.nightly"}
    apply(o.CreateJobFlowJob(job=jf_key, seq=27, name="nightly-prep", jobflow="nightly", jobflow_uid=jf_uid,
                             template="prep", labels=marks, annotations=marks, spec=job["spec"]))
    flow_job = custom.get_namespaced_custom_object(JOB_GROUP, JOB_VERSION, ns, JOB_PLURAL, "nightly-prep")
    assert [(r["kind"], r["uid"], r["controller"]) for r in flow_job["metadata"]["ownerReferences"]] == [
        ("JobFlow", jf_uid, True)]
    apply(o.UpdateJobFlowStatus(job=jf_key, seq=28, name="nightly", uid=jf_uid, status=JobFlowStatus(
        pending_jobs=["nightly-prep"], state=FlowState(phase="Pending"))))
    assert custom.get_namespaced_custom_object(FLOW_GROUP, FLOW_VERSION, ns, "jobflows", "nightly")["status"] == {
        "pendingJobs": ["nightly-prep"], "state": {"phase": "Pending"}}
    apply(o.UpdateJobTemplateStatus(job=f"{ns}/jobtemplate:prep", seq=29, name="prep", uid=jt_uid,
                                    status=JobTemplateStatus(job_depends_on_list=["nightly-prep"])))
    apply(o.RecordEvent(job=jf_key, seq=30, reason="Created", message="create a job named nightly-prep!", kind="JobFlow",
                        name="nightly", api_version=f"{FLOW_GROUP}/{FLOW_VERSION}", component="vc-controller-manager"))
    apply(o.DeleteJobFlowJob(job=jf_key, seq=31, name="nightly-prep", uid=flow_job["metadata"]["uid"]))
    # The garbage collector.
    apply(o.DeleteJob(job=key, seq=22, uid=uid))

    assert {t for t, _ in applied} == set(o.COMMANDS), "a command type is not exercised here"
    assert {e.reason for e in core.list_namespaced_event(ns).items} == {"ExecuteAction", "Unschedulable", "Scheduled",
                                                                         "SuccessfulCreate", "Created"}
    assert any(e.involved_object.name == queue for e in core.list_namespaced_event("default").items)


def test_the_role_refuses_what_the_controller_never_does(k8s, deployed):
    admin, sa, _ = deployed
    ns = k8s.create_namespace(f"deploy-deny-{uuid.uuid4().hex[:6]}")
    custom, core = client.CustomObjectsApi(admin), client.CoreV1Api(admin)
    job = _seed_job(custom, ns)
    core.create_namespaced_secret(ns, {"metadata": {"name": "someone-elses"}, "stringData": {"password": "x"}})
    as_sa, core_sa = client.CustomObjectsApi(sa), client.CoreV1Api(sa)
    # vcjobs belong to their users: no update or spec patch (delete: the GC's, ttlSecondsAfterFinished;
    # create: a CronJob's runs only, the admission policy vcbus-cronjob-and-jobflow-vcjobs).
    _forbidden(as_sa.patch_namespaced_custom_object, JOB_GROUP, JOB_VERSION, ns, JOB_PLURAL, "resnet-dist-train",
               {"spec": {"minAvailable": 1}})
    _refused_by_policy(lambda name: as_sa.create_namespaced_custom_object(
        JOB_GROUP, JOB_VERSION, ns, JOB_PLURAL, {"apiVersion": f"{JOB_GROUP}/{JOB_VERSION}", "kind": "Job",
                                                 "metadata": {"name": name}, "spec": job["spec"]}),
        "vcbus creates vcjobs only as a CronJob's runs or a JobFlow's jobs")
    # JobFlows and JobTemplates belong to their users: read and their status written, never created, changed
    # or deleted.
    custom.create_namespaced_custom_object(FLOW_GROUP, FLOW_VERSION, ns, "jobflows", _jobflow("theirs"))
    _forbidden(as_sa.create_namespaced_custom_object, FLOW_GROUP, FLOW_VERSION, ns, "jobflows", _jobflow("x"))
    _forbidden(as_sa.patch_namespaced_custom_object, FLOW_GROUP, FLOW_VERSION, ns, "jobflows", "theirs",
               {"spec": {"jobRetainPolicy": "delete"}})
    _forbidden(as_sa.delete_namespaced_custom_object, FLOW_GROUP, FLOW_VERSION, ns, "jobflows", "theirs")
    _forbidden(as_sa.create_namespaced_custom_object, FLOW_GROUP, FLOW_VERSION, ns, "jobtemplates",
               _jobtemplate("x", job))
    # CronJobs belong to their users too: read and their status written, never created, changed or deleted.
    custom.create_namespaced_custom_object(JOB_GROUP, JOB_VERSION, ns, CRONJOBS, _cronjob("theirs", job))
    _forbidden(as_sa.create_namespaced_custom_object, JOB_GROUP, JOB_VERSION, ns, CRONJOBS, _cronjob("x", job))
    _forbidden(as_sa.patch_namespaced_custom_object, JOB_GROUP, JOB_VERSION, ns, CRONJOBS, "theirs",
               {"spec": {"suspend": False}})
    _forbidden(as_sa.delete_namespaced_custom_object, JOB_GROUP, JOB_VERSION, ns, CRONJOBS, "theirs")
    # Secrets are written (the ssh plugin), never read: not one, not a list, not anywhere.
    _forbidden(core_sa.read_namespaced_secret, "someone-elses", ns)
    _forbidden(core_sa.list_namespaced_secret, ns)
    _forbidden(core_sa.list_secret_for_all_namespaces)
    _forbidden(core_sa.list_config_map_for_all_namespaces)
    # Queues are created and their status written, never changed otherwise nor deleted; nodes and
    # PriorityClasses are only read. (A PodGroup is read back one by one: whose it is, before a
    # spec patch or a delete, vcbus/k8s/ownership.py.)
    queue = f"deny-{ns[-6:]}"
    custom.create_cluster_custom_object(PG_GROUP, PG_VERSION, "queues", {
        "apiVersion": f"{PG_GROUP}/{PG_VERSION}", "kind": "Queue", "metadata": {"name": queue}, "spec": {"weight": 1}})
    _forbidden(as_sa.patch_cluster_custom_object, PG_GROUP, PG_VERSION, "queues", queue, {"spec": {"weight": 2}})
    _forbidden(as_sa.delete_cluster_custom_object, PG_GROUP, PG_VERSION, "queues", queue)
    node = _node(core, f"deny-{ns[-6:]}")
    _forbidden(core_sa.patch_node, node, {"spec": {"unschedulable": True}})
    _forbidden(core_sa.delete_node, node)
    _forbidden(core_sa.create_node, {"metadata": {"name": f"{node}-x"}})
    _forbidden(client.SchedulingV1Api(sa).create_priority_class, {"metadata": {"name": node}, "value": 1})
    # Namespaces are only listed and watched (the scheduler reads their labels).
    _forbidden(core_sa.read_namespace, ns)
    _forbidden(core_sa.patch_namespace, ns, {"metadata": {"labels": {"x": "y"}}})
    _forbidden(core_sa.delete_namespace, ns)
    _forbidden(core_sa.create_namespace, {"metadata": {"name": f"{node}-x"}})
    # StorageClasses are only listed and watched; PVCs created, listed, watched and read (a claim's uid before
    # its PV's claimRef is written), never changed or deleted; PVs listed, watched, read and patched (the
    # claimRef: VolumeBinding's PreBind), never created or deleted.
    core.create_namespaced_persistent_volume_claim(ns, {"metadata": {"name": "someone-elses"}, "spec": {
        "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}})
    _forbidden(core_sa.patch_namespaced_persistent_volume_claim, "someone-elses", ns, {"metadata": {"labels": {"x": "y"}}})
    _forbidden(core_sa.delete_namespaced_persistent_volume_claim, "someone-elses", ns)
    _forbidden(core_sa.create_persistent_volume, {"metadata": {"name": f"{node}-x"}, "spec": {
        "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/tmp/x"}}})
    _forbidden(core_sa.delete_persistent_volume, f"{node}-x")
    _forbidden(client.StorageV1Api(sa).create_storage_class, {"metadata": {"name": f"{node}-x"}, "provisioner": "x"})
    # ReplicationControllers are only listed and watched; Services (the svc plugin's) read, created and
    # deleted, never changed.
    core.create_namespaced_replication_controller(ns, {"metadata": {"name": "theirs"}, "spec": {
        "replicas": 0, "selector": {"app": "theirs"}, "template": {"metadata": {"labels": {"app": "theirs"}},
                                                                   "spec": {"containers": [{"name": "c",
                                                                                            "image": "busybox"}]}}}})
    _forbidden(core_sa.read_namespaced_replication_controller, "theirs", ns)
    _forbidden(core_sa.patch_namespaced_replication_controller, "theirs", ns, {"spec": {"replicas": 1}})
    _forbidden(core_sa.delete_namespaced_replication_controller, "theirs", ns)
    _forbidden(core_sa.create_namespaced_replication_controller, ns, {"metadata": {"name": "x"}, "spec": {
        "selector": {"a": "x"},
        "template": {"metadata": {"labels": {"a": "x"}}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}})
    core.create_namespaced_service(ns, {"metadata": {"name": "theirs"}, "spec": {"ports": [{"port": 80}]}})
    _forbidden(core_sa.patch_namespaced_service, "theirs", ns, {"spec": {"selector": {"a": "x"}}})
    # Nothing outside the job controller's objects.
    _forbidden(client.AppsV1Api(sa).list_deployment_for_all_namespaces)
    # A pod's owners are only listed and watched (the podgroup controller reads their annotations).
    apps_sa = client.AppsV1Api(sa)
    _forbidden(apps_sa.read_namespaced_replica_set, "watched", ns)
    _forbidden(apps_sa.patch_namespaced_stateful_set, "watched", ns, {"metadata": {"annotations": {"x": "y"}}})
    _forbidden(apps_sa.delete_namespaced_daemon_set, "watched", ns)
    _forbidden(apps_sa.create_namespaced_replica_set, ns, {"metadata": {"name": "x"}, "spec": {
        "selector": {"matchLabels": {"a": "x"}},
        "template": {"metadata": {"labels": {"a": "x"}}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}})
    batch_sa = client.BatchV1Api(sa)  # batch/v1 Jobs likewise
    _forbidden(batch_sa.read_namespaced_job, "watched", ns)
    _forbidden(batch_sa.patch_namespaced_job, "watched", ns, {"metadata": {"annotations": {"x": "y"}}})
    _forbidden(batch_sa.delete_namespaced_job, "watched", ns)
    _forbidden(batch_sa.create_namespaced_job, ns, {"metadata": {"name": "x"}, "spec": {"template": {"spec": {
        "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}})
    _forbidden(client.RbacAuthorizationV1Api(sa).list_cluster_role)


def test_the_observe_only_role_lets_the_bridge_watch_and_nothing_else(k8s, deployed):
    admin, _, _ = deployed
    objs = render("observe-only")
    user = f"system:serviceaccount:{NS}:vcbus-observe-test"
    _apply_rbac(admin, [d for d in objs if d["kind"] in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding")],
                role_name="vcbus-observe-test", sa_name="vcbus-observe-test")
    sa = _as(k8s, user)
    _wait_for_rules(sa, obj(objs, "ClusterRole", "vcbus-controller")["rules"])
    ns = k8s.create_namespace(f"deploy-obs-{uuid.uuid4().hex[:6]}")
    _one_of_each(admin, ns)
    _watch_every_bridge_resource(sa)

    job = _seed_job(client.CustomObjectsApi(admin), ns)
    raw = msgspec.json.encode({"type": "ADDED", "object": job})
    key, act = f"{ns}/resnet-dist-train", Actuator(sa)
    pod = Renderer().pod(raw, "master", 0, initial_status(3, "2026-11-30T08:00:00Z"))
    for cmd in (
        o.CreatePod(job=key, seq=1, name="resnet-dist-train-master-0", task="master", index=0, pod=pod),
        o.RecordEvent(job=key, seq=2, reason="ExecuteAction", message="m"),
        o.UpdateJobStatus(job=key, seq=3, status=initial_status(3, "2026-11-30T08:00:00Z")),
        o.CreateCronJobRun(job=f"{ns}/cronjob:watched", seq=4, name="watched-1", cronjob="watched", cronjob_uid="u"),
        o.UpdateCronJobStatus(job=f"{ns}/cronjob:watched", seq=5, name="watched", uid="u", status=CronJobStatus()),
        o.CreateJobFlowJob(job=f"{ns}/jobflow:watched", seq=6, name="watched-watched", jobflow="watched", jobflow_uid="u",
                           template="watched"),
        o.UpdateJobFlowStatus(job=f"{ns}/jobflow:watched", seq=7, name="watched", uid="u", status=JobFlowStatus()),
    ):
        _forbidden(act.apply, cmd)  # the actuator's first call, `get` of the vcjob, is already refused


def test_the_lease_role_lets_the_elector_lead_and_nothing_more(k8s, deployed):
    """`vcbus up --leader-elect` as the service account: it creates, takes and renews its Lease;
    another Lease of the namespace, or a Lease elsewhere, is refused."""
    from vcbus.k8s.leader import LeaderElector

    _, sa, _ = deployed
    leases = client.CoordinationV1Api(sa)
    elector = LeaderElector(sa, namespace=NS, name="vcbus-controller", identity="vcbus-0", lease_duration=5)
    deadline = time.monotonic() + 30  # RBAC reaches the authorizer through an informer
    while True:
        try:
            assert elector.try_acquire_or_renew() is True
            break
        except ApiException as err:
            assert err.status == 403 and time.monotonic() < deadline, err
            time.sleep(0.2)
    assert elector.try_acquire_or_renew() is True  # renewing: get + update of that one Lease
    assert leases.read_namespaced_lease("vcbus-controller", NS).spec.holder_identity == "vcbus-0"
    _forbidden(leases.read_namespaced_lease, "someone-else", NS)
    _forbidden(leases.list_namespaced_lease, NS)
    _forbidden(leases.create_namespaced_lease, "default", {"metadata": {"name": "vcbus-controller"}, "spec": {}})
    elector.release()


# --------------------------------------------------------------------------- schema and pod security


_PATHS = {
    "ConfigMap": "/api/v1/namespaces/{ns}/configmaps",
    "Service": "/api/v1/namespaces/{ns}/services",
    "StatefulSet": "/apis/apps/v1/namespaces/{ns}/statefulsets",
    "Deployment": "/apis/apps/v1/namespaces/{ns}/deployments",
    "NetworkPolicy": "/apis/networking.k8s.io/v1/namespaces/{ns}/networkpolicies",
    "PodDisruptionBudget": "/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets",
}


def _dry_run(admin: client.ApiClient, d: dict, ns: str) -> tuple[int, str, list[str]]:
    """POST `d` as written (no client-side model) to `ns` with dryRun=All and strict field
    validation: (HTTP status, body, warnings)."""
    d = copy.deepcopy(d)
    d["metadata"]["namespace"] = ns
    method, url, headers, body, post = admin.param_serialize(
        method="POST", resource_path=_PATHS[d["kind"]].format(ns=ns),
        query_params=[("dryRun", "All"), ("fieldValidation", "Strict")],
        header_params={"Accept": "application/json", "Content-Type": "application/json"},
        body=d, auth_settings=["BearerToken"],
    )
    resp = admin.call_api(method, url, header_params=headers, body=body, post_params=post, _request_timeout=30)
    data = resp.read().decode()
    warning = resp.headers.get("Warning")
    return resp.status, data, [warning] if warning else []


def _accepted(admin: client.ApiClient, d: dict, ns: str) -> list[str]:
    status, data, warnings = _dry_run(admin, d, ns)
    assert status == 201, data
    return warnings


def test_the_workloads_pass_the_api_schema_and_the_restricted_pod_security_profile(k8s, deployed):
    admin, _, objs = deployed
    core = client.CoreV1Api(admin)
    workloads = [d for d in objs if d["kind"] in _PATHS]
    assert sorted(d["kind"] for d in workloads) == sorted(_PATHS)
    for d in workloads:  # where they go
        assert _accepted(admin, d, NS) == [], d["kind"]
    for d in render("observe-only"):
        if d["kind"] == "Deployment":
            assert _accepted(admin, d, NS) == []
    # A namespace that warns below `restricted`: both pod templates pass it.
    psa = f"deploy-psa-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": psa, "labels": {"pod-security.kubernetes.io/warn": "restricted"}}})
    for d in workloads:
        assert _accepted(admin, d, psa) == [], d["kind"]
    lax = copy.deepcopy(obj(objs, "Deployment", "vcbus"))  # the check is not vacuous
    del lax["spec"]["template"]["spec"]["containers"][0]["securityContext"]
    assert any("restricted" in w for w in _accepted(admin, lax, psa))
    typo = copy.deepcopy(obj(objs, "StatefulSet", "nats"))  # nor is the schema check
    typo["spec"]["template"]["spec"]["containers"][0]["volumeMount"] = []
    status, data, _ = _dry_run(admin, typo, NS)
    assert status == 400, data
    assert 'unknown field "spec.template.spec.containers[0].volumeMount"' in json.loads(data)["message"]


def test_the_webhook_deployment_serves_probes_on_its_metrics_port_and_passes_the_restricted_profile(k8s, deployed):
    admin, _, _ = deployed
    docs = _docs(REPO / "deploy" / "webhook" / "10-deployment.yaml")
    dep = obj(docs, "Deployment", "vcbus-webhook")
    container = dep["spec"]["template"]["spec"]["containers"][0]
    cmd = container["command"]
    assert cmd[cmd.index("--metrics-addr") + 1] == "0.0.0.0:9464"
    assert {"name": "metrics", "containerPort": 9464} in container["ports"]
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    psa = f"deploy-wh-{uuid.uuid4().hex[:6]}"
    client.CoreV1Api(admin).create_namespace(
        {"metadata": {"name": psa, "labels": {"pod-security.kubernetes.io/warn": "restricted"}}})
    for d in docs:
        assert _accepted(admin, d, psa) == [], d["kind"]


# --------------------------------------------------------------------------- jobs/finalizers


@pytest.fixture
def strict_apiserver(k8s, tmp_path):
    """A second kube-apiserver on the fixture's etcd, with OwnerReferencesPermissionEnforcement.

    Yields `connect(user=None)`: an ApiClient to it as the test admin, or impersonating `user`."""
    port = k8s_env.free_port()
    cmd = [a for a in k8s._apiserver_cmd() if not a.startswith(("--secure-port=", "--cert-dir="))]
    cmd += [f"--secure-port={port}", f"--cert-dir={tmp_path / 'certs'}",
            "--enable-admission-plugins=OwnerReferencesPermissionEnforcement"]
    log = tmp_path / "apiserver.log"
    with open(log, "wb") as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=tmp_path)
    url = f"https://127.0.0.1:{port}"
    clients: list[client.ApiClient] = []

    def connect(user: str | None = None) -> client.ApiClient:
        cfg = client.Configuration()
        cfg.host = url
        cfg.ssl_ca_cert = str(k8s.certs.ca_crt)
        cfg.cert_file = str(k8s.certs.client_crt)
        cfg.key_file = str(k8s.certs.client_key)
        api = client.ApiClient(cfg)
        if user:
            api.set_default_header("Impersonate-User", user)
        clients.append(api)
        return api

    try:
        ctx = k8s._ssl_context()
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, log.read_text()[-3000:]
            try:
                with urllib.request.urlopen(url + "/readyz", context=ctx, timeout=3) as r:
                    if r.status == 200:
                        break
            except (OSError, urllib.error.HTTPError):
                pass
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.2)
        yield connect
    finally:
        for api in clients:
            api.close()
        k8s_env._terminate(proc, 3.0)


JOBS_FINALIZERS = {"apiGroups": ["batch.volcano.sh"], "resources": ["jobs/finalizers"], "verbs": ["update"]}
CRONJOBS_FINALIZERS = {"apiGroups": ["batch.volcano.sh"], "resources": ["cronjobs/finalizers"], "verbs": ["update"]}


def _with_and_without(deployed, strict_apiserver, left_out: list[dict], name: str):
    """ApiClients to the strict API server as the service account, and as one whose role is the
    same but for the rules `left_out` (its own ServiceAccount and ClusterRole `name`)."""
    admin, _, objs = deployed
    role = copy.deepcopy([d for d in objs if d["kind"] in ("ClusterRole", "ClusterRoleBinding")])
    without = obj(role, "ClusterRole", "vcbus-controller")
    without["rules"] = [r for r in without["rules"] if r not in left_out]
    assert len(without["rules"]) == len(obj(objs, "ClusterRole", "vcbus-controller")["rules"]) - len(left_out)
    _apply_rbac(admin, role, role_name=name, sa_name=name)
    sa = strict_apiserver(SA_USER)
    lacking = strict_apiserver(f"system:serviceaccount:{NS}:{name}")
    _wait_for_rules(sa, obj(objs, "ClusterRole", "vcbus-controller")["rules"])
    _wait_for_rules(lacking, without["rules"])
    return sa, lacking


def test_owner_references_with_block_owner_deletion_need_jobs_finalizers(k8s, deployed, strict_apiserver):
    sa, lacking = _with_and_without(deployed, strict_apiserver, [JOBS_FINALIZERS], "vcbus-no-finalizers-test")

    ns = k8s.create_namespace(f"deploy-owner-{uuid.uuid4().hex[:6]}")
    job = _seed_job(client.CustomObjectsApi(strict_apiserver()), ns)
    uid, key = job["metadata"]["uid"], f"{ns}/resnet-dist-train"
    raw = msgspec.json.encode({"type": "ADDED", "object": job})
    r = Renderer()
    pod = r.pod(raw, "master", 0, initial_status(3, "2026-11-30T08:00:00Z"))
    assert pod["metadata"]["ownerReferences"][0]["blockOwnerDeletion"] is True
    create_pod = o.CreatePod(job=key, seq=1, name="resnet-dist-train-master-0", task="master", index=0,
                             job_uid=uid, pod=pod)
    err = _forbidden(Actuator(lacking).apply, create_pod)
    assert "cannot set blockOwnerDeletion" in err.body

    act = Actuator(sa)
    assert act.apply(create_pod) == "applied"
    pg = o.CreatePodGroup(job=key, seq=2, name=f"resnet-dist-train-{uid}", job_uid=uid, podgroup=r.podgroup(raw))
    assert act.apply(pg) == "applied"
    hook = o.PluginHook(job=key, seq=3, hook="OnJobAdd", plugins=["pytorch", "ssh", "status-mounter", "svc"])
    assert act.apply(hook) == "applied"


def test_a_cronjobs_runs_need_cronjobs_finalizers(k8s, deployed, strict_apiserver):
    """A run's ownerReference to its CronJob has blockOwnerDeletion (Volcano's NewControllerRef): with
    OwnerReferencesPermissionEnforcement, creating it needs `update` on cronjobs/finalizers."""
    sa, lacking = _with_and_without(deployed, strict_apiserver, [CRONJOBS_FINALIZERS], "vcbus-no-cj-finalizers")
    ns = k8s.create_namespace(f"deploy-cj-{uuid.uuid4().hex[:6]}")
    custom = client.CustomObjectsApi(strict_apiserver())
    job = _seed_job(custom, ns)
    cj = custom.create_namespaced_custom_object(JOB_GROUP, JOB_VERSION, ns, CRONJOBS, _cronjob("nightly", job))
    run = o.CreateCronJobRun(job=f"{ns}/cronjob:nightly", seq=1, name="nightly-29453760", cronjob="nightly",
                             cronjob_uid=cj["metadata"]["uid"], spec=job["spec"])
    err = _forbidden(Actuator(lacking).apply, run)
    assert "cannot set blockOwnerDeletion" in err.body
    assert Actuator(sa).apply(run) == "applied"


JOBFLOWS_FINALIZERS = {"apiGroups": ["flow.volcano.sh"], "resources": ["jobflows/finalizers"], "verbs": ["update"]}


def test_a_jobflows_jobs_need_jobflows_finalizers(k8s, deployed, strict_apiserver):
    """A flow's vcjob has the JobFlow as its controller with blockOwnerDeletion (Volcano's
    SetControllerReference): with OwnerReferencesPermissionEnforcement, creating it needs `update` on
    jobflows/finalizers."""
    sa, lacking = _with_and_without(deployed, strict_apiserver, [JOBFLOWS_FINALIZERS], "vcbus-no-jf-finalizers")
    ns = k8s.create_namespace(f"deploy-jf-{uuid.uuid4().hex[:6]}")
    custom = client.CustomObjectsApi(strict_apiserver())
    job = _seed_job(custom, ns)
    jf = custom.create_namespaced_custom_object(FLOW_GROUP, FLOW_VERSION, ns, "jobflows", _jobflow("nightly", "prep"))
    create = o.CreateJobFlowJob(job=f"{ns}/jobflow:nightly", seq=1, name="nightly-prep", jobflow="nightly",
                                jobflow_uid=jf["metadata"]["uid"], template="prep", spec=job["spec"])
    err = _forbidden(Actuator(lacking).apply, create)
    assert "cannot set blockOwnerDeletion" in err.body
    assert Actuator(sa).apply(create) == "applied"


# The owners a pod of Volcano's scheduler may have, with blockOwnerDeletion (their controllers set it).
WORKLOADS = [
    ("ReplicaSet", lambda api, ns, body: client.AppsV1Api(api).create_namespaced_replica_set(ns, body)),
    ("StatefulSet", lambda api, ns, body: client.AppsV1Api(api).create_namespaced_stateful_set(ns, body)),
    ("DaemonSet", lambda api, ns, body: client.AppsV1Api(api).create_namespaced_daemon_set(ns, body)),
    ("Job", lambda api, ns, body: client.BatchV1Api(api).create_namespaced_job(ns, body)),
]


def test_podgroups_of_workload_pods_need_their_owners_finalizers(k8s, deployed, strict_apiserver):
    """The podgroup controller's PodGroup carries the pod's ownerReferences (or one to the pod), with
    blockOwnerDeletion: with OwnerReferencesPermissionEnforcement each owner kind needs its finalizers.
    No controller-manager runs: each owner's pod is made here with the reference its controller sets."""
    rules = obj(deployed[2], "ClusterRole", "vcbus-controller")["rules"]
    owners_finalizers = [r for r in rules if r not in (JOBS_FINALIZERS, CRONJOBS_FINALIZERS, JOBFLOWS_FINALIZERS)
                         and any(res.endswith("/finalizers") for res in r["resources"])]
    assert len(owners_finalizers) == 3, owners_finalizers
    sa, lacking = _with_and_without(deployed, strict_apiserver, owners_finalizers, "vcbus-no-owner-finalizers")

    ns = k8s.create_namespace(f"deploy-pgs-{uuid.uuid4().hex[:6]}")
    strict = strict_apiserver()
    core = client.CoreV1Api(strict)
    template = {"metadata": {"labels": {"app": "w"}}, "spec": pod_manifest("x")["spec"]}
    pods = ["plain"]
    core.create_namespaced_pod(ns, pod_manifest("plain"))
    for kind, create in WORKLOADS:
        spec = {"selector": {"matchLabels": {"app": "w"}}, "template": template}
        if kind == "Job":
            spec = {"template": {"spec": {**template["spec"], "restartPolicy": "Never"}}}
        owner = create(strict, ns, {"metadata": {"name": kind.lower()}, "spec": spec})
        ref = {"apiVersion": owner.api_version, "kind": kind, "name": owner.metadata.name, "uid": owner.metadata.uid,
               "controller": True, "blockOwnerDeletion": True}
        core.create_namespaced_pod(ns, pod_manifest(f"{kind.lower()}-0", owner=ref))
        pods.append(f"{kind.lower()}-0")
    for name in pods:
        create_pg, annotate = decided([live(strict, ns, name)])
        err = _forbidden(Actuator(lacking).apply, create_pg)
        assert "cannot set blockOwnerDeletion" in err.body, (name, err.body)
        act = Actuator(sa)
        assert [act.apply(create_pg), act.apply(annotate)] == ["applied", "applied"], name
    made = client.CustomObjectsApi(strict).list_namespaced_custom_object(PG_GROUP, PG_VERSION, ns, PG_PLURAL)["items"]
    assert sorted(pg["metadata"]["ownerReferences"][0]["kind"] for pg in made) == sorted(
        ["Pod"] + [kind for kind, _ in WORKLOADS])


# --------------------------------------------------------------------------- Secrets vcbus did not create


def test_the_admission_policy_lets_the_controller_change_only_the_secrets_it_created(k8s, deployed):
    """RBAC cannot narrow `patch`/`delete` of Secrets to some of them; the ValidatingAdmissionPolicy
    `vcbus-secrets` does: as the service account, a Secret without vcbus's annotation cannot be
    patched or deleted, one with it can; the actuator records the refusal and goes on."""
    admin, sa, _ = deployed
    ns = k8s.create_namespace(f"deploy-secret-{uuid.uuid4().hex[:6]}")
    core, core_sa = client.CoreV1Api(admin), client.CoreV1Api(sa)
    core.create_namespaced_secret(ns, {"metadata": {"name": "someone-elses"}, "stringData": {"k": "v"}})
    core.create_namespaced_secret(ns, {"metadata": {"name": "ours", "annotations": {"bus.volcano.sh/managed-by": "vcbus"}},
                                       "stringData": {"k": "v"}})
    deadline = time.monotonic() + 30  # the policy reaches the admission chain through an informer
    while True:
        try:
            core_sa.patch_namespaced_secret("someone-elses", ns, {"stringData": {"k": "changed"}})
        except ApiException as err:
            assert err.status == 422 and "vcbus changes only the Secrets it created" in err.body, err
            break
        assert time.monotonic() < deadline, "the policy never denied a patch of a Secret vcbus did not create"
        time.sleep(0.2)
    with pytest.raises(ApiException) as exc:
        core_sa.delete_namespaced_secret("someone-elses", ns)
    assert exc.value.status == 422
    core_sa.patch_namespaced_secret("ours", ns, {"stringData": {"k": "changed"}})
    # the actuator, as the service account: the ssh plugin's delete of a Secret it did not make
    job = _seed_job(client.CustomObjectsApi(admin), ns)
    core.create_namespaced_secret(ns, {"metadata": {"name": "resnet-dist-train-ssh"}, "stringData": {"k": "v"}})
    act = Actuator(sa)
    key = f"{ns}/resnet-dist-train"
    booked = initial_status(3, "2026-11-30T08:00:00Z")
    booked.controlled_resources = {"plugin-ssh": "ssh"}  # OnJobDelete deletes what OnJobAdd booked
    assert act.apply(o.UpdateJobStatus(job=key, seq=1, status=booked)) == "applied"
    assert act.apply(o.PluginHook(job=key, seq=2, hook="OnJobDelete", plugins=["ssh"])) == "refused"
    assert core.read_namespaced_secret("resnet-dist-train-ssh", ns).metadata.uid
    core_sa.delete_namespaced_secret("ours", ns)
    assert job["metadata"]["uid"]
