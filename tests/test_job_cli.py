"""`vcbus job ...` and `vcbus queue ...` against a real API server (tests/fixtures_k8s.py).

Each command is run as the user runs it (a subprocess with --kubeconfig), and what it
did is read back from the API server. The Commands that suspend, resume, open and
close write are then replayed through vcbus's own controllers (`vcbus replay`), so
the test shows vcbus understands them; their shape (generateName, a controller
owner reference to the target, `target`, `action`) is checked against vcctl's.
Failures: an unreachable server and a forbidden user (a real service-account token,
no RBAC grant) are one line each, with exit code 4; a missing job is exit code 1.
"""

from __future__ import annotations

import json
import pathlib
import socket
import subprocess
import sys

import pytest
import yaml

from tests.builders import Harness
from tests.test_sm_queues import queue_outs
from vcbus import exitcodes
from vcbus.k8s.watching import KubeApiError, api_request

pytestmark = pytest.mark.k8s

ROOT = pathlib.Path(__file__).resolve().parents[1]
JOBS = "/apis/batch.volcano.sh/v1alpha1/namespaces/{ns}/jobs"
COMMANDS = "/apis/bus.volcano.sh/v1alpha1/namespaces/{ns}/commands"
QUEUES = "/apis/scheduling.volcano.sh/v1beta1/queues"
PODGROUPS = "/apis/scheduling.volcano.sh/v1beta1/namespaces/{ns}/podgroups"
MERGE = "application/merge-patch+json"


def vcbus(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vcbus.cli.main", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, input=stdin)


def ok(*args: str, stdin: str | None = None) -> str:
    res = vcbus(*args, stdin=stdin)
    assert res.returncode == 0, f"vcbus {' '.join(args)}: {res.returncode}\n{res.stdout}\n{res.stderr}"
    return res.stdout


def vcjob(name: str, queue: str = "default", replicas: int = 2) -> dict:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": name, "labels": {"app": name}},
        "spec": {"minAvailable": replicas, "queue": queue, "schedulerName": "volcano",
                 "tasks": [{"name": "worker", "replicas": replicas, "template": {"spec": {
                     "containers": [{"name": "main", "image": "busybox", "command": ["sleep", "60"]}],
                     "restartPolicy": "Never"}}}]},
    }


@pytest.fixture
def kc(k8s) -> list[str]:
    return ["--kubeconfig", str(k8s.kubeconfig)]


def commands(api, ns: str) -> list[dict]:
    return api_request(api, "GET", COMMANDS.format(ns=ns))["items"]


def replay(tmp_path: pathlib.Path, objects: list[dict]) -> dict:
    log = tmp_path / "watch.jsonl"
    log.write_text("".join(json.dumps({"type": "ADDED", "object": o}) + "\n" for o in objects))
    return json.loads(ok("replay", "--json", str(log)))


