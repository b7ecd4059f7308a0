"""`vcbus log export|import`: the stream VCBUS_K8S to and from JSON lines (what `vcbus replay` reads)."""

from __future__ import annotations

import asyncio
import pathlib
import sys
from typing import BinaryIO

import click

from vcbus.bus.connecting import open_bus
from vcbus.bus.logs import Since, export
from vcbus.bus.publisher import check_log, spooled_input
from vcbus.cli.output import output_options
from vcbus.cli.publish import _publish, published
from vcbus.cli.replay import warn
from vcbus.cli.results import RESULT_FORMS, RESULT_HELP, print_result
from vcbus.cli.status import parse_job
from vcbus.errors import UserError
from vcbus.settings import BusSettings, bus_options, from_flags
from vcbus.watchlog import open_input

EXPORT_HELP = """Write the bus's log (VCBUS_K8S) as JSON lines, one watch record per line.

\b
The output is what `vcbus replay FILE` reads (records carry their "time", and
the TIMER records of delayed actions the decider fired), and what
`vcbus log import` restores.

\b
Examples:
  vcbus log export > cluster.jsonl
  vcbus log export --job default/resnet-dist-train | vcbus replay - --job default/resnet-dist-train
  vcbus log export --since 2026-11-30T08:00:00Z -o morning.jsonl
"""

IMPORT_HELP = """Restore an exported log (JSON lines) into an empty VCBUS_K8S, keeping its sequence numbers.

\b
Checked first like `vcbus publish` (bad input: exit 2, nothing imported). With
--append the records are added to a non-empty stream (their seq numbers change).
If the server fails part-way, up to 1,000 records are imported whole or not at
all; a larger log keeps what was stored, and `vcbus log import --append FILE`
completes it without duplicates (the stored records keep their seq numbers).

\b
Examples:
  vcbus log import cluster.jsonl --nats nats://127.0.0.1:4222 && vcbus up --once
  vcbus log import cluster.jsonl -o json    # {"kind": "Published", "published": N, ...}
"""


def register(group: click.Group) -> None:
    @group.group(help="The bus's log (VCBUS_K8S) to and from JSON lines.")
    def log() -> None:
        pass

    log.add_command(export_cmd)
    log.add_command(import_cmd)


@click.command("export", help=EXPORT_HELP)
@click.option("--job", metavar="NS/NAME", help="Only this job's records (and the cluster-scoped queues).")
@click.option("--since", metavar="SEQ|TIME", help="Start at a stream seq, an RFC 3339 time, or a duration ago (10m).")
@click.option("-o", "--output", "output", metavar="FILE", help="Write to FILE instead of standard output.")
@bus_options
def export_cmd(
    job: str | None, since: str | None, output: str | None, nats_url: str | None, data_dir: pathlib.Path | None
) -> None:
    key = parse_job(job, what="--job") if job else None
    start = Since(since)
    settings = from_flags(nats_url, data_dir)
    if output:
        try:
            fh: BinaryIO = open(output, "wb")  # closed in the finally below
        except OSError as err:
            raise UserError(f"{output}: {err.strerror}") from None
    else:
        fh = sys.stdout.buffer
    try:
        n = asyncio.run(_export(settings, fh, key, start))
    finally:
        if output:
            fh.close()
        else:
            fh.flush()
    click.echo(f"exported {n} records", err=True)


async def _export(settings: BusSettings, fh: BinaryIO, job: str | None, since: Since) -> int:
    async with open_bus(settings, name="vcbus-log-export") as bus:
        return await export(bus, fh, job=job, since=since)


@click.command("import", help=IMPORT_HELP)
@click.argument("file", metavar="FILE")
@click.option("--append", is_flag=True, help="Allow a non-empty stream (sequence numbers will differ).")
@output_options(RESULT_FORMS, json_alias=False, default_help=RESULT_HELP)
@bus_options
def import_cmd(file: str, append: bool, fmt: str | None, nats_url: str | None, data_dir: pathlib.Path | None) -> None:
    settings = from_flags(nats_url, data_dir)
    stream, source = open_input(file)
    try:
        data = spooled_input(stream)
        check_log(data, source, warn=warn)  # undecodable records fail before any connection
        data.seek(0)
        again = f"vcbus log import --append {file}"  # a re-run finds the stream non-empty
        pub, checked = asyncio.run(_publish(settings, data, source, require_empty=not append, command=again))
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()
    print_result(published(pub, checked, source), fmt)
