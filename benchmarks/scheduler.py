"""Scheduler throughput: one Volcano session over a large snapshot, against the issue's floor.

    .venv/bin/python benchmarks/scheduler.py            # 1,000 nodes, 1,000 jobs of 10 pods, 4 queues
    .venv/bin/python benchmarks/scheduler.py --quick    # 300 nodes, 300 jobs: under a minute
    .venv/bin/python benchmarks/scheduler.py --json     # one JSON object; headline ratio under "ratio"
    .venv/bin/python benchmarks/scheduler.py --profile  # cProfile of the first session, top functions

The snapshot (made in memory, deterministic): nodes of cpu 16 / memory 64Gi / 110 pods;
four queues of weights 1, 2, 3 and 4; jobs of 10 pods spread over the queues, with pods of
three sizes (cpu 1 / 2Gi, cpu 2 / 4Gi, cpu 4 / 8Gi: about 1.4 times what the cluster holds,
so some jobs stay pending and the proportion plugin's deserved shares matter), gang
minMember 10 for two jobs in three, 5 for the others; every PodGroup Inqueue with its pods
Pending. The configuration is Volcano's default (the helm install's).

Figures:

- first session: `SchedulerCache.snapshot()` plus `run_session` over the snapshot with every
  pod pending: pods bound per second (`pods_per_s`, the headline) and its time. Every session
  is timed `--repeats` times (it is pure: same result each time) and the best time counts;
- steady state: the binds of the first session applied as the cluster shows them (pods get
  spec.nodeName), then one more session (`session_s`): what every later 1-second period costs
  while the remaining jobs stay pending;
- both sessions again with allocate's predicate error cache off (`predicateErrorCacheEnable:
  false`; Volcano's default, on, is what the figures above use). Volcano's other predicates
  cache, `predicate.CacheEnable`, has no switch in vcbus: the node filters that depend only on
  the node and the pod's placement are always computed once per session;
- scaling: the first session at half the nodes and half the jobs (a quarter of
  nodes x pending tasks); `scaling_exponent` = log(t_full / t_half) / log(4) with the CPU
  times of the process (wall times on a shared machine are stretched unevenly by others):
  1 means linear in nodes x pending tasks, above 1 worse;
- the constrained mix (`constrained` in the JSON): the same snapshot where a third of the jobs
  carry a required pod anti-affinity on `kubernetes.io/hostname` (one pod of the job per node)
  or, as many, a `topology.kubernetes.io/zone` spread constraint (maxSkew 1, DoNotSchedule),
  each against the job's own pods (nodes are in three zones): first and steady session, scaling;
- with `--services`, the services mix (`services` in the JSON): the plain snapshot plus a headless
  Service per job selecting its pods (`volcano.sh/job-name`, as the svc plugin's), so every pod gets
  the system-default topology spreading score, and every task is placed through the node index's
  per-zone trees (`NodeIndex.choose_spread`): first session, scaling.

The floor is the issue's: 1,000 pods scheduled per second, so `ratio = pods_per_s / 1000`
(target >= 1).
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import pathlib
import sys
import time
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

FLOOR_PODS_PER_S = 1000.0
QUEUES = {"q1": 1, "q2": 2, "q3": 3, "q4": 4}
SIZES = [("1", "2Gi"), ("2", "4Gi"), ("4", "8Gi")]
T0 = "2026-11-30T08:00:00Z"


def constraints(j: int, job: str) -> dict[str, Any]:
    """The constrained mix's pod spec fields of job `j`: a third of the jobs carry a required
    anti-affinity on the hostname (one pod of the job per node) or, as many, a zone spread
    constraint (maxSkew 1, DoNotSchedule), each against the job's own pods."""
    own = {"labelSelector": {"matchLabels": {"volcano.sh/job-name": job}}}
    if j % 6 == 1:
        return {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {**own, "topologyKey": "kubernetes.io/hostname"}]}}}
    if j % 6 == 4:
        return {"topologySpreadConstraints": [{**own, "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                               "whenUnsatisfiable": "DoNotSchedule"}]}
    return {}


MIXES = ("plain", "constrained", "services")


def make_objects(nodes: int, jobs: int, pods_per_job: int = 10, mix: str = "plain") -> list[dict[str, Any]]:
    """The snapshot's objects, in the order a watch would show them."""
    out: list[dict[str, Any]] = []
    for i in range(nodes):
        name = f"node-{i:04d}"
        out.append({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "uid": f"node-uid-{i}", "creationTimestamp": T0,
                         "labels": {"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": f"z{i % 3}"}},
            "status": {"allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110"},
                       "capacity": {"cpu": "16", "memory": "64Gi", "pods": "110"}},
        })
    for q, weight in QUEUES.items():
        out.append({
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": q, "uid": f"queue-uid-{q}", "creationTimestamp": T0},
            "spec": {"weight": weight, "reclaimable": True},
            "status": {"state": "Open"},
        })
    queue_names = list(QUEUES)
    for j in range(jobs):
        ns = f"team-{j % 7}"
        job = f"job-{j:05d}"
        pg = f"{job}-pg"
        cpu, mem = SIZES[j % len(SIZES)]
        min_member = pods_per_job if j % 3 else pods_per_job // 2
        created = f"2026-11-30T08:{(j // 60) % 60:02d}:{j % 60:02d}Z"
        out.append({
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": pg, "namespace": ns, "uid": f"pg-uid-{j}", "creationTimestamp": created},
            "spec": {"minMember": min_member, "queue": queue_names[j % len(queue_names)],
                     "minResources": {"cpu": str(int(cpu) * min_member), "memory": f"{int(mem[:-2]) * min_member}Gi",
                                      "pods": str(min_member)}},
            "status": {"phase": "Inqueue"},
        })
        extra = constraints(j, job) if mix == "constrained" else {}
        if mix == "services":
            out.append({"apiVersion": "v1", "kind": "Service", "metadata": {"name": job, "namespace": ns},
                        "spec": {"clusterIP": "None", "selector": {"volcano.sh/job-name": job}}})
        for k in range(pods_per_job):
            out.append({
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"{job}-worker-{k}", "namespace": ns, "uid": f"pod-uid-{j}-{k}",
                    "creationTimestamp": created,
                    "labels": {"volcano.sh/job-name": job, "volcano.sh/task-spec": "worker"},
                    "annotations": {"scheduling.k8s.io/group-name": pg, "volcano.sh/task-spec": "worker"},
                },
                "spec": {"schedulerName": "volcano", "containers": [
                    {"name": "main", "image": "trainer:1", "resources": {"requests": {"cpu": cpu, "memory": mem}}}],
                    **extra},
                "status": {"phase": "Pending"},
            })
    return out