def test_run_list_view_delete(k8s, k8s_namespace, kc, tmp_path):
    ns = k8s_namespace
    f = tmp_path / "jobs.yaml"
    f.write_text(yaml.safe_dump_all([vcjob("alpha"), vcjob("beta", queue="other", replicas=3)]))
    out = ok("job", "run", "-f", str(f), "-n", ns, *kc)
    assert out.splitlines() == [f"job.batch.volcano.sh/alpha created in namespace {ns}",
                                f"job.batch.volcano.sh/beta created in namespace {ns}"]
    api = k8s.api_client()
    names = [j["metadata"]["name"] for j in api_request(api, "GET", JOBS.format(ns=ns))["items"]]
    assert sorted(names) == ["alpha", "beta"]
    api_request(api, "PATCH", f"{JOBS.format(ns=ns)}/alpha/status", content_type=MERGE,
                body={"status": {"state": {"phase": "Running"}, "minAvailable": 2, "running": 2, "retryCount": 1}})

    table = ok("job", "list", "-n", ns, *kc).splitlines()
    assert table[0].split() == ["NAME", "CREATION", "PHASE", "JOBTYPE", "REPLICAS", "MIN", "PENDING", "RUNNING",
                                "SUCCEEDED", "FAILED", "UNKNOWN", "RETRYCOUNT"]
    alpha = table[1].split()
    assert alpha[0] == "alpha" and alpha[2:] == ["Running", "Batch", "2", "2", "0", "2", "0", "0", "0", "1"]
    assert table[2].split()[:5] == ["beta", table[2].split()[1], "-", "Batch", "3"]

    wide = ok("job", "list", "-n", ns, "-o", "wide", *kc).splitlines()
    assert wide[0].split()[-4:] == ["QUEUE", "SCHEDULER", "VERSION", "AGE"]
    assert wide[2].split()[-4:-1] == ["other", "volcano", "0"]
    listed = json.loads(ok("job", "list", "-n", ns, "-o", "json", *kc))
    assert listed["kind"] == "List" and [i["metadata"]["name"] for i in listed["items"]] == ["alpha", "beta"]
    assert listed["items"][0]["apiVersion"] == "batch.volcano.sh/v1alpha1" and listed["items"][0]["kind"] == "Job"
    assert "managedFields" not in listed["items"][0]["metadata"]
    as_yaml = yaml.safe_load(ok("job", "list", "-n", ns, "-o", "yaml", "--queue", "other", *kc))
    assert [i["metadata"]["name"] for i in as_yaml["items"]] == ["beta"]
    assert ok("job", "list", "-n", ns, "-o", "name", "-l", "app=alpha", *kc).split() == ["job.batch.volcano.sh/alpha"]
    everywhere = ok("job", "list", "-A", *kc).splitlines()
    assert everywhere[0].split()[:2] == ["NAMESPACE", "NAME"]
    assert any(line.split()[:2] == [ns, "alpha"] for line in everywhere[1:])

    api_request(api, "POST", f"/api/v1/namespaces/{ns}/events", body={
        "metadata": {"name": "alpha.evt1"}, "type": "Warning", "reason": "PodGroupPending",
        "message": "PodGroup alpha unschedulable", "source": {"component": "vc-controller-manager"},
        "involvedObject": {"kind": "Job", "namespace": ns, "name": "alpha", "apiVersion": "batch.volcano.sh/v1alpha1"},
        "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:00:00Z", "count": 1})
    view = ok("job", "view", f"{ns}/alpha", *kc)
    for line in ("Name:", "Namespace:", "Tasks:", "Phase:", "Retry Count:"):
        assert line in view
    assert f"Namespace:            {ns}" in view and "busybox" in view and "Running" in view
    assert "PodGroupPending" in view and "PodGroup alpha unschedulable" in view and "vc-controller-manager" in view
    one = yaml.safe_load(ok("job", "view", "alpha", "-n", ns, "-o", "yaml", *kc))
    assert one["kind"] == "Job" and one["status"]["retryCount"] == 1

    assert ok("job", "delete", f"{ns}/beta", *kc).strip() == f"job.batch.volcano.sh/beta deleted from namespace {ns}"
    gone = vcbus("job", "view", f"{ns}/beta", *kc)
    assert gone.returncode == exitcodes.NEGATIVE
    assert gone.stderr.strip() == f"error: job {ns}/beta not found on cluster {k8s.url} (context envtest)"


def test_run_refuses_bad_input(k8s, k8s_namespace, kc, tmp_path):
    pod = tmp_path / "pod.yaml"
    pod.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n")
    res = vcbus("job", "run", "-f", str(pod), *kc)
    assert res.returncode == exitcodes.USAGE
    assert res.stderr.strip() == f"error: {pod}:1: v1/Pod is not a batch.volcano.sh/v1alpha1 Job"
    dup = ok("job", "run", "-f", "-", "-n", k8s_namespace, "-o", "name", *kc, stdin=json.dumps(vcjob("twice")))
    assert dup.strip() == "job.batch.volcano.sh/twice"
    again = vcbus("job", "run", "-f", "-", "-n", k8s_namespace, *kc, stdin=json.dumps(vcjob("twice")))
    assert again.returncode == exitcodes.CLUSTER
    assert again.stderr.startswith("error: -:1: create jobs.batch.volcano.sh in namespace")
    assert "AlreadyExists" in again.stderr and len(again.stderr.strip().splitlines()) == 1
    other = vcbus("job", "list", "-n", "a", "-A", *kc)
    assert other.returncode == exitcodes.USAGE and "not both" in other.stderr


