"""End to end on a real kube-apiserver and a real nats-server: vcbus is the vcjob controller and the scheduler.

The seed job `resnet-dist-train` is applied as written in the user's document
(through the vcbus admission webhook, which fills in the defaults). `vcbus up
--kubeconfig` (a real subprocess) bridges the watch events into NATS, decides,
schedules, projects and acts on the cluster: its scheduler creates the default
queue (its queue controller opens it), moves the PodGroup to Inqueue and binds
every pod (`pods/binding`) onto a KWOK node big enough for the gang. Nothing
in the test writes a PodGroup phase or binds a pod: KWOK (the `kwok` fixture)
is the kubelet, running a pod once it is bound and finishing a deletion, and
the test only ends pods as their kubelet would (`tests.kwok_env.fail_pod` /
`succeed_pod`, one pods/status write) and plays the node lifecycle controller
(`kwok_env.wait_nodes_ready` lifts the not-ready taint the apiserver puts on a
new node). Pods run, worker-1 fails, the job restarts as a whole, the master
succeeds, the job completes. Then the exported event log, replayed offline,
gives exactly the live final status.

Waiting. Every step waits on a condition of the cluster or of the bus, polled
while KWOK runs the pods, with a generous deadline per stage (the machine is
shared and busy; a whole run takes seconds). The end is "settled": the bridge has recorded the current version of
every object of the job, the decider has decided every record, the actuator
has carried out every command, and the cluster did not move meanwhile. Where
vcbus is SIGKILLed is a condition too, chosen by the seed.
"""

from __future__ import annotations

import asyncio
import json
import os
import pathlib
import random
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from typing import NamedTuple

import pytest
import yaml
from kubernetes import client
from nats.js.errors import NotFoundError

from statemachines import outputs as o
from tests import kwok_env
from tests.fixtures_nats import stream_messages
from tests.test_webhook_k8s import webhook  # noqa: F401 - the admission webhook fixture
from vcbus.bus import subjects as s
from vcbus.bus.cloudevents import MSG_ID
from vcbus.bus.connecting import connect
from vcbus.bus.decider import DURABLE as DECIDER
from vcbus.bus.reading import read_all
from vcbus.k8s.actuating import DURABLE as ACTUATOR
from vcbus.k8s.watching import api_request
from vcbus.settings import BusSettings

pytestmark = [pytest.mark.k8s, pytest.mark.nats, pytest.mark.slow]

ROOT = pathlib.Path(__file__).resolve().parents[1]
SEED = ROOT / "examples" / "resnet-dist-train.yaml"
G, V = "batch.volcano.sh", "v1alpha1"
PG = ("scheduling.volcano.sh", "v1beta1")
NAME = "resnet-dist-train"
JOB_PODS = f"volcano.sh/job-name={NAME}"
STAGE_DEADLINE = 120.0  # seconds for one stage; a whole unloaded run takes a few seconds
POLL = 0.2  # seconds between two looks at the cluster


def ensure_default_queue(api) -> None:
    """The default queue, Open: what Volcano's queue controller gives (tests that play Volcano use it)."""
    custom = client.CustomObjectsApi(api)
    try:
        custom.get_cluster_custom_object(*PG, "queues", "default")
    except client.ApiException as err:
        if err.status != 404:
            raise
        custom.create_cluster_custom_object(
            *PG, "queues",
            {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "default"},
             "spec": {"weight": 1}},
        )
    custom.patch_cluster_custom_object_status(*PG, "queues", "default", {"status": {"state": "Open"}})


