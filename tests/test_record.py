"""`vcbus record` on a real API server, and what real kubectl prints, replayed.

One run of tests/record_scenario.py (a vcjob whose worker fails, then a Command
aborts it, then everything is deleted) is recorded at the same time by
`vcbus record` (merged), by one real `kubectl --watch --output-watch-events`
per kind (JSON and YAML), by a kubectl watch without event types, and listed
half-way with `kubectl get a,b,c -o json|yaml`. Each of those real files must
replay: the per-kind watches, concatenated or given together, exactly as the
merged recording; lists and plain watches as snapshots, with a warning.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time

import pytest
import yaml

from tests.k8s_env import asset_dir
from tests.record_scenario import JOB, drive
from tests.test_replay_cli import records
from tests.test_replay_live import Output, interruptible
from tests.test_webhook_k8s import webhook  # noqa: F401 - the admission webhook fixture (the e2e test's)
from vcbus.k8s.watching import api_request

pytestmark = pytest.mark.k8s

ROOT = pathlib.Path(__file__).resolve().parents[1]
DEADLINE = 90.0
KINDS = ("vcjobs", "pods", "podgroups", "queues", "commands")
KUBECTL_NAMES = {"vcjobs": "jobs.batch.volcano.sh", "pods": "pods", "podgroups": "podgroups.scheduling.volcano.sh",
                 "queues": "queues.scheduling.volcano.sh", "commands": "commands.bus.volcano.sh"}


@pytest.fixture(scope="module")
def kubectl() -> str:
    # The kubectl that scripts/envtest.sh builds beside kube-apiserver (same version), else PATH's.
    assets = asset_dir()
    built = assets / "kubectl" if assets is not None else None
    path = str(built) if built is not None and os.access(built, os.X_OK) else shutil.which("kubectl")
    if path is None:
        msg = "no kubectl (run `make envtest`, which builds it, or put one on PATH): the tests of what real kubectl prints need it"
        if os.environ.get("VCBUS_REQUIRE_K8S", "") not in ("", "0", "false", "no"):
            pytest.fail(msg, pytrace=False)
        pytest.skip(msg)
    return path


def wait_until(condition, what: str, deadline: float = DEADLINE):
    end = time.monotonic() + deadline
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < end, f"timed out waiting for {what}"
        time.sleep(0.05)


OBJECT_KINDS = {"vcjobs": "Job", "pods": "Pod", "podgroups": "PodGroup", "queues": "Queue", "commands": "Command"}


def yaml_events(path: pathlib.Path) -> list[dict]:
    """The whole events of a kubectl `-o yaml` watch written so far (`type:` is a document's last key)."""
    try:
        return [doc for doc in yaml.safe_load_all(path.read_text()) if isinstance(doc, dict) and "type" in doc]
    except (yaml.YAMLError, FileNotFoundError):  # half-written
        return []


def parsed(path: pathlib.Path) -> list[dict]:
    """The records of a JSON log (pretty or lines) written so far; [] while its last record is half-written."""
    try:
        return records(path)
    except (ValueError, FileNotFoundError):  # half-written, or nothing written yet
        return []


def vcbus(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vcbus.cli.main", *args], cwd=ROOT, capture_output=True,
                          timeout=120, **kw)


def replay(*files) -> tuple[dict, str]:
    res = vcbus("replay", "--json", *map(str, files))
    assert res.returncode == 0, res.stderr.decode()
    return json.loads(res.stdout), res.stderr.decode()


class Recorder:
    """`vcbus record` as a child process: started means its snapshot is written and its watches run."""

    def __init__(self, k8s, out: pathlib.Path | None, *args: str, stdout=None) -> None:
        cmd = [sys.executable, "-m", "vcbus.cli.main", "record", "--kubeconfig", str(k8s.kubeconfig), *args]
        if out is not None:
            cmd += ["-o", str(out)]
        self.proc = subprocess.Popen(cmd, cwd=ROOT, stdout=stdout, stderr=subprocess.PIPE, preexec_fn=interruptible)
        self.err = Output(self.proc.stderr)
        # written once the snapshot is written and the watches are started
        self.first = self.err.wait_for(lambda line: True, "vcbus record's first line")
        assert self.first.startswith("recording "), self.first

    def stop(self) -> str:
        self.proc.send_signal(signal.SIGINT)
        err = self.err.rest()
        assert self.proc.wait(timeout=DEADLINE) == 0, err
        assert "Traceback" not in err
        return err


class KubectlWatch:
    """A real `kubectl get KIND --watch` into a file; started once its watch request got its 200."""

    def __init__(self, kubectl: str, k8s, ns: str, kind: str, out: pathlib.Path, *flags: str) -> None:
        self.out = out
        self.err = out.with_suffix(".err")
        cmd = [kubectl, "--kubeconfig", str(k8s.kubeconfig), "-v=6", "get", KUBECTL_NAMES[kind], "-n", ns,
               "--watch", *flags]
        self.proc = subprocess.Popen(cmd, stdout=open(out, "wb"), stderr=open(self.err, "wb"), preexec_fn=interruptible)

    def started(self) -> bool:
        assert self.proc.poll() is None, self.err.read_text()
        # kubectl -v=6 logs the response: "... 200 OK in 3 milliseconds" (older) or status="200 OK" (1.34)
        return any("watch=true" in line and (" 200 " in line or 'status="200 OK"' in line)
                   for line in self.err.read_text().splitlines())

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=DEADLINE)


