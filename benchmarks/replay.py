"""Replay throughput against two floors: decoding the same file into dicts, and into the engine's types.

    .venv/bin/python benchmarks/replay.py            # 10,000 jobs of 1 master + 8 workers
    .venv/bin/python benchmarks/replay.py --quick    # 600 jobs, well under a minute
    .venv/bin/python benchmarks/replay.py --json     # one JSON object; headline ratio under "ratio"

The synthetic log is made once (cached in benchmarks/out/) by the simulated
cluster: jobs arrive in waves of 50 running side by side; realistic pod objects
of a few KB (env, resources, mounts, tolerations, full status); about a third of
the jobs see a worker fail and restart as a whole, some twice; finished jobs are
deleted, as a TTL would. Each measurement runs in a fresh subprocess so that its
peak RSS is its own, and every one is taken `--rounds` times (3 by default), the
rounds interleaved (floor, typed floor, replay, engine, then again), the best time
of each counting: on a shared machine one run of the same work varies by 10% and
more, and the best of a few is what the code costs:

- typed floor: `statemachines.model.records.decode` of every record, i.e. msgspec
  decoding each whole record into the engine's full typed views
  (`statemachines.model.objects`: every field the controller may read, of every
  record). It is a floor to measure against, not a lower bound: replay reads
  less than that (`statemachines.model.replay_decode.decode_replay`: a vcjob
  record's spec, when its bytes equal the spec of the job's last record, is cut
  out before decoding and the spec decoded then reused), so replay may even be
  faster than this floor on the decoding side;
- dict floor: `msgspec.json.decode` of every record into dicts and lists
  (slower than the typed decode: it builds every field, the typed decoder
  skips what the structs do not declare);
- replay: `vcbus.replaying.replay_stream` (read, decode, engine, status and
  history projections), i.e. `vcbus replay --json` minus printing;
- engine: the same with the history projection off (what the decider needs).

Every run reads the file the same way, through a 1 MiB buffer as `vcbus replay
FILE` does (`vcbus.watchlog.READ_BUFFER`), so the floors and the replay pay the
same for I/O; the file is read once before them, so that none of them reads it
from disk (a floor measured on a cold page cache looked half as fast).

`ratio` is replay rate / typed-floor rate, each at its best round (target >= 0.5;
`ratio_vs_dict` the same against the dict floor, for comparison with older figures;
`ratio_per_round` each round's replay over the typed floor of the same round, which
shows how much the machine moves it) and the absolute rate (target >= 100k
events/s). Memory: peak RSS of each run, and of a replay of the first half of
the same log with the history projection off (jobs are deleted as they finish,
so both halves hold the same live objects) — equal peaks mean the engine's
memory follows live objects, not the length of the log. The history projection
keeps every decision, so it grows with the log.
"""

from __future__ import annotations

import argparse
import copy
import json
import pathlib
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
OUT = ROOT / "benchmarks" / "out"
BUFFER = 1 << 20  # the same as vcbus.watchlog.READ_BUFFER (not imported: the floors import no vcbus code)

CONTAINER = {
    "name": "main",
    "image": "registry.example.com/ml/trainer:2026.11.3",
    "imagePullPolicy": "IfNotPresent",
    "command": ["python", "-m", "torch.distributed.run", "--nnodes=9", "train.py"],
    "args": ["--epochs=90", "--batch-size=256", "--lr=0.1", "--data=/data/imagenet"],
    "env": [{"name": f"TRAIN_OPT_{i}", "value": f"value-{i}-" + "x" * 24} for i in range(12)],
    "resources": {
        "requests": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "1"},
        "limits": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "1"},
    },
    "volumeMounts": [
        {"name": "data", "mountPath": "/data", "readOnly": True},
        {"name": "dshm", "mountPath": "/dev/shm"},
        {"name": "ckpt", "mountPath": "/checkpoints"},
    ],
    "ports": [{"containerPort": 23456, "name": "dist", "protocol": "TCP"}],
}
TEMPLATE = {
    "metadata": {"labels": {"app": "resnet", "team": "vision"}, "annotations": {"owner": "ml-platform"}},
    "spec": {
        "containers": [CONTAINER],
        "volumes": [
            {"name": "data", "persistentVolumeClaim": {"claimName": "imagenet"}},
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "8Gi"}},
            {"name": "ckpt", "persistentVolumeClaim": {"claimName": "checkpoints"}},
        ],
        "tolerations": [
            {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
        ],
        "nodeSelector": {"accelerator": "a100"},
        "restartPolicy": "OnFailure",
    },
}


