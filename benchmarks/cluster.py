"""The whole system at a cluster's pace: Volcano's own benchmark on a real API server and KWOK nodes.

    .venv/bin/python benchmarks/cluster.py                 # full size: 100 nodes, W1 10 x 100, W2 300 jobs, W3
    .venv/bin/python benchmarks/cluster.py --quick         # 20 nodes, W1 4 x 25, W2 40 jobs, W3: under 3 minutes
    .venv/bin/python benchmarks/cluster.py --json          # one JSON object; headline ratio under "ratio"
    .venv/bin/python benchmarks/cluster.py --volcano-bin ~/.cache/vcbus/volcano/bin --rounds 3
                                                           # and Volcano itself, interleaved, in the same run

What runs, as Volcano's benchmark (volcano-sh/volcano `benchmark/`: `make test-gang-env JOBS=10
REPLICAS=100 MIN_AVAILABLE=100` on KWOK nodes of 32 cpu / 256Gi) runs it, on this machine:

- the test suite's real etcd + kube-apiserver (tests/k8s_env.py; the envtest binaries of
  `scripts/envtest.sh`), fresh for every workload and system;
- KWOK (sigs.k8s.io/kwok, `scripts/kwok.sh`; tests/kwok_env.py) as the kubelets of `--nodes` fake
  nodes: a bound pod becomes Running, a deleted one goes;
- the system under test, as its users run it: `vcbus up --kubeconfig K` with its defaults (its own
  embedded nats-server, fsync always), or with `--volcano-bin DIR` Volcano's vc-controller-manager and
  vc-scheduler built from source (`build-volcano.sh`), at `--kube-api-qps 5000 --kube-api-burst
  10000` as the benchmark installs them, with the benchmark's scheduler configuration
  (`benchmark/testcases/gang/config/scheduler-config.yaml`: enqueue, allocate, backfill).

Workloads:

- W1 gang: `jobs` vcjobs of `replicas` pods (1 cpu / 1Gi, minAvailable = replicas), created at once;
- W3 failure reaction, on W1's jobs once all run: one pod of each job fails at once (its status set
  Failed, exit code 1, as a kubelet would); the job policy PodFailed -> RestartJob restarts it;
  recovery is the time until all of its pods run again as new pods, per job;
- W2 small jobs: `small` vcjobs of 1 master + 2 workers (minAvailable 3), created at once;
- W4 restarts, on a fresh cluster of `seed_nodes` (10) nodes: the seed job (1 master + 2 workers,
  PodFailed -> RestartJob) once Running, one worker failed `restarts` times in a row; per restart
  the time from the failure to the job's Restarting phase (its status polled every 10 ms) and to
  its three new pods Running (`restart_to_restarting_p50_s`, `restart_to_running_p50_s`);
- W5 one wide gang: `wide` (50) replicas on those 10 nodes, created to all Running.

Figures per workload and system (medians over `--rounds`, each round alternating the systems):
`all_running_s` (first create to the last pod Running, seen by a watch of this process),
`bound_per_s` (pods over the time from the first bind to the last), `bound_p50_s` (a pod's ADDED to
its bind, p50), `cpu_s` (CPU seconds of the system's processes over the workload: `vcbus up` and its
nats-server, or Volcano's two; `cpu_by_process` splits it), `cluster_cpu_s` (etcd's, the API
server's and KWOK's over the same time: the load the system's requests and watches put on the
cluster), `api_writes` (the API server's writes over the workload, from its
`apiserver_request_total`: the system's, KWOK's and the benchmark's own; `api_writes_by_kind` splits
them by verb and resource), `events_by_reason` (the Events written over the workload by involved
kind and reason, and their summed `count`), `recovery_p50_s` (W3) and `peak_rss_mb` (VmHWM of those
processes).

The floor, measured in each round on the same API server and KWOK nodes: the least work any
controller must do to get the same pods running, sent from this process at the same concurrency
as vcbus's actuator (`--actuator-concurrency`, 32): every pod created (POST, the manifest a vcjob's
task renders) and bound (POST of a Binding to the node a round-robin picks), nothing else, and the
time until KWOK reports them all Running. `floor_ratio` is the floor's all-Running time over vcbus's
(1 would be vcbus as fast as bare requests). The headline `ratio` is Volcano's W1 all-Running time
over vcbus's when Volcano runs (above 1: vcbus is faster), else `floor_ratio` of W1.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import json
import os
import pathlib
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from typing import Any, Callable

ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import bustimeline  # noqa: E402
from benchmarks.latency import _die_with_parent, percentile  # noqa: E402
from statemachines.scheduler.config import DEFAULT_CONFIG_YAML  # noqa: E402
from tests import k8s_env, kwok_env  # noqa: E402
from vcbus.k8s.watching import _iter_lines, api_request  # noqa: E402

FULL = {"nodes": 100, "jobs": 10, "replicas": 100, "small": 300, "seed_nodes": 10, "restarts": 7, "wide": 50}
QUICK = {"nodes": 20, "jobs": 4, "replicas": 25, "small": 40, "seed_nodes": 10, "restarts": 3, "wide": 50}
WORKLOADS = ("gang", "small", "seed")
NODE_CPU, NODE_MEMORY, NODE_PODS = "32", "256Gi", "110"
DEADLINE = 600.0  # seconds a workload may take before the run is called failed
VOLCANO_QPS, VOLCANO_BURST = "5000", "10000"  # what Volcano's benchmark installs (benchmark/scripts/install-volcano.sh)
# Volcano's benchmark configuration (benchmark/testcases/gang/config/scheduler-config.yaml) is, word for word,
# vcbus's default (the helm install's), so both systems schedule with the same actions and plugins.
VOLCANO_SCHEDULER_CONF = DEFAULT_CONFIG_YAML
NS = "bench"


# --------------------------------------------------------------------------- manifests


def pod_template(task: str) -> dict:
    return {
        "metadata": {"labels": {"volcano.sh/benchmark": "true"}},
        "spec": {
            "schedulerName": "volcano",
            "restartPolicy": "Never",
            "containers": [{"name": task, "image": "busybox:1.36", "imagePullPolicy": "IfNotPresent",
                            "resources": {"requests": {"cpu": "1", "memory": "1Gi"},
                                          "limits": {"cpu": "1", "memory": "1Gi"}}}],
        },
    }


def gang_job(name: str, replicas: int) -> dict:
    """Volcano's gang case (benchmark/testcases/gang/cases/vcjob-template.yaml), with a restart policy
    for W3; the fields Volcano's admission webhook would default are given (neither system's webhook runs)."""
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
        "metadata": {"name": name, "namespace": NS, "labels": {"volcano.sh/benchmark": "true"}},
        "spec": {
            "schedulerName": "volcano", "minAvailable": replicas, "queue": "default", "maxRetry": 3,
            "policies": [{"event": "PodFailed", "action": "RestartJob"}],
            "tasks": [{"name": "worker", "replicas": replicas, "minAvailable": replicas, "maxRetry": 3,
                       "template": pod_template("worker")}],
        },
    }


def small_job(name: str) -> dict:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "schedulerName": "volcano", "minAvailable": 3, "queue": "default", "maxRetry": 3,
            "policies": [{"event": "PodFailed", "action": "RestartJob"}],
            "tasks": [{"name": "master", "replicas": 1, "minAvailable": 1, "maxRetry": 3, "template": pod_template("master")},
                      {"name": "worker", "replicas": 2, "minAvailable": 2, "maxRetry": 3, "template": pod_template("worker")}],
        },
    }


# --------------------------------------------------------------------------- the watch of pods


class PodWatch:
    """A raw watch of the namespace's pods: per pod (by uid) when it was ADDED, bound and first Running."""

    def __init__(self, api: Any) -> None:
        self.api = api
        self.added: dict[str, float] = {}
        self.bound: dict[str, float] = {}
        self.running: dict[str, float] = {}
        self.names: dict[str, str] = {}  # uid -> name
        self.gone: set[str] = set()
        self.terminating: dict[str, float] = {}  # uid -> when first seen deleting (deletionTimestamp)
        self.deleted: dict[str, float] = {}  # uid -> when DELETED
        self.error: BaseException | None = None
        self.lock = threading.Lock()
        self.closing = False
        self.rv = api_request(api, "GET", f"/api/v1/namespaces/{NS}/pods", query={"limit": "1"})["metadata"]["resourceVersion"]
        self.resp = self._open()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _open(self) -> Any:
        return api_request(self.api, "GET", f"/api/v1/namespaces/{NS}/pods", stream=True, timeout=(5, 3600),
                           query={"watch": "true", "resourceVersion": self.rv, "allowWatchBookmarks": "true"})

    def _run(self) -> None:
        while not self.closing:
            try:
                for line in _iter_lines(self.resp):
                    self._event(json.loads(line), time.time())
            except Exception as err:  # noqa: BLE001 - closed at the end, or broken: watched again
                if self.closing:
                    return
                if "410" in str(err) or "Gone" in str(err):
                    self.error = err  # history lost: the figures would be wrong
                    return
            if self.closing:
                return
            try:
                self.resp = self._open()  # the server ended the watch: go on from the last version seen
            except Exception as err:  # noqa: BLE001
                self.error = err
                return

    def _event(self, ev: dict, now: float) -> None:
        obj = ev.get("object") or {}
        meta = obj.get("metadata") or {}
        if meta.get("resourceVersion"):
            self.rv = meta["resourceVersion"]
        if ev.get("type") == "BOOKMARK":
            return
        if ev.get("type") == "ERROR":
            raise RuntimeError(f"watch error: {obj.get('message') or obj}")
        uid = meta.get("uid", "")
        with self.lock:
            self.added.setdefault(uid, now)
            self.names[uid] = meta.get("name", "")
            if (obj.get("spec") or {}).get("nodeName"):
                self.bound.setdefault(uid, now)
            if (obj.get("status") or {}).get("phase") == "Running":
                self.running.setdefault(uid, now)
            if ev.get("type") == "DELETED" or meta.get("deletionTimestamp"):
                self.gone.add(uid)
                self.terminating.setdefault(uid, now)
            if ev.get("type") == "DELETED":
                self.deleted.setdefault(uid, now)

    def live_running(self) -> dict[str, float]:
        """uid -> first Running time, of the pods not deleted."""
        with self.lock:
            return {uid: t for uid, t in self.running.items() if uid not in self.gone}

    def close(self) -> None:
        """End the watch: its socket shut down under the reading thread (a close would wait for the read)."""
        self.closing = True
        sock = getattr(getattr(self.resp, "connection", None), "sock", None)
        try:
            if sock is not None:
                sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.thread.join(timeout=10)