def error_cache_config(enabled: bool) -> Any:  # noqa: ANN401 - a SchedulerConfig
    """Volcano's default config with allocate's `predicateErrorCacheEnable` set (Volcano's default: on)."""
    import yaml

    from statemachines.scheduler.config import DEFAULT_CONFIG_YAML, config_from_dict

    data = yaml.safe_load(DEFAULT_CONFIG_YAML)
    data["configurations"] = [{"name": "allocate", "arguments": {"predicateErrorCacheEnable": enabled}}]
    return config_from_dict(data, source="benchmark config")


REPEATS = 3


def timed_session(cluster: Any, number: int, config: Any = None, *, cached: bool = True) -> tuple[Any, float]:  # noqa: ANN401
    """The session's result and its best wall time over REPEATS runs (run_session is pure: same result
    each run). The best CPU time of the process goes to CPU_TIMES[number, config is None]."""
    from statemachines.scheduler.session import run_session

    best = best_cpu = float("inf")
    result = None
    for _ in range(REPEATS):
        gc.collect()
        t0, c0 = time.perf_counter(), time.process_time()
        snap = cluster.cache.snapshot()
        result = run_session(snap, config or cluster.config, seq=cluster.cache.position, number=number, time=T0,
                             cache_predicates=cached)
        best = min(best, time.perf_counter() - t0)
        best_cpu = min(best_cpu, time.process_time() - c0)
    CPU_TIMES[number, config is None] = best_cpu
    return result, best


CPU_TIMES: dict[tuple[int, bool], float] = {}


def build(nodes: int, jobs: int, mix: str = "plain") -> tuple[Any, float]:  # noqa: ANN401 - an OfflineCluster
    from statemachines.scheduler.config import DEFAULT_CONFIG
    from vcbus.offline_cluster import OfflineCluster
    from vcbus.snapshots import KEPT_KINDS, object_key

    cluster = OfflineCluster(DEFAULT_CONFIG)
    objects = make_objects(nodes, jobs, mix=mix)
    t0 = time.perf_counter()
    for obj in objects:
        cluster.cache.apply_object("ADDED", obj)
    fold_s = time.perf_counter() - t0
    cluster.snapshot.objects = {object_key(o): o for o in objects if o["kind"] in KEPT_KINDS}
    return cluster, fold_s


