"""Gang scheduling at a cluster's pace: vcbus as users run it, on a real API server and KWOK nodes.

A real kube-apiserver + etcd (the `k8s` fixture), KWOK as the kubelets of 10 fake nodes (the
`kwok` fixture: a bound pod becomes Running, a deleted one goes; nothing ends a pod), and
`vcbus up --kubeconfig KUBECONFIG` as a child process with its embedded defaults: its own
nats-server (JetStream, fsync always) over a temporary --data-dir, bridge, decider, scheduler
(the helm install's configuration: enqueue, allocate, backfill; gang, proportion, predicates, ...),
projector and actuator. Nothing in the test binds a pod, writes a PodGroup or plays a kubelet.
Two flags only keep it apart from the rest of the session: `--namespace` (other test modules leave
vcjobs in the shared API server) and a free `--metrics-addr` (its /metrics counts sessions and
binds).

The nodes are 10 x 5 cpu / 20Gi / 110 pods: 9 labelled `pool=ab`, 1 `pool=c`. Three vcjobs of
1 cpu / 1Gi pods, schedulerName volcano, created at once:

- `gang-a`, `gang-b`: 20 replicas, minAvailable 20, nodeSelector `pool=ab` (45 cpu: both fit);
- `gang-c`: 6 replicas, minAvailable 6, nodeSelector `pool=c` (5 cpu: 5 of its 6 pods fit).

By the cluster's totals all three fit (46 of 50 cpu; the enqueue action admits on totals), so
gang-c's PodGroup goes Inqueue and its 6 pods are created: only the gang keeps them off the
`pool=c` node. A scheduler that placed pods one by one would bind 5 of them.

Checked: gang-a and gang-b reach Running with all 40 pods bound (each on a `pool=ab` node) and
Running (KWOK); no pod of a job is bound before its PodGroup is Inqueue nor before all 20 pods of
its gang exist (resourceVersions of one etcd order the pod and PodGroup watches); gang-c's PodGroup
is Inqueue with the Unschedulable condition, its job Pending, and not one of its pods is ever
bound, through three more scheduling sessions (each started by a change nobody uses, a
PriorityClass, and counted on vcbus's /metrics); vcbus's scheduler decided exactly 40 binds.

Not timed: every step waits on a condition with a generous deadline (the machine is small and
shared); the stage timings are printed.
"""

from __future__ import annotations

import os
import pathlib
import re
import sys
import time
import urllib.request
import uuid

import pytest
from kubernetes import client

from tests import kwok_env
from tests.k8s_env import free_port
from tests.test_e2e_cluster import UpProcess
from vcbus.k8s.watching import ResourceWatcher

pytestmark = [pytest.mark.k8s, pytest.mark.slow]

G, V = "batch.volcano.sh", "v1alpha1"
SG, SV = "scheduling.volcano.sh", "v1beta1"
DEADLINE = float(os.environ.get("VCBUS_E2E_DEADLINE", "300"))  # seconds for one stage; the machine is shared
NODES_AB, NODES_C = 9, 1
NODE = {"cpu": "5", "memory": "20Gi", "pods": "110"}
JOBS = {"gang-a": (20, "ab"), "gang-b": (20, "ab"), "gang-c": (6, "c")}  # name: (replicas = minAvailable, pool)
RUNNING_JOBS = ("gang-a", "gang-b")
STUCK_JOB = "gang-c"


def vcjob(name: str, namespace: str, replicas: int, pool: str) -> dict:
    """Volcano's benchmark gang case (benchmark/testcases/gang/cases/vcjob-template.yaml) with a
    nodeSelector; the fields Volcano's admission webhook would default are given (no webhook runs)."""
    return {
        "apiVersion": f"{G}/{V}", "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": {"volcano.sh/benchmark": "true"}},
        "spec": {
            "schedulerName": "volcano", "minAvailable": replicas, "queue": "default", "maxRetry": 3,
            "tasks": [{
                "name": "worker", "replicas": replicas, "minAvailable": replicas, "maxRetry": 3,
                "template": {
                    "metadata": {"labels": {"volcano.sh/benchmark": "true"}},
                    "spec": {
                        "schedulerName": "volcano",
                        "restartPolicy": "Never",
                        "nodeSelector": {"pool": pool},
                        "containers": [{
                            "name": "worker", "image": "busybox:1.36", "imagePullPolicy": "IfNotPresent",
                            "resources": {"requests": {"cpu": "1", "memory": "1Gi"},
                                          "limits": {"cpu": "1", "memory": "1Gi"}},
                        }],
                    },
                },
            }],
        },
    }