def wait_for(what: str, cond: Callable[[], Any], deadline: float = DEADLINE, every: float = 0.05,
             check: Callable[[], None] = lambda: None) -> Any:
    end = time.monotonic() + deadline
    while True:
        got = cond()
        if got:
            return got
        check()
        if time.monotonic() > end:
            raise TimeoutError(f"waited {deadline:.0f}s for {what}")
        time.sleep(every)


# --------------------------------------------------------------------------- the systems under test


def _cpu(pid: int) -> float:
    try:
        fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def status_mb(pid: int, field: str) -> float:
    """A memory figure of the process in MB, from /proc/<pid>/status (`VmHWM`: its peak RSS, `VmRSS`:
    now); 0 when it is gone."""
    try:
        for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _hwm_mb(pid: int) -> float:
    return status_mb(pid, "VmHWM")


def _children(pid: int) -> list[int]:
    try:
        text = pathlib.Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split()]


class System:
    """Processes that run the cluster: started, their CPU and memory read, stopped."""

    name = "?"

    def __init__(self, workdir: pathlib.Path) -> None:
        self.workdir = workdir
        self.procs: list[subprocess.Popen] = []
        self.logs: list[pathlib.Path] = []

    def pids(self) -> list[int]:
        out = []
        for proc in self.procs:
            out.append(proc.pid)
            out += _children(proc.pid)  # vcbus's embedded nats-server
        return out

    def cpus(self) -> collections.Counter:
        """CPU seconds so far by process name (vcbus and nats-server; vc-controller-manager and vc-scheduler)."""
        out: collections.Counter = collections.Counter()
        for pid in self.pids():
            try:
                name = pathlib.Path(f"/proc/{pid}/comm").read_text().strip()
            except OSError:
                continue
            out[name] += _cpu(pid)
        return out

    def cpu(self) -> float:
        return sum(self.cpus().values())

    def peak_rss_mb(self) -> float:
        return sum(_hwm_mb(pid) for pid in self.pids())

    def check(self) -> None:
        for proc, log in zip(self.procs, self.logs):
            if proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited ({proc.returncode}):\n{log.read_text(errors='replace')[-3000:]}")

    def _spawn(self, args: list[str], log_name: str) -> None:
        log = self.workdir / log_name
        fh = open(log, "wb")
        self.logs.append(log)
        self.procs.append(subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=fh, stderr=subprocess.STDOUT,
                                           preexec_fn=_die_with_parent, cwd=self.workdir))
        fh.close()

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