def measure(nodes: int, jobs: int, *, steady: bool, mix: str = "plain") -> dict[str, Any]:
    cluster, fold_s = build(nodes, jobs, mix)
    first, first_s = timed_session(cluster, 1)
    figures: dict[str, Any] = {
        "nodes": nodes,
        "jobs": jobs,
        "pods": jobs * 10,
        "fold_s": round(fold_s, 3),
        "first_session_s": round(first_s, 3),
        "first_session_cpu_s": round(CPU_TIMES[1, True], 3),
        "first_session_binds": len(first.binds),
        "pods_per_s": round(len(first.binds) / first_s, 1),
    }
    if not steady:
        return figures
    # run_session does not change the cache: the same first session again, without the error cache
    # (the same binds unless a task's filters depend on the pods placed before it: spread counts)
    off, first_off_s = timed_session(cluster, 1, error_cache_config(False))
    if mix == "plain":
        assert [(b.name, b.node) for b in off.binds] == [(b.name, b.node) for b in first.binds]
    # ... and with the predicates uncached: every stable filter and score per task and node
    uncached, first_uncached_s = timed_session(cluster, 1, cached=False)
    assert [(b.name, b.node) for b in uncached.binds] == [(b.name, b.node) for b in first.binds]
    cluster.apply_decisions(first.outputs, T0)
    steady_res, steady_s = timed_session(cluster, 2)
    _, steady_off_s = timed_session(cluster, 2, error_cache_config(False))
    _, steady_uncached_s = timed_session(cluster, 2, cached=False)
    pending = sum(1 for pg in steady_res.podgroups if pg.get("phase") not in ("Running", "Completed"))
    tried = sum(1 for r in steady_res.reports.values() if any(t.node_errors for t in r.tasks))
    figures.update({
        "first_session_error_cache_off_s": round(first_off_s, 3),
        "session_s": round(steady_s, 3),
        "steady_binds": len(steady_res.binds),
        "steady_pending_podgroups": pending,
        "steady_podgroups_with_fit_errors": tried,
        "steady_error_cache_off_s": round(steady_off_s, 3),
        "first_session_uncached_s": round(first_uncached_s, 3),
        "pods_per_s_uncached": round(len(uncached.binds) / first_uncached_s, 1),
        "steady_uncached_s": round(steady_uncached_s, 3),
    })
    return figures


def phases(cluster: Any) -> dict[str, float]:  # noqa: ANN401 - an OfflineCluster
    """Seconds of one first session by phase: snapshot, open, each action, close (best of REPEATS)."""
    from statemachines.scheduler import session as sm

    spent: dict[str, float] = {}

    def timed(name: str, fn: Any) -> Any:  # noqa: ANN401
        def wrapper(*args: Any, **kwargs: Any) -> Any:  # noqa: ANN401
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[name] = spent.get(name, 0.0) + time.perf_counter() - t0
        return wrapper

    saved = (dict(sm.ACTIONS), sm.open_session, sm._close)
    sm.ACTIONS.update({name: timed(name, fn) for name, fn in sm.ACTIONS.items()})
    sm.open_session = timed("open", sm.open_session)
    sm._close = timed("close", sm._close)
    best: dict[str, float] = {}
    try:
        for _ in range(REPEATS):
            spent.clear()
            gc.collect()
            t0 = time.perf_counter()
            snap = cluster.cache.snapshot()
            spent["snapshot"] = time.perf_counter() - t0
            sm.run_session(snap, cluster.config, seq=cluster.cache.position, number=1, time=T0)
            total = sum(spent.values())
            if not best or total < sum(best.values()):
                best = dict(spent)
    finally:
        sm.ACTIONS.clear()
        sm.ACTIONS.update(saved[0])
        sm.open_session, sm._close = saved[1], saved[2]
    return best


def profile(nodes: int, jobs: int, top: int = 25) -> None:
    import cProfile
    import pstats

    cluster, _ = build(nodes, jobs)
    split = phases(cluster)
    total = sum(split.values())
    print(f"first session, {nodes} nodes, {jobs} jobs: {total:.3f} s")
    for name, seconds in split.items():
        print(f"  {name:<10} {seconds:>7.3f} s  {100 * seconds / total:>5.1f} %")
    global REPEATS
    REPEATS = 1
    prof = cProfile.Profile()
    prof.enable()
    timed_session(cluster, 1)
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(top)


