"""The whole system under load on embedded defaults: 1,000 jobs on 100 simulated nodes.

    .venv/bin/python benchmarks/system.py            # 1,000 jobs (2 pods each) on 100 nodes
    .venv/bin/python benchmarks/system.py --quick    # 100 jobs on 20 nodes, under a minute
    .venv/bin/python benchmarks/system.py --json     # one JSON object; headline ratio under "ratio"

What runs, each as it runs for a user:

- `vcbus up --service decider --service projector --service scheduler` over a
  fresh --data-dir: vcbus's embedded nats-server (JetStream, fsync always) and
  every bus service in one process, as `vcbus up` runs them;
- this process plays the cluster, live: `tools.simulate.SimCluster` is the API
  server and the kubelets. Its watch records (nodes, the queue, vcjobs, pods,
  PodGroups, status writes) are published into VCBUS_K8S as the bridge would
  publish them, and the commands vcbus stores on VCBUS_CMDS are applied to it as
  the actuator would apply them (create and delete pods and PodGroups, bind pods,
  PodGroup, queue and job status, pod conditions). A bound pod starts after
  `--start-delay` and ends after `--runtime` (wall time). Every 10th job's first
  worker fails once: its PodFailed policy restarts the job.

Figures:

- jobs completed per second: all jobs are submitted at once; the rate is the
  number of jobs over the time until the last one is Completed (its status as
  vcbus wrote it);
- events per second through the bus: messages stored in VCBUS_K8S, VCBUS_JOBS
  and VCBUS_CMDS during that time, over that time;
- pod failure to DeletePod: from the moment the simulated cluster hands the
  failed pod's record to the bus until the DeletePod command it causes (the
  command's `seq` is the failure record's) arrives, p50/p99;
- peak RSS (VmHWM) of each process: nats-server, `vcbus up`, this driver.

The headline `ratio` is events/s through the bus over the bus's floor: raw
nats-py `publish_async` (256 in flight, every ack checked) of the same number
of messages, with bodies sampled from the run's own streams, into a scratch
stream on the same server right after the run. Everything the system does
(publish, decide, schedule, project, apply) moves through that one server:
the ratio is the share of the server's bare storage rate (for one writer) the
whole system reaches. It can pass 1: the system has several writers at once
(the cluster, the decider's batches, the scheduler, the projector's KV
puts), and with fsync always concurrent writes share fsyncs. Under this load
the failure-to-DeletePod latency is mostly queueing behind the backlog;
`benchmarks/bus.py` measures the light-load latency.
"""

from __future__ import annotations

import argparse
import asyncio
import heapq
import json
import pathlib
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import msgspec  # noqa: E402

from statemachines import outputs as o  # noqa: E402
from tools.simulate import SimCluster  # noqa: E402
from vcbus.bus import subjects as s  # noqa: E402
from vcbus.bus.publisher import Publisher, prepare  # noqa: E402

