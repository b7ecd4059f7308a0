"""Start-up time of the decider and the projector after a long log, with and without a snapshot.

    .venv/bin/python benchmarks/snapshots.py            # 100k records in VCBUS_K8S
    .venv/bin/python benchmarks/snapshots.py --quick    # 20k records
    .venv/bin/python benchmarks/snapshots.py --json     # one JSON object; headline under "snapshot_restart_s"

One nats-server (JetStream, fsync always, as `vcbus up`). The synthetic log of the replay
benchmark (jobs created, run, failed, restarted, completed, deleted in waves) is cut at `records`
records. All but the last `behind` (a tenth) are loaded into VCBUS_K8S, decided and projected, and
each service saves a snapshot on a clean stop; then the rest is loaded, decided and projected
with snapshots off. Then, per service, `rounds` times each (medians reported), the seconds from
constructing the service until it is ready for the next record:

- with the older snapshot: restore it, fold the `behind` records after it
  (`restart_snapshot_behind_s`: a restart with the default cadence is at most this far behind
  when `behind` is `VCBUS_SNAPSHOT_EVERY`);
- without a snapshot: refold the whole stream (`restart_full_s`);
- with a snapshot at the end (saved by one clean stop): restore it, fold nothing
  (`restart_snapshot_s`; `bytes` is its size).

`snapshot_restart_s` is the slower of the two services' `restart_snapshot_s` (target: under
1 s at 100k records), `ratio` that over the slower `restart_full_s`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import pathlib
import statistics
import sys
import tempfile
import time
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
OUT = ROOT / "benchmarks" / "out"

from vcbus.bus import statesnap  # noqa: E402
from vcbus.bus import subjects as s  # noqa: E402
from vcbus.bus.connecting import Bus, open_bus  # noqa: E402
from vcbus.bus.decider import Decider  # noqa: E402
from vcbus.bus.projector import SNAPSHOT_OWNER, Projector  # noqa: E402
from vcbus.bus.server import EmbeddedServer  # noqa: E402
from vcbus.settings import BusSettings  # noqa: E402

FROZEN = "1970-01-01T00:00:00Z"
RECORDS_PER_JOB = 125  # about, in the generated log


def cut_log(records: int) -> pathlib.Path:
    """The generated log's first `records` records (generated once into benchmarks/out)."""
    from benchmarks.replay import generate

    OUT.mkdir(parents=True, exist_ok=True)
    jobs = records // RECORDS_PER_JOB + 10
    full = OUT / f"bus-{jobs}.jsonl"
    if not full.exists():
        generate(full, jobs, wave=10)
    lines = [line for line in full.read_bytes().splitlines(keepends=True) if line.strip()]
    if len(lines) < records:
        raise SystemExit(f"benchmarks/snapshots.py: {full} has {len(lines)} records, fewer than {records}")
    path = OUT / f"snapshots-{records}.jsonl"
    if not path.exists():
        path.write_bytes(b"".join(lines[:records]))
    return path


async def restart(bus: Bus, make) -> tuple[float, object]:  # noqa: ANN001
    """Seconds from constructing a service to it being ready for the next record; then a clean stop."""
    t0 = time.perf_counter()
    service = make(bus)
    stop = asyncio.Event()
    task = asyncio.create_task(service.run(stop=stop))
    ready = asyncio.create_task(service.ready.wait())
    done, _ = await asyncio.wait({task, ready}, return_when=asyncio.FIRST_COMPLETED)
    elapsed = time.perf_counter() - t0
    if task in done:
        task.result()  # raises what stopped it
    stop.set()
    await task
    return elapsed, service


def decider(every: int):  # noqa: ANN201
    def make(bus: Bus) -> Decider:
        d = Decider(bus, clock=lambda: FROZEN)
        d.rebuilder.snapshot_every = every  # the decider's snapshots are its Rebuilder part's
        return d

    return make


def projector(every: int):  # noqa: ANN201
    def make(bus: Bus) -> Projector:
        p = Projector(bus)
        p.snapshot_every = every
        p.snapshots = None
        if every:
            p.snapshots = statesnap.Store(bus.js, owner=SNAPSHOT_OWNER, stream=s.JOBS_STREAM, config=p._snapshot_config())
        return p

    return make


SERVICES = (("decider", decider), ("projector", projector))


def restored_seq(name: str, service) -> int:  # noqa: ANN001
    return service.stats.restored if name == "decider" else service.restored


def snapshot_store(name: str, service):  # noqa: ANN001, ANN201
    """The service's snapshot store: the decider keeps it in its Rebuilder part, the projector on itself."""
    return service.rebuilder.snapshots if name == "decider" else service.snapshots


async def build(bus: Bus, path: pathlib.Path) -> tuple[int, int]:
    """Load `path` into VCBUS_K8S, decide and project everything (snapshots off): outputs, events."""
    from benchmarks.bus import load_log

    await load_log(bus, path, 1)
    stats = await decider(0)(bus).run(until_idle=True)
    proj = projector(0)(bus)
    await proj.run(until_idle=True)
    return stats.outputs, proj.views.position


