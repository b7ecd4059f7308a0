"""End to end: vcbus alone (job controller AND scheduler) runs the seed job on a real API server.

A real kube-apiserver + etcd, a real nats-server, and `vcbus up --kubeconfig` as a subprocess
(bridge, decider, scheduler, projector, actuator). No Volcano, and nothing in the test writes a
PodGroup phase: the PodGroup goes Pending -> Inqueue by vcbus's enqueue, the job controller
creates the pods, vcbus's allocate binds them through the `pods/binding` subresource, and the
kubelets are KWOK's (the `kwok` fixture): a pod runs once it is bound, a deleted one goes, and
the test ends a pod as its kubelet would (`tests.kwok_env.fail_pod` / `succeed_pod`, one
pods/status write). The nodes are KWOK nodes of cpu 5 / memory 16Gi / pods 110 and the seed
job's pods request cpu 3 / memory 8Gi (the seed has no requests; the test adds them), so one pod
fits per node (Volcano scheduler reference §10.3). The default queue is not created by the test:
vcbus's scheduler creates it and the queue controller opens it, before the job can be admitted.

- three nodes: one pod per node, Running; worker-1 fails -> RestartJob -> bound again ->
  master succeeds -> Completed, retryCount 1;
- two nodes: the gang never fits, no pod is ever bound, and the PodGroup carries Volcano's
  exact Unschedulable condition (§10.2).

The tests delete every Node of the API server first (in envtest every Node is a fake left by
another test module; the scheduler counts all of them) and the default queue if another test
left one.
"""

from __future__ import annotations

import asyncio
import json
import os
import pathlib
import signal
import subprocess
import sys
import time
import uuid

import pytest
import yaml
from kubernetes import client

from statemachines import outputs as o
from tests import kwok_env
from tests.fixtures_nats import stream_messages
from tests.test_webhook_k8s import webhook  # noqa: F401 - the admission webhook fixture
from vcbus.bus import subjects as s
from vcbus.bus.cloudevents import MSG_ID
from vcbus.k8s.watching import api_request

pytestmark = [pytest.mark.k8s, pytest.mark.nats, pytest.mark.slow]

ROOT = pathlib.Path(__file__).resolve().parents[1]
SEED = ROOT / "examples" / "resnet-dist-train.yaml"
G, V = "batch.volcano.sh", "v1alpha1"
SG, SV = "scheduling.volcano.sh", "v1beta1"
NAME = "resnet-dist-train"
REQUESTS = {"cpu": "3", "memory": "8Gi"}
DEADLINE = float(os.environ.get("VCBUS_E2E_DEADLINE", "300"))  # seconds for a whole scenario; the machine is shared
UNSCHEDULABLE = (
    "1/3 tasks in gang unschedulable: pod group is not ready, 3 Pending, 3 minAvailable; "
    "Pending: 1 Unschedulable, 2 Schedulable. Origin reason is resnet-dist-train-worker-1: "
    "0/2 nodes are unavailable: 2 Insufficient cpu."
)


def seed_job() -> dict:
    """The seed vcjob with requests on every container (the seed itself has none)."""
    job = yaml.safe_load(SEED.read_text())
    for task in job["spec"]["tasks"]:
        for c in task["template"]["spec"]["containers"]:
            c["resources"] = {"requests": dict(REQUESTS), "limits": dict(REQUESTS)}
    return job