class UpProcess:
    """A `vcbus up` child process, killable and restartable; its output goes to a file (no pipe to
    fill up). Shared with tests/test_e2e_leader.py."""

    def __init__(self, cmd: list[str], log: pathlib.Path, env: dict[str, str] | None = None) -> None:
        self.cmd = cmd
        self.log = log
        self.env = env
        self.proc: subprocess.Popen | None = None
        self.killed = False  # the last stop was a SIGKILL on purpose

    def start(self) -> None:
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(self.cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                                         env=None if self.env is None else {**os.environ, **self.env})
        self.killed = False

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)
        self.killed = True

    def stop(self) -> None:
        """SIGTERM, as Kubernetes stops a pod; SIGKILL after 30 s (its grace period)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:] if self.log.exists() else "(no output)"


class Vcbus(UpProcess):
    """`vcbus up` as a child process, restartable."""

    def __init__(self, nats_url: str, kubeconfig: str, namespace: str, log: pathlib.Path) -> None:
        super().__init__([sys.executable, "-m", "vcbus.cli.main", "up", "--nats", nats_url, "--kubeconfig",
                          kubeconfig, "--namespace", namespace, "-v"], log)
        self.kills = 0
        self.restart_due = False

    def kill(self) -> None:
        super().kill()
        self.kills += 1
        self.restart_due = True

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def check(self) -> None:
        """Fail at once if vcbus up exited without being killed on purpose (no use waiting on it)."""
        if self.proc is not None and not self.alive() and not self.restart_due:
            pytest.fail(f"vcbus up exited with {self.proc.returncode}; {self.log} ends with:\n{self.tail()}",
                        pytrace=False)


def vcbus_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vcbus.cli.main", *args], cwd=ROOT, capture_output=True, timeout=300)


# --------------------------------------------------------------------------- what the bus has seen and done


class BusView(NamedTuple):
    last: dict[tuple[str, str], tuple[str, str]]  # (kind, name) -> (type, resourceVersion) of its last record
    backlog: dict[str, int | None]  # consumer -> messages not yet handled (None: no consumer yet)


async def _bus_view(nats_url: str, namespace: str) -> BusView:
    nc = await connect(nats_url)
    try:
        js = nc.jetstream()
        last: dict[tuple[str, str], tuple[str, str]] = {}
        try:
            async for msg in read_all(js, s.K8S_STREAM, filters=[f"{s.K8S_PREFIX}.*.{s.token(namespace)}.>"]):
                h = msg.headers or {}
                last[(h.get("Vcbus-Kind", ""), h.get("Vcbus-Name", ""))] = (
                    h.get("Vcbus-Type", ""), h.get("Vcbus-Resource-Version", ""))
        except NotFoundError:  # vcbus up has not created its streams yet
            pass
        backlog: dict[str, int | None] = {}
        for stream, durable in ((s.K8S_STREAM, DECIDER), (s.CMDS_STREAM, ACTUATOR)):
            try:
                info = await js.consumer_info(stream, durable)
            except NotFoundError:
                backlog[durable] = None
                continue
            backlog[durable] = int(info.num_pending or 0) + int(info.num_ack_pending or 0)
        return BusView(last, backlog)
    finally:
        await nc.close()


def bus_view(nats_url: str, namespace: str) -> BusView:
    return asyncio.run(_bus_view(nats_url, namespace))


def recorded(nats_url: str, namespace: str, kind: str, name: str, resource_version: str) -> bool:
    """Whether the bridge has put this version of the object into VCBUS_K8S (as its latest record)."""
    last = bus_view(nats_url, namespace).last.get((kind, name))
    return last is not None and last[1] == resource_version


def wait_until(what: str, condition: Callable[[], object], *, deadline: float = STAGE_DEADLINE,
               poll: float = 0.5, explain: Callable[[], str] = lambda: "", vc: Vcbus | None = None) -> object:
    """Poll `condition` until it returns something true; fail naming `what` after `deadline` seconds
    (or as soon as `vc`, the vcbus the condition waits on, has died)."""
    end = time.monotonic() + deadline
    while True:
        if vc is not None:
            vc.check()
        value = condition()
        if value:
            return value
        if time.monotonic() > end:
            pytest.fail(f"waited {deadline:.0f}s for {what}. {explain()}", pytrace=False)
        time.sleep(poll)


# --------------------------------------------------------------------------- one run of the seed job


def version_of(pod: dict) -> str:
    return pod["metadata"]["annotations"]["volcano.sh/job-version"]


class Seen(NamedTuple):
    """One look at the cluster: the job's status and its pods."""

    status: dict
    pods: list[dict]  # every pod of the job, terminating ones included

    @property
    def live(self) -> list[dict]:
        return [p for p in self.pods if not p["metadata"].get("deletionTimestamp")]

    @property
    def running(self) -> dict[str, dict]:
        return {p["metadata"]["name"]: p for p in self.live if p["status"].get("phase") == "Running"}

    def describe(self) -> str:
        pods = ", ".join(
            f"{p['metadata']['name']}@v{version_of(p)}:{p['status'].get('phase')}"
            + ("(terminating)" if p["metadata"].get("deletionTimestamp") else "")
            for p in self.pods
        )
        return f"status {json.dumps(self.status, sort_keys=True)}; pods [{pods}]"