def test_list_finds_nothing_names_the_cluster(k8s, k8s_namespace, kc):
    res = vcbus("job", "list", "-n", k8s_namespace, *kc)
    assert res.returncode == 0 and res.stdout == ""
    assert res.stderr.strip() == f"No resources found in namespace {k8s_namespace} of cluster {k8s.url} (context envtest)."
    empty = json.loads(ok("job", "list", "-n", k8s_namespace, "-o", "json", *kc))
    assert empty["items"] == []


def test_suspend_resume_create_commands_vcbus_understands(k8s, k8s_namespace, kc, tmp_path):
    ns = k8s_namespace
    api = k8s.api_client()
    job = api_request(api, "POST", JOBS.format(ns=ns), body=vcjob("sus"))
    out = ok("job", "suspend", "sus", "-n", ns, *kc)
    [cmd] = commands(api, ns)
    assert out.strip() == f"command.bus.volcano.sh/{cmd['metadata']['name']} created: AbortJob job {ns}/sus"
    ref = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "sus", "uid": job["metadata"]["uid"],
           "controller": True, "blockOwnerDeletion": True}
    assert cmd["action"] == "AbortJob" and cmd["target"] == ref and cmd["metadata"]["ownerReferences"] == [ref]
    assert cmd["metadata"]["generateName"] == "sus-abortjob-"
    ok("job", "resume", f"{ns}/sus", *kc)
    resume = next(c for c in commands(api, ns) if c["action"] == "ResumeJob")
    assert resume["metadata"]["generateName"] == "sus-resumejob-" and resume["target"] == ref

    queue = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "default", "uid": "q"},
             "spec": {"weight": 1}, "status": {"state": "Open"}}
    job = dict(job, status={"state": {"phase": "Running"}, "minAvailable": 2})
    report = replay(tmp_path, [queue, job, cmd, resume])
    [decided] = [j for j in report["jobs"] if j["name"] == "sus"]
    moves = [h["to"] for h in decided["history"]]
    assert moves[:3] == ["Aborting", "Aborted", "Restarting"], decided["history"]
    assert "AbortJob" in json.dumps(decided["history"][0]) and "ResumeJob" in json.dumps(decided["history"][2])

    missing = vcbus("job", "suspend", "nope", "-n", ns, *kc)
    assert missing.returncode == exitcodes.NEGATIVE and "job " + ns + "/nope not found" in missing.stderr