class Vcbus(System):
    name = "vcbus"

    def command(self) -> list[str]:
        """How `vcbus` is started (benchmarks/soak.py's --tracemalloc starts it under tracemalloc)."""
        return [str(pathlib.Path(sys.executable).with_name("vcbus"))]

    def start(self, kubeconfig: pathlib.Path, extra: list[str]) -> None:
        self.metrics = f"127.0.0.1:{k8s_env.free_port()}"  # its /metrics, read at the end of each workload
        self.nats_port = k8s_env.free_port()  # its embedded nats-server's, for --timeline
        self._spawn([*self.command(), "up", "--kubeconfig", str(kubeconfig), "--data-dir", str(self.workdir / "data"),
                     "--metrics-addr", self.metrics, "--port", str(self.nats_port), *extra], "vcbus.log")

    def ready(self) -> bool:
        return b"running decider" in self.logs[0].read_bytes() and b"vcjobs listed" in self.logs[0].read_bytes()

    def summary(self) -> list[str]:
        """What `vcbus up` said of its work when it stopped (commands by result, sessions, decisions)."""
        wanted = ("actuator: stopped", "decider: decided", "scheduler: ", "projector: ")
        lines = self.logs[0].read_text(errors="replace").splitlines()
        return [line.split(" ", 3)[-1] for line in lines if any(w in line for w in wanted) and "session " not in line][-4:]


class Volcano(System):
    name = "volcano"

    def start(self, kubeconfig: pathlib.Path, bindir: pathlib.Path) -> None:
        conf = self.workdir / "volcano-scheduler.conf"
        conf.write_text(VOLCANO_SCHEDULER_CONF)
        common = [f"--kubeconfig={kubeconfig}", "--leader-elect=false", f"--kube-api-qps={VOLCANO_QPS}",
                  f"--kube-api-burst={VOLCANO_BURST}", "--logtostderr=true", "-v=1"]
        self._spawn([str(bindir / "vc-controller-manager"), *common, "--healthz-address=127.0.0.1:0",
                     "--listen-address=127.0.0.1:0"], "vc-controller-manager.log")
        self._spawn([str(bindir / "vc-scheduler"), *common, f"--scheduler-conf={conf}", "--healthz-address=127.0.0.1:0",
                     "--listen-address=127.0.0.1:0"], "vc-scheduler.log")

    def ready(self) -> bool:
        return True


# --------------------------------------------------------------------------- one cluster