class SeedRun:
    """Watches `vcbus up` (it schedules and binds) run the job on KWOK nodes; waits on what the cluster shows."""

    def __init__(self, k8s, kwok: kwok_env.Kwok, vc: Vcbus, namespace: str, nats_url: str) -> None:
        self.api = k8s.api_client()
        self.custom = client.CustomObjectsApi(self.api)
        self.kwok = kwok
        self.vc = vc
        self.namespace = namespace
        self.nats_url = nats_url
        self.seen: dict[tuple[str, str], set[str]] = {}  # (pod name, job version) -> uids ever observed
        self.last: Seen | None = None

    def podgroups(self) -> list[dict]:
        return self.custom.list_namespaced_custom_object(*PG, self.namespace, "podgroups")["items"]

    def drive(self) -> Seen:
        """One pass: restart vcbus if it was killed on purpose, check KWOK is alive, look."""
        self.vc.check()
        self.kwok.check()
        if not self.vc.alive():  # killed on purpose: start it again
            self.vc.restart_due = False
            self.vc.start()
        return self.look()

    def job_pods(self) -> list[dict]:
        return job_pods(self.api, self.namespace)

    def look(self) -> Seen:
        pods = self.job_pods()
        for p in pods:
            meta = p["metadata"]
            self.seen.setdefault((meta["name"], version_of(p)), set()).add(meta["uid"])
        job = self.custom.get_namespaced_custom_object(G, V, self.namespace, "jobs", NAME)
        self.last = Seen(job.get("status") or {}, pods)
        return self.last

    def wait(self, what: str, condition: Callable[[Seen], object]) -> Seen:
        end = time.monotonic() + STAGE_DEADLINE
        while True:
            seen = self.drive()
            if condition(seen):
                return seen
            if time.monotonic() > end:
                pytest.fail(
                    f"waited {STAGE_DEADLINE:.0f}s for {what}; last seen: {seen.describe()}\n"
                    f"{self.vc.log} ends with:\n{self.vc.tail()}",
                    pytrace=False,
                )
            time.sleep(POLL)

    def versions(self) -> dict[tuple[str, str], str]:
        """(kind, name) -> resourceVersion of the job, its pods and its PodGroups, as the API has them."""
        job = self.custom.get_namespaced_custom_object(G, V, self.namespace, "jobs", NAME)
        out = {("Job", NAME): job["metadata"]["resourceVersion"]}
        for p in self.job_pods():
            out[("Pod", p["metadata"]["name"])] = p["metadata"]["resourceVersion"]
        for pg in self.podgroups():
            out[("PodGroup", pg["metadata"]["name"])] = pg["metadata"]["resourceVersion"]
        return out

    def settled(self, _: Seen) -> bool:
        """vcbus has caught up with the cluster, and the cluster did not move while we looked."""
        before = self.versions()
        view = bus_view(self.nats_url, self.namespace)
        if any(n != 0 for n in view.backlog.values()):
            return False  # a record not decided yet, or a command not carried out yet
        for key, rv in before.items():
            if view.last.get(key, ("", ""))[1] != rv or view.last[key][0] == "DELETED":
                return False  # the bridge has not recorded this version yet
        for key, (type_, _) in view.last.items():
            if key[0] in ("Job", "Pod", "PodGroup") and type_ != "DELETED" and key not in before:
                return False  # gone from the cluster, not yet from the log
        return self.versions() == before


KILL_POINTS: dict[str, Callable[[SeedRun, Seen], bool]] = {  # inside the restart worker-1's failure causes
    "right after the failure": lambda run, seen: True,
    "once the restart is decided": lambda run, seen: seen.status.get("retryCount", 0) >= 1,
    "once the old pods are gone": lambda run, seen: seen.status.get("retryCount", 0) >= 1
    and all(version_of(p) != "0" for p in seen.pods),
    "once a new pod exists": lambda run, seen: any(version != "0" for _, version in run.seen),
}


