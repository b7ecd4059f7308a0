"""The envtest control plane itself: binaries, certificates, kubeconfig, restart, compaction."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import urllib.error
import urllib.request

import pytest
from kubernetes import client as k
from kubernetes import config

from tests import k8s_env

pytestmark = pytest.mark.k8s

REPO = pathlib.Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "envtest.sh"


def test_script_check_finds_the_assets(k8s):
    out = subprocess.run([str(SCRIPT), "--check"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    d = pathlib.Path(out.stdout.strip().splitlines()[-1])
    assert (d / "kube-apiserver").exists() and (d / "etcd").exists()


def test_script_without_go_or_assets_explains_how_to_get_them(tmp_path):
    env = {
        "PATH": "/usr/bin:/bin",  # no Go here
        "HOME": str(tmp_path),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
    }
    if pathlib.Path("/usr/bin/go").exists() or pathlib.Path("/bin/go").exists():
        pytest.skip("go is installed in /usr/bin; cannot simulate a machine without Go")
    out = subprocess.run([str(SCRIPT)], capture_output=True, text=True, env=env, timeout=30)
    assert out.returncode != 0
    assert "KUBEBUILDER_ASSETS" in out.stderr and "make envtest" in out.stderr
    assert out.stdout == ""


def test_versions_are_pinned_in_one_place():
    v = k8s_env.read_versions()
    assert v["K8S_VERSION"].count(".") == 2 and v["ETCD_VERSION"].count(".") == 2
    assert v["KWOK_VERSION"].count(".") == 2  # scripts/kwok.sh, tests/kwok_env.py


def test_apiserver_is_ready_and_reports_the_pinned_version(k8s):
    api = k8s.api_client()
    info = k.VersionApi(api).get_code()
    stamp = k8s.assets / "VERSIONS"
    if stamp.exists():  # built by scripts/envtest.sh (not an external KUBEBUILDER_ASSETS)
        assert info.git_version == "v" + k8s_env.read_versions()["K8S_VERSION"]
    assert k8s.url.startswith("https://127.0.0.1:")


def test_kubeconfig_authenticates_as_cluster_admin(k8s):
    api = config.new_client_from_config(config_file=str(k8s.kubeconfig))
    try:
        review = k.AuthenticationV1Api(api).create_self_subject_review(
            {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
        )
        assert "system:masters" in review.status.user_info.groups
        names = {n.metadata.name for n in k.CoreV1Api(api).list_namespace().items}
        assert {"default", "kube-system"} <= names
    finally:
        api.close()


def test_crds_are_installed(k8s):
    ext = k.ApiextensionsV1Api(k8s.api_client())
    names = {c.metadata.name for c in ext.list_custom_resource_definition().items}
    assert {
        "jobs.batch.volcano.sh",
        "podgroups.scheduling.volcano.sh",
        "queues.scheduling.volcano.sh",
        "commands.bus.volcano.sh",
    } <= names


def test_apiserver_restart_keeps_the_data(k8s, k8s_namespace):
    core = k.CoreV1Api(k8s.api_client())
    core.create_namespaced_config_map(
        k8s_namespace, k.V1ConfigMap(metadata=k.V1ObjectMeta(name="keep"), data={"a": "1"})
    )
    k8s.stop_apiserver()
    assert not k8s.apiserver_running
    with pytest.raises(OSError):
        urllib.request.urlopen(k8s.url + "/readyz", context=k8s._ssl_context(), timeout=2)
    k8s.start_apiserver()
    assert k8s.apiserver_running
    cm = k.CoreV1Api(k8s.api_client()).read_namespaced_config_map("keep", k8s_namespace)
    assert cm.data == {"a": "1"}


def test_compact_etcd(k8s, k8s_namespace):
    core = k.CoreV1Api(k8s.api_client())
    cm = core.create_namespaced_config_map(k8s_namespace, k.V1ConfigMap(metadata=k.V1ObjectMeta(name="c")))
    rv = int(cm.metadata.resource_version)
    assert k8s.etcd_revision() >= rv
    compacted = k8s.compact_etcd()
    assert compacted >= rv
    # etcd itself now refuses history before the compaction point.
    req = urllib.request.Request(
        k8s.etcd_url + "/v3/kv/range",
        data=json.dumps({"key": "Lw==", "revision": rv - 1}).encode(),
        method="POST",
    )
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=5)
    assert "compacted" in e.value.read().decode()


def test_child_processes_live_in_the_session_tmpdir(k8s):
    assert (k8s.workdir / "etcd-data").is_dir()
    assert (k8s.workdir / "pki" / "ca.crt").exists()
    assert os.access(k8s.assets / "kube-apiserver", os.X_OK)


def test_the_audit_log_has_each_pod_and_binding_create_with_its_answer_across_a_restart(k8s, k8s_namespace):
    from vcbus.k8s.watching import KubeApiError, api_request

    api, ns = k8s.api_client(), k8s_namespace
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
           "spec": {"containers": [{"name": "c", "image": "x"}]}}
    binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"},
               "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"}}
    for path, body in ((f"/api/v1/namespaces/{ns}/pods", pod), (f"/api/v1/namespaces/{ns}/pods/p/binding", binding)):
        api_request(api, "POST", path, body=body)
        k8s.kill_apiserver()  # what was answered before a crash stays in the log
        k8s.start_apiserver()
        with pytest.raises(KubeApiError) as again:
            api_request(k8s.api_client(), "POST", path, body=body)
        assert again.value.status == 409
    k.CoreV1Api(api).create_namespaced_config_map(ns, k.V1ConfigMap(metadata=k.V1ObjectMeta(name="not-logged")))
    seen = [((ev["objectRef"].get("subresource") or "pods"), ev["objectRef"]["name"], ev["responseStatus"]["code"])
            for ev in k8s.audit_events(ns)]
    assert seen == [("pods", "p", 201), ("pods", "p", 409), ("binding", "p", 201), ("binding", "p", 409)]
    assert all(ev["stage"] == "ResponseComplete" for ev in k8s.audit_events(ns))