class Cluster:
    """A fresh API server and KWOK with `nodes` fake nodes (`complete`: KWOK ends every running pod
    of a vcjob at once, exit 0, its pod-complete stage)."""

    def __init__(self, workdir: pathlib.Path, nodes: int, crd_dir: pathlib.Path = k8s_env.CRD_DIR,
                 complete: bool = False) -> None:
        assets = k8s_env.asset_dir()
        if assets is None:
            raise SystemExit("cluster: " + k8s_env.missing_assets_message())
        binary = kwok_env.kwok_binary()
        if binary is None:
            raise SystemExit("cluster: " + kwok_env.missing_kwok_message())
        self.env = k8s_env.EnvTest(assets, workdir / "envtest", crd_dir).start()
        self.api = self.env.api_client()
        self.kwok = kwok_env.Kwok(binary, self.env.kubeconfig, workdir / "kwok", complete=complete).start()
        self.node_names = kwok_env.create_nodes(self.api, nodes, cpu=NODE_CPU, memory=NODE_MEMORY, pods=NODE_PODS)
        kwok_env.wait_nodes_ready(self.api, self.node_names, timeout=120)
        self.env.create_namespace(NS)
        queue = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "default"},
                 "spec": {"weight": 1, "reclaimable": True}}
        api_request(self.api, "POST", "/apis/scheduling.volcano.sh/v1beta1/queues", body=queue)

    def cpu(self) -> float:
        """CPU seconds so far of the cluster's own processes: etcd, kube-apiserver and KWOK (what the
        system under test makes them do shows here: every request, every watch event they send)."""
        procs = (self.env._etcd, self.env._apiserver, self.kwok.proc)
        return sum(_cpu(p.pid) for p in procs if p is not None and p.poll() is None)

    def writes(self) -> collections.Counter:
        """The API server's count so far of its writes, by verb and resource (`apiserver_request_total`).
        Everyone's writes count: the system's, KWOK's (a pod's status, node leases) and the benchmark's own."""
        resp = api_request(self.api, "GET", "/metrics", accept="text/plain", stream=True)
        try:
            text = resp.data.decode()
        finally:
            resp.release_conn()
        out: collections.Counter = collections.Counter()
        for line in text.splitlines():
            if not line.startswith("apiserver_request_total{"):
                continue
            labels, _, value = line.rpartition(" ")
            fields = dict(part.split("=", 1) for part in labels[len("apiserver_request_total{"):-1].split(","))
            verb = fields.get("verb", "").strip('"')
            if verb not in ("POST", "PUT", "PATCH", "DELETE", "APPLY"):
                continue
            resource = fields.get("resource", "").strip('"')
            sub = fields.get("subresource", "").strip('"')
            out[f"{verb} {resource}{'/' + sub if sub else ''}"] += int(float(value))
        return out

    def events(self) -> collections.Counter:
        """The Events stored so far, every namespace, by the involved object's kind and the reason: how many
        Event objects (the API server's POSTs) and, under "... (count)", their `count` summed (a recorder
        that aggregates repeats PATCHes the count of one object instead of writing another)."""
        out: collections.Counter = collections.Counter()
        for ev in api_request(self.api, "GET", "/api/v1/events")["items"]:
            key = f"{(ev.get('involvedObject') or {}).get('kind', '')} {ev.get('reason', '')}"
            out[key] += 1
            out[key + " (count)"] += ev.get("count") or 1
        return out

    def stop(self) -> None:
        self.kwok.stop()
        self.env.stop()


def create_all(api: Any, manifests: list[dict], concurrency: int = 16) -> None:
    path = f"/apis/batch.volcano.sh/v1alpha1/namespaces/{NS}/jobs"
    with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(lambda m: api_request(api, "POST", path, body=m), manifests))


class Costs:
    """What a workload costs from now on: the system's CPU, the cluster's, and the API server's writes."""

    def __init__(self, system: System, cluster: Cluster) -> None:
        self.system, self.cluster = system, cluster
        self.cpus0, self.cluster_cpu0, self.writes0 = system.cpus(), cluster.cpu(), cluster.writes()
        self.events0 = cluster.events()

    def since(self) -> dict:
        """`cpu_s` (and `cpu_by_process`), `cluster_cpu_s`, `api_writes`, `api_writes_by_kind` and
        `events_by_reason` since this was made."""
        grown = self.cluster.writes() - self.writes0
        cpus = self.system.cpus()
        cpus.subtract(self.cpus0)
        return {"cpu_s": round(sum(cpus.values()), 2),
                "cpu_by_process": {name: round(cpu, 2) for name, cpu in sorted(cpus.items())},
                "cluster_cpu_s": round(self.cluster.cpu() - self.cluster_cpu0, 2),
                "api_writes": sum(grown.values()), "api_writes_by_kind": dict(grown.most_common()),
                "events_by_reason": dict(sorted((self.cluster.events() - self.events0).items()))}


def bound_figures(watch: PodWatch, uids: set[str]) -> dict:
    bound = [watch.bound[u] for u in uids if u in watch.bound]
    waits = [watch.bound[u] - watch.added[u] for u in uids if u in watch.bound and u in watch.added]
    span = (max(bound) - min(bound)) if len(bound) > 1 else float("nan")
    return {"bound_per_s": round(len(bound) / span, 1) if span and span == span else float("nan"),
            "bound_p50_s": round(percentile(waits, 50), 2)}