TEMPLATE = {
    "spec": {
        "containers": [{"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]
    }
}


def job_manifest(i: int, replicas: int) -> dict:
    return {
        "metadata": {"name": f"sys-{i:05d}"},
        "spec": {
            "minAvailable": replicas,
            "schedulerName": "volcano",
            "policies": [{"event": "PodFailed", "action": "RestartJob"}],
            "tasks": [{"name": "worker", "replicas": replicas, "template": TEMPLATE}],
        },
    }


def node(name: str) -> dict:
    alloc = {"cpu": "4", "memory": "16Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "uid": f"uid-{name}", "labels": {"kubernetes.io/hostname": name}},
        "spec": {},
        "status": {"allocatable": alloc, "capacity": alloc},
    }


class LiveCluster(SimCluster):
    """The simulator on wall-clock time, its records going to the bus instead of to its own engine."""

    def __init__(self) -> None:
        super().__init__(write=lambda data: None)
        self.outbox: list[tuple[bytes, float]] = []  # (record, when handed over; negative: a pod failure)
        self.fail_first: set[str] = set()  # pods that fail on their first run
        self.completed: set[str] = set()

    @property
    def now(self) -> str:  # type: ignore[override]
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())

    def tick(self, seconds: int = 1) -> None:
        pass

    def _record(self, rtype: str, obj: dict) -> None:
        self.outbox.append((_enc({"type": rtype, "object": obj}), time.monotonic()))

    def fail(self, pod: dict, exit_code: int = 1) -> None:
        super().fail(pod, exit_code)
        data, handed = self.outbox[-1]
        self.outbox[-1] = (data, -handed)  # the failure itself: its seq and time are remembered

    def add_node(self, name: str) -> None:
        self.rv += 1
        obj = node(name)
        obj["metadata"]["resourceVersion"] = str(self.rv)
        obj["metadata"]["creationTimestamp"] = self.now
        self.objects[("Node", "", name)] = obj
        self._record("ADDED", obj)

    def apply_command(self, out: Any) -> str | None:
        """Apply one command as the actuator would; the name of a pod to start, if it was bound."""
        ns, _, name = out.job.partition("/")
        if isinstance(out, o.BindPod):
            pod = self.get("Pod", ns, out.name)
            if pod is not None and not pod["spec"].get("nodeName") and "deletionTimestamp" not in pod["metadata"]:
                self.node = out.node
                self.bind(pod)
                return out.name
        elif isinstance(out, o.UpdatePodGroupStatus):
            pg = self.get("PodGroup", ns, out.name)
            if pg is not None:
                merged = {**pg.get("status", {}), **out.status}
                if merged != pg.get("status"):
                    pg["status"] = merged
                    self._put("MODIFIED", "PodGroup", pg)
        elif isinstance(out, o.CreateQueue):
            if self.get("Queue", "", out.queue) is None:
                self.add_queue(out.queue)
        elif isinstance(out, o.UpdateQueueStatus):
            queue = self.get("Queue", "", out.queue)
            if queue is not None and out.state is not None and queue["status"].get("state") != out.state:
                queue["status"]["state"] = out.state
                self._put("MODIFIED", "Queue", queue)
        elif isinstance(out, o.UpdatePodCondition):
            pod = self.get("Pod", ns, out.name)
            if pod is not None and not pod["spec"].get("nodeName"):
                cond = {"type": "PodScheduled", "status": out.status, "reason": out.reason, "message": out.message}
                if pod["status"].get("conditions") != [cond]:
                    pod["status"]["conditions"] = [cond]
                    self._put("MODIFIED", "Pod", pod)
        elif isinstance(out, o.EvictPod):
            pod = self.get("Pod", ns, out.name)
            if pod is not None and "deletionTimestamp" not in pod["metadata"]:
                self.evict(pod)
        elif isinstance(out, o.DeleteJob):
            self.delete_job(ns, name)
        elif isinstance(out, o.UpdateJobStatus):
            self._apply(out)
            if out.status.state.phase == "Completed":
                self.completed.add(out.job)
        elif not isinstance(out, o.RecordEvent):
            self._apply(out)  # pods, PodGroups, bus Commands
        for pod in self.deferred:  # no grace period: a deleted pod is gone at once
            self._put("DELETED", "Pod", pod)
        self.deferred = []
        return None


_enc = msgspec.json.Encoder().encode


def peak_rss_mb(pid: int) -> float:
    try:
        for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return 0.0


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


async def drain(stream: asyncio.StreamReader, lines: list[str], ready: asyncio.Event) -> None:
    while True:
        line = await stream.readline()
        if not line:
            return
        text = line.decode(errors="replace").rstrip()
        lines.append(text)
        if "vcbus up:" in text:
            ready.set()


async def run(args: argparse.Namespace) -> dict:
    from vcbus.bus.connecting import open_bus
    from vcbus.settings import BusSettings

    data = pathlib.Path(tempfile.mkdtemp(prefix="vcbus-system-"))
    up = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "vcbus.cli.main", "up", "--data-dir", str(data),
        "--service", "decider", "--service", "projector", "--service", "scheduler",
        cwd=ROOT, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )
    log: list[str] = []
    ready = asyncio.Event()
    drainer = asyncio.create_task(drain(up.stderr, log, ready))  # type: ignore[arg-type]
    try:
        await asyncio.wait_for(ready.wait(), 120)
        server_pid = int(json.loads((data / "server.json").read_text())["server_pid"])
        async with open_bus(BusSettings(data_dir=data), name="system-benchmark") as bus:
            figures = await drive(bus, args)
            figures["raw_publish_msgs_per_s"] = await raw_publish_rate(bus, figures["events"])
            figures["peak_rss_mb"] = {
                "nats-server": peak_rss_mb(server_pid),
                "vcbus up (decider, projector, scheduler)": peak_rss_mb(up.pid),
                "driver (simulated cluster)": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            }
    finally:
        if up.returncode is None:
            up.terminate()
        try:
            await asyncio.wait_for(up.wait(), 60)
        except TimeoutError:
            up.kill()
        drainer.cancel()
        subprocess.run(["rm", "-rf", str(data)], check=False)
    figures["ratio"] = round(figures["events_per_s"] / figures["raw_publish_msgs_per_s"], 3)
    return figures


