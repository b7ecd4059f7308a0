"""Pod failure to the API call, at light load, stage by stage, on a real API server.

    .venv/bin/python benchmarks/latency.py            # 20 single failures of each job shape
    .venv/bin/python benchmarks/latency.py --quick    # 8 of each, under a minute
    .venv/bin/python benchmarks/latency.py --json     # one JSON object; headline under "ratio"
    .venv/bin/python benchmarks/latency.py --volcano "$(VOLCANO_SRC=... scripts/volcano-controller.sh)"
                                                      # and Volcano's own controller, side by side

What runs: the test suite's real etcd + kube-apiserver (tests/k8s_env.py, the
envtest binaries of `scripts/envtest.sh`), an embedded nats-server (fsync
always, as `vcbus up` runs it), and in a process of their own the bridge,
one decider and the actuator exactly as `vcbus up --kubeconfig` assembles
them (vcbus.k8s.cluster.ClusterSide, vcbus.bus.decider.Decider with the pod
renderer; `VcbusProcess`), so that nothing the benchmark does shares their
interpreter. The benchmark's process plays the scheduler and the kubelets
(tests/podsim.py): N vcjobs of two workers (policy PodFailed -> RestartJob)
and N copies of the seed job (examples/resnet-dist-train.yaml: 1 master + 2
workers, pytorch and status-mounter) run; then, one at a time, alternating
between the two, worker-0 of a job fails and the benchmark waits for vcbus's
reaction (the first DeletePod of its pods) before the next failure.

Timestamps, all on this machine's wall clock:

- `failed`: just before the PATCH of pods/status that fails the pod;
- `watched`: when an independent raw watch of pods in this process sees the
  failed status (the API server's own watch delivery);
- `recorded`: the stream timestamp of the pod's record on VCBUS_K8S (bridge);
- `decided`: the stream timestamp of the first DeletePod command on VCBUS_CMDS
  whose `Nats-Msg-Id` is `<that record's seq>:<index>` (decider);
- `applied`: the actuator's own debug audit line for that command
  (`vcbus.actuator`), logged once the API DELETE returned (actuator), and
  handed to the benchmark on the vcbus process's stdout.

Stages: apiserver (watched - failed), bridge (recorded - watched), decider
(decided - recorded), actuator (applied - decided), total (applied - failed).
The actuator stage in two: `actuator_api`, the time its apply of the
DeletePod took (the audit line's own figure: the JSON-patch ownership test
that also marks the pod out of sync, then the DELETE), and `actuator_wait`,
the rest. The decider and the actuator share a process, so the actuator
applies the DeletePod the moment it is decided, while it is being stored
(vcbus.k8s.ahead): `actuator_wait` is then negative, the API call having
started before the command was stored; `decider` is the command's store,
which waits for that first apply (`vcbus.bus.decider.AHEAD_HOLD`;
`--ahead-hold 0` stores it beside the apply). With `--stored-commands-only`
(as `vcbus up` takes it) the actuator waits for the stored command, and
`actuator_wait` is its delivery from the stream, decoding and the hand-over
to the worker thread.

Floor, measured in the same run: the API server's watch delivery for the pod
status change (the `apiserver` stage itself), plus the raw JetStream publish
round trips on the way (nats-py `js.publish`, acked, into a scratch stream on
the same server: one, the record's, when commands are applied ahead of their
store; two with `--stored-commands-only`), plus the two API requests every Volcano-compatible controller sends
for a killed pod (`pkg/controllers/job/job_controller_actions.go`, killPods:
the PATCH that marks it `volcano.sh/controller-out-of-sync`, then the DELETE;
a pod on a node, graceful, with a uid precondition), as raw requests
(`vcbus.k8s.rawcalls`) with nothing else running (the vcbus process is
stopped first: while it runs, each request's watch event is recorded and
decided beside it), on copies of a running worker of the run (the same spec
and status, owned by no vcjob), each after `IDLE` seconds without a request,
as the reaction to a failure at light load starts. `ratio` = vcbus total p50 /
floor p50 (1.0 = nothing but the unavoidable hops).

Volcano's order: Volcano's killPods first PATCHes every victim, then deletes
them one by one, so for a job of two pods its first DELETE returns after three
requests, for the seed job's three pods after four (vcbus's actuator sends each
DeletePod's PATCH and DELETE together: two). `volcano_order_floor_ms` is the
watch delivery plus those raw requests, measured in this run: the least a
controller that follows Volcano's order needs, with no time of its own (no
informer, work queue or sync). `vs_volcano_order_floor` = vcbus total p50 /
that (below 1.0: faster than Volcano could possibly be on this API server).
The top-level stages, `ratio` and `vs_volcano_order_floor` are the two-worker
jobs'; `seed_job` holds the seed job's stages and its own Volcano-order floor.

One yardstick for any controller: `deleted`, when the raw watch first sees a
pod of the failed pod's job being deleted (its deletionTimestamp set, or its
DELETED event), so `delete_seen_ms` = deleted - failed. It needs nothing from
the controller (no audit line), so it measures Volcano's own controller too.

`--volcano BIN` (vc-controller-manager built from Volcano's source, see
scripts/volcano-controller.sh): before vcbus runs, the same failures, on the
same API server, the same job shapes and the same pacing, go to Volcano's
controller (`--controllers=job-controller`, no leader election, no webhook)
in a namespace of its own, the benchmark playing the scheduler and the
kubelets as for vcbus. Its jobs are stored as Volcano's mutating webhook
would have stored them (`pkg/webhooks/admission/jobs/mutate/mutate_job.go`:
task minAvailable and maxRetry, the svc plugin beside pytorch), less the
vendor `status-mounter` plugin, which Volcano does not have (its controller
fails every sync of a job naming an unknown plugin). Volcano's controller is
stopped and its pods removed before vcbus starts. Before the first failure,
for both controllers, the benchmark waits until the controller's process has
used at most 20 ms of CPU in a second (`Child.settle`): after its jobs start,
Volcano's controller works on for seconds, throttled by its client's QPS
limit, and a first failure in that backlog took 1.2-1.7 s instead of 15-20 ms.
`cpu_ms_per_failure` (vcbus's, and Volcano's under `volcano_controller`) is
the CPU the controller's process used from the first failure to the end of
the last reaction, per failure. `volcano_controller` holds
its `delete_seen_ms` figures (and `seed_job` the seed job's), and
`vs_volcano_controller` = vcbus `delete_seen_ms` p50 / Volcano's (below 1.0:
vcbus reacts faster), for each job shape.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import logging
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests import k8s_env  # noqa: E402
from tests.podsim import PodSimulator  # noqa: E402
from vcbus.bus.decider import AHEAD_HOLD  # noqa: E402
from vcbus.k8s.watching import api_request  # noqa: E402

JOBS = "/apis/batch.volcano.sh/v1alpha1/namespaces/{ns}/jobs"
PODGROUPS = "/apis/scheduling.volcano.sh/v1beta1/namespaces/{ns}/podgroups"
QUEUES = "/apis/scheduling.volcano.sh/v1beta1/queues"
MERGE = "application/merge-patch+json"
STAGES = ("apiserver", "bridge", "decider", "actuator", "total")
PARTS = ("actuator_wait", "actuator_api")  # the actuator stage: until its API calls start, and the calls
IDLE = 0.4  # seconds without a request before each floor sequence: about the pause before each failure
DEADLINE = 60.0  # seconds for one step (a busy shared machine)
VOLCANO_CONTROLLERS = "job-controller"  # it creates the PodGroup and the pods, and reacts to their failures
VOLCANO_VERBOSITY = 1  # its log (klog -v), in the run's work directory


def vcjob(name: str, queue: str) -> dict:
    """A job of two workers (policy PodFailed -> RestartJob)."""
    template = {"spec": {"containers": [{"name": "main", "image": "busybox",
                                         "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}],
                         "restartPolicy": "OnFailure"}}
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": name},
        "spec": {"minAvailable": 2, "queue": queue, "schedulerName": "volcano", "maxRetry": 3,
                 "policies": [{"events": ["PodFailed"], "action": "RestartJob"}],
                 "tasks": [{"name": "worker", "replicas": 2, "template": template}]},
    }


def seed_job(name: str, queue: str) -> dict:
    """The seed job of examples/resnet-dist-train.yaml (1 master + 2 workers, pytorch and status-mounter,
    PodEvicted/PodFailed -> RestartJob, master TaskCompleted -> CompleteJob), with a higher maxRetry."""
    manifest = yaml.safe_load((ROOT / "examples" / "resnet-dist-train.yaml").read_text())
    manifest["metadata"] = {"name": name}
    manifest["spec"]["queue"] = queue
    manifest["spec"]["maxRetry"] = 3
    return manifest


SHAPES = {"pair": ("lat", vcjob, 2), "seed": ("seed", seed_job, 3)}  # shape -> (name prefix, manifest, pods per job)


def volcano_admitted(manifest: dict) -> dict:
    """The job as Volcano's mutating webhook stores it (pkg/webhooks/admission/jobs/mutate/mutate_job.go:
    default queue, scheduler, maxRetry and minAvailable; each task's minAvailable = replicas and maxRetry = 3;
    the svc plugin beside pytorch, tensorflow, mpi or ray, ssh beside mpi), less the vendor status-mounter
    plugin: Volcano's controller has no such plugin and fails every sync of a job that names one."""
    job = copy.deepcopy(manifest)
    spec = job["spec"]
    spec["queue"] = spec.get("queue") or "default"
    spec["schedulerName"] = spec.get("schedulerName") or "volcano"
    spec["maxRetry"] = spec.get("maxRetry") or 3
    for task in spec["tasks"]:
        task.setdefault("minAvailable", task["replicas"])
        task["maxRetry"] = task.get("maxRetry") or 3
    spec["minAvailable"] = spec.get("minAvailable") or sum(t["minAvailable"] for t in spec["tasks"])
    plugins = spec.get("plugins")
    if plugins is not None:
        plugins.pop("status-mounter", None)
        if {"tensorflow", "mpi", "pytorch", "ray"} & plugins.keys():
            plugins.setdefault("svc", [])
        if "mpi" in plugins:
            plugins.setdefault("ssh", [])
    return job


