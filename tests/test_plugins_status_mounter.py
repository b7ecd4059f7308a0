"""status-mounter (vendor plugin, seed document) and the reference's worked example `resnet-dist-train` (section 3)."""

from __future__ import annotations

import json
import pathlib

import pytest
import yaml

from statemachines.admission import default_queues, validate_create
from statemachines.manifests.job import render_job
from statemachines.manifests.pod import build_pod
from statemachines.plugins import on_job_add, on_job_delete, on_job_update, status_mounter_configmap
from statemachines.plugins.status_mounter import validate_args

SEED = pathlib.Path(__file__).resolve().parents[1] / "examples" / "resnet-dist-train.yaml"


def make_job(args, status=None, containers=("main", "side")):
    job = {"metadata": {"name": "j", "namespace": "ns", "uid": "u"},
           "spec": {"queue": "default", "plugins": {"status-mounter": args},
                    "tasks": [{"name": "t", "replicas": 1,
                               "template": {"spec": {"containers": [{"name": c, "image": "x"} for c in containers]}}}]}}
    if status is not None:
        job["status"] = status
    return job


def env_of(container):
    return {e["name"]: e["value"] for e in container.get("env", [])}


STATUS = {"state": {"phase": "Running"}, "pending": 1, "running": 2, "retryCount": 1, "minAvailable": 3}


def test_defaults_inject_job_retrycount_env_and_no_files():
    built = build_pod(make_job([], STATUS), "t", 0, version=0, retry_count=1)
    assert env_of(built["spec"]["containers"][0]) == {"Job_retryCount": "1"}
    assert "volumes" not in built["spec"]
    assert status_mounter_configmap(make_job([]), STATUS) is None


def test_env_values_prefix_and_json_status():
    built = build_pod(make_job(["-values=pending,running,phase", "-prefix=S_", "-statusJson=true"], STATUS), "t", 0,
                      version=0, retry_count=1)
    values = env_of(built["spec"]["containers"][0])
    assert list(values) == ["S_pending", "S_running", "S_phase", "S_jsonStatus"]
    assert values["S_pending"] == "1" and values["S_phase"] == "Running"
    assert json.loads(values["S_jsonStatus"])["running"] == 2


def test_add_env_false_and_containers_filter():
    built = build_pod(make_job(["-containers=side", "-mountPoint=/status"], STATUS), "t", 0, version=0, retry_count=0)
    main, side = built["spec"]["containers"]
    assert "env" not in main and "volumeMounts" not in main
    assert side["volumeMounts"] == [{"name": "status-mounter", "mountPath": "/status", "readOnly": True}]
    none = build_pod(make_job(["-addEnv=false"], STATUS), "t", 0, version=0, retry_count=0)
    assert "env" not in none["spec"]["containers"][0]


def test_files_come_from_a_live_configmap_mounted_without_subpath():
    built = build_pod(make_job(["-mountPoint=/status", "-values=running"], STATUS), "t", 0, version=0, retry_count=0)
    assert {"name": "status-mounter", "configMap": {"name": "j-status-mounter", "optional": True}} in built["spec"]["volumes"]
    assert all("subPath" not in m for m in built["spec"]["containers"][0]["volumeMounts"])


def test_configmap_tracks_the_status_it_is_given():
    job = make_job(["-mountPoint=/status", "-values=retryCount,pending,running", "-statusJson"])
    first = status_mounter_configmap(job, {"state": {"phase": "Pending"}})
    later = status_mounter_configmap(job, STATUS)
    assert first["data"] == {"retryCount": "0", "pending": "0", "running": "0", "jsonStatus": '{"state":{"phase":"Pending"}}'}
    assert later["data"]["pending"] == "1" and later["data"]["running"] == "2"
    assert later["metadata"]["name"] == "j-status-mounter"
    assert later["metadata"]["ownerReferences"][0]["kind"] == "Job"