def deleted(path: pathlib.Path, kind: str, name: str) -> bool:
    return any(r.get("type") == "DELETED" and r["object"].get("kind") == kind and r["object"]["metadata"]["name"] == name
               for r in parsed(path))


@pytest.fixture(scope="module")
def run(k8s, kubectl, tmp_path_factory):
    """One scenario, recorded every way at once; the paths of the files."""
    d = tmp_path_factory.mktemp("recorded")
    ns = k8s.create_namespace(f"record-{os.getpid() % 100000}")
    api = k8s.api_client()
    merged = Recorder(k8s, d / "merged.log", "-n", ns, *[f"--kind={k}" for k in KINDS])
    everything = Recorder(k8s, d / "all.log", "-n", ns)
    watches = {}
    for kind in KINDS:
        watches[("json", kind)] = KubectlWatch(kubectl, k8s, ns, kind, d / f"{kind}.json",
                                               "--output-watch-events", "-o", "json")
        watches[("yaml", kind)] = KubectlWatch(kubectl, k8s, ns, kind, d / f"{kind}.yaml",
                                               "--output-watch-events", "-o", "yaml")
    watches[("plain", "vcjobs")] = KubectlWatch(kubectl, k8s, ns, "vcjobs", d / "vcjobs-plain.json", "-o", "json")
    for w in watches.values():
        wait_until(w.started, f"kubectl watch {w.out.name}")

    def snapshot(step: str) -> None:
        if step != "failed":
            return
        names = ",".join(KUBECTL_NAMES[k] for k in ("vcjobs", "pods", "podgroups"))
        for fmt in ("json", "yaml"):
            with open(d / f"list.{fmt}", "wb") as fh:
                subprocess.run([kubectl, "--kubeconfig", str(k8s.kubeconfig), "get", names, "-n", ns, "-o", fmt],
                               stdout=fh, check=True, timeout=60)

    created = drive(api, ns, on_step=snapshot)
    # each log has what it must end with
    wait_until(lambda: deleted(d / "merged.log", "Queue", created["queue"]), "the merged recording's end")
    wait_until(lambda: deleted(d / "all.log", "Node", created["node"]), "the recording's end")
    # each kubectl watch has every record of its kind the merged recording has (its last one seen is not
    # enough: two pods' deletions, say, can reach a watch in either order)
    recorded = [r for r in parsed(d / "merged.log") if r["type"] != "BOOKMARK"]
    for kind, object_kind in OBJECT_KINDS.items():
        want = sum(r["object"]["kind"] == object_kind for r in recorded)
        wait_until(lambda: len(parsed(d / f"{kind}.json")) >= want, f"kubectl's {kind} watch: {want} records")
        wait_until(lambda: len(yaml_events(d / f"{kind}.yaml")) >= want, f"kubectl's {kind} yaml watch: {want} records")
    wait_until(lambda: len(parsed(d / "vcjobs-plain.json")) >= 4, "kubectl's plain vcjob watch")
    for w in watches.values():
        w.stop()
    errs = {"merged": merged.stop(), "all": everything.stop()}
    return {"dir": d, "ns": ns, "created": created, "stderr": errs}


