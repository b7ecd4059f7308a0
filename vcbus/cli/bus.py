"""`vcbus bus partitions|repartition`: how VCBUS_K8S is partitioned among deciders, and changing it.

`partitions` lists each partition's decider consumer (with N > 1 also the
queue role's, partition `queues`): its ack floor, the records still pending,
and whether a live decider owns it. `repartition N`
replays the log into N partitions, keeping every record's sequence
(`vcbus.bus.repartitioning`); the deciders must be stopped and caught up.
"""

from __future__ import annotations

import asyncio
import json
import pathlib

import click
import nats.errors

from vcbus.bus import partitions as parts
from vcbus.bus import subjects as s
from vcbus.bus.connecting import open_bus
from vcbus.bus.ownership import control_subject
from vcbus.errors import UserError
from vcbus.settings import BusSettings, bus_options, from_flags

HELP = """The bus's layout: VCBUS_K8S's partitions (one decider each) and repartitioning.

\b
Examples:
  vcbus bus partitions                 # PARTITION CONSUMER ACK-FLOOR PENDING OWNER
  vcbus bus partitions -o json
  vcbus bus repartition 4              # stop the deciders first; they must be caught up

Exit codes: 0 ok; 2 bad input or deciders not caught up; 3 the bus is unreachable;
4 a decider still runs.
"""


def register(group: click.Group) -> None:
    group.add_command(bus)


@click.group(help=HELP)
def bus() -> None:
    pass


@bus.command("partitions", help="Each partition's decider: its ack floor, records pending, and its owner.")
@click.option("-o", "--output", "fmt", type=click.Choice(["table", "wide", "json", "yaml", "name"]), default="table",
              show_default=True, help="table (wide: the same), json or yaml (a list), name (the consumers' names).")
@bus_options
def partitions_cmd(fmt: str, nats_url: str | None, data_dir: pathlib.Path | None) -> None:
    rows = asyncio.run(_partitions(from_flags(nats_url, data_dir)))
    if fmt == "json":
        click.echo(json.dumps(rows, indent=2))
        return
    if fmt == "yaml":
        import yaml

        click.echo(yaml.safe_dump(rows, sort_keys=False), nl=False)
        return
    if fmt == "name":
        for r in rows:
            click.echo(f"consumer/{r['consumer']}")
        return
    click.echo(f"{'PARTITION':<10} {'CONSUMER':<20} {'ACK-FLOOR':>10} {'PENDING':>8}  OWNER")
    for r in rows:
        floor = "-" if r["ack_floor"] is None else str(r["ack_floor"])
        pending = "-" if r["pending"] is None else str(r["pending"])
        click.echo(f"{r['partition']:<10} {r['consumer']:<20} {floor:>10} {pending:>8}  {r['owner'] or '-'}")


async def _partitions(settings: BusSettings) -> list[dict]:
    rows = []
    async with open_bus(settings) as b:
        count = await parts.partitions(b.js)
        roles: list[parts.Partition] = [parts.Partition(k, count) for k in range(count)]
        if count > 1:  # the queue controller over every partition (vcbus.bus.queueing)
            from vcbus.bus.queueing import QueueRole

            roles.append(QueueRole())
        for part in roles:
            floor = pending = None
            try:
                info = await b.js.consumer_info(s.K8S_STREAM, part.consumer)
                floor = int(info.ack_floor.stream_seq or 0) if info.ack_floor else 0
                pending = int(info.num_pending or 0) + int(info.num_ack_pending or 0)
            except Exception:  # no consumer yet: no decider has run
                pass
            owner = None
            try:
                reply = await b.nc.request(control_subject(part.consumer), b"", timeout=1.0)
                who = json.loads(reply.data)
                owner = f"pid {who.get('pid')} on {who.get('host')}"
            except (nats.errors.NoRespondersError, nats.errors.TimeoutError, ValueError):
                pass
            label = part.name if part.name == "queues" else part.index
            rows.append({"partition": label, "of": count, "consumer": part.consumer, "ack_floor": floor,
                         "pending": pending, "owner": owner})
    return rows


@bus.command("repartition", help="Replay VCBUS_K8S into N partitions (sequences kept; deciders stopped).")
@click.argument("count", type=int, metavar="N")
@bus_options
def repartition_cmd(count: int, nats_url: str | None, data_dir: pathlib.Path | None) -> None:
    if not 1 <= count <= parts.MAX_PARTITIONS:
        raise UserError(f"N {count}: expected 1..{parts.MAX_PARTITIONS}")
    summary = asyncio.run(_repartition(from_flags(nats_url, data_dir), count))
    if not summary["changed"]:
        click.echo(f"{s.K8S_STREAM} has {count} partition(s) already; nothing to do.")
        return
    click.echo(f"{s.K8S_STREAM}: {summary['records']} records replayed into {count} partition(s); start one decider per "
               f"partition (vcbus up, or vcbus up --service decider --partition K).")


async def _repartition(settings: BusSettings, count: int) -> dict:
    from vcbus.bus.repartitioning import repartition

    async with open_bus(settings) as b:
        return await repartition(b, count, progress=lambda m: click.echo(m, err=True))