class Watch:
    """Pods and PodGroups of the namespace, from two watches, every state kept with its resourceVersion."""

    def __init__(self, api, namespace: str) -> None:
        self.pods = ResourceWatcher(api, "pods", namespace=namespace, label_selector="").start()
        self.podgroups = ResourceWatcher(api, "podgroups", namespace=namespace).start()
        self.pod: dict[str, dict] = {}  # name -> last object
        self.created: dict[str, int] = {}  # pod name -> resourceVersion it was first seen at
        self.bound: dict[str, tuple[int, str]] = {}  # pod name -> (first resourceVersion with a node, node)
        self.pg: dict[str, dict] = {}  # job -> last PodGroup
        self.inqueue: dict[str, int] = {}  # job -> first resourceVersion its PodGroup was Inqueue (or later)

    def drain(self) -> None:
        while (ev := self.pods.poll()) is not None:
            obj = ev["object"]
            name, rv = obj["metadata"]["name"], int(obj["metadata"]["resourceVersion"])
            self.created.setdefault(name, rv)
            if ev["type"] != "DELETED":
                self.pod[name] = obj
            if (node := (obj.get("spec") or {}).get("nodeName")) and name not in self.bound:
                self.bound[name] = (rv, node)
        while (ev := self.podgroups.poll()) is not None:
            obj = ev["object"]
            job = next((r["name"] for r in obj["metadata"].get("ownerReferences") or [] if r.get("kind") == "Job"), "")
            self.pg[job] = obj
            if ((obj.get("status") or {}).get("phase") or "") in ("Inqueue", "Running"):
                self.inqueue.setdefault(job, int(obj["metadata"]["resourceVersion"]))

    def job_pods(self, job: str) -> dict[str, dict]:
        return {n: p for n, p in self.pod.items()
                if (p["metadata"].get("labels") or {}).get("volcano.sh/job-name") == job}

    def stop(self) -> None:
        self.pods.stop()
        self.podgroups.stop()


def metric(addr: str, name: str) -> float:
    """One counter of vcbus's /metrics (0 before the service registers it)."""
    with urllib.request.urlopen(f"http://{addr}/metrics", timeout=5) as r:
        text = r.read().decode()
    m = re.search(rf"^{re.escape(name)} ([0-9.e+]+)$", text, re.M)
    return float(m.group(1)) if m else 0.0