def test_the_recording_has_every_kind_in_resource_version_order_and_replays(run):
    log = run["dir"] / "all.log"
    lines = log.read_bytes().splitlines()
    recs = [json.loads(line) for line in lines]
    assert all(set(r) == {"type", "object"} for r in recs)
    # the initial list, between its two marks (docs/replay.md), then the watches
    (start, end) = [i for i, r in enumerate(recs) if r["type"] == "BOOKMARK"]
    assert start == 0 and recs[0]["object"] == {"metadata": {"annotations": {"vcbus.volcano.sh/record-format": "2"}}}
    assert recs[end]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    assert all(r["type"] == "ADDED" for r in recs[1:end])
    recs = recs[1:end] + recs[end + 1:]
    rvs = [int(r["object"]["metadata"]["resourceVersion"]) for r in recs]
    assert rvs == sorted(rvs)
    kinds = {r["object"]["kind"] for r in recs}
    assert {"Job", "Pod", "PodGroup", "Queue", "Command", "Node"} <= kinds
    for kind in ("Job", "Pod", "PodGroup", "Queue", "Command", "Node"):
        types = {r["type"] for r in recs if r["object"]["kind"] == kind and r["object"]["metadata"].get("namespace")
                 in (None, run["ns"])}
        assert {"ADDED", "DELETED"} <= types, kind
    # managedFields keep who wrote and when (the replay's clock), never their field sets
    writes = [e for r in recs for e in r["object"]["metadata"].get("managedFields", [])]
    assert writes and all(set(e) <= {"manager", "operation", "time"} and e["time"] for e in writes)
    assert all(r["object"]["metadata"].get("managedFields") for r in recs if r["object"]["kind"] == "PodGroup")
    assert f"recorded {len(recs)} records" in run["stderr"]["all"]
    report, err = replay(log)
    (job,) = [j for j in report["jobs"] if j["namespace"] == run["ns"]]
    decisive = [(a["event"], a["pod"], a["action"], a["policy"]) for a in job["actions"] if a["action"] != "SyncJob"]
    assert decisive == [("PodFailed", run["created"]["pods"][1], "RestartJob", "job[0]"),
                        ("CommandIssued", "", "AbortJob", "command")]
    assert job["deleted"]
    assert "warning" not in err


def test_per_kind_kubectl_watches_concatenated_or_together_replay_like_the_merged_recording(run):
    d = run["dir"]
    marked, err = replay(d / "merged.log")
    assert "warning" not in err
    # kubectl's logs have no marks of an initial list (the recording's two bookmarks): the same without them
    unmarked = d / "merged-unmarked.log"
    unmarked.write_text("".join(line for line in (d / "merged.log").read_text().splitlines(keepends=True)
                                if json.loads(line)["type"] != "BOOKMARK"))
    expected, _ = replay(unmarked)
    assert [j["status"] for j in marked["jobs"]] == [j["status"] for j in expected["jobs"]]
    assert marked["input"]["events"] == expected["input"]["events"] + 2
    for fmt in ("json", "yaml"):
        files = [d / f"{kind}.{fmt}" for kind in KINDS]
        concatenated = d / f"concatenated.{fmt}"
        separator = "---\n" if fmt == "yaml" else ""
        concatenated.write_text(separator.join(f.read_text() for f in files))
        report, err = replay(concatenated)
        assert report == expected, fmt
        assert "out of resourceVersion order" in err
        report, err = replay(*files)
        assert report == expected, fmt
        assert "merging 5 inputs" in err