def default_queue_open(api) -> bool:
    try:
        queue = client.CustomObjectsApi(api).get_cluster_custom_object(*PG, "queues", "default")
    except client.ApiException as err:
        if err.status == 404:
            return False
        raise
    return (queue.get("status") or {}).get("state") == "Open"


def status_files(api, namespace: str, **expected: str) -> dict | None:
    """The status-mounter ConfigMap's files, once they hold `expected`."""
    try:
        files = client.CoreV1Api(api).read_namespaced_config_map(f"{NAME}-status-mounter", namespace).data or {}
    except client.ApiException as err:
        if err.status == 404:
            return None
        raise
    return dict(files) if all(files.get(k) == v for k, v in expected.items()) else None


def sched_binds(nats_url: str) -> list[str]:
    """The pods vcbus's scheduler decided to bind (one BindPod command each), in decision order."""
    msgs = asyncio.run(stream_messages(BusSettings(nats_url=nats_url), s.CMDS_STREAM))
    return [cmd.name for _, _, h, body in msgs
            if h.get(MSG_ID, "").startswith("sched:") and isinstance(cmd := o.output_decoder.decode(body), o.BindPod)]


def job_pods(api, namespace: str) -> list[dict]:
    """Every pod of the job, terminating ones included."""
    return api_request(api, "GET", f"/api/v1/namespaces/{namespace}/pods",
                       query={"labelSelector": JOB_PODS}).get("items") or []


def kwok_node(api, kwok: kwok_env.Kwok, prefix: str) -> str:
    """The one node of the run: a KWOK node the whole gang fits on twice over, Ready and untainted.

    Every other Node goes first: in envtest they are fakes left by other test modules, which no
    kubelet runs here, and vcbus's scheduler would bind onto them as well."""
    core = client.CoreV1Api(api)
    for other in core.list_node().items:
        core.delete_node(other.metadata.name)
    [node] = kwok_env.create_nodes(api, 1, cpu="64", memory="256Gi", pods=110, prefix=prefix)
    # KWOK makes it Ready; then the not-ready taint the apiserver's TaintNodesByCondition gave it is
    # lifted, the node lifecycle controller's part (kube-controller-manager is absent here)
    kwok_env.wait_nodes_ready(api, [node], timeout=STAGE_DEADLINE, kwok=kwok)
    return node


def run_seed_job(k8s, kwok, nats_url: str, namespace: str, tmp_path: pathlib.Path, *,
                 kill_at: set[str] = frozenset()):
    api = k8s.api_client()
    custom = client.CustomObjectsApi(api)
    node = kwok_node(api, kwok, f"kwok-e2e-{namespace[-6:]}")
    vc = Vcbus(nats_url, k8s.kubeconfig, namespace, tmp_path / "vcbus-up.log")
    seed = int(os.environ.get("VCBUS_E2E_SEED", random.randrange(1 << 30)))
    kill_point = random.Random(seed).choice(sorted(KILL_POINTS))
    print(f"kill timing seed: {seed} (VCBUS_E2E_SEED={seed} repeats it): kill-when-failed kills {kill_point}")
    run = SeedRun(k8s, kwok, vc, namespace, nats_url)
    files_seen: list[dict] = []
    vc.start()
    try:
        # admission takes the job only into an Open queue: vcbus creates `default` and opens it
        wait_until("the default queue, Open", lambda: default_queue_open(api), vc=vc,
                   explain=lambda: f"{vc.log} ends with:\n{vc.tail()}")
        custom.create_namespaced_custom_object(G, V, namespace, "jobs", yaml.safe_load(SEED.read_text()))
        run.wait("3 running pods, and the status saying so",
                 lambda seen: len(seen.running) == 3 and seen.status.get("running") == 3)
        # the status files a worker reads (`cat /status/running`) follow the status (written just after it)
        files_seen.append(wait_until("the status files to follow the status (running 3)",
                                     lambda: status_files(api, namespace, running="3"), vc=vc,
                                     explain=lambda: f"{vc.log} ends with:\n{vc.tail()}"))
        if "running" in kill_at:
            vc.kill()
        kwok_env.fail_pod(api, namespace, f"{NAME}-worker-1", 1)
        if "failed" in kill_at:
            run.wait(f"the kill point: {kill_point}", lambda seen: KILL_POINTS[kill_point](run, seen))
            vc.kill()
        run.wait("the restart: retryCount 1, 3 running pods of a new version",
                 lambda seen: seen.status.get("retryCount") == 1 and len(seen.running) == 3
                 and all(version_of(p) != "0" for p in seen.running.values()))
        if "restarted" in kill_at:
            vc.kill()
        kwok_env.succeed_pod(api, namespace, f"{NAME}-master-0")
        run.wait("the job Completed", lambda seen: seen.status.get("state", {}).get("phase") == "Completed")
        run.wait("vcbus to settle (everything recorded, decided and carried out)", run.settled)
        job = custom.get_namespaced_custom_object(G, V, namespace, "jobs", NAME)
        return job, run.seen, vc, files_seen, sched_binds(nats_url)
    finally:
        vc.stop()
        kwok_env.delete_nodes(api, [node])  # other tests schedule onto whatever nodes exist