def test_queue_list_get_open_close(k8s, k8s_namespace, kc, tmp_path):
    api = k8s.api_client()
    name = f"q-{k8s_namespace[-6:]}"
    queue = api_request(api, "POST", QUEUES, body={"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                                                   "metadata": {"name": name}, "spec": {"weight": 3}})
    api_request(api, "PATCH", f"{QUEUES}/{name}/status", content_type=MERGE, body={"status": {"state": "Open"}})
    for i, phase in enumerate(("Running", "Running", "Inqueue", "Pending")):
        pg = f"pg-{i}"
        api_request(api, "POST", PODGROUPS.format(ns=k8s_namespace), body={
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": {"name": pg},
            "spec": {"minMember": 1, "queue": name}})
        path = f"{PODGROUPS.format(ns=k8s_namespace)}/{pg}"
        try:  # the status subresource when the CRD has one, else the object itself
            api_request(api, "PATCH", f"{path}/status", content_type=MERGE, body={"status": {"phase": phase}})
        except KubeApiError as err:
            assert err.status == 404, err
            api_request(api, "PATCH", path, content_type=MERGE, body={"status": {"phase": phase}})
    table = ok("queue", "list", *kc).splitlines()
    assert table[0].split() == ["NAME", "WEIGHT", "STATE", "PARENT", "INQUEUE", "PENDING", "RUNNING", "UNKNOWN",
                                "COMPLETED"]
    [row] = [line.split() for line in table if line.split()[0] == name]
    assert row == [name, "3", "Open", "-", "1", "1", "2", "0", "0"]
    got = ok("queue", "get", name, *kc).splitlines()
    assert got[1].split() == row
    assert ok("queue", "get", name, "-o", "name", *kc).strip() == f"queue.scheduling.volcano.sh/{name}"
    assert yaml.safe_load(ok("queue", "get", name, "-o", "yaml", *kc))["spec"]["weight"] == 3
    assert ok("queue", "list", "-o", "wide", *kc).splitlines()[0].split()[-2:] == ["RECLAIMABLE", "AGE"]

    before = {c["metadata"]["name"] for c in commands(api, "default")}
    ok("queue", "close", name, *kc)
    ok("queue", "open", name, *kc)
    mine = [c for c in commands(api, "default") if c["metadata"]["name"] not in before]
    ref = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "name": name,
           "uid": queue["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}
    assert sorted(c["action"] for c in mine) == ["CloseQueue", "OpenQueue"]
    assert all(c["target"] == ref and c["metadata"]["ownerReferences"] == [ref] for c in mine)
    close = next(c for c in mine if c["action"] == "CloseQueue")
    reopen = next(c for c in mine if c["action"] == "OpenQueue")
    assert close["metadata"]["generateName"] == f"{name}-closequeue-"
    # vcbus's queue controller consumes them as they are on the cluster: Open -> Closing (PodGroups left) -> Open
    h = Harness()
    h.feed("ADDED", api_request(api, "GET", f"{QUEUES}/{name}"))
    for pg in api_request(api, "GET", PODGROUPS.format(ns=k8s_namespace))["items"]:
        h.feed("ADDED", pg)
    assert ("state", name, "Open", "Closing", "CloseQueue") in queue_outs(h.feed("ADDED", close))
    assert ("state", name, "Closing", "Open", "OpenQueue") in queue_outs(h.feed("ADDED", reopen))

    none = vcbus("queue", "list", "-l", "no-such=label", *kc)
    assert none.returncode == 0 and none.stdout == ""
    assert none.stderr.strip() == f"No resources found on cluster {k8s.url} (context envtest)."
    missing = vcbus("queue", "get", "no-such-queue", *kc)
    assert missing.returncode == exitcodes.NEGATIVE
    assert missing.stderr.strip() == f"error: queue no-such-queue not found on cluster {k8s.url} (context envtest)"


def test_unreachable_and_forbidden_are_one_line(k8s, k8s_namespace, tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    cfg = yaml.safe_load(k8s.kubeconfig.read_text())
    cfg["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{port}"
    down = tmp_path / "down.kubeconfig"
    down.write_text(yaml.safe_dump(cfg))
    res = vcbus("job", "list", "--kubeconfig", str(down))
    assert res.returncode == exitcodes.CLUSTER, res.stderr
    assert res.stderr.startswith(f"error: cannot reach the API server at https://127.0.0.1:{port}")
    assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr

    api = k8s.api_client()
    api_request(api, "POST", f"/api/v1/namespaces/{k8s_namespace}/serviceaccounts", body={"metadata": {"name": "nobody"}})
    token = api_request(api, "POST", f"/api/v1/namespaces/{k8s_namespace}/serviceaccounts/nobody/token",
                        body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                              "spec": {"expirationSeconds": 600}})["status"]["token"]
    cfg = yaml.safe_load(k8s.kubeconfig.read_text())
    cfg["users"][0]["user"] = {"token": token}
    nobody = tmp_path / "nobody.kubeconfig"
    nobody.write_text(yaml.safe_dump(cfg))
    res = vcbus("job", "list", "-n", k8s_namespace, "--kubeconfig", str(nobody))
    assert res.returncode == exitcodes.CLUSTER
    assert res.stderr.startswith(f"error: forbidden: cannot list jobs.batch.volcano.sh in namespace {k8s_namespace} "
                                 f"on cluster {k8s.url} (context envtest): ")
    assert f"system:serviceaccount:{k8s_namespace}:nobody" in res.stderr
    cfg["users"][0]["user"] = {"token": "not-a-token"}
    nobody.write_text(yaml.safe_dump(cfg))
    res = vcbus("queue", "list", "--kubeconfig", str(nobody))
    assert res.returncode == exitcodes.CLUSTER
    assert res.stderr.strip() == f"error: the API server at {k8s.url} refused the kubeconfig's credentials (401 Unauthorized)"
    res = vcbus("job", "list", "--kubeconfig", str(tmp_path / "absent"))
    assert res.returncode == exitcodes.USAGE and "no such file" in res.stderr