class Audit(logging.Handler):
    """The actuator's debug audit lines: msg id -> (time, command type, result)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.seen: dict[str, tuple[float, str, str]] = {}
        self.took: dict[str, float] = {}  # msg id -> ms the command's apply took (its API calls)

    def emit(self, record: logging.LogRecord) -> None:
        if record.msg.startswith("actuator: %s %s for %s: %s in") and len(record.args) == 6:
            msg_id, kind, _job, result, ms, _waited = record.args
            print(json.dumps([record.created, msg_id, kind, result, float(ms)]), flush=True)  # to the parent

    def feed(self, line: str) -> None:
        """One line of the vcbus process's audit (`emit` in the child): record it."""
        created, msg_id, kind, result, ms = json.loads(line)
        self.seen[msg_id] = (created, kind, result)
        self.took[msg_id] = ms


class Child:
    """A controller in a process of its own (`proc`), its stderr in `log`."""

    what = "a child"
    cpu_per_failure = float("nan")  # ms of CPU the process used per failure, from the first to the last reaction
    proc: subprocess.Popen
    log: pathlib.Path
    _err: Any

    def check(self) -> None:
        if self.proc.poll() is not None:
            tail = self.log.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"{self.what} exited ({self.proc.returncode}):\n{tail}")

    def cpu(self) -> float:
        """The CPU seconds the process has used (user + system, /proc/PID/stat)."""
        fields = pathlib.Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    async def settle(self, window: float = 1.0, budget: float = 0.02, deadline: float = 120.0) -> None:
        """Wait until the process used at most `budget` CPU seconds in `window` seconds: its backlog is done
        (after the jobs start, Volcano's controller works for seconds more, throttled by its client's QPS
        limit, so the first failure would measure that queue, not a reaction at light load)."""
        end = time.monotonic() + deadline
        while True:
            self.check()
            before = self.cpu()
            await asyncio.sleep(window)
            if self.cpu() - before <= budget:
                return
            if time.monotonic() > end:
                raise TimeoutError(f"{self.what} still busy after {deadline:.0f}s")

    def stop(self) -> None:
        """Stop the process (SIGTERM, then SIGKILL after 30 s); stopping again does nothing."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._err.close()


class VcbusProcess(Child):
    """The bridge, the decider and the actuator in a process of their own, as `vcbus up` runs them: the
    benchmark's own work (the kubelets' requests, the raw watch, the polling) never shares its GIL."""

    what = "the vcbus process"

    def __init__(self, nats_url: str, kubeconfig: pathlib.Path, ns: str, log: pathlib.Path, stored_only: bool = False,
                 hold: float | None = None) -> None:
        self.audit = Audit()
        self.log = log
        self._err = open(log, "wb")  # noqa: SIM115 - the child's stderr for its lifetime, closed by stop()
        self.proc = subprocess.Popen(
            [sys.executable, str(pathlib.Path(__file__).resolve()), "--serve", nats_url, str(kubeconfig), ns,
             *(["--stored-commands-only"] if stored_only else []), *([f"--ahead-hold={hold}"] if hold is not None else [])],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._err, text=True)  # stdin: see `serve`
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("["):
                self.audit.feed(line)


class VolcanoProcess(Child):
    """Volcano's own controller (vc-controller-manager): the job controller only, no leader election; it
    gets SIGTERM if the benchmark dies (PR_SET_PDEATHSIG), as the vcbus process stops when its pipe closes."""

    what = "Volcano's controller"

    def __init__(self, binary: pathlib.Path, kubeconfig: pathlib.Path, log: pathlib.Path) -> None:
        self.log = log
        self._err = open(log, "wb")  # noqa: SIM115 - the child's stderr for its lifetime, closed by stop()
        self.proc = subprocess.Popen(
            [str(binary), f"--kubeconfig={kubeconfig}", "--leader-elect=false",
             f"--controllers={VOLCANO_CONTROLLERS}", "--logtostderr=true", f"-v={VOLCANO_VERBOSITY}"],
            stdin=subprocess.DEVNULL, stdout=self._err, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)


def _die_with_parent() -> None:
    import ctypes
    import signal

    ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG


def volcano_version(binary: pathlib.Path) -> str:
    """What `vc-controller-manager --version` says (Version and Git SHA), or "unknown"."""
    try:
        out = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    fields = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
    got = [fields.get(k, "").strip() for k in ("Version", "Git SHA")]
    return " ".join(v for v in got if v and v not in ("Not provided.", "unknown")) or "unknown"


async def serve(nats_url: str, kubeconfig: str, ns: str, *, ahead: bool = True, hold: float | None = None) -> None:
    """The child: vcbus's bridge, one decider (with the pod renderer) and the actuator, exactly as
    `vcbus up --kubeconfig` assembles them, until SIGTERM or until its stdin closes (the benchmark
    is gone, even killed); the actuator's audit lines go to stdout."""
    import signal

    from kubernetes import config

    from statemachines.engine import Engine
    from statemachines.manifests.renderer import Renderer
    from vcbus.bus.connecting import open_bus
    from vcbus.bus.decider import Decider
    from vcbus.k8s.cluster import ClusterSide
    from vcbus.settings import BusSettings

    alog = logging.getLogger("vcbus.actuator")
    alog.setLevel(logging.DEBUG)
    alog.addHandler(Audit())
    alog.propagate = False
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)

    def orphaned() -> None:
        sys.stdin.read()  # EOF: the parent closed the pipe or died
        loop.call_soon_threadsafe(stop.set)

    threading.Thread(target=orphaned, daemon=True).start()
    async with open_bus(BusSettings(nats_url=nats_url), name="latency") as bus:
        cluster = ClusterSide(bus, config.new_client_from_config(config_file=kubeconfig), namespace=ns, ahead=ahead)
        renderer = Renderer()
        engine = Engine(render_pod=renderer.pod, render_podgroup=renderer.podgroup)
        decider = Decider(bus, engine=engine)
        if hold is not None:
            decider.ahead_hold = hold
        cluster.feed([decider])
        tasks = [asyncio.create_task(decider.run(stop=stop)), *cluster.tasks(stop)]
        done, _ = await asyncio.wait([*tasks, asyncio.create_task(stop.wait())], return_when=asyncio.FIRST_COMPLETED)
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        for t in done:
            if t in tasks and not t.cancelled() and t.exception() is not None:
                raise t.exception()