def test_kubectl_lists_and_watches_without_event_types_are_snapshots(run):
    d = run["dir"]
    for name in ("list.json", "list.yaml"):
        report, err = replay(d / name)
        assert "read as snapshots" in err
        (job,) = report["jobs"]
        assert job["adopted"]["phase"] == "Running"  # as the status was written when the pod failed
        assert report["input"]["events"] == 1 + 2 + 1  # the vcjob, its two pods, its podgroup
    report, err = replay(d / "vcjobs-plain.json")
    assert "read as snapshots" in err and "deletions cannot be seen" in err
    assert "no Pod records" in err or "no PodGroup records" in err  # and what is missing is named


def test_kubectls_answer_to_several_kinds_in_one_watch_is_explained(k8s, kubectl, tmp_path):
    log = tmp_path / "watch.log"
    with open(log, "wb") as fh:
        res = subprocess.run([kubectl, "--kubeconfig", str(k8s.kubeconfig), "get", "vcjob,pods,podgroups", "-A",
                              "--watch", "--output-watch-events", "-o", "json"],
                             stdout=fh, stderr=subprocess.STDOUT, timeout=60)
    assert res.returncode != 0
    out = vcbus("replay", str(log))
    assert out.returncode == 2
    err = out.stderr.decode()
    assert "one resource type at a time" in err and "vcbus record -A -o watch.log" in err


