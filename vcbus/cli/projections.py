"""`vcbus projections rebuild|verify|history`: the KV views refolded from VCBUS_JOBS sequence 1, and
one job's stored history (which outlives the stream records it was folded from: docs/operations.md
"Retention")."""

from __future__ import annotations

import asyncio
import pathlib

import click

from vcbus.bus import subjects as s
from vcbus.bus.connecting import open_bus
from vcbus.bus.projector import rebuild as rebuild_views
from vcbus.bus.projector import verify as verify_views
from vcbus.cli.output import output_options, print_document
from vcbus.cli.results import RESULT_FORMS, RESULT_HELP, Rebuilt, Verified, print_result
from vcbus.errors import UserError
from vcbus.settings import BusSettings, bus_options, from_flags

REBUILD_HELP = """Wipe the KV buckets vcbus_status and vcbus_history and refold them from VCBUS_JOBS seq 1.

\b
Stop the projector first (`vcbus up`), or it writes while the buckets are rebuilt.
The result equals what the live projector had written, byte for byte
(`vcbus projections verify` checks that without writing).

\b
Examples:
  vcbus projections rebuild
  vcbus projections rebuild -o json          # {"kind": "Rebuilt", "jobs": N, "position": SEQ, ...}
  vcbus projections verify && echo "views are current"
"""

VERIFY_HELP = """Refold VCBUS_JOBS in memory and compare with the KV buckets; exit 1 on any difference.

\b
Examples:
  vcbus projections verify
  vcbus projections verify -o json | jq '.differences[]'
"""

VIEWS = (s.STATUS_BUCKET, s.HISTORY_BUCKET)  # the KV views a rebuild wipes and refolds


def register(group: click.Group) -> None:
    @group.group(help="The projections (KV views) of the domain events.")
    def projections() -> None:
        pass

    projections.add_command(rebuild)
    projections.add_command(verify)
    projections.add_command(history)


@click.command(help=REBUILD_HELP)
@click.option("--force", is_flag=True, help="Rebuild even if retention removed the oldest events (their history is lost).")
@output_options(RESULT_FORMS, json_alias=False, default_help=RESULT_HELP)
@bus_options
def rebuild(nats_url: str | None, data_dir: pathlib.Path | None, force: bool, fmt: str | None) -> None:
    settings = from_flags(nats_url, data_dir)
    jobs, position = asyncio.run(_rebuild(settings, force=force))
    print_result(Rebuilt(buckets=list(VIEWS), stream=s.JOBS_STREAM, jobs=jobs, position=position), fmt)


async def _rebuild(settings: BusSettings, *, force: bool = False) -> tuple[int, int]:
    async with open_bus(settings, name="vcbus-projections") as bus:
        first = int((await bus.js.stream_info(s.JOBS_STREAM)).state.first_seq or 1)
        if first > 1 and not force:
            raise UserError(
                f"VCBUS_JOBS starts at seq {first}: older events were removed (retention), and a rebuild would "
                "drop the history they hold from vcbus_history; --force rebuilds anyway"
            )
        views = await rebuild_views(bus)
        return len(views.jobs()), views.position


@click.command(help=VERIFY_HELP)
@output_options(RESULT_FORMS, json_alias=False, default_help="a line on standard error (and the first 50 "
                "differences); json or yaml: the outcome and every difference, as one document")
@bus_options
def verify(nats_url: str | None, data_dir: pathlib.Path | None, fmt: str | None) -> None:
    settings = from_flags(nats_url, data_dir)
    problems = asyncio.run(_verify(settings))
    result = Verified(buckets=list(VIEWS), stream=s.JOBS_STREAM, equal=not problems, differences=problems)
    if fmt is not None:
        print_result(result, fmt)
    else:
        for p in problems[:50]:
            click.echo(p, err=True)
    if problems:
        raise UserError(result.line(), exit_code=1)
    if fmt is None:
        print_result(result, fmt)


async def _verify(settings: BusSettings) -> list[str]:
    async with open_bus(settings, name="vcbus-projections") as bus:
        return await verify_views(bus)


HISTORY_HELP = """Print one job's stored history (KV vcbus_history) as JSON: its `vcbus replay --json` entry.


The entry is a fold of the job's domain events, kept as long as the job exists
(and for a while after its deletion), whatever the streams' retention removed
since: export it before deleting the job to keep it for good.


Examples:
  vcbus projections history default/resnet-dist-train > resnet.history.json
"""


@click.command(help=HISTORY_HELP)
@click.argument("job")
@output_options(("json", "yaml"), json_alias=False, default="json", default_help="json, the entry as stored")
@bus_options
def history(job: str, fmt: str, nats_url: str | None, data_dir: pathlib.Path | None) -> None:
    from vcbus.cli.status import parse_job

    key = parse_job(job)
    settings = from_flags(nats_url, data_dir)
    value, where = asyncio.run(_history(settings, key))
    if value is None:
        raise UserError(f"job {key}: no history in vcbus_history on the bus at {where} (never seen, or deleted and "
                        "past its retention)", exit_code=1)
    if fmt == "yaml":
        import msgspec

        print_document(msgspec.json.decode(value), fmt)
        return
    click.echo(value.decode())


async def _history(settings: BusSettings, job: str) -> tuple[bytes | None, str]:
    from nats.js.errors import KeyNotFoundError

    async with open_bus(settings, name="vcbus-projections") as bus:
        kv = await bus.js.key_value(s.HISTORY_BUCKET)
        try:
            entry = await kv.get(s.kv_key(job))
        except KeyNotFoundError:
            return None, bus.describe()
        return entry.value or None, bus.describe()
