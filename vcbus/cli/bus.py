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
from vcbus.cli.output import output_options, print_document, print_names, print_table
from vcbus.cli.results import RESULT_FORMS, Repartitioned, print_result
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
@output_options(("table", "wide", "json", "yaml", "name"), json_alias=False, default="table",
                default_help="table; wide: the same; json or yaml: a list; name: the consumers' names")
@bus_options
def partitions_cmd(fmt: str, nats_url: str | None, data_dir: pathlib.Path | None) -> None:
    rows = asyncio.run(_partitions(from_flags(nats_url, data_dir)))
    if fmt in ("json", "yaml"):
        print_document(rows, fmt)
        return
    if fmt == "name":
        print_names(f"consumer/{r['consumer']}" for r in rows)
        return
    print_table([["PARTITION", "CONSUMER", "ACK-FLOOR", "PENDING", "OWNER"]] + [
        [str(r["partition"]), r["consumer"], "-" if r["ack_floor"] is None else str(r["ack_floor"]),
         "-" if r["pending"] is None else str(r["pending"]), r["owner"] or "-"]
        for r in rows
    ])


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
@output_options(RESULT_FORMS, json_alias=False,
                default_help="a line; json or yaml: what was done, as one document (kind Repartitioned)")
@bus_options
def repartition_cmd(count: int, fmt: str | None, nats_url: str | None, data_dir: pathlib.Path | None) -> None:
    if not 1 <= count <= parts.MAX_PARTITIONS:
        raise UserError(f"N {count}: expected 1..{parts.MAX_PARTITIONS}")
    summary = asyncio.run(_repartition(from_flags(nats_url, data_dir), count))
    print_result(Repartitioned(stream=s.K8S_STREAM, partitions=count, records=summary["records"],
                               changed=summary["changed"]), fmt, err=False)


async def _repartition(settings: BusSettings, count: int) -> dict:
    from vcbus.bus.repartitioning import repartition

    async with open_bus(settings) as b:
        return await repartition(b, count, progress=lambda m: click.echo(m, err=True))