def test_record_only_one_job_or_a_label_selector(k8s, tmp_path):
    ns = k8s.create_namespace("record-filters")
    api = k8s.api_client()
    job_log, label_log = tmp_path / "job.log", tmp_path / "label.log"
    by_job = Recorder(k8s, job_log, "--job", f"{ns}/{JOB}")
    by_label = Recorder(k8s, label_log, "-n", ns, "-l", "team=a")
    jobs = f"/apis/batch.volcano.sh/v1alpha1/namespaces/{ns}/jobs"
    created = {}
    for name, team in ((JOB, "a"), ("other", "b")):
        job = api_request(api, "POST", jobs, body={
            "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": name, "labels": {"team": team}},
            "spec": {"minAvailable": 1, "tasks": [{"name": "t", "replicas": 1, "template": {
                "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}]}})
        created[name] = job
        owner = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": name,
                 "uid": job["metadata"]["uid"], "controller": True}
        api_request(api, "POST", f"/apis/scheduling.volcano.sh/v1beta1/namespaces/{ns}/podgroups", body={
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": f"{name}-{job['metadata']['uid']}", "ownerReferences": [owner],
                         "labels": {"team": team}},
            "spec": {"minMember": 1}})
        api_request(api, "POST", f"/api/v1/namespaces/{ns}/pods", body={
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{name}-t-0", "labels": {"volcano.sh/job-name": name, "team": team},
                         "ownerReferences": [owner]},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
        api_request(api, "POST", f"/apis/bus.volcano.sh/v1alpha1/namespaces/{ns}/commands", body={
            "apiVersion": "bus.volcano.sh/v1alpha1", "kind": "Command",
            "metadata": {"name": f"{name}-abort", "labels": {"team": team}}, "action": "AbortJob",
            "target": owner})
    api_request(api, "DELETE", f"/apis/bus.volcano.sh/v1alpha1/namespaces/{ns}/commands/{JOB}-abort")
    api_request(api, "DELETE", f"/apis/bus.volcano.sh/v1alpha1/namespaces/{ns}/commands/other-abort")
    wait_until(lambda: deleted(job_log, "Command", f"{JOB}-abort"), "the job's recording")
    wait_until(lambda: deleted(label_log, "Command", f"{JOB}-abort"), "the label's recording")
    by_job.stop()
    by_label.stop()
    for log in (job_log, label_log):
        names = {(r["object"]["kind"], r["object"]["metadata"]["name"]) for r in records(log) if r["type"] != "BOOKMARK"}
        assert names == {("Job", JOB), ("PodGroup", f"{JOB}-{created[JOB]['metadata']['uid']}"),
                         ("Pod", f"{JOB}-t-0"), ("Command", f"{JOB}-abort")}, log.name


def test_record_piped_into_replay_follows_a_live_cluster(k8s):
    ns = k8s.create_namespace("record-live")
    recorder = Recorder(k8s, None, "-n", ns, stdout=subprocess.PIPE)
    follower = subprocess.Popen([sys.executable, "-m", "vcbus.cli.main", "replay", "-"], cwd=ROOT, preexec_fn=interruptible,
                                stdin=recorder.proc.stdout, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    recorder.proc.stdout.close()  # the follower owns the pipe now
    out = Output(follower.stdout)
    try:
        drive(k8s.api_client(), ns)
        out.wait_for(lambda line: "-> RestartJob" in line, "the restart's row")  # while the recording goes on
        out.wait_for(lambda line: "-> AbortJob" in line, "the abort's row")
        recorder.stop()  # its end closes the pipe: the follower prints the final status and ends
        tail = out.rest()
        assert follower.wait(timeout=DEADLINE) == 0, follower.stderr.read().decode()
        assert "final status" in tail
    finally:
        follower.kill()
        recorder.proc.kill()


@pytest.mark.parametrize(
    "args, says",
    [
        (["--kind", "deployments"], "--kind 'deployments': unknown resource"),
        (["-n", "x", "-A"], "not both"),
        (["--for", "soon"], "--for 'soon'"),
        (["--job", "a/b/c"], "--job"),
    ],
)
def test_bad_options_are_one_line_and_exit_2(k8s, args, says):
    res = vcbus("record", "--kubeconfig", str(k8s.kubeconfig), *args)
    assert res.returncode == 2
    err = res.stderr.decode()
    assert says in err and err.count("\n") == 1 and "Traceback" not in err


def test_no_cluster_and_forbidden_are_one_line_and_exit_4(k8s, kubectl, tmp_path):
    import yaml

    config = yaml.safe_load(k8s.kubeconfig.read_text())
    unreachable = tmp_path / "unreachable"
    config_copy = json.loads(json.dumps(config))
    for c in config_copy["clusters"]:
        c["cluster"]["server"] = "https://127.0.0.1:1"
    unreachable.write_text(yaml.safe_dump(config_copy))
    res = vcbus("record", "--kubeconfig", str(unreachable), "-A", "-o", str(tmp_path / "x.log"))
    assert res.returncode == 4  # the cluster is unavailable or refused (docs/cli.md)
    assert res.stderr.decode() == "error: cannot reach the Kubernetes API server at https://127.0.0.1:1: connection refused\n"
    assert not (tmp_path / "x.log").exists()  # nothing recorded, no empty log left behind

    # a service account with no role at all
    ns = k8s.create_namespace("record-rbac")
    api = k8s.api_client()
    api_request(api, "POST", f"/api/v1/namespaces/{ns}/serviceaccounts",
                body={"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "nobody"}})
    token = api_request(api, "POST", f"/api/v1/namespaces/{ns}/serviceaccounts/nobody/token",
                        body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}})
    for u in config["users"]:
        u["user"] = {"token": token["status"]["token"]}
    forbidden = tmp_path / "forbidden"
    forbidden.write_text(yaml.safe_dump(config))
    res = vcbus("record", "--kubeconfig", str(forbidden), "-n", ns, "--for", "1s")
    assert res.returncode == 4  # the cluster is unavailable or refused (docs/cli.md)
    err = res.stderr.decode()
    assert err.startswith(f"error: cannot list vcjobs in namespace {ns}: HTTP 403 Forbidden:") and err.count("\n") == 1
    assert "system:serviceaccount" in err and res.stdout == b""


def test_for_duration_ends_the_recording_by_itself(k8s, tmp_path):
    log = tmp_path / "short.log"
    res = vcbus("record", "--kubeconfig", str(k8s.kubeconfig), "-A", "--kind", "queues", "--for", "1s", "-o", str(log))
    assert res.returncode == 0, res.stderr.decode()
    assert log.exists() and "recorded" in res.stderr.decode()
    replay(log)


@pytest.mark.nats
@pytest.mark.slow
def test_a_recording_of_a_job_vcbus_ran_replays_to_the_status_it_wrote(k8s, kwok, nats_server, bus_settings, webhook,
                                                                       tmp_path):
    """The seed job end to end (`vcbus up` is its controller, tests/test_e2e_cluster.py), recorded all along."""
    from tests.test_e2e_cluster import NAME, run_seed_job

    namespace = webhook["namespace"]
    log = tmp_path / "run.log"
    recorder = Recorder(k8s, log, "-n", namespace)
    try:
        job, *_ = run_seed_job(k8s, kwok, nats_server.url, namespace, tmp_path)
        final = job["metadata"]["resourceVersion"]
        wait_until(lambda: any(r["object"].get("kind") == "Job" and r["object"]["metadata"]["resourceVersion"] == final
                               for r in parsed(log)), "the job's last status in the recording")
    finally:
        recorder.stop()
    res = vcbus("replay", "--json", "--compare", "--job", f"{namespace}/{NAME}", str(log))
    assert res.returncode == 0, res.stdout.decode()[-3000:] + res.stderr.decode()  # --compare: no divergence
    (replayed,) = json.loads(res.stdout)["jobs"]
    live = job["status"]
    for field in ("minAvailable", "retryCount", "version", "succeeded", "failed", "running", "pending", "terminating"):
        assert replayed["status"].get(field) == live.get(field), field
    assert replayed["status"]["state"]["phase"] == live["state"]["phase"] == "Completed"
    assert [(h["from"], h["to"]) for h in replayed["history"]][-2:] == [("Running", "Completing"),
                                                                      ("Completing", "Completed")]


def test_a_recording_started_mid_job_replays_only_what_happened_after(k8s, tmp_path):
    """The job's status was written before its pods were last updated, so `vcbus record`'s initial list (in
    resourceVersion order) has the vcjob before its pods: folded whole, no pod that exists is asked for."""
    from statemachines.manifests.pod import build_pod
    from statemachines.manifests.podgroup import build_podgroup
    from tests.podsim import PodSimulator
    from tests.record_scenario import JOBS, MERGE, PODGROUPS, vcjob

    ns = k8s.create_namespace("record-midjob")
    api = k8s.api_client()
    sim = PodSimulator(api)
    node = f"mid-{os.getpid() % 100000}"
    sim.create_node(node, cpu="16", memory="64Gi")
    try:
        job = api_request(api, "POST", JOBS.format(ns=ns), body=vcjob("default"))
        pg = api_request(api, "POST", PODGROUPS.format(ns=ns), body=build_podgroup(job))
        sim.set_podgroup_phase(ns, pg["metadata"]["name"], "Running")
        pods = [api_request(api, "POST", f"/api/v1/namespaces/{ns}/pods",
                            body=build_pod(job, "worker", i, version=0, retry_count=0))["metadata"]["name"]
                for i in range(2)]
        for name in pods:
            sim.bind(name, node, namespace=ns)
        api_request(api, "PATCH", f"{JOBS.format(ns=ns)}/{JOB}/status", content_type=MERGE,
                    body={"status": {"state": {"phase": "Running"}, "minAvailable": 2, "running": 2}})
        for name in pods:  # the kubelet reports after the controller wrote Running
            sim.start(name, namespace=ns)
        log = tmp_path / "mid.log"
        recorder = Recorder(k8s, log, "-n", ns, "--kind", "vcjobs", "--kind", "pods", "--kind", "podgroups")
        sim.fail(pods[1], 1, namespace=ns)  # what happens after the recording started
        wait_until(lambda: any(r["type"] == "MODIFIED" and r["object"]["metadata"]["name"] == pods[1]
                               and r["object"]["status"].get("phase") == "Failed" for r in parsed(log)),
                   "the failure in the recording")
        recorder.stop()
    finally:
        sim.delete_node(node)
    recs = parsed(log)
    assert [r["type"] for r in recs[:1]] == ["BOOKMARK"]
    listed = [r["object"]["kind"] for r in recs[1:next(i for i, r in enumerate(recs) if i and r["type"] == "BOOKMARK")]]
    assert listed.index("Job") < len(listed) - 1 - listed[::-1].index("Pod")  # the job before a pod, by rv
    report, err = replay(log)
    (replayed,) = report["jobs"]
    assert replayed["adopted"]["phase"] == "Running"
    creates = [c for c in replayed["commands"] if c["command"] == "CreatePod" and c.get("jobVersion") == 0]
    assert not creates, creates  # the pods were there all along
    decisive = [(a["event"], a["pod"], a["action"]) for a in replayed["actions"] if a["action"] != "SyncJob"]
    assert decisive == [("PodFailed", pods[1], "RestartJob")]
    assert "warning" not in err


def test_record_job_keeps_the_vcjobs_podgroup_not_a_batch_jobs_of_that_name():
    """`vcbus record --job NS/x` keeps PodGroups owned by vcjob x (a Job of batch.volcano.sh), not the PodGroup
    Volcano's podgroup controller made for a batch/v1 Job x's pods (its owner's kind is Job too)."""
    from vcbus.k8s.recording import Scope, resource_kind

    def podgroup(name: str, api_version: str) -> dict:
        return {"metadata": {"name": name, "namespace": "ns1", "ownerReferences": [
            {"apiVersion": api_version, "kind": "Job", "name": "x", "uid": "u", "controller": True}]}}

    scope, kind = Scope(job="ns1/x"), resource_kind("podgroups")
    assert scope.keeps(kind, podgroup("x-uid", "batch.volcano.sh/v1alpha1"))
    assert not scope.keeps(kind, podgroup("podgroup-bj-uid", "batch/v1"))


@pytest.mark.nats
def test_real_kubectl_yaml_watches_published_replay_from_the_bus_as_from_their_file(run, bus_settings):
    """kubectl's own `-o yaml` watches, one per kind, concatenated: `vcbus publish` reads them as `vcbus replay`
    does (it refused them as invalid JSON), merges them with replay's warning, and the bus replays to the file's
    report, which is the recording's."""
    d = run["dir"]
    log = d / "concatenated-for-the-bus.yaml"
    log.write_text("---\n".join((d / f"{kind}.yaml").read_text() for kind in KINDS))
    res = vcbus("publish", str(log), "--nats", bus_settings.nats_url)
    assert res.returncode == 0, res.stderr.decode()
    assert "publishing the records merged by resourceVersion" in res.stderr.decode()
    by_bus = vcbus("replay", "--json", "--nats", bus_settings.nats_url)
    assert by_bus.returncode == 0, by_bus.stderr.decode()
    report, _ = replay(log)
    assert json.loads(by_bus.stdout) == report
    assert [j["status"] for j in report["jobs"]] == [j["status"] for j in replay(d / "merged.log")[0]["jobs"]]