def restart_stages(watch: PodWatch, first: dict[str, float], failed_at: dict[str, float]) -> dict:
    """Where a restart's time goes, from the pod watch: per job, seconds from its pod's failure to
    the first and last old pod deleting, the last one gone, the first and last new pod ADDED, the
    first new pod bound; medians over the jobs (`stage_*_p50_s`)."""
    stages: dict[str, list[float]] = {}
    with watch.lock:
        old: dict[str, list[str]] = {}
        new: dict[str, list[str]] = {}
        for uid, name in watch.names.items():
            job = name.rsplit("-", 2)[0]
            if job in failed_at:
                (old if uid in first else new).setdefault(job, []).append(uid)
        for job, t0 in failed_at.items():
            marks = {
                "first_deleting": min((watch.terminating[u] for u in old.get(job, ()) if u in watch.terminating), default=None),
                "last_deleting": max((watch.terminating[u] for u in old.get(job, ()) if u in watch.terminating), default=None),
                "last_gone": max((watch.deleted[u] for u in old.get(job, ()) if u in watch.deleted), default=None),
                "first_added": min((watch.added[u] for u in new.get(job, ())), default=None),
                "last_added": max((watch.added[u] for u in new.get(job, ())), default=None),
                "first_bound": min((watch.bound[u] for u in new.get(job, ()) if u in watch.bound), default=None),
            }
            for stage, t in marks.items():
                if t is not None:
                    stages.setdefault(stage, []).append(t - t0)
    return {f"stage_{stage}_p50_s": round(statistics.median(ts), 2) for stage, ts in stages.items()}


def most_pods_per_name(watch: PodWatch) -> int:
    """The most pods (uids) seen under one name: 2 in W1 + W3 (one before the restart, one after);
    more means a pod was created twice for one version."""
    with watch.lock:
        per_name = collections.Counter(watch.names.values())
    return max(per_name.values(), default=0)


def run_gang(cluster: Cluster, system: System, size: dict, stage: Callable[[str], None] = lambda _: None) -> dict:
    """W1, then W3 on the same jobs; `stage("W3")` as W3 begins (a profile starts a new file)."""
    n = size["jobs"] * size["replicas"]
    watch = PodWatch(cluster.api)
    try:
        costs = Costs(system, cluster)
        t0 = time.time()
        create_all(cluster.api, [gang_job(f"gang-{i}", size["replicas"]) for i in range(size["jobs"])])
        running = wait_for(f"{n} pods Running ({system.name})", lambda: (r := watch.live_running()) and len(r) >= n and r,
                           check=system.check)
        t1 = max(running.values())
        w1 = {"all_running_s": round(t1 - t0, 2), **bound_figures(watch, set(running)), **costs.since()}
        # W3: one pod of each job fails at once
        first = dict(running)
        victims = {}
        with watch.lock:
            by_job: dict[str, str] = {}
            for uid in first:
                job = watch.names[uid].rsplit("-", 2)[0]
                by_job.setdefault(job, uid)
        stage("W3")
        costs = Costs(system, cluster)
        failed_at: dict[str, float] = {}
        for job, uid in sorted(by_job.items()):
            victims[job] = uid
            failed_at[job] = time.time()
            kwok_env.fail_pod(cluster.api, NS, watch.names[uid], exit_code=1)

        def recovered() -> dict[str, float] | None:
            live = watch.live_running()
            fresh: dict[str, list[float]] = {}
            with watch.lock:
                for uid, t in live.items():
                    if uid not in first:
                        fresh.setdefault(watch.names[uid].rsplit("-", 2)[0], []).append(t)
            if all(len(fresh.get(job, [])) >= size["replicas"] for job in by_job):
                return {job: max(ts) for job, ts in fresh.items()}
            return None

        def check() -> None:
            system.check()
            if watch.error is not None:
                raise RuntimeError(f"the watch of pods broke: {watch.error!r}")

        back = wait_for(f"every job restarted and running again ({system.name})", recovered, check=check)
        w3 = {"recovery_p50_s": round(statistics.median(back[j] - failed_at[j] for j in by_job), 2),
              "all_running_s": round(max(back.values()) - min(failed_at.values()), 2),
              **costs.since(), **restart_stages(watch, first, failed_at),
              "most_pods_per_name": most_pods_per_name(watch)}
        return {"W1": w1, "W3": w3}
    finally:
        watch.close()


def run_small(cluster: Cluster, system: System, size: dict) -> dict:
    n = size["small"] * 3
    watch = PodWatch(cluster.api)
    try:
        costs = Costs(system, cluster)
        t0 = time.time()
        create_all(cluster.api, [small_job(f"small-{i}") for i in range(size["small"])])
        running = wait_for(f"{n} pods Running ({system.name})", lambda: (r := watch.live_running()) and len(r) >= n and r,
                           check=system.check)
        return {"W2": {"all_running_s": round(max(running.values()) - t0, 2), **bound_figures(watch, set(running)),
                       **costs.since()}}
    finally:
        watch.close()


def job_phase(api: Any, name: str) -> tuple[str, int]:
    status = api_request(api, "GET", f"/apis/batch.volcano.sh/v1alpha1/namespaces/{NS}/jobs/{name}").get("status") or {}
    return (status.get("state") or {}).get("phase", ""), int(status.get("retryCount") or 0)


