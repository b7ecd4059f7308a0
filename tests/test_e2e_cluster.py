"""End to end on a real kube-apiserver and a real nats-server: vcbus is the vcjob controller.

The seed job `resnet-dist-train` is applied as written in the user's document
(through the vcbus admission webhook, which fills in the defaults). `vcbus up
--kubeconfig` (a real subprocess) bridges the watch events into NATS, decides,
projects and acts on the cluster. The test plays the scheduler (PodGroup to
Inqueue) and the kubelets (vcbus.k8s.podsim): pods run, worker-1 fails, the
job restarts as a whole, the master succeeds, the job completes. Then the
exported event log, replayed offline, gives exactly the live final status.
"""

from __future__ import annotations

import json
import os
import pathlib
import random
import signal
import subprocess
import sys
import time

import pytest
import yaml
from kubernetes import client

from tests.test_webhook_k8s import webhook  # noqa: F401 - the admission webhook fixture
from vcbus.k8s.podsim import PodSimulator
from vcbus.k8s.watching import api_request

pytestmark = [pytest.mark.k8s, pytest.mark.nats, pytest.mark.slow]

ROOT = pathlib.Path(__file__).resolve().parents[1]
SEED = ROOT / "examples" / "resnet-dist-train.yaml"
G, V = "batch.volcano.sh", "v1alpha1"
NAME = "resnet-dist-train"


def ensure_default_queue(api) -> None:
    custom = client.CustomObjectsApi(api)
    try:
        custom.get_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues", "default")
    except client.ApiException as err:
        if err.status != 404:
            raise
        custom.create_cluster_custom_object(
            "scheduling.volcano.sh", "v1beta1", "queues",
            {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "default"},
             "spec": {"weight": 1}},
        )
    custom.patch_cluster_custom_object_status(
        "scheduling.volcano.sh", "v1beta1", "queues", "default", {"status": {"state": "Open"}}
    )


class Vcbus:
    """`vcbus up` as a child process, restartable."""

    def __init__(self, nats_url: str, kubeconfig: str, namespace: str, log: pathlib.Path) -> None:
        self.cmd = [sys.executable, "-m", "vcbus.cli.main", "up", "--nats", nats_url, "--kubeconfig", kubeconfig,
                    "--namespace", namespace, "-v"]
        self.log = log
        self.proc: subprocess.Popen | None = None
        self.kills = 0
        self.restart_due = False

    def start(self) -> None:
        self.proc = subprocess.Popen(self.cmd, cwd=ROOT, stdout=open(self.log, "ab"), stderr=subprocess.STDOUT)

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)
        self.kills += 1
        self.restart_due = True

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


def vcbus_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vcbus.cli.main", *args], cwd=ROOT, capture_output=True, timeout=120)


def run_seed_job(k8s, nats_url: str, namespace: str, tmp_path: pathlib.Path, *, kill_at: set[str] = frozenset()):
    api = k8s.api_client()
    custom = client.CustomObjectsApi(api)
    sim = PodSimulator(api)
    node = f"podsim-e2e-{namespace[-6:]}"
    sim.create_node(node, cpu="64", memory="256Gi")
    ensure_default_queue(api)
    vc = Vcbus(nats_url, k8s.kubeconfig, namespace, tmp_path / "vcbus-up.log")
    vc.start()
    seed = int(os.environ.get("VCBUS_E2E_SEED", random.randrange(1 << 30)))
    print(f"kill timing seed: {seed} (VCBUS_E2E_SEED={seed} repeats it)")
    rng = random.Random(seed)
    seen: dict[tuple[str, str], set[str]] = {}  # (pod name, job version) -> uids ever observed
    files_seen: list[dict] = []
    stage = "start"
    try:
        job = yaml.safe_load(SEED.read_text())
        custom.create_namespaced_custom_object(G, V, namespace, "jobs", job)
        deadline = time.monotonic() + 150
        while True:
            assert time.monotonic() < deadline, f"stuck at stage {stage}; see {vc.log}:\n{vc.log.read_text()[-3000:]}"
            if not vc.alive():
                if vc.restart_due:  # killed on purpose: start again
                    vc.restart_due = False
                    vc.start()
                else:
                    pytest.fail(f"vcbus up died: {vc.log.read_text()[-3000:]}")
            for pg in custom.list_namespaced_custom_object("scheduling.volcano.sh", "v1beta1", namespace, "podgroups")["items"]:
                if (pg.get("status") or {}).get("phase", "") in ("", "Pending"):
                    sim.set_podgroup_phase(namespace, pg["metadata"]["name"], "Inqueue")
            sim.step(namespace)
            pods = sim.list_pods(namespace, label_selector=f"volcano.sh/job-name={NAME}")
            for p in pods:
                meta = p["metadata"]
                seen.setdefault((meta["name"], meta["annotations"]["volcano.sh/job-version"]), set()).add(meta["uid"])
            live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
            running = {p["metadata"]["name"]: p for p in live if p["status"].get("phase") == "Running"}
            status = custom.get_namespaced_custom_object(G, V, namespace, "jobs", NAME).get("status") or {}
            if stage == "start" and len(running) == 3 and status.get("running") == 3:
                # the status files a worker reads (`cat /status/running`) follow the status
                files = client.CoreV1Api(api).read_namespaced_config_map(f"{NAME}-status-mounter", namespace).data
                files_seen.append(dict(files))
                if "running" in kill_at and vc.kills == 0:
                    vc.kill()
                sim.fail(f"{NAME}-worker-1", 1, namespace=namespace)
                stage = "failed"
            elif stage == "failed" and status.get("retryCount") == 1 and len(running) == 3 and all(
                p["metadata"]["annotations"]["volcano.sh/job-version"] != "0" for p in running.values()
            ):
                if "restarted" in kill_at and vc.kills <= 1:
                    vc.kill()
                sim.succeed(f"{NAME}-master-0", namespace=namespace)
                stage = "master-done"
            elif stage == "master-done" and status.get("state", {}).get("phase") == "Completed":
                break
            elif stage == "failed" and "failed" in kill_at and vc.kills == 0:
                time.sleep(rng.uniform(0.0, 0.6))  # somewhere inside the restart
                vc.kill()
            time.sleep(0.2)
        time.sleep(1.0)  # let the last writes settle
        return custom.get_namespaced_custom_object(G, V, namespace, "jobs", NAME), seen, vc, files_seen
    finally:
        vc.stop()
        sim.delete_node(node)  # other tests schedule onto whatever nodes exist