def test_on_job_add_and_update_apply_the_configmap_every_time():
    job = make_job(["-mountPoint=/s"], {**STATUS, "controlledResources": {"plugin-status-mounter": "status-mounter"}})
    assert [e.manifest["kind"] for e in on_job_add(job).effects] == ["ConfigMap"]
    assert [e.manifest["kind"] for e in on_job_update(job).effects] == ["ConfigMap"]


def test_on_job_delete_keeps_the_configmap_and_drops_the_key():
    job = make_job(["-mountPoint=/s"], {"controlledResources": {"plugin-status-mounter": "status-mounter"}})
    deleted = on_job_delete(job)
    assert deleted.effects == () and deleted.controlled_resources == {}


def test_existing_mount_at_mount_point_is_left_alone():
    job = make_job(["-mountPoint=/data"], STATUS, containers=("main",))
    job["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["volumeMounts"] = [{"name": "d", "mountPath": "/data"}]
    assert build_pod(job, "t", 0, version=0, retry_count=0)["spec"]["containers"][0]["volumeMounts"] == [
        {"name": "d", "mountPath": "/data"}]


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        (['-mountPoint="/status"'], 'mountPoint "\\"/status\\"" must be an absolute path (quotes are not removed)'),
        (["-values=pending,bogus"], "unknown values [bogus]"),
        (["-nope"], "flag provided but not defined: -nope"),
    ],
)
def test_admission_rejects_bad_arguments(args, problem):
    assert any(problem in p for p in validate_args(args))


# ------------------------------------------------------------------ the worked example (reference section 3)


@pytest.fixture(scope="module")
def seed_objects():
    return render_job(yaml.safe_load(SEED.read_text()), namespace="ns")


def by(objects, kind, name):
    return next(o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name)


def test_seed_after_mutation(seed_objects):
    spec = seed_objects[0]["spec"]
    assert spec["queue"] == "default" and spec["maxRetry"] == 3 and spec["minAvailable"] == 3
    assert [(t["name"], t["minAvailable"], t["maxRetry"]) for t in spec["tasks"]] == [("master", 1, 3), ("worker", 2, 3)]
    assert list(spec["plugins"]) == ["pytorch", "status-mounter", "svc"] and spec["plugins"]["svc"] == []


def test_seed_is_admitted_with_status_mounter_registered(seed_objects):
    assert validate_create(seed_objects[0], queues=default_queues()).allowed


def test_seed_objects_from_on_job_add(seed_objects):
    cm = by(seed_objects, "ConfigMap", "resnet-dist-train-svc")["data"]
    assert cm == {
        "master.host": "resnet-dist-train-master-0.resnet-dist-train",
        "VC_MASTER_HOSTS": "resnet-dist-train-master-0.resnet-dist-train",
        "VC_MASTER_NUM": "1",
        "worker.host": "resnet-dist-train-worker-0.resnet-dist-train\nresnet-dist-train-worker-1.resnet-dist-train",
        "VC_WORKER_HOSTS": "resnet-dist-train-worker-0.resnet-dist-train,resnet-dist-train-worker-1.resnet-dist-train",
        "VC_WORKER_NUM": "2",
    }
    service = by(seed_objects, "Service", "resnet-dist-train")["spec"]
    assert service["clusterIP"] == "None" and service["publishNotReadyAddresses"] is False and "ports" not in service
    assert by(seed_objects, "NetworkPolicy", "resnet-dist-train")["spec"]["policyTypes"] == ["Ingress"]
    files = by(seed_objects, "ConfigMap", "resnet-dist-train-status-mounter")["data"]
    assert sorted(files) == ["jsonStatus", "pending", "retryCount", "running"]