class PodWatch:
    """A raw watch of the namespace's pods: when each (pod, phase) was first seen, when each pod was first
    seen deleted (deletionTimestamp set, or its DELETED event), and when the last event came."""

    def __init__(self, api: Any, ns: str) -> None:
        self.api, self.ns = api, ns
        self.seen: dict[tuple[str, str], float] = {}
        self.deleted: dict[str, float] = {}
        self.last = time.time()
        self.stop = threading.Event()
        rv = api_request(api, "GET", f"/api/v1/namespaces/{ns}/pods")["metadata"]["resourceVersion"]
        self.resp = api_request(api, "GET", f"/api/v1/namespaces/{ns}/pods", stream=True, timeout=(5, 3600),
                                query={"watch": "true", "resourceVersion": rv})
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        from vcbus.k8s.watching import _iter_lines

        try:
            for line in _iter_lines(self.resp):
                now = time.time()
                ev = json.loads(line)
                obj = ev.get("object") or {}
                meta = obj.get("metadata") or {}
                key = (meta.get("name", ""), (obj.get("status") or {}).get("phase", ""))
                self.seen.setdefault(key, now)
                if ev.get("type") == "DELETED" or meta.get("deletionTimestamp"):
                    self.deleted.setdefault(key[0], now)
                self.last = now
        except Exception:  # noqa: BLE001 - closed at the end
            pass

    def first_deletion(self, job: str) -> float | None:
        """When a pod of vcjob `job` (pods are named `<job>-<task>-<index>`) was first seen deleted."""
        times = [t for name, t in list(self.deleted.items()) if name.startswith(job + "-")]
        return min(times) if times else None

    def quiet(self, seconds: float) -> bool:
        """No pod event for `seconds`."""
        return time.time() - self.last > seconds

    def close(self) -> None:
        try:
            self.resp.shutdown() if hasattr(self.resp, "shutdown") else None
            self.resp.close()
        except Exception:  # noqa: BLE001
            pass


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, round(q / 100 * (len(s) - 1)))]