def check_completed_job(k8s, namespace: str, job: dict, seen: dict) -> None:
    status = job["status"]
    assert status["state"]["phase"] == "Completed"
    assert status["retryCount"] == 1
    # no duplicate pod, ever: one uid per (pod name, job version)
    assert all(len(uids) == 1 for uids in seen.values()), seen
    assert sorted(seen) == sorted(
        (f"{NAME}-{p}", v) for p in ("master-0", "worker-0", "worker-1") for v in ("0", "1")
    )
    # what `kubectl get vcjob` prints: the CRD's printer columns
    table = api_request(
        k8s.api_client(), "GET", f"/apis/{G}/{V}/namespaces/{namespace}/jobs/{NAME}",
        accept="application/json;as=Table;v=v1;g=meta.k8s.io",
    )
    columns = [c["name"] for c in table["columnDefinitions"]]
    row = dict(zip(columns, table["rows"][0]["cells"]))
    assert row["STATUS"] == "Completed"


def check_labels_and_annotations(pods: list[dict], job: dict) -> None:
    for p in pods:
        meta = p["metadata"]
        task = meta["annotations"]["volcano.sh/task-spec"]
        assert meta["labels"]["volcano.sh/job-name"] == NAME
        assert meta["labels"]["volcano.sh/task-spec"] == task
        assert meta["labels"]["volcano.sh/queue-name"] == "default"
        assert meta["annotations"]["scheduling.k8s.io/group-name"] == f"{NAME}-{job['metadata']['uid']}"
        assert meta["annotations"]["volcano.sh/template-uid"] == f"{NAME}-{task}"
        assert meta["ownerReferences"][0]["uid"] == job["metadata"]["uid"]


def replayed_status(nats_url: str, tmp_path: pathlib.Path, namespace: str) -> dict:
    exported = vcbus_cli("log", "export", "--nats", nats_url)
    assert exported.returncode == 0, exported.stderr.decode()
    log = tmp_path / "exported.jsonl"
    log.write_bytes(exported.stdout)
    res = vcbus_cli("replay", "--json", "--job", f"{namespace}/{NAME}", str(log))
    assert res.returncode == 0, res.stderr.decode()
    return json.loads(res.stdout)["jobs"][0]["status"]


def test_seed_job_runs_restarts_and_completes_on_a_real_cluster(k8s, nats_server, bus_settings, webhook, tmp_path):
    namespace = webhook["namespace"]
    pods_before = []
    job, seen, _, files = run_seed_job(k8s, nats_server.url, namespace, tmp_path)
    check_completed_job(k8s, namespace, job, seen)
    assert files and files[0]["running"] == "3" and files[0]["retryCount"] == "0"
    core = client.CoreV1Api(k8s.api_client())
    final_files = core.read_namespaced_config_map(f"{NAME}-status-mounter", namespace).data
    assert final_files["retryCount"] == "1" and json.loads(final_files["jsonStatus"])["state"]["phase"] == "Completed"
    events = [(e.reason, e.message) for e in core.list_namespaced_event(namespace).items if e.involved_object.name == NAME]
    assert ("ExecuteAction", "Start to execute action RestartJob ") in events
    assert ("ExecuteAction", "Start to execute action CompleteJob ") in events
    sim = PodSimulator(k8s.api_client())
    pods_before = sim.list_pods(namespace, label_selector=f"volcano.sh/job-name={NAME}")
    check_labels_and_annotations(pods_before, job)
    env = {e["name"]: e.get("value") for e in next(
        p for p in pods_before if p["metadata"]["name"].endswith("master-0"))["spec"]["containers"][0]["env"]}
    assert env["MASTER_PORT"] == "23456" and env["WORLD_SIZE"] == "3" and env["RANK"] == "0"
    assert replayed_status(nats_server.url, tmp_path, namespace) == job["status"]


@pytest.mark.parametrize("kill_at", [{"running"}, {"failed"}, {"restarted"}], ids=lambda k: "kill-when-" + "-".join(k))
def test_sigkill_of_vcbus_at_any_point_gives_the_same_outcome(k8s, nats_server, bus_settings, webhook, tmp_path, kill_at):
    namespace = webhook["namespace"]
    job, seen, vc, _ = run_seed_job(k8s, nats_server.url, namespace, tmp_path, kill_at=kill_at)
    assert vc.kills >= 1
    check_completed_job(k8s, namespace, job, seen)
    assert replayed_status(nats_server.url, tmp_path, namespace) == job["status"]