def run_seed(cluster: Cluster, system: System, size: dict) -> dict:
    """W4: the seed job (1 master + 2 workers, PodFailed -> RestartJob) restarted `restarts` times, one
    failed worker each time; W5: one gang of `wide` replicas on the same `seed_nodes` nodes."""
    watch = PodWatch(cluster.api)
    try:
        costs = Costs(system, cluster)
        seed = small_job("seed")
        seed["spec"]["maxRetry"] = size["restarts"] + 2  # every restart is one retry: none may end the job
        create_all(cluster.api, [seed])
        seen = wait_for("the seed job's 3 pods Running", lambda: (r := watch.live_running()) and len(r) >= 3 and r,
                        check=system.check)
        to_restarting, to_running = [], []
        for attempt in range(size["restarts"]):
            with watch.lock:
                worker = next(uid for uid in seen if "-worker-" in watch.names[uid])
            failed_at = time.time()
            kwok_env.fail_pod(cluster.api, NS, watch.names[worker], exit_code=1)
            # the phase is polled (every 10 ms) rather than watched: Restarting lasts until the pods are gone
            restarting = wait_for("the seed job Restarting", lambda: job_phase(cluster.api, "seed") == ("Restarting", attempt)
                                  or job_phase(cluster.api, "seed")[1] > attempt, every=0.01, check=system.check)
            if restarting:
                to_restarting.append(time.time() - failed_at)
            fresh = wait_for("the seed job running again", lambda: (r := {u: t for u, t in watch.live_running().items()
                                                                         if u not in seen}) and len(r) >= 3 and r,
                             check=system.check)
            to_running.append(max(fresh.values()) - failed_at)
            seen = fresh
        w4 = {"restart_to_restarting_p50_s": round(statistics.median(to_restarting), 3),
              "restart_to_running_p50_s": round(statistics.median(to_running), 3), **costs.since()}
        costs, t0 = Costs(system, cluster), time.time()
        create_all(cluster.api, [gang_job("wide", size["wide"])])
        before = set(watch.live_running())
        running = wait_for(f"{size['wide']} pods of the wide gang Running", lambda: (
            r := {u: t for u, t in watch.live_running().items() if u not in before}) and len(r) >= size["wide"] and r,
            check=system.check)
        # W5's `PATCH pods/status` are KWOK's (one per pod: Running) and vcbus's PodScheduled=False writes
        w5 = {"all_running_s": round(max(running.values()) - t0, 2), **costs.since()}
        return {"W4": w4, "W5": w5}
    finally:
        watch.close()


def run_floor(cluster: Cluster, n: int, concurrency: int) -> dict:
    """The least work: n pods created and bound by bare requests at the actuator's concurrency."""
    watch = PodWatch(cluster.api)
    nodes = cluster.node_names
    template = pod_template("worker")

    def one(i: int) -> None:
        name = f"floor-{i}"
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS, **template["metadata"]},
               "spec": template["spec"]}
        api_request(cluster.api, "POST", f"/api/v1/namespaces/{NS}/pods", body=pod)
        api_request(cluster.api, "POST", f"/api/v1/namespaces/{NS}/pods/{name}/binding", body={
            "apiVersion": "v1", "kind": "Binding", "metadata": {"name": name, "namespace": NS},
            "target": {"apiVersion": "v1", "kind": "Node", "name": nodes[i % len(nodes)]}})

    try:
        t0 = time.time()
        with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
            list(pool.map(one, range(n)))
        running = wait_for(f"{n} floor pods Running", lambda: (r := watch.live_running()) and len(r) >= n and r)
        return {"all_running_s": round(max(running.values()) - t0, 2)}
    finally:
        watch.close()
        api_request(cluster.api, "DELETE", f"/api/v1/namespaces/{NS}/pods", query={"gracePeriodSeconds": "0"})


def volcano_crds(volcano_bin: pathlib.Path | None, into: pathlib.Path) -> pathlib.Path:
    """Volcano's own CRDs (config/crd/*/bases: its controller waits for every informer, JobFlows included),
    copied into `into`, from the source build-volcano.sh built from (VOLCANO_SRC, else its cache)."""
    src = os.environ.get("VOLCANO_SRC")
    candidates = [pathlib.Path(src)] if src else sorted((pathlib.Path.home() / ".cache/vcbus/volcano").glob("src-*"))
    for candidate in candidates:
        found = sorted(candidate.glob("config/crd/*/bases/*.yaml"))
        if found:
            into.mkdir(parents=True, exist_ok=True)
            for path in found:
                shutil.copy(path, into / path.name)
            return into
    raise SystemExit(f"cluster: no Volcano CRDs found for --volcano-bin {volcano_bin}: set VOLCANO_SRC to the source "
                     "build-volcano.sh built from")