async def drive(bus, args: argparse.Namespace) -> dict:
    from nats.js import api

    from vcbus.bus.streams import last_seq

    cluster = LiveCluster()
    pub = Publisher(bus.js, window=256)
    seq_sent: dict[int, float] = {}  # K8S seq of a pod failure -> when it was handed to the bus
    failure_records: list[float] = []
    latencies: list[float] = []
    starts: list[tuple[float, int, str, str]] = []  # (due, order, action, pod name) for the kubelets
    order = 0

    commands: asyncio.Queue = asyncio.Queue()

    async def on_command(msg) -> None:
        commands.put_nowait(msg)

    base = {name: await last_seq(bus.js, name) for name in (s.K8S_STREAM, s.JOBS_STREAM, s.CMDS_STREAM)}
    sub = await bus.js.subscribe(
        f"{s.CMDS_PREFIX}.>", cb=on_command, ordered_consumer=True, deliver_policy=api.DeliverPolicy.NEW
    )

    async def flush_outbox() -> None:
        batch, cluster.outbox = cluster.outbox, []
        fails = []
        for data, handed in batch:
            msg = prepare(data, _decode(data))
            if msg is None:
                continue
            if handed >= 0:
                await pub.publish(msg)
            else:  # a pod failure (LiveCluster.fail): its ack gives the seq its DeletePod will carry
                fails.append((await bus.js.publish_async(msg.subject, msg.body, headers=dict(msg.headers)), -handed))
        await pub.flush()
        for fut, handed in fails:
            ack = await fut
            seq_sent[ack.seq] = handed
            failure_records.append(handed)

    for i in range(args.nodes):
        cluster.add_node(f"node-{i:04d}")
    cluster.add_queue("default")
    await flush_outbox()
    t0 = time.monotonic()
    for i in range(args.jobs):
        cluster.create_job(job_manifest(i, args.replicas))
        if i % 10 == 0:
            cluster.fail_first.add(f"sys-{i:05d}-worker-0")
    await flush_outbox()

    deadline = t0 + args.timeout
    wanted = {f"default/sys-{i:05d}" for i in range(args.jobs)}
    while not wanted <= cluster.completed:
        if time.monotonic() > deadline:
            raise SystemExit(f"only {len(cluster.completed & wanted)} of {args.jobs} jobs completed in {args.timeout}s")
        try:
            msg = await asyncio.wait_for(commands.get(), 0.01)
            msgs = [msg]
            while not commands.empty() and len(msgs) < 512:
                msgs.append(commands.get_nowait())
        except TimeoutError:
            msgs = []
        now = time.monotonic()
        for msg in msgs:
            out = o.command_decoder.decode(msg.data)
            if isinstance(out, o.DeletePod) and out.seq in seq_sent:
                latencies.append(now - seq_sent.pop(out.seq))
            bound = cluster.apply_command(out)
            if bound is not None:
                order += 1
                heapq.heappush(starts, (now + args.start_delay, order, "run", bound))
        while starts and starts[0][0] <= now:
            _, _, action, name = heapq.heappop(starts)
            pod = cluster.get("Pod", "default", name)
            if pod is None or "deletionTimestamp" in pod["metadata"]:
                continue
            if action == "run" and pod["status"]["phase"] == "Pending":
                cluster.run(pod)
                order += 1
                heapq.heappush(starts, (now + args.runtime, order, "end", name))
            elif action == "end" and pod["status"]["phase"] == "Running":
                if name in cluster.fail_first:
                    cluster.fail_first.discard(name)
                    cluster.fail(pod)
                else:
                    cluster.succeed(pod)
        if cluster.outbox:
            await flush_outbox()
    elapsed = time.monotonic() - t0
    await sub.unsubscribe()
    events = 0
    for name, before in base.items():
        events += await last_seq(bus.js, name) - before
    return {
        "jobs": args.jobs,
        "nodes": args.nodes,
        "pods_per_job": args.replicas,
        "elapsed_s": round(elapsed, 2),
        "jobs_per_s": round(args.jobs / elapsed, 2),
        "events": events,
        "events_per_s": round(events / elapsed, 1),
        "pod_failures": len(failure_records),
        "failure_to_deletepod_ms": {
            "samples": len(latencies),
            "p50": round(percentile(latencies, 0.5) * 1000, 1),
            "p99": round(percentile(latencies, 0.99) * 1000, 1),
            "mean": round(statistics.fmean(latencies) * 1000, 1) if latencies else 0.0,
        },
    }