@pytest.mark.parametrize(
    ("pod", "rank"),
    [("resnet-dist-train-master-0", "0"), ("resnet-dist-train-worker-0", "1"), ("resnet-dist-train-worker-1", "2")],
)
def test_seed_pods_match_the_reference_table(seed_objects, pod, rank):
    built = by(seed_objects, "Pod", pod)
    assert (built["spec"]["hostname"], built["spec"]["subdomain"]) == (pod, "resnet-dist-train")
    container = built["spec"]["containers"][0]
    values = {e["name"]: e.get("value") for e in container["env"]}
    assert values["MASTER_ADDR"] == "resnet-dist-train-master-0.resnet-dist-train"
    assert (values["MASTER_PORT"], values["WORLD_SIZE"], values["RANK"]) == ("23456", "3", rank)
    assert container["ports"] == [{"name": "pytorchjob-port", "containerPort": 23456}]
    assert [e["name"] for e in container["env"]] == [
        "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK",
        "VC_MASTER_HOSTS", "VC_MASTER_NUM", "VC_WORKER_HOSTS", "VC_WORKER_NUM",
        "Job_retryCount", "Job_pending", "Job_running", "Job_jsonStatus"]
    assert {m["mountPath"] for m in container["volumeMounts"]} == {"/etc/volcano", "/status"}
    assert "initContainers" not in built["spec"]


def test_seed_cat_status_running_shows_the_live_count(seed_objects):
    """`kubectl exec resnet-dist-train-worker-0 -- cat /status/running` prints 2 once two pods run."""
    job = seed_objects[0]
    live = status_mounter_configmap(job, {"state": {"phase": "Pending"}, "minAvailable": 3, "pending": 1, "running": 2})
    assert (live["data"]["pending"], live["data"]["running"]) == ("1", "2")


# ------------------------------------------------------------------ docs/plugins.md shows exactly this

DOC = SEED.parents[1] / "docs" / "plugins.md"


def seed_env_markdown() -> str:
    """The env of every seed pod and the status files, as docs/plugins.md shows them."""
    objects = render_job(yaml.safe_load(SEED.read_text()), namespace="default")
    lines = []
    for pod in (o for o in objects if o["kind"] == "Pod"):
        spec = pod["spec"]
        lines += [f"`{pod['metadata']['name']}` (hostname `{spec['hostname']}`, subdomain `{spec['subdomain']}`):", "",
                  "```text"]
        for env in spec["containers"][0]["env"]:
            if "value" in env:
                lines.append(f"{env['name']}={env['value']}")
            else:
                ref = env["valueFrom"]["configMapKeyRef"]
                lines.append(f"{env['name']} <- configMap {ref['name']}[{ref['key']}]")
        mounts = ", ".join(f"{m['mountPath']} ({m['name']})" for m in spec["containers"][0]["volumeMounts"])
        lines += ["```", "", f"Ports: `pytorchjob-port` 23456. Mounts: {mounts}.", ""]
    files = by(objects, "ConfigMap", "resnet-dist-train-status-mounter")["data"]
    controlled = {"plugin-pytorch": "pytorch", "plugin-status-mounter": "status-mounter", "plugin-svc": "svc"}
    live = status_mounter_configmap(objects[0], {"state": {"phase": "Pending"}, "minAvailable": 3, "pending": 1, "running": 2,
                                                 "controlledResources": controlled})
    lines += ["Files under `/status` (ConfigMap `resnet-dist-train-status-mounter`), when the pods are created, "
              "and once two pods run and one is pending:", "", "| File | At creation | Later |", "|---|---|---|"]
    lines += [f"| `{name}` | `{value}` | `{live['data'][name]}` |" for name, value in files.items()]
    return "\n".join(lines) + "\n"


def test_docs_show_the_rendered_seed_env_and_files():
    text = DOC.read_text()
    begin, end = "<!-- seed-env:begin -->\n", "<!-- seed-env:end -->"
    assert text[text.index(begin) + len(begin):text.index(end)] == seed_env_markdown(), (
        "regenerate: .venv/bin/python -c 'from tests.test_plugins_status_mounter import seed_env_markdown as s; print(s(), end=\"\")'")