def test_gangs_run_and_a_gang_that_does_not_fit_gets_no_pod_bound(k8s, kwok, k8s_namespace, tmp_path):
    ns = k8s_namespace
    api = k8s.api_client()
    core = client.CoreV1Api(api)
    custom = client.CustomObjectsApi(api)
    t0 = time.monotonic()
    timings: dict[str, float] = {}
    up: UpProcess | None = None
    watch: Watch | None = None

    def wait(what: str, predicate):
        """Poll `predicate()` until it returns something true; fail with the state after DEADLINE."""
        deadline = time.monotonic() + DEADLINE
        while True:
            kwok.check()
            if up is not None and up.proc is not None and up.proc.poll() is not None:
                pytest.fail(f"vcbus up exited with {up.proc.returncode} while waiting for {what}:\n{up.tail()}")
            if watch is not None:
                watch.drain()
            value = predicate()
            if value:
                timings[what] = round(time.monotonic() - t0, 1)
                return value
            if time.monotonic() > deadline:
                pytest.fail(f"timed out after {DEADLINE:.0f}s waiting for {what} (stages so far: {timings})\n"
                            f"{diagnosis()}")
            time.sleep(0.2)

    def diagnosis() -> str:
        lines = []
        if watch is not None:
            for job in JOBS:
                pods = watch.job_pods(job)
                phases = sorted((p.get("status") or {}).get("phase", "") for p in pods.values())
                bound = sum(1 for n in pods if n in watch.bound)
                pg = (watch.pg.get(job) or {}).get("status")
                lines.append(f"{job}: {len(pods)} pods, {bound} bound, phases {phases}; podgroup {pg}")
        return "\n".join(lines) + f"\nvcbus up log (tail):\n{up.tail() if up else ''}"

    # Other test modules leave fake nodes (the scheduler would count them) and may leave a default
    # queue; vcbus's scheduler creates the queue and its queue controller opens it.
    for node in core.list_node().items:
        core.delete_node(node.metadata.name)
    try:
        custom.delete_cluster_custom_object(SG, SV, "queues", "default")
    except client.ApiException as err:
        if err.status != 404:
            raise

    tag = uuid.uuid4().hex[:4]
    nodes = kwok_env.create_nodes(api, NODES_AB, prefix=f"kwok-gang-{tag}-ab", labels={"pool": "ab"}, **NODE)
    nodes += kwok_env.create_nodes(api, NODES_C, prefix=f"kwok-gang-{tag}-c", labels={"pool": "c"}, **NODE)
    metrics_addr = f"127.0.0.1:{free_port()}"
    exe = str(pathlib.Path(sys.executable).with_name("vcbus"))
    up = UpProcess([exe, "up", "--kubeconfig", str(k8s.kubeconfig), "--data-dir", str(tmp_path / "data"),
                    "--metrics-addr", metrics_addr, "--namespace", ns, "-v"], tmp_path / "vcbus-up.log")
    try:
        kwok_env.wait_nodes_ready(api, nodes, timeout=DEADLINE, kwok=kwok)
        timings["nodes Ready"] = round(time.monotonic() - t0, 1)
        up.start()

        def queue_open() -> bool:
            try:
                q = custom.get_cluster_custom_object(SG, SV, "queues", "default")
            except client.ApiException as err:
                if err.status == 404:
                    return False
                raise
            return (q.get("status") or {}).get("state") == "Open"

        wait("default queue created and Open", queue_open)
        watch = Watch(api, ns)
        for name, (replicas, pool) in JOBS.items():
            custom.create_namespaced_custom_object(G, V, ns, "jobs", vcjob(name, ns, replicas, pool))

        def job_phase(name: str) -> str:
            return ((custom.get_namespaced_custom_object(G, V, ns, "jobs", name).get("status") or {})
                    .get("state") or {}).get("phase", "")

        def gangs_running():
            for job in RUNNING_JOBS:
                pods = watch.job_pods(job)
                replicas = JOBS[job][0]
                if len(pods) != replicas or not all((p.get("status") or {}).get("phase") == "Running"
                                                    and p["spec"].get("nodeName") for p in pods.values()):
                    return None
            return all(job_phase(j) == "Running" for j in RUNNING_JOBS)

        wait("gang-a and gang-b: jobs Running, 40 pods bound and Running", gangs_running)

        def stuck_gang_refused():
            pods = watch.job_pods(STUCK_JOB)
            pg = watch.pg.get(STUCK_JOB) or {}
            st = pg.get("status") or {}
            unschedulable = any(c.get("type") == "Unschedulable" and c.get("status") == "True"
                                for c in st.get("conditions") or [])
            return len(pods) == JOBS[STUCK_JOB][0] and st.get("phase") == "Inqueue" and unschedulable

        wait("gang-c: PodGroup Inqueue and Unschedulable, its 6 pods created", stuck_gang_refused)

        # Three more sessions, each after a change to the scheduler's view that nobody uses.
        scheduling = client.SchedulingV1Api(api)
        nudges = []
        try:
            for i in range(3):
                sessions = metric(metrics_addr, "vcbus_scheduler_sessions_total")
                pc = f"kwok-gang-nudge-{tag}-{i}"
                scheduling.create_priority_class({"metadata": {"name": pc}, "value": 7, "globalDefault": False})
                nudges.append(pc)
                wait(f"a scheduling session after {pc}",
                     lambda s=sessions: metric(metrics_addr, "vcbus_scheduler_sessions_total") > s)
        finally:
            for pc in nudges:
                try:
                    scheduling.delete_priority_class(pc)
                except client.ApiException:
                    pass
        watch.drain()

        # --- what happened
        ab_nodes = {n for n in nodes if "-ab-" in n}
        for job in RUNNING_JOBS:
            pods = watch.job_pods(job)
            replicas = JOBS[job][0]
            assert len(pods) == replicas, (job, sorted(pods))
            assert all(watch.bound[n][1] in ab_nodes for n in pods), {n: watch.bound[n] for n in pods}
            first_bind = min(watch.bound[n][0] for n in pods)
            # the gang's pods all existed, and its PodGroup was admitted, before any of them was bound
            assert max(watch.created[n] for n in pods) < first_bind, (job, watch.created, watch.bound)
            assert watch.inqueue[job] < first_bind, (job, watch.inqueue[job], first_bind)
            assert job_phase(job) == "Running"
            assert ((watch.pg[job].get("status") or {}).get("phase")) == "Running", watch.pg[job].get("status")
        per_node: dict[str, int] = {}
        for rv, node in watch.bound.values():
            per_node[node] = per_node.get(node, 0) + 1
        assert max(per_node.values()) <= int(NODE["cpu"]), per_node  # never more than a node holds

        stuck = watch.job_pods(STUCK_JOB)
        assert len(stuck) == JOBS[STUCK_JOB][0], sorted(stuck)
        assert not [n for n in stuck if n in watch.bound], {n: watch.bound.get(n) for n in stuck}
        assert all(not p["spec"].get("nodeName") and (p.get("status") or {}).get("phase") == "Pending"
                   for p in stuck.values())
        assert job_phase(STUCK_JOB) == "Pending"
        assert (watch.pg[STUCK_JOB].get("status") or {}).get("phase") == "Inqueue"
        assert len(watch.bound) == sum(JOBS[j][0] for j in RUNNING_JOBS), sorted(watch.bound)
        assert metric(metrics_addr, "vcbus_scheduler_binds_total") == len(watch.bound)
        cond = next(c for c in watch.pg[STUCK_JOB]["status"]["conditions"] if c.get("type") == "Unschedulable")
        print(f"stage timings (s since start): {timings}")
        print(f"pods per node: {dict(sorted(per_node.items()))}")
        print(f"gang-c Unschedulable: {cond.get('reason')}: {cond.get('message')}")
    finally:
        if watch is not None:
            watch.stop()
        up.stop()
        kwok_env.delete_nodes(api, nodes)