class Vcbus:
    """`vcbus up --kubeconfig` as a child process, logging to a file."""

    def __init__(self, nats_url: str, kubeconfig: str, namespace: str, log: pathlib.Path) -> None:
        self.cmd = [sys.executable, "-m", "vcbus.cli.main", "up", "--nats", nats_url, "--kubeconfig", kubeconfig,
                    "--namespace", namespace, "-v"]
        self.log = log
        self.nats_url = nats_url
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(self.cmd, cwd=ROOT, stdout=open(self.log, "ab"), stderr=subprocess.STDOUT)

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=20)

    def check(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            pytest.fail(f"vcbus up exited with {self.proc.returncode}:\n{self.tail()}")

    def tail(self) -> str:
        return self.log.read_text()[-4000:] if self.log.exists() else ""

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()


class Scenario:
    """The cluster side of a test: API clients, KWOK nodes, the clock of its stages."""

    def __init__(self, k8s, kwok: kwok_env.Kwok, namespace: str, nodes: int, vc: Vcbus) -> None:
        self.api = k8s.api_client()
        self.core = client.CoreV1Api(self.api)
        self.custom = client.CustomObjectsApi(self.api)
        self.kwok = kwok
        self.ns = namespace
        self.vc = vc
        self.t0 = time.monotonic()
        self.deadline = self.t0 + DEADLINE
        self.timings: dict[str, float] = {}
        for node in self.core.list_node().items:  # fakes of other test modules: the scheduler would count them
            self.core.delete_node(node.metadata.name)
        try:
            self.custom.delete_cluster_custom_object(SG, SV, "queues", "default")
        except client.ApiException as err:
            if err.status != 404:
                raise
        tag = uuid.uuid4().hex[:4]
        self.nodes = kwok_env.create_nodes(self.api, nodes, cpu="5", memory="16Gi", pods=110,
                                           prefix=f"sched-e2e-{tag}", start=1)
        # KWOK makes them Ready; then the not-ready taint the TaintNodesByCondition admission
        # plugin gave them is lifted (the node lifecycle controller's part), or no pod tolerates them
        kwok_env.wait_nodes_ready(self.api, self.nodes, timeout=DEADLINE, kwok=kwok)

    def mark(self, stage: str) -> None:
        self.timings[stage] = round(time.monotonic() - self.t0, 1)

    def wait(self, what: str, predicate):
        """Poll `predicate()` until it returns something true (KWOK runs the bound pods meanwhile)."""
        while True:
            self.vc.check()
            self.kwok.check()
            if time.monotonic() > self.deadline:
                pytest.fail(f"timed out waiting for {what} (stages so far: {self.timings})\n{self.diagnosis()}")
            value = predicate()
            if value:
                self.mark(what)
                return value
            time.sleep(0.2)

    def diagnosis(self) -> str:
        """What a failure message needs: the pods, the PodGroup, the scheduler's last outputs, the log."""
        pods = [(p["metadata"]["name"], p["metadata"]["annotations"].get("volcano.sh/job-version"),
                 p["status"].get("phase"), p["spec"].get("nodeName")) for p in self.pods()]
        pg = (self.podgroup() or {}).get("status")
        outs = []
        for stream in (s.JOBS_STREAM, s.CMDS_STREAM):
            outs += [(i, type(x).__name__, getattr(x, "name", "") or getattr(x, "podgroup", ""))
                     for i, x in bus_outputs(self.vc.nats_url, stream) if i.startswith("sched:")]
        outs.sort(key=lambda e: tuple(int(n) for n in e[0].split(":")[1:]))
        return f"pods: {pods}\npodgroup status: {pg}\nscheduler outputs (last 30): {outs[-30:]}\n{self.vc.tail()}"

    def default_queue_open(self) -> bool:
        try:
            q = self.custom.get_cluster_custom_object(SG, SV, "queues", "default")
        except client.ApiException as err:
            if err.status == 404:
                return False
            raise
        return (q.get("status") or {}).get("state") == "Open"

    def submit(self, job: dict) -> None:
        """Create the vcjob once the default queue is there and Open (admission wants it so)."""
        self.wait("default queue created and Open", self.default_queue_open)
        self.custom.create_namespaced_custom_object(G, V, self.ns, "jobs", job)

    def podgroup(self) -> dict | None:
        items = self.custom.list_namespaced_custom_object(SG, SV, self.ns, "podgroups")["items"]
        return items[0] if items else None

    def job(self) -> dict:
        return self.custom.get_namespaced_custom_object(G, V, self.ns, "jobs", NAME)

    def pods(self) -> list[dict]:
        pods = api_request(self.api, "GET", f"/api/v1/namespaces/{self.ns}/pods",
                           query={"labelSelector": f"volcano.sh/job-name={NAME}"}).get("items") or []
        return [p for p in pods if not p["metadata"].get("deletionTimestamp")]

    def cleanup(self) -> None:
        kwok_env.delete_nodes(self.api, self.nodes)


def bus_outputs(nats_url: str, stream: str) -> list[tuple[str, o.Output]]:
    from vcbus.settings import BusSettings

    msgs = asyncio.run(stream_messages(BusSettings(nats_url=nats_url), stream))
    return [(h.get(MSG_ID, ""), o.output_decoder.decode(body)) for _, _, h, body in msgs]


def check_bound_one_per_node(sc: Scenario, pods: list[dict]) -> dict[str, str]:
    """Each pod on one of the test's nodes, and no two on the same node. The pods are created
    without spec.nodeName and the API server refuses any update that sets it: only the
    pods/binding subresource can put it there (KWOK never binds)."""
    placement = {}
    for p in pods:
        name = p["metadata"]["name"]
        node = p["spec"].get("nodeName")
        assert node in sc.nodes, (name, node)
        placement[name] = node
    assert sorted(placement.values()) == sorted(sc.nodes), placement
    return placement


@pytest.fixture
def scenario(k8s, kwok, nats_server, bus_settings, webhook, tmp_path, request):  # noqa: F811 - webhook is a fixture
    nodes = request.param
    namespace = webhook["namespace"]
    vc = Vcbus(nats_server.url, k8s.kubeconfig, namespace, tmp_path / "vcbus-up.log")
    sc = Scenario(k8s, kwok, namespace, nodes, vc)
    vc.start()
    try:
        yield sc
    finally:
        vc.stop()
        sc.cleanup()
        print(f"stage timings (s since start): {sc.timings}")


def sched_binds(nats_url: str) -> list[tuple[str, str]]:
    return [(x.name, x.node) for i, x in bus_outputs(nats_url, s.CMDS_STREAM)
            if isinstance(x, o.BindPod) and i.startswith("sched:")]


@pytest.mark.parametrize("scenario", [3], indirect=True)
@pytest.mark.parametrize("kill", [False, True], ids=["", "sigkill-after-the-binds"])
def test_vcbus_alone_schedules_restarts_and_completes_the_seed_job(scenario, nats_server, kill):
    sc = scenario
    # vcbus's scheduler creates the default queue, its queue controller opens it; only then does
    # admission accept the job (its queue must exist and be Open)
    sc.wait("default queue created and Open", sc.default_queue_open)
    sc.custom.create_namespaced_custom_object(G, V, sc.ns, "jobs", seed_job())
    if kill:
        # SIGKILL as soon as the binds are decided (carried out or not): the restarted scheduler
        # rebuilds its projection from the log, its binds included, and binds nothing twice
        sc.wait("the binds decided", lambda: len(sched_binds(nats_server.url)) >= 3)
        sc.vc.kill()
        sc.vc.start()

    phases: list[str] = []

    def inqueue():
        pg = sc.podgroup()
        phase = ((pg or {}).get("status") or {}).get("phase", "")
        if phase and (not phases or phases[-1] != phase):
            phases.append(phase)
        return phase in ("Inqueue", "Running")

    sc.wait("PodGroup Inqueue", inqueue)
    assert phases[0] in ("Pending", "Inqueue")

    def running(version: str):
        """The 3 pods of a job version Running, the job counting them, and the scheduler having
        moved the PodGroup to Running (its session after the binds landed)."""
        def check():
            pods = [p for p in sc.pods() if p["metadata"]["annotations"]["volcano.sh/job-version"] == version]
            status = sc.job().get("status") or {}
            ok = len(pods) == 3 and all(p["status"].get("phase") == "Running" for p in pods)
            pg_phase = ((sc.podgroup() or {}).get("status") or {}).get("phase")
            return pods if ok and status.get("running") == 3 and pg_phase == "Running" else None
        return check

    first = sc.wait("3 pods Running (version 0)", running("0"))
    placement0 = check_bound_one_per_node(sc, first)
    kwok_env.fail_pod(sc.api, sc.ns, f"{NAME}-worker-1", 1)

    second = sc.wait("3 pods Running again (version 1)", running("1"))
    placement1 = check_bound_one_per_node(sc, second)
    assert sc.job()["status"]["retryCount"] == 1
    kwok_env.succeed_pod(sc.api, sc.ns, f"{NAME}-master-0")

    def completed():
        status = sc.job().get("status") or {}
        return status if status.get("state", {}).get("phase") == "Completed" else None

    status = sc.wait("Completed", completed)
    assert status["retryCount"] == 1

    # The bus tells who did it: vcbus's scheduler enqueued the PodGroup, bound each pod of both
    # versions, and created the default queue.
    cmds = bus_outputs(nats_server.url, s.CMDS_STREAM)
    events = bus_outputs(nats_server.url, s.JOBS_STREAM)
    binds = sched_binds(nats_server.url)  # exactly one bind per pod and version: none repeated
    assert sorted(binds) == sorted(list(placement0.items()) + list(placement1.items())), binds
    # pods are created without a node (a pod update may never set spec.nodeName: only a Binding can)
    creates = [x for _, x in cmds if isinstance(x, o.CreatePod)]
    assert len(creates) == 6 and all(x.pod and not x.pod["spec"].get("nodeName") for x in creates)
    assert any(isinstance(x, o.CreateQueue) and x.queue == "default" for i, x in cmds if i.startswith("sched:"))
    assert any(isinstance(x, o.JobEnqueued) and x.job == f"{sc.ns}/{NAME}" for i, x in events if i.startswith("sched:"))
    # The log has the PodGroup's whole life: created Pending (by vcbus's job controller), moved to
    # Inqueue by the scheduler's enqueue, then Running once the bound pods run.
    k8s_log = asyncio.run(stream_messages(_settings(nats_server.url), s.K8S_STREAM))
    pg_phases = []
    for _, subject, _, body in k8s_log:
        if subject.startswith(f"{s.K8S_PREFIX}.podgroup."):
            phase = (json.loads(body)["object"].get("status") or {}).get("phase", "")
            if not pg_phases or pg_phases[-1] != phase:
                pg_phases.append(phase)
    # created with no phase (as Volcano's job controller creates it), Inqueue, Running; the restart
    # deletes and recreates it, and it goes the same way again
    assert pg_phases[:3] == ["", "Inqueue", "Running"] and pg_phases.count("Running") == 2, pg_phases
    job_phases = [(x.from_phase, x.to_phase) for _, x in events if isinstance(x, o.PhaseChanged)]
    assert job_phases[0] == ("", "Pending") and ("Pending", "Running") in job_phases, job_phases
    assert ("Running", "Restarting") in job_phases and job_phases[-1][1] == "Completed", job_phases
    print(f"PodGroup phases: {pg_phases}; placements: {placement0} then {placement1}")


@pytest.mark.parametrize("scenario", [2], indirect=True)
def test_on_two_nodes_the_gang_is_never_bound_and_says_why(scenario, nats_server):
    sc = scenario
    sc.submit(seed_job())

    def condition():
        return unschedulable_condition(sc, lambda message: message == UNSCHEDULABLE)

    pg, cond = sc.wait("the Unschedulable condition", condition)
    assert cond["status"] == "True" and cond["reason"] == "NotEnoughResources"
    assert pg["status"]["phase"] == "Inqueue"  # enqueue admits on cluster totals (10 cpu >= 9)

    three_sessions_bind_nothing(sc, nats_server.url)
    assert condition() is not None  # still the same reason
    sessions = [x for _, x in bus_outputs(nats_server.url, s.JOBS_STREAM) if isinstance(x, o.SchedulingSession)]
    print(f"{len(sessions)} sessions; condition: {json.dumps(cond)}")


def unschedulable_condition(sc: Scenario, accept) -> tuple[dict, dict] | None:
    """(The PodGroup, its Unschedulable condition) once the condition's message is one `accept`s."""
    pg = sc.podgroup()
    for c in ((pg or {}).get("status") or {}).get("conditions") or []:
        if c.get("type") == "Unschedulable" and accept(c.get("message", "")):
            return pg, c
    return None


def three_sessions_bind_nothing(sc: Scenario, nats_url: str, pods=None, count: int = 3) -> None:
    """A window bounded by sessions, not by a sleep: three times, change the scheduler's view (a
    PriorityClass nobody uses) and wait for a session whose cut includes that change; none of the
    `count` pods (`pods()`; default: the job's) is bound meanwhile, and the scheduler never decided a bind."""
    pods = pods or sc.pods
    scheduling = client.SchedulingV1Api(sc.api)
    names = [f"sched-e2e-nudge-{uuid.uuid4().hex[:6]}" for _ in range(3)]
    try:
        for pc in names:
            scheduling.create_priority_class({"metadata": {"name": pc}, "value": 7, "globalDefault": False})

            def session_after(pc=pc):
                k8s = asyncio.run(stream_messages(_settings(nats_url), s.K8S_STREAM))
                seqs = [seq for seq, subject, _, _ in k8s if subject == s.k8s_subject("PriorityClass", "", pc)]
                if not seqs:
                    return False
                return any(isinstance(x, o.SchedulingSession) and x.seq >= seqs[0]
                           for _, x in bus_outputs(nats_url, s.JOBS_STREAM))

            sc.wait(f"a session that saw {pc}", session_after)
            assert all(not p["spec"].get("nodeName") for p in pods())
    finally:
        for pc in names:
            try:
                scheduling.delete_priority_class(pc)
            except client.ApiException:
                pass
    now = pods()
    assert len(now) == count and all(not p["spec"].get("nodeName") for p in now)
    assert not [x for _, x in bus_outputs(nats_url, s.CMDS_STREAM) if isinstance(x, o.BindPod)]


def _settings(url: str):
    from vcbus.settings import BusSettings

    return BusSettings(nats_url=url)
