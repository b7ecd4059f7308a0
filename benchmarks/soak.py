"""Memory over time: `vcbus up` and its nats-server over a soak of benchmarks/cluster.py's W2, repeated.

    .venv/bin/python benchmarks/soak.py                  # 60 minutes: W2 (300 jobs of 3 pods, 100 nodes) again and again
    .venv/bin/python benchmarks/soak.py --quick          # 3 minutes, W2 of 40 jobs on 20 nodes
    .venv/bin/python benchmarks/soak.py --minutes 20 --json --samples soak.jsonl

What runs: benchmarks/cluster.py's cluster (the test suite's real etcd + kube-apiserver, KWOK as the
kubelets of its fake nodes) and `vcbus up --kubeconfig` as its users run it (its embedded
nats-server). One cycle is W2: `small` vcjobs of 1 master + 2 workers created at once, each with
`ttlSecondsAfterFinished` (`--ttl`, 5 s); KWOK runs every pod and ends it at once, exit 0 (its
pod-complete stage), so every job completes; vcbus's garbage collector deletes each job `--ttl`
seconds later (Volcano's: foreground propagation). The cycle ends when every job and pod of it is
gone, and the next starts: jobs created, completed and TTL-deleted for `--minutes`.

The test API server runs no kube-controller-manager, so nothing would carry out a foreground
deletion: this script stands in for Kubernetes' garbage collector (`GarbageCollector`, below): a
vcjob being deleted has its pods and PodGroups deleted, then its `foregroundDeletion` finalizer
removed, as kube-controller-manager does. It is the cluster's part, not vcbus's.

The streams run with a retention (`--retention-max-bytes`, passed to `vcbus up`; 16MiB, 2MiB with
--quick), deleted jobs' histories with `VCBUS_HISTORY_RETENTION` (`--history-retention`, 10m) and the
KV buckets' delete markers with `VCBUS_KV_MARKER_TTL` (`--kv-marker-ttl`, 10m), so that a soak
reaches the steady state a bounded deployment has.

`--tracemalloc DIR` runs `vcbus up` under tracemalloc (`--frames`, 1 by default) and snapshots it
after the cycles of `--snapshot-at` (10 and 40 by default; the soak ends after the last): the
figures then say what it holds more at each snapshot than at the one before, by allocating line,
in bytes per job created and deleted in between, and DIR/holders-<n>.txt who holds a few objects
of each of those lines (the chain of attributes, dict keys and lists up to a module). Sampled every `--every` seconds: the
resident memory (VmRSS) of `vcbus up` and of its nats-server, and every stream's (and KV bucket's)
messages and bytes, from JetStream.

Figures: per process the RSS after warm-up (`--warmup-minutes`, 10; 1 with --quick: the median of
the first minute's samples after it), at the end (the median of the last minute's), the peak, and
the least-squares slope of the samples after warm-up in MB per hour; per stream the most bytes and
messages seen against its limit (`within`: never above it). The floor is the process's own memory
once warm, measured in the same run: the headline `ratio` is vcbus's end RSS over its warm RSS
(1.0: flat; 1.10: 10% grown over the soak). `--json` prints one object; `--samples FILE` writes each
sample as a JSON line as it is taken (a long run's figures survive its interruption).
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import json
import pathlib
import statistics
import sys
import tempfile
import threading
import time
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.cluster import FULL, NS, QUICK, Cluster, Vcbus, create_all, small_job, status_mb, wait_for  # noqa: E402
from vcbus.k8s.watching import KubeApiError, api_request  # noqa: E402

JOBS = f"/apis/batch.volcano.sh/v1alpha1/namespaces/{NS}/jobs"
PODS = f"/api/v1/namespaces/{NS}/pods"
PODGROUPS = f"/apis/scheduling.volcano.sh/v1beta1/namespaces/{NS}/podgroups"
MERGE_PATCH = "application/merge-patch+json"


# --------------------------------------------------------------------------- work in the background


class Periodic:
    """`step()` now and then every `every` seconds in a thread of its own, until `stop()`; the
    first failure ends it and `check()` raises it, naming `what`."""

    what = "?"

    def __init__(self, every: float) -> None:
        self.every = every
        self.stopping = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def step(self) -> None:
        raise NotImplementedError

    def _run(self) -> None:
        while True:
            try:
                self.step()
            except Exception as err:  # noqa: BLE001 - reported by check()
                self.error = err
                return
            if self.stopping.wait(self.every):
                return

    def check(self) -> None:
        if self.error is not None:
            raise RuntimeError(f"{self.what} failed: {self.error!r}")

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(timeout=60)


class GarbageCollector(Periodic):
    """Kubernetes' garbage collector's part in a foreground deletion, for the vcjobs of the namespace.

    Every `every` seconds: the vcjobs being deleted (deletionTimestamp set, `foregroundDeletion`
    finalizer held) have their dependents deleted (pods and PodGroups whose owner reference names
    the job's uid), then the finalizer removed, so that the API server removes the job."""

    what = "the garbage collector's stand-in"

    def __init__(self, api: Any, every: float = 0.5) -> None:
        self.api = api
        self.collected = 0
        self.pool = concurrent.futures.ThreadPoolExecutor(8)
        super().__init__(every)

    def step(self) -> None:
        deleting = {j["metadata"]["uid"]: j for j in api_request(self.api, "GET", JOBS)["items"]
                    if j["metadata"].get("deletionTimestamp")}
        if not deleting:
            return
        dependents = [(PODS, o) for o in api_request(self.api, "GET", PODS)["items"]]
        dependents += [(PODGROUPS, o) for o in api_request(self.api, "GET", PODGROUPS)["items"]]
        doomed = [(path, o["metadata"]["name"]) for path, o in dependents
                  if any(ref.get("uid") in deleting for ref in o["metadata"].get("ownerReferences") or ())]
        list(self.pool.map(lambda d: self._delete(f"{d[0]}/{d[1]}"), doomed))
        list(self.pool.map(self._release, deleting.values()))
        self.collected += len(deleting)

    def _delete(self, path: str) -> None:
        try:
            api_request(self.api, "DELETE", path, query={"gracePeriodSeconds": "0"})
        except KubeApiError as err:
            if getattr(err, "status", None) != 404:
                raise

    def _release(self, job: dict) -> None:
        meta = job["metadata"]
        left = [f for f in meta.get("finalizers") or () if f != "foregroundDeletion"]
        body = {"metadata": {"finalizers": left or None, "resourceVersion": meta["resourceVersion"]}}
        try:
            api_request(self.api, "PATCH", f"{JOBS}/{meta['name']}", body=body, content_type=MERGE_PATCH)
        except KubeApiError as err:
            if getattr(err, "status", None) not in (404, 409):  # gone, or changed: the next sweep sees it
                raise

    def stop(self) -> None:
        super().stop()
        self.pool.shutdown(wait=True)


# --------------------------------------------------------------------------- samples


def process_names(system: Vcbus) -> dict[str, int]:
    """`vcbus` (the `up` process) and `nats-server` (its child) -> pid."""
    out = {"vcbus": system.procs[0].pid}
    for pid in system.pids()[1:]:
        try:
            name = pathlib.Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            continue
        out.setdefault(name, pid)
    return out


async def stream_states(url: str) -> dict[str, dict]:
    import nats

    nc = await nats.connect(url, connect_timeout=10, allow_reconnect=False)
    try:
        infos = await nc.jetstream().streams_info()
    finally:
        await nc.close()
    return {str(i.config.name): {"bytes": i.state.bytes, "msgs": i.state.messages,
                            "max_bytes": i.config.max_bytes if (i.config.max_bytes or -1) > 0 else None,
                            "max_msgs": i.config.max_msgs if (i.config.max_msgs or -1) > 0 else None}
            for i in infos}


class Sampler(Periodic):
    """Every `every` seconds, in its own thread: each process's RSS and each stream's state."""

    what = "sampling"

    def __init__(self, system: Vcbus, every: float, out: pathlib.Path | None) -> None:
        self.system, self.out = system, out
        self.samples: list[dict] = []
        self.t0 = time.monotonic()
        super().__init__(every)

    def take(self) -> dict:
        procs = process_names(self.system)
        sample = {"t_s": round(time.monotonic() - self.t0, 1),
                  "rss_mb": {name: round(status_mb(pid, "VmRSS"), 1) for name, pid in procs.items()},
                  "streams": asyncio.run(stream_states(f"nats://127.0.0.1:{self.system.nats_port}"))}
        self.samples.append(sample)
        if self.out is not None:
            with self.out.open("a") as fh:
                fh.write(json.dumps(sample) + "\n")
        return sample

    def step(self) -> None:
        self.take()


def slope_per_hour(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, MB) points, in MB per hour."""
    if len(points) < 2:
        return float("nan")
    mx = statistics.fmean(t for t, _ in points)
    my = statistics.fmean(v for _, v in points)
    den = sum((t - mx) ** 2 for t, _ in points)
    return round(3600 * sum((t - mx) * (v - my) for t, v in points) / den, 2) if den else float("nan")


def memory_figures(samples: list[dict], warmup_s: float, window_s: float = 60.0) -> dict[str, dict]:
    """Per process: RSS once warm, at the end, the peak and the slope after warm-up."""
    out: dict[str, dict] = {}
    names = sorted({n for s in samples for n in s["rss_mb"]})
    end_t = samples[-1]["t_s"] if samples else 0.0
    for name in names:
        pts = [(s["t_s"], s["rss_mb"][name]) for s in samples if s["rss_mb"].get(name)]  # 0: the process gone
        warm = [(t, v) for t, v in pts if t >= warmup_s]
        first = [v for t, v in warm if t < warmup_s + window_s] or [v for _, v in warm[:1]]
        last = [v for t, v in warm if t > end_t - window_s] or [v for _, v in warm[-1:]]
        out[name] = {"rss_start_mb": pts[0][1] if pts else float("nan"),
                     "rss_warm_mb": round(statistics.median(first), 1) if first else float("nan"),
                     "rss_end_mb": round(statistics.median(last), 1) if last else float("nan"),
                     "rss_peak_mb": max((v for _, v in pts), default=float("nan")),
                     "slope_mb_per_h": slope_per_hour(warm), "samples_after_warmup": len(warm)}
    return out


def stream_figures(samples: list[dict]) -> dict[str, dict]:
    """Per stream: the most bytes and messages seen, its last state and whether it stayed within its limits."""
    out: dict[str, dict] = {}
    for sample in samples:
        for name, st in sample["streams"].items():
            f = out.setdefault(name, {"max_bytes": st["max_bytes"], "max_msgs": st["max_msgs"], "bytes_peak": 0, "msgs_peak": 0})
            f["bytes_peak"] = max(f["bytes_peak"], st["bytes"])
            f["msgs_peak"] = max(f["msgs_peak"], st["msgs"])
            f["bytes_last"], f["msgs_last"] = st["bytes"], st["msgs"]
    for f in out.values():
        f["within"] = ((f["max_bytes"] is None or f["bytes_peak"] <= f["max_bytes"])
                       and (f["max_msgs"] is None or f["msgs_peak"] <= f["max_msgs"]))
    return out


# --------------------------------------------------------------------------- where the memory goes


class TracedVcbus(Vcbus):
    """`vcbus up` under tracemalloc (`--tracemalloc DIR`): the same process, started through this
    script's `--run-traced`, which dumps a snapshot of what is allocated whenever the soak asks
    (`snapshot(n)`: a request file in DIR; the dump is DIR/snap-<n>.pickle)."""

    def __init__(self, workdir: pathlib.Path, trace_dir: pathlib.Path, frames: int) -> None:
        super().__init__(workdir)
        self.trace_dir, self.frames = trace_dir, frames

    def command(self) -> list[str]:
        return [sys.executable, "-X", f"tracemalloc={self.frames}", str(pathlib.Path(__file__).resolve()),
                "--run-traced", str(self.trace_dir)]

    def snapshot(self, n: int, check: Any) -> pathlib.Path:
        out = self.trace_dir / f"snap-{n}.pickle"
        (self.trace_dir / f"request-{n}").touch()
        wait_for(f"tracemalloc snapshot {n}", lambda: (self.trace_dir / f"done-{n}").exists(), deadline=600,
                 every=0.5, check=check)
        return out


def run_traced(trace_dir: pathlib.Path, argv: list[str]) -> int:
    """`vcbus ARGV` in this process, dumping a tracemalloc snapshot for each request file in `trace_dir`;
    from the second on, also who holds a few objects of each line that allocated the most since the
    one before (`holders-<n>.txt`, `holders`)."""
    import gc
    import tracemalloc

    from vcbus.cli.main import main as vcbus_main

    def serve() -> None:
        done: set[str] = set()
        before = None
        while True:
            for req in sorted(trace_dir.glob("request-*")):
                n = req.name.split("-", 1)[1]
                if n in done:
                    continue
                gc.collect()
                snap = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(False, tracemalloc.__file__)])
                snap.dump(str(trace_dir / f"snap-{n}.pickle"))
                if before is not None:
                    sites = [(d.traceback[0].filename, d.traceback[0].lineno) for d in snap.compare_to(before, "lineno")[:12]]
                    (trace_dir / f"holders-{n}.txt").write_text(holders(sites))
                before = snap
                (trace_dir / f"done-{n}").touch()
                done.add(n)
            time.sleep(0.5)  # a poll for the soak's requests, not a wait for a condition of the system

    threading.Thread(target=serve, daemon=True).start()
    return vcbus_main(argv)


def holders(sites: list[tuple[str, int]], per_site: int = 100, depth: int = 12) -> str:
    """For the newest `per_site` live objects allocated at each of `sites` (file, line), what keeps
    them alive: the chain of holders, innermost first (an attribute, a dict key, a list), up to a
    module or `depth`, counted by its first attribute of an object (`Class.attr`), with an example."""
    import collections
    import gc
    import tracemalloc
    import types

    found: dict[tuple[str, int], collections.deque[tuple[Any, tuple[Any, ...]]]] = {
        site: collections.deque(maxlen=per_site) for site in sites}

    def take(obj: Any, via: tuple[Any, ...]) -> None:
        """`obj` if allocated at one of the sites, with the untracked containers `via` it is held."""
        tb = tracemalloc.get_object_traceback(obj)
        if tb is not None and (tb[0].filename, tb[0].lineno) in found:
            found[(tb[0].filename, tb[0].lineno)].append((obj, via))

    def untracked(obj: Any) -> None:
        """What the collector does not track below `obj` (str, and tuples and dicts of such), 3 deep:
        gc.get_referrers cannot find their holders, so the way down is kept."""
        below = [(ref, (obj,)) for ref in gc.get_referents(obj) if not gc.is_tracked(ref)]
        for _ in range(3):
            for ref, via in below:
                take(ref, via)
            below = [(r, (ref, *via)) for ref, via in below if isinstance(ref, (tuple, dict, frozenset))
                     for r in gc.get_referents(ref)]

    every = gc.get_objects()
    for obj in every:
        take(obj, ())
        untracked(obj)
    mine = {id(every), id(found), *(id(v) for v in found.values())}

    def referrers(obj: Any) -> list[Any]:
        refs = gc.get_referrers(obj)
        mine.add(id(refs))
        out = [r for r in refs if id(r) not in mine and not isinstance(r, types.FrameType)]
        mine.add(id(out))
        return out

    def step(holder: Any, held: Any) -> tuple[str, Any]:
        """How `holder` holds `held`, and the object to go on from (an instance for its __dict__)."""
        if isinstance(holder, dict):
            owner = next((o for o in referrers(holder) if getattr(o, "__dict__", None) is holder), None)
            for key, value in holder.items():
                if value is held:
                    return (f"{type(owner).__qualname__}.{key}", owner) if owner is not None else (f"dict[{key!r}]"[:100], holder)
                if key is held:
                    return f"dict key ({len(holder)} keys)", owner if owner is not None else holder
            return f"dict ({len(holder)} keys)", holder
        for slot in getattr(type(holder), "__slots__", ()):
            if getattr(holder, slot, None) is held:
                return f"{type(holder).__qualname__}.{slot}", holder
        size = f" ({len(holder)})" if hasattr(holder, "__len__") else ""
        return f"{type(holder).__qualname__}{size}", holder

    lines: list[str] = []
    for (filename, lineno), objs in found.items():
        lines.append(f"{filename}:{lineno} ({len(objs)} objects)")
        labels: collections.Counter[str] = collections.Counter()
        example: dict[str, str] = {}
        sample = list(objs)
        mine.add(id(sample))
        for i in range(len(sample)):  # no iterator over `sample`: it would hold each object too
            obj, via = sample[i]
            chain, cur = [type(obj).__qualname__], obj
            for holder in via:  # the untracked containers down to it, then the tracked ones' referrers
                what, cur = step(holder, cur)
                chain.append(what)
            for _ in range(depth):
                refs = referrers(cur)
                if not refs:
                    break
                holder = next((r for r in refs if not isinstance(r, (list, tuple))), refs[0])
                what, cur = step(holder, cur)
                chain.append(what)
                if isinstance(holder, types.ModuleType) or (isinstance(holder, dict) and "__name__" in holder):
                    break
            label = next((c for c in chain[1:] if "." in c and c[:1].isupper() and not c.startswith("dict")), chain[-1])
            labels[label] += 1
            example.setdefault(label, " <- ".join(chain))
        for label, count in labels.most_common(6):
            lines.append(f"    {count:>4}  {label}:  {example[label][:300]}")
    del every
    return "\n".join(lines) + "\n"


def compare_snapshots(old: pathlib.Path, new: pathlib.Path, jobs: int, top: int = 25) -> dict:
    """What `vcbus up` holds more in `new` than in `old`, by allocating line, and per job in between."""
    import tracemalloc

    a, b = tracemalloc.Snapshot.load(str(old)), tracemalloc.Snapshot.load(str(new))
    grown = b.compare_to(a, "lineno")
    total = sum(d.size_diff for d in grown)
    return {"jobs": jobs, "grown_bytes": total, "bytes_per_job": round(total / jobs, 1) if jobs else None,
            "held_old_bytes": sum(s.size for s in a.statistics("filename")),
            "held_new_bytes": sum(s.size for s in b.statistics("filename")),
            "top": [{"where": f"{d.traceback[0].filename}:{d.traceback[0].lineno}", "bytes": d.size_diff,
                     "blocks": d.count_diff} for d in grown[:top]]}


# --------------------------------------------------------------------------- the soak


def one_cycle(cluster: Cluster, system: Vcbus, gc: GarbageCollector, sampler: Sampler, cycle: int, jobs: int,
              ttl: int) -> float:
    """W2 once: `jobs` small jobs created, run, completed and TTL-deleted; seconds until all are gone."""
    manifests = []
    for i in range(jobs):
        job = small_job(f"soak-{cycle}-{i}")
        job["spec"]["ttlSecondsAfterFinished"] = ttl
        manifests.append(job)
    t0 = time.monotonic()
    create_all(cluster.api, manifests)

    def check() -> None:
        system.check()
        gc.check()
        sampler.check()
        cluster.kwok.check()

    wait_for(f"cycle {cycle}: {jobs} jobs completed and deleted", lambda: not api_request(
        cluster.api, "GET", JOBS, query={"limit": "1"})["items"], every=0.5, check=check)
    wait_for(f"cycle {cycle}: every pod gone", lambda: not api_request(
        cluster.api, "GET", PODS, query={"limit": "1"})["items"], deadline=120, every=0.5, check=check)
    return time.monotonic() - t0


def soak(size: dict, minutes: float, ttl: int, every: float, warmup_s: float, extra: list[str],
         samples_out: pathlib.Path | None, log: Any, trace: tuple[pathlib.Path, int, list[int]] | None = None) -> dict:
    """The soak; with `trace` (DIR, frames, cycles) `vcbus up` runs under tracemalloc and is
    snapshotted after each of those cycles, and what grew between them is in `tracemalloc`."""
    import os

    with tempfile.TemporaryDirectory(prefix="vcbus-soak-") as tmp:
        work = pathlib.Path(tmp)
        cluster = Cluster(work, size["nodes"], complete=True)
        system = Vcbus(work) if trace is None else TracedVcbus(work, trace[0], trace[1])
        snaps: list[tuple[int, pathlib.Path]] = []
        gc = sampler = None
        try:
            system.start(cluster.env.kubeconfig, extra)
            wait_for("vcbus ready", system.ready, deadline=120, check=system.check)
            wait_for("its nats-server", lambda: "nats-server" in process_names(system), deadline=60, check=system.check)
            gc = GarbageCollector(cluster.api)
            sampler = Sampler(system, every, samples_out)
            end = time.monotonic() + minutes * 60
            cycles: list[float] = []
            while time.monotonic() < end:
                took = one_cycle(cluster, system, gc, sampler, len(cycles), size["small"], ttl)
                cycles.append(took)
                last = sampler.samples[-1] if sampler.samples else {"rss_mb": {}}
                log(f"cycle {len(cycles)}: {size['small']} jobs in {took:.1f} s; rss {json.dumps(last['rss_mb'])}; "
                    f"{(end - time.monotonic()) / 60:.1f} min left")
                if isinstance(system, TracedVcbus) and trace is not None and len(cycles) in trace[2]:
                    snaps.append((len(cycles), system.snapshot(len(cycles), system.check)))
                    log(f"cycle {len(cycles)}: tracemalloc snapshot {snaps[-1][1]}")
                    if len(snaps) == len(trace[2]):
                        break
            sampler.stop()
            sampler.take()  # the state once the last cycle is over
            sampler.check()
            memory = memory_figures(sampler.samples, warmup_s)
            vc = memory.get("vcbus", {})
            ratio = round(vc["rss_end_mb"] / vc["rss_warm_mb"], 3) if vc.get("rss_warm_mb") else float("nan")
            got = {"size": {"nodes": size["nodes"], "small": size["small"]}, "minutes": minutes, "ttl_s": ttl,
                  "vcbus_args": extra, "history_retention": os.environ.get("VCBUS_HISTORY_RETENTION"),
                  "kv_marker_ttl": os.environ.get("VCBUS_KV_MARKER_TTL"),
                  "cycles": len(cycles), "jobs": len(cycles) * size["small"],
                  "cycle_p50_s": round(statistics.median(cycles), 1) if cycles else float("nan"),
                  "cycle_max_s": round(max(cycles), 1) if cycles else float("nan"),
                  "jobs_collected": gc.collected, "warmup_s": warmup_s, "samples": len(sampler.samples),
                  "memory": memory, "streams": stream_figures(sampler.samples), "ratio": ratio}
            if len(snaps) > 1:
                got["tracemalloc"] = [compare_snapshots(p0, p1, (c1 - c0) * size["small"])
                                      for (c0, p0), (c1, p1) in zip(snaps, snaps[1:], strict=False)]
        finally:
            if sampler is not None:
                sampler.stop()
            if gc is not None:
                gc.stop()
            system.stop()
            said = system.summary()  # what it logged as it stopped
            cluster.stop()
    return {**got, "vcbus_said": said}


def main(argv: list[str] | None = None) -> int:
    import os

    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--run-traced"]:  # the `vcbus up` of --tracemalloc (TracedVcbus)
        return run_traced(pathlib.Path(argv[1]), argv[2:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--quick", action="store_true", help="3 minutes of W2 at the quick size (40 jobs, 20 nodes)")
    ap.add_argument("--json", action="store_true", help="one JSON object of the figures on stdout")
    ap.add_argument("--minutes", type=float, help="how long to soak (default 60; 3 with --quick)")
    ap.add_argument("--warmup-minutes", type=float, help="samples before this are warm-up (default 10; 1 with --quick)")
    ap.add_argument("--every", type=float, help="seconds between samples (default 10; 2 with --quick)")
    ap.add_argument("--small", type=int, help="jobs per cycle (default 300; 40 with --quick)")
    ap.add_argument("--nodes", type=int, help="KWOK nodes (default 100; 20 with --quick)")
    ap.add_argument("--ttl", type=int, default=5, help="each job's ttlSecondsAfterFinished (default 5)")
    ap.add_argument("--retention-max-bytes", help="each stream's limit, for `vcbus up` (default 16MiB; 2MiB with --quick)")
    ap.add_argument("--history-retention", default="10m", help="VCBUS_HISTORY_RETENTION for `vcbus up` (default 10m)")
    ap.add_argument("--kv-marker-ttl", default="10m", help="VCBUS_KV_MARKER_TTL for `vcbus up` (default 10m)")
    ap.add_argument("--vcbus-arg", action="append", default=[], metavar="ARG", help="one more argument for `vcbus up`")
    ap.add_argument("--samples", type=pathlib.Path, metavar="FILE", help="append each sample to FILE as a JSON line")
    ap.add_argument("--tracemalloc", type=pathlib.Path, metavar="DIR",
                    help="run vcbus up under tracemalloc, dump snapshots into DIR after --snapshot-at's cycles, "
                         "and report what grew between them (by allocating line, and bytes per job); the soak "
                         "ends after the last of them")
    ap.add_argument("--snapshot-at", default="10,40", metavar="N,M,...",
                    help="the cycles after which --tracemalloc snapshots (default 10,40)")
    ap.add_argument("--frames", type=int, default=1, help="frames tracemalloc keeps per allocation (default 1)")
    args = ap.parse_args(argv)
    size = dict(QUICK if args.quick else FULL)
    for key in ("small", "nodes"):
        if getattr(args, key):
            size[key] = getattr(args, key)
    minutes = args.minutes if args.minutes is not None else (3.0 if args.quick else 60.0)
    warmup = args.warmup_minutes if args.warmup_minutes is not None else (1.0 if args.quick else 10.0)
    every = args.every if args.every is not None else (2.0 if args.quick else 10.0)
    for flag, value in (("--minutes", minutes), ("--every", every), ("--ttl", args.ttl)):
        if value <= 0 and not (flag == "--ttl" and value == 0):
            print(f"soak: {flag} {value}: must be above 0", file=sys.stderr)
            return 2
    if warmup >= minutes:
        print(f"soak: --warmup-minutes {warmup} is not below --minutes {minutes}: no sample would count", file=sys.stderr)
        return 2
    retention = args.retention_max_bytes or ("2MiB" if args.quick else "16MiB")
    os.environ["VCBUS_HISTORY_RETENTION"] = args.history_retention  # read by `vcbus up`, the child
    os.environ["VCBUS_KV_MARKER_TTL"] = args.kv_marker_ttl
    extra = [f"--retention-max-bytes={retention}", *args.vcbus_arg]
    log = (lambda text: print(text, file=sys.stderr, flush=True)) if args.json else (lambda text: print(text, flush=True))
    trace = None
    if args.tracemalloc is not None:
        try:
            at = sorted({int(c) for c in args.snapshot_at.split(",")})
        except ValueError:
            print(f"soak: --snapshot-at {args.snapshot_at!r}: not a list of cycle numbers", file=sys.stderr)
            return 2
        if len(at) < 2 or at[0] < 1:
            print(f"soak: --snapshot-at {args.snapshot_at!r}: needs two cycles or more, from 1", file=sys.stderr)
            return 2
        args.tracemalloc.mkdir(parents=True, exist_ok=True)
        trace = (args.tracemalloc.resolve(), max(1, args.frames), at)
    got = soak(size, minutes, args.ttl, every, warmup * 60, extra, args.samples, log, trace)
    if args.json:
        print(json.dumps(got))
        return 0
    print(f"\n{got['cycles']} cycles of {size['small']} jobs ({got['jobs']} jobs) in {minutes:g} min; "
          f"a cycle p50 {got['cycle_p50_s']} s, max {got['cycle_max_s']} s")
    print(f"{'process':14}{'start MB':>10}{'warm MB':>10}{'end MB':>10}{'peak MB':>10}{'MB/h':>10}")
    for name, f in got["memory"].items():
        print(f"{name:14}{f['rss_start_mb']:>10}{f['rss_warm_mb']:>10}{f['rss_end_mb']:>10}{f['rss_peak_mb']:>10}"
              f"{f['slope_mb_per_h']:>10}")
    print(f"{'stream':22}{'limit':>12}{'peak bytes':>12}{'last bytes':>12}{'peak msgs':>10}  within")
    for name, f in sorted(got["streams"].items()):
        print(f"{name:22}{f['max_bytes'] or '-'!s:>12}{f['bytes_peak']:>12}{f['bytes_last']:>12}{f['msgs_peak']:>10}  {f['within']}")
    print(f"ratio (vcbus end RSS / warm RSS): {got['ratio']}")
    for diff in got.get("tracemalloc", ()):
        print(f"\ntracemalloc: {diff['grown_bytes']} bytes more over {diff['jobs']} jobs ({diff['bytes_per_job']} per job); "
              f"held {diff['held_old_bytes']} -> {diff['held_new_bytes']}")
        for row in diff["top"]:
            print(f"  {row['bytes']:>10} B {row['blocks']:>7} blocks  {row['where']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