def job_manifest(i: int) -> dict:
    return {
        "metadata": {"name": f"train-{i:05d}", "labels": {"team": "vision"}},
        "spec": {
            "minAvailable": 9,
            "policies": [{"events": ["PodEvicted", "PodFailed"], "action": "RestartJob"}],
            "plugins": {"pytorch": ["--master=master", "--worker=worker", "--port=23456"]},
            "tasks": [
                {
                    "name": "master",
                    "replicas": 1,
                    "policies": [{"event": "TaskCompleted", "action": "CompleteJob"}],
                    "template": copy.deepcopy(TEMPLATE),
                },
                {"name": "worker", "replicas": 8, "template": copy.deepcopy(TEMPLATE)},
            ],
        },
    }


def generate(path: pathlib.Path, jobs: int, *, wave: int = 50) -> None:
    from tools.simulate import SimCluster

    tmp = path.with_suffix(".tmp")
    with open(tmp, "wb") as fh:
        c = SimCluster(write=fh.write)
        c.add_queue("default")
        c.settle()
        ns = "default"
        for start in range(0, jobs, wave):
            names = []
            for i in range(start, min(jobs, start + wave)):
                c.create_job(job_manifest(i))
                names.append(f"train-{i:05d}")
                c.tick()
            c.settle()
            failures = {n: (1 if k % 3 == 0 else 0) + (1 if k % 11 == 0 else 0) for k, n in enumerate(names)}
            for attempt in range(3):
                for n in names:
                    if attempt and failures[n] < attempt:
                        continue
                    c.schedule(ns, n)
                c.settle()
                for n in names:
                    for p in c.pods_of(ns, n):
                        if p["status"]["phase"] == "Pending" and "deletionTimestamp" not in p["metadata"]:
                            c.run(p)
                c.settle()
                c.tick(60)
                retry = [n for n in names if failures[n] > attempt]
                for n in retry:
                    c.fail(c.get("Pod", ns, f"{n}-worker-3"), 1)
                c.settle()
                if not retry:
                    break
            c.tick(600)
            for n in names:
                c.succeed(c.get("Pod", ns, f"{n}-master-0"))
            c.settle()
            c.tick(60)
            for n in names:  # ttlSecondsAfterFinished: the job and its remaining pods go
                for p in c.pods_of(ns, n):
                    c._put("DELETED", "Pod", p)
                c.delete_job(ns, n)
            c.settle()
    tmp.rename(path)


# ------------------------------------------------------------------ measured runs (in subprocesses)


def run_floor(path: str) -> dict:
    import msgspec

    dec = msgspec.json.Decoder()
    n = 0
    t0 = time.perf_counter()
    with open(path, "rb", buffering=BUFFER) as fh:
        for line in fh:
            dec.decode(line)
            n += 1
    return {"events": n, "seconds": time.perf_counter() - t0}


def run_typed_floor(path: str) -> dict:
    """Decode every record into the engine's typed structs (what `replay_stream` decodes into)."""
    from statemachines.model.records import decode

    n = 0
    t0 = time.perf_counter()
    with open(path, "rb", buffering=BUFFER) as fh:
        for line in fh:
            decode(line)
            n += 1
    return {"events": n, "seconds": time.perf_counter() - t0}


def run_replay(path: str, history: bool, limit: int | None = None) -> dict:
    import itertools

    from vcbus.replaying import replay_stream

    t0 = time.perf_counter()
    with open(path, "rb", buffering=BUFFER) as fh:
        source = itertools.islice(fh, limit) if limit else fh
        result = replay_stream(source, path, keep_commands=history, keep_history=history)
    seconds = time.perf_counter() - t0
    phases: dict[str, int] = {}
    for key in result.statuses.jobs():
        st = result.statuses.status(key) or {}
        ph = st.get("state", {}).get("phase", "")
        phases[ph] = phases.get(ph, 0) + 1
    return {"events": result.counts.events, "seconds": seconds, "phases": phases}


def _child(args: list[str]) -> dict:
    code = (
        f"import json,resource,sys;sys.path.insert(0,{str(ROOT)!r});"
        "from benchmarks.replay import run_floor,run_replay,run_typed_floor;"
    )
    mode, path, *rest = args
    limit = int(rest[0]) if rest else None
    if mode == "floor":
        code += f"r=run_floor({path!r})"
    elif mode == "typed":
        code += f"r=run_typed_floor({path!r})"
    else:
        code += f"r=run_replay({path!r}, {mode == 'replay'}, {limit!r})"
    code += ";r['peak_rss_mb']=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss/1024;print(json.dumps(r))"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, cwd=ROOT)
    return json.loads(out.stdout.strip().splitlines()[-1])


