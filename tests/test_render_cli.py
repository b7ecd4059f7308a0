"""`vcbus render` as a user runs it: the mutated job, then every object the controller would create."""

from __future__ import annotations

import base64
import json
import pathlib
import subprocess
import sys

import yaml

from vcbus.cli.main import main

REPO = pathlib.Path(__file__).resolve().parents[1]
SEED = REPO / "examples" / "resnet-dist-train.yaml"


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def write(tmp_path, obj, name="job.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(obj))
    return str(path)


def test_seed_renders_as_multi_document_yaml_with_the_job_first(capsys):
    code, out, _ = run(capsys, "render", str(SEED))
    assert code == 0
    docs = list(yaml.safe_load_all(out))
    assert [(d["kind"], d["metadata"]["name"]) for d in docs] == [
        ("Job", "resnet-dist-train"),
        ("PodGroup", docs[1]["metadata"]["name"]),
        ("Pod", "resnet-dist-train-master-0"),
        ("Pod", "resnet-dist-train-worker-0"),
        ("Pod", "resnet-dist-train-worker-1"),
        ("ConfigMap", "resnet-dist-train-svc"),
        ("Service", "resnet-dist-train"),
        ("NetworkPolicy", "resnet-dist-train"),
        ("ConfigMap", "resnet-dist-train-status-mounter"),
    ]
    assert docs[0]["spec"]["plugins"]["svc"] == [] and docs[0]["spec"]["queue"] == "default"
    assert docs[1]["metadata"]["name"].startswith("resnet-dist-train-") and docs[1]["spec"]["minMember"] == 3


def test_render_is_deterministic(capsys):
    first = run(capsys, "render", str(SEED))[1]
    assert run(capsys, "render", str(SEED))[1] == first


def test_json_output_is_a_v1_list(capsys):
    code, out, _ = run(capsys, "render", str(SEED), "-o", "json")
    listing = json.loads(out)
    assert code == 0 and listing["apiVersion"] == "v1" and listing["kind"] == "List" and len(listing["items"]) == 9


def test_pod_option_prints_one_pod_with_env_ports_hostname(capsys):
    code, out, _ = run(capsys, "render", str(SEED), "--pod", "resnet-dist-train-worker-1", "-o", "json")
    pod = json.loads(out)
    assert code == 0 and pod["kind"] == "Pod"
    env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
    assert env["RANK"] == "2" and env["WORLD_SIZE"] == "3"
    assert pod["spec"]["hostname"] == "resnet-dist-train-worker-1" and pod["spec"]["subdomain"] == "resnet-dist-train"


def test_unknown_pod_lists_the_pods(capsys):
    code, _, err = run(capsys, "render", str(SEED), "--pod", "nope")
    assert code == 2 and "resnet-dist-train-master-0" in err


def test_namespace_option_and_given_uid(tmp_path, capsys):
    job = yaml.safe_load(SEED.read_text())
    job["metadata"]["uid"] = "1234"
    code, out, _ = run(capsys, "render", write(tmp_path, job), "-n", "team", "-o", "json")
    items = json.loads(out)["items"]
    assert items[1]["metadata"] == {**items[1]["metadata"], "name": "resnet-dist-train-1234", "namespace": "team"}
    assert all(i["metadata"]["namespace"] == "team" for i in items)


def test_mpi_job_gets_svc_ssh_and_a_generated_key(tmp_path, capsys):
    job = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "mpi"},
           "spec": {"plugins": {"mpi": []}, "tasks": [
               {"name": "master", "replicas": 1, "template": {"spec": {"containers": [{"name": "m", "image": "x"}]}}},
               {"name": "worker", "replicas": 2, "template": {"spec": {"containers": [{"name": "w", "image": "x"}]}}}]}}
    code, out, _ = run(capsys, "render", write(tmp_path, job), "-o", "json")
    items = json.loads(out)["items"]
    secret = next(i for i in items if i["kind"] == "Secret")
    assert code == 0 and secret["metadata"]["name"] == "mpi-ssh"
    assert base64.b64decode(secret["data"]["id_rsa"]).startswith(b"-----BEGIN RSA PRIVATE KEY-----")
    assert base64.b64decode(secret["data"]["authorized_keys"]).startswith(b"ssh-rsa ")
    master = next(i for i in items if i["metadata"]["name"] == "mpi-master-0")
    assert {"name": "MPI_HOST", "value": "mpi-worker-0.mpi,mpi-worker-1.mpi"} in master["spec"]["containers"][0]["env"]