def _decode(data: bytes):
    from statemachines.model.records import decode

    return decode(data)


async def raw_publish_rate(bus, count: int) -> float:
    """The floor: raw publish_async of `count` messages (bodies from the run's streams), acks checked."""
    from nats.js import api

    from vcbus.bus.reading import read_all

    bodies: list[bytes] = []
    for stream in (s.K8S_STREAM, s.JOBS_STREAM, s.CMDS_STREAM):
        taken = 0
        async for msg in read_all(bus.js, stream):
            bodies.append(msg.data)
            taken += 1
            if taken == 1000:
                break
    info = await bus.js.stream_info(s.K8S_STREAM)
    await bus.js.add_stream(
        api.StreamConfig(
            name="BENCH_RAW", subjects=["bench.raw.>"], storage=api.StorageType.FILE,
            compression=info.config.compression, duplicate_window=info.config.duplicate_window,
        )
    )
    try:
        t0 = time.perf_counter()
        pending = []
        for i in range(count):
            pending.append(await bus.js.publish_async("bench.raw.x", bodies[i % len(bodies)], headers={"Nats-Msg-Id": f"r{i}"}))
            if len(pending) >= 256:
                await asyncio.gather(*pending)
                pending = []
        await asyncio.gather(*pending)
        return round(count / (time.perf_counter() - t0), 1)
    finally:
        await bus.js.delete_stream("BENCH_RAW")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="100 jobs on 20 nodes (under a minute)")
    ap.add_argument("--json", action="store_true", help="print one JSON object of the figures")
    ap.add_argument("--jobs", type=int, help="jobs (default 1000, --quick 100)")
    ap.add_argument("--nodes", type=int, help="nodes of 4 CPUs (default 100, --quick 20)")
    ap.add_argument("--replicas", type=int, default=2, help="pods per job (1 CPU each)")
    ap.add_argument("--runtime", type=float, default=1.0, help="seconds a pod runs")
    ap.add_argument("--start-delay", type=float, default=0.2, help="seconds from bind to Running")
    ap.add_argument("--timeout", type=float, default=1800, help="give up after this many seconds")
    args = ap.parse_args()
    args.jobs = args.jobs or (100 if args.quick else 1000)
    args.nodes = args.nodes or (20 if args.quick else 100)
    figures = asyncio.run(run(args))
    if args.json:
        print(json.dumps(figures))
        return
    lat = figures["failure_to_deletepod_ms"]
    print(f"system: {figures['jobs']} jobs x {figures['pods_per_job']} pods on {figures['nodes']} nodes, "
          f"embedded nats-server (fsync always), vcbus up with decider, projector, scheduler")
    print(f"  jobs completed        {figures['jobs_per_s']:>10,} /s   ({figures['elapsed_s']} s)")
    print(f"  events through bus    {figures['events_per_s']:>10,} /s   ({figures['events']:,} messages)")
    print(f"  raw publish floor     {figures['raw_publish_msgs_per_s']:>10,} /s   ratio {figures['ratio']}")
    print(f"  failure -> DeletePod  p50 {lat['p50']} ms, p99 {lat['p99']} ms ({lat['samples']} failures)")
    for proc, mb in figures["peak_rss_mb"].items():
        print(f"  peak RSS  {proc:<42} {mb:>8} MB")


if __name__ == "__main__":
    main()