def options(doc: str) -> tuple[argparse.Namespace, int, pathlib.Path]:
    """The command line of a benchmark of this log (`--quick`, `--json`, `--jobs`, `--rounds`), its number
    of jobs and the log's path (benchmarks/replay_text.py reads the same log)."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="600 jobs instead of 10,000 (under a minute)")
    ap.add_argument("--json", action="store_true", help="print one JSON object of the figures")
    ap.add_argument("--jobs", type=int, help="number of jobs (overrides --quick)")
    ap.add_argument("--rounds", type=int, default=3, help="measure each this many times, interleaved; the best counts")
    args = ap.parse_args()
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")
    jobs = args.jobs or (600 if args.quick else 10_000)
    OUT.mkdir(parents=True, exist_ok=True)
    return args, jobs, OUT / f"replay-{jobs}.jsonl"


def main() -> None:
    args, jobs, path = options(__doc__ or "")
    t0 = time.perf_counter()
    if not path.exists():
        generate(path, jobs)
    gen_s = time.perf_counter() - t0
    size = path.stat().st_size
    with open(path, "rb") as fh:  # into the page cache first: no run pays for reading it from disk
        while fh.read(BUFFER):
            pass

    runs: dict[str, list[dict]] = {"floor": [], "typed": [], "replay": [], "engine": []}
    for _ in range(args.rounds):
        for mode, results in runs.items():
            results.append(_child([mode, str(path)]))
    floor, typed, replay, engine = (min(runs[m], key=lambda r: r["seconds"]) for m in runs)
    # each round's replay over the typed floor of the same round: how far the machine moves the ratio
    per_round = [
        round((r["events"] / r["seconds"]) / (t["events"] / t["seconds"]), 3)
        for t, r in zip(runs["typed"], runs["replay"], strict=True)
    ]
    events = floor["events"]
    half = _child(["engine", str(path), str(events // 2)])
    floor_rate = events / floor["seconds"]
    typed_rate = typed["events"] / typed["seconds"]
    replay_rate = replay["events"] / replay["seconds"]
    engine_rate = engine["events"] / engine["seconds"]
    figures = {
        "jobs": jobs,
        "events": events,
        "file_mb": round(size / 2**20, 1),
        "avg_record_bytes": round(size / events),
        "generate_seconds": round(gen_s, 1),
        "rounds": args.rounds,
        "floor_typed_events_per_s": round(typed_rate),
        "floor_dict_events_per_s": round(floor_rate),
        "replay_events_per_s": round(replay_rate),
        "engine_only_events_per_s": round(engine_rate),
        "ratio": round(replay_rate / typed_rate, 3),
        "engine_ratio": round(engine_rate / typed_rate, 3),
        "ratio_vs_dict": round(replay_rate / floor_rate, 3),
        "ratio_per_round": per_round,
        "target_ratio": 0.5,
        "target_events_per_s": 100_000,
        "peak_rss_mb": {
            "floor": round(floor["peak_rss_mb"], 1),
            "floor_typed": round(typed["peak_rss_mb"], 1),
            "replay": round(replay["peak_rss_mb"], 1),
            "engine_only": round(engine["peak_rss_mb"], 1),
            "engine_only_first_half": round(half["peak_rss_mb"], 1),
        },
        "final_phases": replay["phases"],
    }
    if args.json:
        print(json.dumps(figures))
        return
    print(f"log: {jobs} jobs, {events} records, {figures['file_mb']} MiB ({figures['avg_record_bytes']} B/record); "
          f"best of {args.rounds} round(s) each")
    print(f"floor   typed decode        {typed_rate:>12,.0f} events/s   (statemachines.model.records.decode)")
    print(f"floor   dict decode         {floor_rate:>12,.0f} events/s   (msgspec.json.decode, untyped)")
    print(
        f"replay  vcbus replay        {replay_rate:>12,.0f} events/s   ratio {figures['ratio']:.3f} "
        f"of the typed floor (target >= 0.5; {figures['ratio_vs_dict']:.3f} of the dict floor)"
    )
    print(f"        each round's replay over its typed floor: {' '.join(f'{r:.3f}' for r in per_round)}")
    print(f"engine  no history          {engine_rate:>12,.0f} events/s   ratio {figures['engine_ratio']:.3f}")
    rss = figures["peak_rss_mb"]
    print(
        f"peak RSS MiB: floor {rss['floor']}, replay {rss['replay']}, engine only {rss['engine_only']} "
        f"(first half of the log: {rss['engine_only_first_half']})"
    )
    print(f"final phases: {replay['phases']}")


if __name__ == "__main__":
    main()