def check_completed_job(k8s, namespace: str, job: dict, seen: dict, binds: list[str]) -> None:
    status = job["status"]
    assert status["state"]["phase"] == "Completed"
    assert status["retryCount"] == 1
    # no duplicate pod, ever: one uid per (pod name, job version)
    assert all(len(uids) == 1 for uids in seen.values()), seen
    assert sorted(seen) == sorted(
        (f"{NAME}-{p}", v) for p in ("master-0", "worker-0", "worker-1") for v in ("0", "1")
    )
    # vcbus's scheduler bound every pod of both versions, and none twice
    assert sorted(binds) == sorted(name for name, _ in seen), binds
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


def test_seed_job_runs_restarts_and_completes_on_a_real_cluster(k8s, kwok, nats_server, bus_settings, webhook,
                                                                 tmp_path):
    namespace = webhook["namespace"]
    job, seen, vc, files, binds = run_seed_job(k8s, kwok, nats_server.url, namespace, tmp_path)
    check_completed_job(k8s, namespace, job, seen, binds)
    # the actuator applied commands as the decider decided them (vcbus.k8s.ahead), and said so when stopped
    ahead = re.search(r"(\d+) commands finished \([^)]*\), (\d+) applied ahead of their store", vc.log.read_text())
    assert ahead and 0 < int(ahead.group(2)) <= int(ahead.group(1)), vc.tail()
    assert files and files[0]["running"] == "3" and files[0]["retryCount"] == "0"
    core = client.CoreV1Api(k8s.api_client())
    final_files = core.read_namespaced_config_map(f"{NAME}-status-mounter", namespace).data
    assert final_files["retryCount"] == "1" and json.loads(final_files["jsonStatus"])["state"]["phase"] == "Completed"
    events = [(e.reason, e.message) for e in core.list_namespaced_event(namespace).items if e.involved_object.name == NAME]
    assert ("ExecuteAction", "Start to execute action RestartJob ") in events
    assert ("ExecuteAction", "Start to execute action CompleteJob ") in events
    pods = job_pods(k8s.api_client(), namespace)
    check_labels_and_annotations(pods, job)
    env = {e["name"]: e.get("value") for e in next(
        p for p in pods if p["metadata"]["name"].endswith("master-0"))["spec"]["containers"][0]["env"]}
    assert env["MASTER_PORT"] == "23456" and env["WORLD_SIZE"] == "3" and env["RANK"] == "0"
    assert replayed_status(nats_server.url, tmp_path, namespace) == job["status"]


@pytest.mark.parametrize("kill_at", [{"running"}, {"failed"}, {"restarted"}], ids=lambda k: "kill-when-" + "-".join(k))
def test_sigkill_of_vcbus_at_any_point_gives_the_same_outcome(k8s, kwok, nats_server, bus_settings, webhook, tmp_path,
                                                              kill_at):
    namespace = webhook["namespace"]
    job, seen, vc, _, binds = run_seed_job(k8s, kwok, nats_server.url, namespace, tmp_path, kill_at=kill_at)
    assert vc.kills >= 1
    check_completed_job(k8s, namespace, job, seen, binds)
    assert replayed_status(nats_server.url, tmp_path, namespace) == job["status"]