def figures(values: list[float]) -> dict[str, float]:
    return {"p50": round(percentile(values, 50), 2), "p99": round(percentile(values, 99), 2),
            "mean": round(statistics.fmean(values), 2) if values else float("nan")}


async def until(what: str, cond, deadline: float = DEADLINE, every: float = 0.01):
    end = time.monotonic() + deadline
    while True:
        got = cond()
        if asyncio.iscoroutine(got):
            got = await got
        if got:
            return got
        if time.monotonic() > end:
            raise TimeoutError(f"waited {deadline:.0f}s for {what}")
        await asyncio.sleep(every)


async def run(n: int, workdir: pathlib.Path, verbose: bool, sync_interval: str = "always",
              volcano_bin: pathlib.Path | None = None, stored_only: bool = False, hold: float | None = None) -> dict:
    from vcbus.bus.connecting import open_bus
    from vcbus.bus.server import EmbeddedServer
    from vcbus.settings import BusSettings

    assets = k8s_env.asset_dir()
    if assets is None:
        raise SystemExit(f"latency: {k8s_env.missing_assets_message()}")
    env = k8s_env.EnvTest(assets, workdir / "envtest")
    server = EmbeddedServer(data_dir=workdir / "nats", sync_interval=sync_interval)
    vcbus = volcano_proc = None
    vsamples: list[dict] = []
    try:
        env.start()
        server.start(timeout=10)
        api = env.api_client()
        ns = env.create_namespace("latency")
        sim = PodSimulator(api)
        queue = "lat"
        api_request(api, "POST", QUEUES, body={"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                                               "metadata": {"name": queue}, "spec": {"weight": 1}})
        api_request(api, "PATCH", f"{QUEUES}/{queue}/status", content_type=MERGE, body={"status": {"state": "Open"}})
        sim.create_node("lat-node", cpu="64", memory="256Gi", pods=250)
        if volcano_bin is not None:  # Volcano's own controller first, in a namespace of its own, then gone
            vns = env.create_namespace("latency-volcano")
            volcano_proc = VolcanoProcess(volcano_bin, env.kubeconfig, workdir / "volcano.log")
            vsamples = await drive_volcano(api, vns, sim, n, queue, volcano_proc)
            volcano_proc.stop()
            volcano_cpu = volcano_proc.cpu_per_failure
            await asyncio.to_thread(remove_all, api, vns)
        async with open_bus(BusSettings(nats_url=server.url), name="latency-driver") as bus:  # creates the streams
            vcbus = VcbusProcess(server.url, env.kubeconfig, ns, workdir / "vcbus.log", stored_only, hold)
            samples, template = await drive(api, ns, sim, bus, n, vcbus, queue)
            vcbus.stop()  # the floor: nothing else running
            vcbus_cpu = vcbus.cpu_per_failure
            floor = await measure_floor(api, ns, bus, n, template)
    finally:
        for child in (vcbus, volcano_proc):
            if child is not None:
                child.stop()
        server.stop()
        env.stop()
    pair, seed = by_shape(samples)
    stages = {k: figures([x[k] for x in pair]) for k in STAGES + PARTS}
    seed_stages = {k: figures([x[k] for x in seed]) for k in STAGES + PARTS}
    watch = stages["apiserver"]["p50"]
    hops = 2 if stored_only else 1  # the record's durable write; and the command's, when the actuator waits for it
    floor_p50 = watch + floor["js_publish_ms"]["p50"] * hops + floor["api_patch_ms"]["p50"] + floor["api_delete_ms"]["p50"]
    volcano = watch + floor["volcano_order_api_ms"]["p50"]
    volcano_seed = seed_stages["apiserver"]["p50"] + floor["volcano_order_seed_api_ms"]["p50"]  # its pods' watch
    seen, seed_seen = (figures([x["delete_seen"] for x in xs]) for xs in (pair, seed))
    result = {
        "failures": len(pair),
        "sync_interval": sync_interval,
        "stored_commands_only": stored_only,
        "ahead_hold_s": None if stored_only else (AHEAD_HOLD if hold is None else hold),
        "stages_ms": stages,
        "floor_ms": {**floor, "js_hops": hops, "p50": round(floor_p50, 2)},
        "ratio": round(stages["total"]["p50"] / floor_p50, 2) if floor_p50 else None,
        # Volcano's killPods with no time of its own (no informer, queue or sync): watch delivery, then
        # PATCH, PATCH, DELETE (a job of two pods) as raw requests, measured in this run
        "volcano_order_floor_ms": round(volcano, 2),
        "vs_volcano_order_floor": round(stages["total"]["p50"] / volcano, 2) if volcano else None,
        # the same for the seed job (examples/resnet-dist-train.yaml): three PATCHes before the first DELETE
        "seed_job": {
            "failures": len(seed),
            "stages_ms": seed_stages,
            "volcano_order_floor_ms": round(volcano_seed, 2),
            "vs_volcano_order_floor": round(seed_stages["total"]["p50"] / volcano_seed, 2) if volcano_seed else None,
            "delete_seen_ms": seed_seen,
        },
        # failure -> the first deletion of one of the job's pods on the raw watch: the yardstick for any controller
        "delete_seen_ms": seen,
        "cpu_ms_per_failure": round(vcbus_cpu, 2),
        "samples": samples if verbose else None,
    }
    if volcano_bin is not None:
        vpair, vseed = by_shape(vsamples)
        vc, vc_seed = (figures([x["delete_seen"] for x in xs]) for xs in (vpair, vseed))
        result["volcano_controller"] = {
            "binary": str(volcano_bin), "version": volcano_version(volcano_bin), "controllers": VOLCANO_CONTROLLERS,
            "failures": len(vpair), "delete_seen_ms": vc, "cpu_ms_per_failure": round(volcano_cpu, 2),
            "apiserver_ms": figures([x["apiserver"] for x in vpair]),
            "seed_job": {"failures": len(vseed), "delete_seen_ms": vc_seed,
                         "apiserver_ms": figures([x["apiserver"] for x in vseed])},
            **({"samples": vsamples} if verbose else {}),
        }
        result["vs_volcano_controller"] = round(seen["p50"] / vc["p50"], 2) if vc["p50"] else None
        result["seed_job"]["vs_volcano_controller"] = (
            round(seed_seen["p50"] / vc_seed["p50"], 2) if vc_seed["p50"] else None)
    return result


def by_shape(samples: list[dict]) -> tuple[list[dict], list[dict]]:
    """The two-worker jobs' samples, and the seed job's."""
    return [x for x in samples if x["shape"] == "pair"], [x for x in samples if x["shape"] == "seed"]


async def start_jobs(api, ns: str, sim: PodSimulator, n: int, queue: str, child: Child, admit=lambda m: m) -> dict:
    """Create n jobs of each shape (each manifest through `admit`), then play the scheduler (PodGroup
    Pending -> Inqueue, as Volcano's enqueue action does; binding) and the kubelets until every pod runs,
    then wait until the controller (`child`) is idle. Returns shape -> job names."""
    check = child.check
    jobs = {shape: [f"{prefix}-{i:03d}" for i in range(n)] for shape, (prefix, _, _) in SHAPES.items()}
    for shape, (_, manifest, _) in SHAPES.items():
        for name in jobs[shape]:
            body = admit(manifest(name, queue))
            await asyncio.to_thread(api_request, api, "POST", JOBS.format(ns=ns), body=body)
    pods = n * sum(count for _, _, count in SHAPES.values())

    def bring_up() -> bool:  # play the scheduler and the kubelets until every worker runs
        pgs = api_request(api, "GET", PODGROUPS.format(ns=ns))["items"]
        for pg in pgs:
            if (pg.get("status") or {}).get("phase") in (None, "", "Pending"):
                sim.set_podgroup_phase(ns, pg["metadata"]["name"], "Inqueue")
        sim.reap(ns)
        sim.schedule(ns)
        running = 0
        for pod in sim.list_pods(ns):
            phase = (pod.get("status") or {}).get("phase")
            if pod["spec"].get("nodeName") and phase == "Pending" and not pod["metadata"].get("deletionTimestamp"):
                sim.start(pod)
                phase = "Running"
            running += phase == "Running"
        return running == pods and len(pgs) == len(SHAPES) * n

    async def up() -> bool:
        check()
        return await asyncio.to_thread(bring_up)

    await until("every worker running", up, deadline=120.0, every=0.2)
    await child.settle()  # light load: nothing else in flight
    return jobs


def turns(jobs: dict) -> list[tuple[str, str]]:
    """(job, shape), one job of each shape in turn."""
    n = len(next(iter(jobs.values())))
    return [(jobs[shape][i], shape) for i in range(n) for shape in SHAPES]


async def deletion_seen(watch: PodWatch, name: str, check) -> float:
    """When the raw watch first saw a pod of job `name` deleted (waits for it)."""

    def seen() -> float | None:
        check()
        return watch.first_deletion(name)

    return await until(f"a deletion of {name}'s pods on the watch", seen)


async def drive_volcano(api, ns: str, sim: PodSimulator, n: int, queue: str, child: Child) -> list[dict]:
    """The same failures as `drive`, with Volcano's controller reacting: the jobs as its webhook stores
    them, the same bring-up, the same failure procedure and order, the same pause after each reaction
    (0.3 s, then until nothing happens to the pods for 0.3 s: Volcano has no audit to wait on)."""
    check = child.check
    jobs = await start_jobs(api, ns, sim, n, queue, child, admit=volcano_admitted)
    watch = await asyncio.to_thread(PodWatch, api, ns)
    samples = []
    cpu = child.cpu()
    try:
        for name, shape in turns(jobs):
            pod = f"{name}-worker-0"
            failed = await asyncio.to_thread(fail, sim, pod, ns)
            deleted = await deletion_seen(watch, name, check)
            watched = await until(f"{pod} Failed on the watch", lambda pod=pod: watch.seen.get((pod, "Failed")))
            samples.append({"shape": shape, "apiserver": (watched - failed) * 1e3,
                            "delete_seen": (deleted - failed) * 1e3})
            await asyncio.sleep(0.3)
            await until("the pods quiet", lambda: watch.quiet(0.3), every=0.05)
        child.cpu_per_failure = (child.cpu() - cpu) * 1e3 / len(samples)
    finally:
        watch.close()
    return samples


def remove_all(api, ns: str) -> None:
    """Delete every vcjob, PodGroup and pod of `ns` at once (pods with grace period 0, as a kubelet finishes
    a deletion): what a stopped controller leaves must not weigh on the next one."""
    for path in (JOBS.format(ns=ns), PODGROUPS.format(ns=ns)):
        api_request(api, "DELETE", path)
    api_request(api, "DELETE", f"/api/v1/namespaces/{ns}/pods",
                body={"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0})


async def drive(api, ns, sim: PodSimulator, bus, n: int, child: VcbusProcess, queue: str) -> tuple[list[dict], dict]:
    from vcbus.bus import subjects as s

    audit, check = child.audit, child.check
    jobs = await start_jobs(api, ns, sim, n, queue, child)
    # a running worker as it is now (the floor's pods are copies: the same size and status)
    template = await asyncio.to_thread(api_request, api, "GET", f"/api/v1/namespaces/{ns}/pods/{jobs['pair'][0]}-worker-1")
    watch = await asyncio.to_thread(PodWatch, api, ns)
    k8s = bus.js
    samples = []
    cpu = child.cpu()
    try:
        for name, shape in turns(jobs):
            pod = f"{name}-worker-0"
            before = len(audit.seen)
            failed = await asyncio.to_thread(fail, sim, pod, ns)

            def reacted(before: int = before) -> str | None:
                check()
                for mid, (_, kind, _) in list(audit.seen.items())[before:]:
                    if kind == "DeletePod":
                        return mid
                return None

            mid = await until(f"the DeletePod after {pod} failed", reacted)
            applied = audit.seen[mid][0]
            seq = int(mid.split(":")[0])
            rec = await k8s.get_msg(s.K8S_STREAM, seq)
            recorded = rec.time.timestamp()  # the stream timestamp of the failure's record
            if f"/{pod}" not in rec.subject and not rec.subject.endswith(pod):
                raise RuntimeError(f"DeletePod {mid} follows record {seq} on {rec.subject}, not {pod}'s failure")
            cmd = await _command(k8s, mid)
            watched = watch.seen.get((pod, "Failed"), float("nan"))
            deleted = await deletion_seen(watch, name, check)
            samples.append({
                "shape": shape,
                "apiserver": (watched - failed) * 1e3, "bridge": (recorded - watched) * 1e3,
                "decider": (cmd - recorded) * 1e3, "actuator": (applied - cmd) * 1e3, "total": (applied - failed) * 1e3,
                "actuator_api": audit.took[mid], "actuator_wait": (applied - cmd) * 1e3 - audit.took[mid],
                "delete_seen": (deleted - failed) * 1e3,
            })
            # the rest of the reaction (the siblings' deletes, the status) goes through before the next failure
            await asyncio.sleep(0.3)
            await until("the actuator idle", lambda: _idle(audit), every=0.05)
        child.cpu_per_failure = (child.cpu() - cpu) * 1e3 / len(samples)
    finally:
        watch.close()
    return samples, template


def fail(sim: PodSimulator, pod: str, ns: str) -> float:
    """Fail `pod` as its kubelet would; returns the time just before the PATCH of pods/status."""
    sent = []
    patch = sim._patch_pod_status

    def timed(*args, **kw):  # a timestamp, nothing else: the request goes out as it would
        sent.append(time.time())
        return patch(*args, **kw)

    sim._patch_pod_status = timed
    try:
        sim.fail(pod, 1, namespace=ns)
    finally:
        del sim._patch_pod_status
    return sent[-1]


def _idle(audit: Audit, quiet: float = 0.3) -> bool:
    last = max((t for t, _, _ in audit.seen.values()), default=0.0)
    return time.time() - last > quiet


async def _command(js, msg_id: str) -> float:
    from vcbus.bus import subjects as s

    # applied ahead of its store, a command may be stored a moment after its audit line
    end = time.monotonic() + 10.0
    checked = 0
    while True:
        info = await js.stream_info(s.CMDS_STREAM)
        for seq in range(info.state.last_seq, max(checked, info.state.last_seq - 200), -1):
            m = await js.get_msg(s.CMDS_STREAM, seq)
            if (m.headers or {}).get("Nats-Msg-Id") == msg_id:
                return m.time.timestamp()
        checked = max(checked, info.state.last_seq)
        if time.monotonic() > end:
            raise RuntimeError(f"no command {msg_id} on {s.CMDS_STREAM} after 10 s")
        await asyncio.sleep(0.02)


async def measure_floor(api, ns: str, bus, n: int, template: dict) -> dict:
    from nats.js.api import StreamConfig

    js = bus.js
    await js.add_stream(StreamConfig(name="LATENCY_FLOOR", subjects=["latency.floor"]))
    pubs = []
    for i in range(max(20, n * 2)):
        t = time.perf_counter()
        await js.publish("latency.floor", b'{"type":"MODIFIED","object":{}}' * 20, headers={"Nats-Msg-Id": f"f{i}"})
        pubs.append((time.perf_counter() - t) * 1e3)
    await js.delete_stream("LATENCY_FLOOR")
    from vcbus.k8s import rawcalls
    from vcbus.k8s.actuator import OUT_OF_SYNC_PATCH

    meta = template["metadata"]
    labels = {k: v for k, v in (meta.get("labels") or {}).items() if not k.startswith("volcano.sh/")}

    def pod(name: str) -> str:
        """A copy of a running worker of the run (the same spec on the same node, the same status),
        under another name and owned by no vcjob, so that vcbus leaves it alone."""
        body = {"metadata": {"name": name, "labels": labels, "annotations": meta.get("annotations") or {}},
                "spec": template["spec"]}
        uid = json.loads(rawcalls.call(api, "POST", f"/api/v1/namespaces/{ns}/pods", body=body))["metadata"]["uid"]
        rawcalls.call(api, "PATCH", rawcalls.pod_path(ns, name) + "/status", body={"status": template["status"]},
                      content_type="application/merge-patch+json")
        return uid

    def mark(name: str) -> None:  # Volcano's killPods marks each victim out of sync before deleting it
        rawcalls.call(api, "PATCH", rawcalls.pod_path(ns, name), body=OUT_OF_SYNC_PATCH, content_type=rawcalls.JSON_PATCH)

    def delete(name: str, uid: str) -> None:
        rawcalls.call(api, "DELETE", rawcalls.pod_path(ns, name), body={"preconditions": {"uid": uid}})

    def volcano_order(prefix: str, victims: int) -> float:
        """Volcano's killPods for a job of `victims` pods, after `IDLE` seconds without a request: every
        PATCH, then the first DELETE (ms until it returned); the other pods are deleted after."""
        uids = [pod(f"{prefix}-{k}") for k in range(victims)]
        time.sleep(IDLE)
        t = time.perf_counter()
        for k in range(victims):
            mark(f"{prefix}-{k}")
        delete(f"{prefix}-0", uids[0])
        took = (time.perf_counter() - t) * 1e3
        for k in range(1, victims):
            delete(f"{prefix}-{k}", uids[k])
        return took

    def requests() -> dict[str, list[float]]:
        """Raw requests, nothing else running: a PATCH then the DELETE of one pod (what the actuator must
        send), and Volcano's killPods order for a job of two pods and for the seed job's three.
        Each sequence starts after `IDLE` seconds without a request, as a reaction at light load does
        (back to back, the same requests take about 2.5 ms less: a connection and a server kept busy)."""
        out: dict[str, list[float]] = {"patch": [], "delete": [], "pair": [], "seed": []}
        for i in range(max(10, n)):
            uid = pod(f"floor-{i}")
            time.sleep(IDLE)
            t = time.perf_counter()
            mark(f"floor-{i}")
            t1 = time.perf_counter()
            delete(f"floor-{i}", uid)
            out["patch"].append((t1 - t) * 1e3)
            out["delete"].append((time.perf_counter() - t1) * 1e3)
            out["pair"].append(volcano_order(f"floor-{i}-pair", 2))
            out["seed"].append(volcano_order(f"floor-{i}-seed", 3))
        return out

    got = await asyncio.to_thread(requests)
    return {"js_publish_ms": figures(pubs), "api_patch_ms": figures(got["patch"]),
            "api_delete_ms": figures(got["delete"]), "volcano_order_api_ms": figures(got["pair"]),
            "volcano_order_seed_api_ms": figures(got["seed"])}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="8 failures of each job shape (under a minute)")
    ap.add_argument("--failures", type=int, default=None, help="single failures of each job shape (default 20)")
    ap.add_argument("--sync-interval", default="always", metavar="always|DURATION",
                    help="the nats-server's fsync interval (default always, as `vcbus up` runs it; e.g. 2m, "
                         "NATS' own default: see docs/operations.md on what that trades away)")
    ap.add_argument("--volcano", type=pathlib.Path, metavar="BIN",
                    help="also run the same failures against Volcano's own controller, this vc-controller-manager "
                         "(scripts/volcano-controller.sh builds it), first, and compare")
    ap.add_argument("--stored-commands-only", action="store_true",
                    help="the actuator applies a command only once it is stored, as `vcbus up --stored-commands-only`"
                         " (default: as it is decided, vcbus.k8s.ahead)")
    ap.add_argument("--ahead-hold", type=float, metavar="SECONDS",
                    help="how long the decider holds a flight whose commands went ahead, waiting for the first "
                         f"one's apply (default vcbus's own, {AHEAD_HOLD}; 0: stored beside it, the old path)")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--samples", action="store_true", help="include every sample in the JSON")
    ap.add_argument("--serve", nargs=3, metavar=("NATS_URL", "KUBECONFIG", "NAMESPACE"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.serve:  # the vcbus process (VcbusProcess)
        logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
        asyncio.run(serve(*args.serve, ahead=not args.stored_commands_only, hold=args.ahead_hold))
        return 0
    n = args.failures or (8 if args.quick else 20)
    if n < 1:
        print("latency: --failures must be at least 1", file=sys.stderr)
        return 2
    if args.ahead_hold is not None and not 0 <= args.ahead_hold <= 10:
        print(f"latency: --ahead-hold {args.ahead_hold}: seconds from 0 to 10", file=sys.stderr)
        return 2
    if args.volcano is not None and not (args.volcano.is_file() and os.access(args.volcano, os.X_OK)):
        print(f"latency: --volcano {args.volcano}: not an executable file (scripts/volcano-controller.sh "
              "builds vc-controller-manager and prints its path)", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    with tempfile.TemporaryDirectory(prefix="vcbus-latency-") as tmp:
        result = asyncio.run(run(n, pathlib.Path(tmp), args.samples, args.sync_interval, args.volcano,
                                 args.stored_commands_only, args.ahead_hold))
    if not args.samples:
        result.pop("samples")
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"pod failure -> API call, {result['failures']} single failures at light load (ms)")
    for k in STAGES:
        f = result["stages_ms"][k]
        print(f"  {k:<10} p50 {f['p50']:8.2f}  p99 {f['p99']:8.2f}  mean {f['mean']:8.2f}")
    for k in PARTS:
        f = result["stages_ms"][k]
        print(f"    {k:<14} p50 {f['p50']:8.2f}  p99 {f['p99']:8.2f}  mean {f['mean']:8.2f}")
    fl = result["floor_ms"]
    print(f"  floor: watch delivery p50 {result['stages_ms']['apiserver']['p50']:.2f} + 2 x JetStream publish "
          f"p50 {fl['js_publish_ms']['p50']:.2f} + API PATCH p50 {fl['api_patch_ms']['p50']:.2f} + API DELETE p50 "
          f"{fl['api_delete_ms']['p50']:.2f} = {fl['p50']:.2f}")
    print(f"  ratio (total p50 / floor p50): {result['ratio']}")
    print(f"  Volcano's order with no time of its own: watch delivery + PATCH, PATCH, DELETE p50 "
          f"{fl['volcano_order_api_ms']['p50']:.2f} = {result['volcano_order_floor_ms']:.2f}; "
          f"vcbus total p50 / that: {result['vs_volcano_order_floor']}")
    seed = result["seed_job"]
    print(f"the seed job (examples/resnet-dist-train.yaml, 3 pods), {seed['failures']} single worker failures (ms)")
    for k in STAGES:
        f = seed["stages_ms"][k]
        print(f"  {k:<10} p50 {f['p50']:8.2f}  p99 {f['p99']:8.2f}  mean {f['mean']:8.2f}")
    print(f"  Volcano's order with no time of its own: watch delivery + PATCH, PATCH, PATCH, DELETE p50 "
          f"{fl['volcano_order_seed_api_ms']['p50']:.2f} = {seed['volcano_order_floor_ms']:.2f}; "
          f"vcbus total p50 / that: {seed['vs_volcano_order_floor']}")
    print("failure -> first deletion of the job's pods on the raw watch (ms)")
    rows = [("vcbus, two workers", result["delete_seen_ms"]), ("vcbus, seed job", seed["delete_seen_ms"])]
    vc = result.get("volcano_controller")
    if vc is not None:
        rows += [("Volcano, two workers", vc["delete_seen_ms"]), ("Volcano, seed job", vc["seed_job"]["delete_seen_ms"])]
    for label, f in rows:
        print(f"  {label:<22} p50 {f['p50']:8.2f}  p99 {f['p99']:8.2f}  mean {f['mean']:8.2f}")
    print(f"  CPU per failure (ms, the controller's process, both shapes): vcbus {result['cpu_ms_per_failure']:.2f}"
          + (f", Volcano {vc['cpu_ms_per_failure']:.2f}" if vc is not None else ""))
    if vc is not None:
        print(f"  Volcano's controller: {vc['binary']} ({vc['version']}, {vc['controllers']}); vcbus p50 / Volcano's "
              f"p50: two workers {result['vs_volcano_controller']}, seed job {seed['vs_volcano_controller']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
