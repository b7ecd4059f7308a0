"""The bus against its floors, in one run against one nats-server (JetStream, fsync always).

    .venv/bin/python benchmarks/bus.py            # 100 jobs (~13k records, ~50 MB), 3 rounds
    .venv/bin/python benchmarks/bus.py --quick    # 30 jobs (~4k records), under a minute
    .venv/bin/python benchmarks/bus.py --json     # one JSON object; headline ratio under "ratio"
    .venv/bin/python benchmarks/bus.py --sync 2m  # NATS' default durability instead of fsync always

Figures, each against a floor measured in the same run on the same server:

- publish: `vcbus publish`'s path (read the log, decode and check each record,
  strip managedFields, dedup ids and headers, pipelined publish with every ack
  checked) vs raw nats-py `publish_async` of the same bodies with the same
  Nats-Msg-Id (the floor), into streams of the same configuration. Rounds
  alternate raw and vcbus and the medians are compared (fsync makes single
  runs noisy). Target ratio >= 0.7 (the headline `ratio`).
- decide: records/s through the decider end to end (fetch, engine, publish
  every output, wait for their acks, ack the record).
- latency: a new vcjob published into VCBUS_K8S until its first command
  arrives on vcbus.cmd.> (the decider in its own process, idle and waiting),
  p50/p99, vs a raw core NATS request/reply round trip (target p99 <= 3x the
  raw RTT) and vs a raw JetStream publish round trip (a stored, acknowledged
  write: the first thing the event itself has to go through). Also the raw
  JetStream *hop* (publish until a push consumer has the message): the
  event-to-command path is two hops plus the decider, so twice the hop is its
  physical floor; with fsync on every write that floor alone is about 4-5x the
  raw RTT on a 2-core machine, above the 3x target.
- rebuild: `vcbus projections rebuild` (read VCBUS_JOBS, fold, write the KV
  views) events/s vs a raw nats-py ordered consumer reading the same stream.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import pathlib
import statistics
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
OUT = ROOT / "benchmarks" / "out"

import msgspec  # noqa: E402

from vcbus.bus import subjects as s  # noqa: E402
from vcbus.bus.connecting import Bus, open_bus  # noqa: E402
from vcbus.bus.decider import Decider  # noqa: E402
from vcbus.bus.projector import rebuild  # noqa: E402
from vcbus.bus.publisher import check_log, prepare, publish_records  # noqa: E402
from vcbus.bus.server import EmbeddedServer  # noqa: E402
from vcbus.bus.streams import stream_config  # noqa: E402
from vcbus.settings import BusSettings  # noqa: E402
from statemachines.records import decode  # noqa: E402

FROZEN = "1970-01-01T00:00:00Z"


def log_file(jobs: int) -> pathlib.Path:
    from benchmarks.replay import generate

    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"bus-{jobs}.jsonl"
    if not path.exists():
        generate(path, jobs, wave=10)
    return path


async def wipe(bus: Bus) -> None:
    for name in (s.K8S_STREAM, s.JOBS_STREAM, s.CMDS_STREAM, f"KV_{s.STATUS_BUCKET}", f"KV_{s.HISTORY_BUCKET}",
                 "BENCH_RAW"):
        try:
            await bus.js.delete_stream(name)
        except Exception:
            pass
    from vcbus.bus.streams import ensure_streams

    await ensure_streams(bus.js, bus.settings)


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


# ------------------------------------------------------------------ publish


async def raw_stream(bus: Bus) -> None:
    """A fresh stream configured as VCBUS_K8S (file, S2, same duplicate window) on bench.raw.>."""
    cfg = stream_config(s.K8S_STREAM, bus.settings)
    cfg.name, cfg.subjects, cfg.description = "BENCH_RAW", ["bench.raw.>"], "benchmark floor"
    try:
        await bus.js.delete_stream("BENCH_RAW")
    except Exception:
        pass
    await bus.js.add_stream(cfg)


async def raw_publish(bus: Bus, msgs: list[tuple[bytes, str]]) -> float:
    await raw_stream(bus)
    js = bus.js
    t0 = time.perf_counter()
    futs = []
    for body, msg_id in msgs:
        futs.append(await js.publish_async("bench.raw.x", body, headers={"Nats-Msg-Id": msg_id}))
        if len(futs) >= 256:
            await asyncio.gather(*futs)
            futs = []
    await asyncio.gather(*futs)
    return time.perf_counter() - t0


async def vcbus_publish(bus: Bus, path: pathlib.Path, *, check: bool) -> float:
    await wipe(bus)
    t0 = time.perf_counter()
    with open(path, "rb") as fh:
        if check:
            check_log(fh, str(path))
            fh.seek(0)
        pub = await publish_records(bus.js, fh, str(path))
    seconds = time.perf_counter() - t0
    assert pub.duplicates == 0, "fresh stream expected"
    return seconds


# ------------------------------------------------------------------ latency


def new_jobs(n: int) -> list[bytes]:
    """`n` distinct vcjob ADDED records (each makes the decider emit commands at once)."""
    base = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"namespace": "bench", "creationTimestamp": "2026-11-30T09:00:00Z"},
        "spec": {
            "minAvailable": 1,
            "queue": "default",
            "schedulerName": "volcano",
            "tasks": [{"name": "w", "replicas": 1, "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}],
        },
    }
    out = []
    for i in range(n):
        job = copy.deepcopy(base)
        job["metadata"].update({"name": f"lat-{i:05d}", "uid": f"lat-uid-{i}", "resourceVersion": str(10 + i)})
        out.append(msgspec.json.encode({"type": "ADDED", "object": job}))
    return out


async def latency(bus: Bus, samples: int) -> dict:
    nc = bus.nc
    # raw request/reply round trip over the same connection
    async def echo(msg):  # noqa: ANN001
        await msg.respond(msg.data)

    sub = await nc.subscribe("bench.echo", cb=echo)
    for _ in range(50):
        await nc.request("bench.echo", b"x", timeout=2)
    rtts = []
    for _ in range(max(samples, 200)):
        t0 = time.perf_counter()
        await nc.request("bench.echo", b"x" * 64, timeout=2)
        rtts.append(time.perf_counter() - t0)
    await sub.unsubscribe()
    # raw JetStream publish round trip (stored and acknowledged)
    await raw_stream(bus)
    js_rtts = []
    for i in range(max(samples, 200)):
        t0 = time.perf_counter()
        await bus.js.publish("bench.raw.rtt", b"x" * 64)
        js_rtts.append(time.perf_counter() - t0)

    # raw JetStream hop: publish into the stream until a push consumer's callback has it.
    # The event-to-command path is two such hops (the record, then the command) plus the decider.
    hop: list[float] = []
    got = asyncio.Event()

    async def on_hop(msg):  # noqa: ANN001
        hop.append(time.perf_counter() - float(msg.data))
        got.set()

    hsub = await bus.js.subscribe("bench.raw.hop", cb=on_hop, stream="BENCH_RAW", ordered_consumer=True)
    for _ in range(max(samples, 200) + 20):
        got.clear()
        await bus.js.publish("bench.raw.hop", str(time.perf_counter()).encode())
        await asyncio.wait_for(got.wait(), 5)
        await asyncio.sleep(0.002)
    await hsub.unsubscribe()
    hop = hop[20:]

    # event to command: the decider running live and idle, in its own process (as deployed)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "vcbus.cli.main", "up", "--nats", bus.url, "--service", "decider",
        cwd=ROOT, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stderr is not None
    while b"deciding from seq" not in await asyncio.wait_for(proc.stderr.readline(), 30):
        pass
    arrived: dict[str, float] = {}
    waiters: dict[str, asyncio.Event] = {}

    async def on_cmd(msg):  # noqa: ANN001
        job = (msg.headers or {}).get("ce-subject", "")
        if job not in arrived:
            arrived[job] = time.perf_counter()
            ev = waiters.get(job)
            if ev is not None:
                ev.set()

    csub = await nc.subscribe(f"{s.CMDS_PREFIX}.bench.>", cb=on_cmd)
    lat = []
    records = new_jobs(samples + 20)
    try:
        for i, body in enumerate(records):
            msg = prepare(body, decode(body))
            assert msg is not None
            job = msg.headers["Vcbus-Job"]
            waiters[job] = ev = asyncio.Event()
            t0 = time.perf_counter()
            await bus.js.publish(msg.subject, msg.body, headers=dict(msg.headers))
            await asyncio.wait_for(ev.wait(), 10)
            if i >= 20:  # warm-up
                lat.append(arrived[job] - t0)
            await asyncio.sleep(0.002)
    finally:
        await csub.unsubscribe()
        proc.terminate()
        await proc.wait()
    return {
        "samples": len(lat),
        "event_to_command_p50_ms": round(statistics.median(lat) * 1e3, 3),
        "event_to_command_p99_ms": round(pct(lat, 99) * 1e3, 3),
        "raw_rtt_p50_ms": round(statistics.median(rtts) * 1e3, 3),
        "raw_rtt_p99_ms": round(pct(rtts, 99) * 1e3, 3),
        "raw_js_publish_rtt_p50_ms": round(statistics.median(js_rtts) * 1e3, 3),
        "raw_js_publish_rtt_p99_ms": round(pct(js_rtts, 99) * 1e3, 3),
        "raw_js_hop_p50_ms": round(statistics.median(hop) * 1e3, 3),
        "raw_js_hop_p99_ms": round(pct(hop, 99) * 1e3, 3),
    }


# ------------------------------------------------------------------ rebuild


async def raw_ordered_read(bus: Bus, stream: str) -> tuple[int, float]:
    info = await bus.js.stream_info(stream)
    total = info.state.messages
    t0 = time.perf_counter()
    sub = await bus.js.subscribe(f"{s.JOBS_PREFIX}.>", stream=stream, ordered_consumer=True)
    n = 0
    while n < total:
        await sub.next_msg(timeout=5)
        n += 1
    seconds = time.perf_counter() - t0
    await sub.unsubscribe()
    return n, seconds


# ------------------------------------------------------------------ main


async def run(args: argparse.Namespace) -> dict:
    jobs = args.jobs or (30 if args.quick else 100)
    rounds = args.rounds or (2 if args.quick else 3)
    path = log_file(jobs)
    lines = [line.strip() for line in open(path, "rb") if line.strip()]
    prepared = [prepare(line, decode(line)) for line in lines]
    msgs = [(p.body, p.headers["Nats-Msg-Id"]) for p in prepared if p is not None]
    size = sum(len(b) for b, _ in msgs)

    data_dir = pathlib.Path(tempfile.mkdtemp(prefix="vcbus-bench-"))
    server = EmbeddedServer(data_dir=data_dir, sync_interval=args.sync)
    url = server.start()
    figures: dict = {"jobs": jobs, "records": len(msgs), "mb": round(size / 2**20, 1), "sync_interval": args.sync}
    try:
        settings = BusSettings(nats_url=url)
        async with open_bus(settings) as bus:
            raw_t, pub_t, full_t = [], [], []
            for _ in range(rounds):
                raw_t.append(await raw_publish(bus, msgs))
                pub_t.append(await vcbus_publish(bus, path, check=False))
                full_t.append(await vcbus_publish(bus, path, check=True))
            raw_rate = len(msgs) / statistics.median(raw_t)
            pub_rate = len(msgs) / statistics.median(pub_t)
            full_rate = len(msgs) / statistics.median(full_t)
            figures["publish"] = {
                "raw_records_per_s": round(raw_rate),
                "vcbus_records_per_s": round(pub_rate),
                "vcbus_with_check_records_per_s": round(full_rate),
                "ratio": round(pub_rate / raw_rate, 3),
                "ratio_with_check": round(full_rate / raw_rate, 3),
                "rounds": rounds,
            }

            # decide: VCBUS_K8S holds the log from the last publish round
            t0 = time.perf_counter()
            decider = Decider(bus, clock=lambda: FROZEN)
            stats = await decider.run(until_idle=True)
            dt = time.perf_counter() - t0 - decider.idle  # the final idle poll is not work
            figures["decide"] = {
                "records": stats.decided,
                "outputs": stats.outputs,
                "records_per_s": round(stats.decided / dt),
                "outputs_per_s": round(stats.outputs / dt),
            }

            # rebuild vs a raw ordered consumer over VCBUS_JOBS
            n, raw_s = await raw_ordered_read(bus, s.JOBS_STREAM)
            t0 = time.perf_counter()
            views = await rebuild(bus)
            rb_s = time.perf_counter() - t0
            figures["rebuild"] = {
                "events": n,
                "raw_ordered_events_per_s": round(n / raw_s),
                "rebuild_events_per_s": round(views.position / rb_s),
                "ratio": round((views.position / rb_s) / (n / raw_s), 3),
                "jobs": len(views.jobs()),
            }

            figures["latency"] = await latency(bus, args.samples or (100 if args.quick else 300))
            lat = figures["latency"]
            lat["p99_vs_raw_rtt"] = round(lat["event_to_command_p99_ms"] / lat["raw_rtt_p99_ms"], 1)
            # the physical floor of a two-hop path through JetStream, in units of the raw RTT
            lat["two_js_hops_p99_vs_raw_rtt"] = round(2 * lat["raw_js_hop_p99_ms"] / lat["raw_rtt_p99_ms"], 1)
            lat["p99_vs_two_js_hops"] = round(lat["event_to_command_p99_ms"] / (2 * lat["raw_js_hop_p99_ms"]), 2)
    finally:
        server.stop()
    figures["ratio"] = figures["publish"]["ratio"]
    figures["targets"] = {"publish_ratio": 0.7, "latency_p99_vs_raw_rtt": 3.0}
    return figures


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="30 jobs, 2 rounds (under a minute)")
    ap.add_argument("--json", action="store_true", help="print one JSON object of the figures")
    ap.add_argument("--jobs", type=int, help="jobs in the synthetic log (overrides --quick)")
    ap.add_argument("--rounds", type=int, help="publish rounds (medians are compared)")
    ap.add_argument("--samples", type=int, help="latency samples")
    ap.add_argument("--sync", default="always", help="server sync_interval: always (vcbus' default) or e.g. 2m")
    args = ap.parse_args()
    figures = asyncio.run(run(args))
    if args.json:
        print(json.dumps(figures))
        return
    p, d, r, lat = figures["publish"], figures["decide"], figures["rebuild"], figures["latency"]
    print(f"log: {figures['jobs']} jobs, {figures['records']} records, {figures['mb']} MiB; "
          f"server sync_interval {figures['sync_interval']}")
    print(f"publish  raw nats-py publish_async    {p['raw_records_per_s']:>9,} records/s (floor)")
    print(f"         vcbus publish path           {p['vcbus_records_per_s']:>9,} records/s   ratio {p['ratio']:.3f} "
          "(target >= 0.7)")
    print(f"         ... with the check pass      {p['vcbus_with_check_records_per_s']:>9,} records/s   "
          f"ratio {p['ratio_with_check']:.3f}")
    print(f"decide   end to end                   {d['records_per_s']:>9,} records/s ({d['outputs_per_s']:,} outputs/s)")
    print(f"latency  event -> command             p50 {lat['event_to_command_p50_ms']:.2f} ms, "
          f"p99 {lat['event_to_command_p99_ms']:.2f} ms")
    print(f"         raw request/reply RTT        p50 {lat['raw_rtt_p50_ms']:.2f} ms, p99 {lat['raw_rtt_p99_ms']:.2f} ms"
          f"   p99 ratio {lat['p99_vs_raw_rtt']} (target <= 3)")
    print(f"         raw JetStream publish RTT    p50 {lat['raw_js_publish_rtt_p50_ms']:.2f} ms, "
          f"p99 {lat['raw_js_publish_rtt_p99_ms']:.2f} ms")
    print(f"         raw JetStream hop            p50 {lat['raw_js_hop_p50_ms']:.2f} ms, "
          f"p99 {lat['raw_js_hop_p99_ms']:.2f} ms (publish -> a consumer has it); two hops = "
          f"{lat['two_js_hops_p99_vs_raw_rtt']}x the raw RTT; event -> command = {lat['p99_vs_two_js_hops']}x two hops")
    print(f"rebuild  raw ordered consumer         {r['raw_ordered_events_per_s']:>9,} events/s (floor)")
    print(f"         vcbus projections rebuild    {r['rebuild_events_per_s']:>9,} events/s   ratio {r['ratio']:.3f}")


if __name__ == "__main__":
    main()