def test_volume_claims_render_pvcs(tmp_path, capsys):
    job = yaml.safe_load(SEED.read_text())
    job["spec"]["volumes"] = [{"mountPath": "/data", "volumeClaim": {"accessModes": ["ReadWriteOnce"],
                                                                      "resources": {"requests": {"storage": "1Gi"}}}}]
    items = json.loads(run(capsys, "render", write(tmp_path, job), "-o", "json")[1])["items"]
    pvc = next(i for i in items if i["kind"] == "PersistentVolumeClaim")
    pod = next(i for i in items if i["kind"] == "Pod")
    assert pvc["metadata"]["name"].startswith("resnet-dist-train-pvc-")
    assert {"persistentVolumeClaim": {"claimName": pvc["metadata"]["name"]}}.items() <= pod["spec"]["volumes"][0].items()


def test_job_the_webhook_would_deny_is_not_rendered(tmp_path, capsys):
    job = yaml.safe_load(SEED.read_text())
    job["spec"]["minAvailable"] = 9
    code, out, err = run(capsys, "render", write(tmp_path, job))
    assert code == 1 and out == ""
    assert "the admission webhook would deny it: job 'minAvailable' should not be greater than total replicas in tasks;" in err


def test_ray_job_without_head_fails_like_the_controller(tmp_path, capsys):
    job = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "r"},
           "spec": {"plugins": {"ray": []}, "tasks": [{"name": "worker", "replicas": 1,
                                                        "template": {"spec": {"containers": [{"name": "worker", "image": "x"}]}}}]}}
    code, _, err = run(capsys, "render", write(tmp_path, job))
    assert code == 1 and "job r doesn't have head task head" in err


def test_bad_yaml_and_no_job(tmp_path, capsys):
    broken = tmp_path / "broken.yaml"
    broken.write_text("kind: Job\nspec: {tasks: [}\n")
    code, _, err = run(capsys, "render", str(broken))
    assert code == 2 and err.startswith(f"error: {broken}:2:")
    empty = write(tmp_path, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}, "cm.yaml")
    code, _, err = run(capsys, "render", empty)
    assert code == 2 and "holds 1 ConfigMap (v1), no batch.volcano.sh/v1alpha1 Job to render" in err


def test_help_teaches_with_examples(capsys):
    code, out, _ = run(capsys, "render", "--help")
    assert code == 0 and "Examples:" in out and "--pod" in out


def test_malformed_object_is_an_input_error_or_a_schema_refusal_not_a_traceback(tmp_path, capsys):
    job = yaml.safe_load(SEED.read_text())
    job["spec"]["tasks"][0]["template"]["spec"]["containers"] = "x"
    path = write(tmp_path, job)
    # Both check the CRD schema's types first, which include Kubernetes' pod template schema: the API
    # server's refusal (exit 1, its words, naming the field and the type), never a Python error.
    code, _, err = run(capsys, "render", path)
    assert code == 1 and 'spec.tasks[0].template.spec.containers in body must be of type array: "string"' in err
    assert "Error" not in err.replace("error: ", "", 1)
    code, out, err = run(capsys, "validate", path)
    assert code == 1, out + err
    assert 'spec.tasks[0].template.spec.containers in body must be of type array: "string"' in out + err


def test_render_refuses_an_object_etcd_cannot_store(tmp_path):
    """etcd's 1.5 MiB limit, checked last (after admission) as the API server meets it."""
    job = yaml.safe_load(SEED.read_text())
    job["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["args"] = ["y" * 1000] * 1600
    path = tmp_path / "big.json"
    path.write_text(json.dumps(job))
    res = subprocess.run([sys.executable, "-m", "vcbus.cli.main", "render", str(path)], capture_output=True,
                         cwd=REPO, timeout=120)
    assert res.returncode == 1 and res.stdout == b""
    assert "etcdserver: request is too large (the object is 1,605,708 bytes as JSON" in res.stderr.decode()