def exponent(full: dict[str, Any], half: dict[str, Any]) -> float:
    """log(CPU time ratio) / log(work ratio) between the full and the half snapshot (1 = linear in
    nodes x pending tasks). CPU time, not wall time: on a shared machine other processes stretch
    wall times unevenly."""
    work_ratio = (full["nodes"] * full["pods"]) / (half["nodes"] * half["pods"])
    return round(math.log(full["first_session_cpu_s"] / half["first_session_cpu_s"]) / math.log(work_ratio), 2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="300 nodes and 300 jobs (under a minute)")
    ap.add_argument("--json", action="store_true", help="print one JSON object of the figures")
    ap.add_argument("--nodes", type=int, help="nodes (overrides --quick)")
    ap.add_argument("--jobs", type=int, help="jobs of 10 pods (overrides --quick)")
    ap.add_argument("--repeats", type=int, help="runs of each session, the best time counts (default 3, --quick 2)")
    ap.add_argument("--profile", action="store_true", help="cProfile the first session instead")
    ap.add_argument("--services", action="store_true",
                    help="also the services mix: a headless Service per job (system-default spreading)")
    args = ap.parse_args()
    global REPEATS
    REPEATS = args.repeats or (2 if args.quick else 3)
    nodes = args.nodes or (300 if args.quick else 1000)
    jobs = args.jobs or (300 if args.quick else 1000)
    if args.profile:
        profile(nodes, jobs)
        return
    full = measure(nodes, jobs, steady=True)
    half = measure(nodes // 2, jobs // 2, steady=False)
    mixed = measure(nodes, jobs, steady=True, mix="constrained")
    mixed_half = measure(nodes // 2, jobs // 2, steady=False, mix="constrained")
    figures = {
        **full,
        "ratio": round(full["pods_per_s"] / FLOOR_PODS_PER_S, 3),
        "floor_pods_per_s": FLOOR_PODS_PER_S,
        "target_ratio": 1.0,
        "half": half,
        "scaling_exponent": exponent(full, half),
        "constrained": {
            **mixed,
            "ratio": round(mixed["pods_per_s"] / FLOOR_PODS_PER_S, 3),
            "half": mixed_half,
            "scaling_exponent": exponent(mixed, mixed_half),
        },
        "repeats": REPEATS,
    }
    if args.services:
        svc = measure(nodes, jobs, steady=False, mix="services")
        svc_half = measure(nodes // 2, jobs // 2, steady=False, mix="services")
        figures["services"] = {**svc, "ratio": round(svc["pods_per_s"] / FLOOR_PODS_PER_S, 3), "half": svc_half,
                               "scaling_exponent": exponent(svc, svc_half)}
    if args.json:
        print(json.dumps(figures))
        return
    f = figures
    print(f"snapshot: {nodes} nodes, {jobs} jobs of 10 pods in {len(QUEUES)} queues (weights "
          f"{', '.join(map(str, QUEUES.values()))}); folded in {f['fold_s']:.2f} s")
    print(f"first session     {f['first_session_s']:>8.3f} s   {f['first_session_binds']:>6} binds   "
          f"{f['pods_per_s']:>9,.0f} pods/s   ratio {f['ratio']:.3f} (floor 1,000 pods/s, target >= 1); "
          f"CPU {f['first_session_cpu_s']:.3f} s")
    print(f"steady session    {f['session_s']:>8.3f} s   {f['steady_binds']:>6} binds   "
          f"{f['steady_pending_podgroups']} PodGroups still not running")
    print(f"  ({f['steady_podgroups_with_fit_errors']} of them tried against the nodes; the others wait "
          "for their queue's deserved share)")
    print(f"predicate error cache off: first session {f['first_session_error_cache_off_s']:.3f} s, "
          f"steady session {f['steady_error_cache_off_s']:.3f} s (on: {f['first_session_s']:.3f} s, "
          f"{f['session_s']:.3f} s)")
    print(f"predicates uncached (filters and scores per task and node): first session "
          f"{f['first_session_uncached_s']:.3f} s ({f['pods_per_s_uncached']:,.0f} pods/s), steady session "
          f"{f['steady_uncached_s']:.3f} s")
    print(f"half size         {half['first_session_s']:>8.3f} s   ({half['nodes']} nodes, {half['jobs']} jobs; "
          f"CPU {half['first_session_cpu_s']:.3f} s)   "
          f"scaling exponent in nodes x pending tasks: {f['scaling_exponent']} (1 = linear)")
    c = f["constrained"]
    print("constrained mix (a third of the jobs: hostname anti-affinity or a zone spread constraint):")
    print(f"  first session   {c['first_session_s']:>8.3f} s   {c['first_session_binds']:>6} binds   "
          f"{c['pods_per_s']:>9,.0f} pods/s   ratio {c['ratio']:.3f}; CPU {c['first_session_cpu_s']:.3f} s")
    print(f"  steady session  {c['session_s']:>8.3f} s   {c['steady_binds']:>6} binds   "
          f"{c['steady_pending_podgroups']} PodGroups still not running")
    print(f"  half size       {c['half']['first_session_s']:>8.3f} s   scaling exponent {c['scaling_exponent']}")
    if args.services:
        v = f["services"]
        print("services mix (a headless Service per job: every pod default-spread):")
        print(f"  first session   {v['first_session_s']:>8.3f} s   {v['first_session_binds']:>6} binds   "
              f"{v['pods_per_s']:>9,.0f} pods/s   ratio {v['ratio']:.3f}; CPU {v['first_session_cpu_s']:.3f} s")
        print(f"  half size       {v['half']['first_session_s']:>8.3f} s   scaling exponent {v['scaling_exponent']}")


if __name__ == "__main__":
    main()