async def measure(bus: Bus, name: str, make, rounds: int) -> dict:  # noqa: ANN001
    obs = await bus.js.object_store(statesnap.BUCKET)
    behind = []
    for _ in range(rounds):  # restore the older snapshot and fold the records after it
        seconds, service = await restart(bus, make(10**12))
        if not restored_seq(name, service):
            raise SystemExit(f"benchmarks/snapshots.py: the {name} did not restore its older snapshot")
        behind.append(seconds)
        newest = (await snapshot_store(name, service).names())[0]
        if newest[0] > restored_seq(name, service):
            await obs.delete(newest[1])  # the clean stop's: the older one stays the newest
    full = [(await restart(bus, make(0)))[0] for _ in range(rounds)]
    await restart(bus, make(10**12))  # restores the older one and saves at the end on its clean stop
    with_snap = []
    for _ in range(rounds):
        seconds, service = await restart(bus, make(10**12))
        if restored_seq(name, service) != snapshot_store(name, service).saved_seq:
            raise SystemExit(f"benchmarks/snapshots.py: the {name} did not restore its newest snapshot")
        with_snap.append(seconds)
    names = await snapshot_store(name, service).names()
    info = await obs.get_info(names[0][1])
    return {
        "restart_full_s": round(statistics.median(full), 3),
        "restart_snapshot_s": round(statistics.median(with_snap), 3),
        "restart_snapshot_behind_s": round(statistics.median(behind), 3),
        "ratio": round(statistics.median(with_snap) / statistics.median(full), 4),
        "covers_seq": names[0][0],
        "bytes": int(info.size or 0),
    }


async def run(args: argparse.Namespace) -> dict:
    from benchmarks.bus import wipe

    records = args.records or (20_000 if args.quick else 100_000)
    behind = args.behind if args.behind is not None else records // 10
    rounds = args.rounds or (2 if args.quick else 3)
    lines = cut_log(records).read_bytes().splitlines(keepends=True)
    early, late = OUT / f"snapshots-{records}-early.jsonl", OUT / f"snapshots-{records}-late.jsonl"
    early.write_bytes(b"".join(lines[: records - behind]))
    late.write_bytes(b"".join(lines[records - behind :]))
    data_dir = pathlib.Path(tempfile.mkdtemp(prefix="vcbus-bench-snap-"))
    servers = getattr(args, "servers", 1) or 1
    if servers == 1:
        server: Any = EmbeddedServer(data_dir=data_dir, sync_interval=args.sync)
    else:
        from vcbus.bus.cluster import EmbeddedCluster

        server = EmbeddedCluster(data_dir=data_dir, size=servers, sync_interval=args.sync)
    url = server.start()
    figures: dict = {"records": records, "behind": behind, "sync_interval": args.sync, "rounds": rounds,
                     "servers": servers}
    try:
        async with open_bus(BusSettings(nats_url=url, snapshot_every=0, replicas=min(3, servers))) as bus:
            await wipe(bus)
            await statesnap.delete_all(bus.js)
            await build(bus, early)
            for _, make in SERVICES:  # each saves a snapshot `behind` records before the end
                await restart(bus, make(10**12))
            figures["outputs"], figures["events"] = await build(bus, late)
            for name, make in SERVICES:
                figures[name] = await measure(bus, name, make, rounds)
    finally:
        server.stop()
    d, p = figures["decider"], figures["projector"]
    figures["snapshot_restart_s"] = max(d["restart_snapshot_s"], p["restart_snapshot_s"])
    figures["ratio"] = round(figures["snapshot_restart_s"] / max(d["restart_full_s"], p["restart_full_s"]), 4)
    return figures


async def snapshot_restart_s(*, quick: bool, sync: str = "always", servers: int = 1) -> float:
    """The headline alone (benchmarks/bus.py's `snapshot_restart_s`): 20k records with `quick`, else 100k,
    on one server or a JetStream cluster of `servers` (streams and the object store at replicas 3)."""
    args = argparse.Namespace(records=None, behind=None, rounds=None, quick=quick, sync=sync, servers=servers)
    return (await run(args))["snapshot_restart_s"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="20k records, 2 rounds")
    ap.add_argument("--json", action="store_true", help="print one JSON object of the figures")
    ap.add_argument("--records", type=int, help="records in VCBUS_K8S (overrides --quick)")
    ap.add_argument("--behind", type=int, help="records after the older snapshot (default: a tenth of them)")
    ap.add_argument("--rounds", type=int, help="restarts of each kind (medians are reported)")
    ap.add_argument("--sync", default="always", help="server sync_interval: always (vcbus' default) or e.g. 2m")
    ap.add_argument("--servers", type=int, default=1, metavar="N",
                    help="nats-server processes: 1, or a JetStream cluster of N (replicas 3)")
    args = ap.parse_args()
    figures = asyncio.run(run(args))
    if args.json:
        print(json.dumps(figures))
        return
    print(f"log: {figures['records']} records, {figures['events']} events; server sync_interval {figures['sync_interval']}")
    for name in ("decider", "projector"):
        f = figures[name]
        print(f"{name:<9} restart without a snapshot {f['restart_full_s']:>7.3f} s; with one at the end "
              f"{f['restart_snapshot_s']:.3f} s (ratio {f['ratio']}; {f['bytes']:,} bytes); with one "
              f"{figures['behind']:,} records behind {f['restart_snapshot_behind_s']:.3f} s")
    print(f"snapshot_restart_s {figures['snapshot_restart_s']} (target < 1 s at 100k records); ratio {figures['ratio']}")


if __name__ == "__main__":
    main()