def start_profile(system: System, into: pathlib.Path) -> subprocess.Popen:
    """py-spy sampling `vcbus up` (its Python threads, native frames left out) into a flame-graph file.

    `--nonblocking`: py-spy's default pauses the process for every sample, and at 200 samples a second
    that more than doubled W1's all-Running time (46 s against 20 s unprofiled). Unpaused samples can
    be torn now and then, which a profile of where the time goes can afford."""
    spy = shutil.which("py-spy") or str(pathlib.Path(sys.executable).with_name("py-spy"))
    if not os.access(spy, os.X_OK):
        raise SystemExit("cluster: --profile needs py-spy (`.venv/bin/pip install py-spy`)")
    into.parent.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen([spy, "record", "--pid", str(system.procs[0].pid), "--rate", "200", "--gil", "--nonblocking", "--format", "raw",
                             "--output", str(into)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def stop_profile(spy: subprocess.Popen) -> None:
    spy.send_signal(signal.SIGINT)
    spy.wait(timeout=60)


def one_round(kind: str, size: dict, tmp: pathlib.Path, volcano_bin: pathlib.Path | None, extra: list[str],
              concurrency: int, log: Callable[[str], None], workloads: tuple[str, ...] = WORKLOADS,
              profile: pathlib.Path | None = None, timeline: bool = False) -> dict:
    """Every workload once on `kind` ("vcbus" or "volcano"), each on a fresh cluster."""
    out: dict = {}
    for workload in workloads:
        work = pathlib.Path(tempfile.mkdtemp(prefix=f"{kind}-{workload}-", dir=tmp))
        crds = k8s_env.CRD_DIR if kind == "vcbus" else volcano_crds(volcano_bin, work / "crds")
        cluster = Cluster(work, size["seed_nodes"] if workload == "seed" else size["nodes"], crds)
        system: System = Vcbus(work) if kind == "vcbus" else Volcano(work)
        try:
            if kind == "vcbus" and workload != "seed":
                floor = run_floor(cluster, size["jobs"] * size["replicas"] if workload == "gang" else size["small"] * 3,
                                  concurrency)
                out.setdefault("floor", {})["W1" if workload == "gang" else "W2"] = floor
                wait_for("the floor's pods gone", lambda: not api_request(
                    cluster.api, "GET", f"/api/v1/namespaces/{NS}/pods")["items"], deadline=120)
            if kind == "vcbus":
                system.start(cluster.env.kubeconfig, extra)
            else:
                assert volcano_bin is not None
                system.start(cluster.env.kubeconfig, volcano_bin)
            wait_for(f"{kind} ready", system.ready, deadline=120, check=system.check)
            spy = None
            if profile is not None and kind == "vcbus":
                spy = start_profile(system, profile / f"{workload}-{os.getpid()}-{time.time_ns()}.txt")

            def stage(name: str) -> None:  # a profile of each stage of its own (W1 and W3 of the gang run)
                nonlocal spy
                if spy is not None and profile is not None:
                    stop_profile(spy)
                    spy = start_profile(system, profile / f"{workload}-{name}-{os.getpid()}-{time.time_ns()}.txt")

            run = {"gang": run_gang, "small": run_small, "seed": run_seed}[workload]
            got = run(cluster, system, size, stage) if workload == "gang" else run(cluster, system, size)
            if spy is not None:
                stop_profile(spy)
                assert isinstance(system, Vcbus)
                with urllib.request.urlopen(f"http://{system.metrics}/metrics", timeout=30) as resp:
                    (profile / f"{workload}-{os.getpid()}-metrics.txt").write_bytes(resp.read())
            rss = round(system.peak_rss_mb(), 1)
            for figures in got.values():
                figures["peak_rss_mb"] = rss
            if timeline and isinstance(system, Vcbus):
                out.setdefault("timeline", {})[workload] = bustimeline.milestones(
                    *bustimeline.read(f"nats://127.0.0.1:{system.nats_port}"))
            out.update(got)
            log(f"  {kind} {workload}: " + json.dumps(got))
        except BaseException:
            kept = pathlib.Path(tempfile.gettempdir()) / f"vcbus-cluster-failed-{kind}-{workload}-{os.getpid()}"
            shutil.copytree(work, kept, dirs_exist_ok=True, ignore=shutil.ignore_patterns("data", "etcd*", "pki"))
            log(f"  {kind} {workload} failed; its logs are kept in {kept}")
            raise
        finally:
            system.stop()
            if isinstance(system, Vcbus):
                out.setdefault("vcbus_said", {})[workload] = system.summary()
            cluster.stop()
            shutil.rmtree(work, ignore_errors=True)
    return out


def median_of(rounds: list[dict], workload: str, key: str) -> float:
    values = [r[workload][key] for r in rounds if workload in r and key in r[workload] and r[workload][key] == r[workload][key]]
    return round(statistics.median(values), 2) if values else float("nan")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--quick", action="store_true", help="a smaller size (under 3 minutes)")
    ap.add_argument("--json", action="store_true", help="one JSON object of the figures on stdout")
    ap.add_argument("--volcano-bin", type=pathlib.Path, metavar="DIR",
                    help="a directory with vc-controller-manager and vc-scheduler: run Volcano too, interleaved")
    ap.add_argument("--rounds", type=int, default=1, help="rounds of every workload and system (medians reported)")
    ap.add_argument("--nodes", type=int), ap.add_argument("--jobs", type=int), ap.add_argument("--replicas", type=int)
    ap.add_argument("--small", type=int, help="W2's jobs of 1 master + 2 workers")
    ap.add_argument("--actuator-concurrency", type=int, default=32, help="passed to `vcbus up`; also the floor's")
    ap.add_argument("--vcbus-arg", action="append", default=[], metavar="ARG", help="one more argument for `vcbus up`")
    ap.add_argument("--only", choices=WORKLOADS, help="one workload: gang (W1 and W3), small (W2) or seed (W4 and W5)")
    ap.add_argument("--timeline", action="store_true",
                    help="read vcbus's bus back after each workload: each job's milestones (benchmarks/bustimeline.py), "
                         "medians, under \"timeline\" in each round")
    ap.add_argument("--profile", type=pathlib.Path, metavar="DIR",
                    help="sample `vcbus up` with py-spy over each workload (the thread holding the GIL: where its CPU goes): "
                         "collapsed stacks and its /metrics at the end into DIR (a profiled run's timings are not figures)")
    args = ap.parse_args(argv)
    size = dict(QUICK if args.quick else FULL)
    for key in ("nodes", "jobs", "replicas", "small"):
        if getattr(args, key):
            size[key] = getattr(args, key)
    if args.volcano_bin is not None:
        missing = [b for b in ("vc-controller-manager", "vc-scheduler") if not os.access(args.volcano_bin / b, os.X_OK)]
        if missing:
            print(f"cluster: --volcano-bin {args.volcano_bin}: no executable {', '.join(missing)} there "
                  "(build-volcano.sh builds them)", file=sys.stderr)
            return 2
    log = (lambda text: print(text, file=sys.stderr, flush=True)) if args.json else (lambda text: print(text, flush=True))
    kinds = ["vcbus"] + (["volcano"] if args.volcano_bin else [])
    results: dict[str, list[dict]] = {k: [] for k in kinds}
    extra = [f"--actuator-concurrency={args.actuator_concurrency}", *args.vcbus_arg]
    with tempfile.TemporaryDirectory(prefix="vcbus-cluster-bench-") as tmp:
        for r in range(args.rounds):
            order = kinds if r % 2 == 0 else kinds[::-1]
            for kind in order:
                log(f"round {r + 1}/{args.rounds}: {kind}")
                results[kind].append(one_round(kind, size, pathlib.Path(tmp), args.volcano_bin, extra,
                                               args.actuator_concurrency, log,
                                               (args.only,) if args.only else WORKLOADS, args.profile,
                                               args.timeline))
                if args.timeline and "timeline" in results[kind][-1]:
                    log(f"  {kind} timeline: " + json.dumps(results[kind][-1]["timeline"]))
    keys = ("all_running_s", "bound_per_s", "bound_p50_s", "cpu_s", "cluster_cpu_s", "api_writes", "recovery_p50_s", "restart_to_restarting_p50_s",
            "restart_to_running_p50_s", "peak_rss_mb")
    workloads = ("W1", "W2", "W3", "W4", "W5")
    summary: dict[str, Any] = {"size": size, "rounds": results}
    for kind in kinds:
        summary[kind] = {w: {k: median_of(results[kind], w, k) for k in keys
                             if any(k in r.get(w, {}) for r in results[kind])} for w in workloads}
    floor = {w: median_of([r.get("floor", {}) for r in results["vcbus"]], w, "all_running_s") for w in ("W1", "W2")}
    summary["floor"] = floor
    v = summary["vcbus"]
    summary["floor_ratio"] = {w: round(floor[w] / v[w]["all_running_s"], 3) for w in ("W1", "W2") if v[w]}
    if "volcano" in summary:
        vo = summary["volcano"]
        summary["vs_volcano"] = {
            f"{w}_{label}": round(vo[w][key] / v[w][key], 3)
            for w, key, label in (("W1", "all_running_s", "all_running"), ("W2", "all_running_s", "all_running"),
                                  ("W3", "recovery_p50_s", "recovery_p50"),
                                  ("W4", "restart_to_restarting_p50_s", "restarting_p50"),
                                  ("W4", "restart_to_running_p50_s", "running_again_p50"),
                                  ("W5", "all_running_s", "all_running")) if v[w] and vo[w]
        }
        summary["vs_volcano"].update({f"{w}_cpu_vcbus_over_volcano": round(v[w]["cpu_s"] / vo[w]["cpu_s"], 2)
                                      for w in workloads if v[w] and vo[w]})
        headline = {"small": "W2_all_running", "seed": "W4_running_again_p50"}.get(args.only, "W1_all_running")
        summary["ratio"] = summary["vs_volcano"][headline]
    else:
        summary["ratio"] = summary["floor_ratio"].get("W2" if args.only == "small" else "W1", float("nan"))
    if args.json:
        print(json.dumps(summary))
    else:
        print(f"\nsize: {size}; medians of {args.rounds} round(s)")
        print(f"{'':24}" + "".join(f"{k:>14}" for k in kinds) + f"{'floor':>14}")
        for w in workloads:
            for k in keys:
                if k in summary["vcbus"][w]:
                    row = "".join(f"{summary[kind][w].get(k, float('nan')):>14}" for kind in kinds)
                    fl = floor.get(w, "") if k == "all_running_s" else ""
                    print(f"{w + ' ' + k:24}{row}{fl!s:>14}")
        print(f"floor ratio (floor / vcbus all-Running): {summary['floor_ratio']}")
        if "vs_volcano" in summary:
            print(f"Volcano / vcbus: {summary['vs_volcano']}")
        print(f"ratio: {summary['ratio']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
