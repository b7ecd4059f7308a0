"""`vcbus projections rebuild|verify`: the KV views refolded from VCBUS_JOBS sequence 1."""

from __future__ import annotations

import asyncio
import pathlib

import click

from vcbus.bus.connecting import open_bus
from vcbus.bus.projector import rebuild as rebuild_views
from vcbus.bus.projector import verify as verify_views
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
  vcbus projections verify && echo "views are current"
"""

VERIFY_HELP = """Refold VCBUS_JOBS in memory and compare with the KV buckets; exit 1 on any difference."""


def register(group: click.Group) -> None:
    @group.group(help="The projections (KV views) of the domain events.")
    def projections() -> None:
        pass

    projections.add_command(rebuild)
    projections.add_command(verify)


@click.command(help=REBUILD_HELP)
@bus_options
def rebuild(nats_url: str | None, data_dir: pathlib.Path | None) -> None:
    settings = from_flags(nats_url, data_dir)
    jobs, position = asyncio.run(_rebuild(settings))
    click.echo(f"rebuilt vcbus_status and vcbus_history: {jobs} jobs, VCBUS_JOBS up to seq {position}", err=True)


async def _rebuild(settings: BusSettings) -> tuple[int, int]:
    async with open_bus(settings, name="vcbus-projections") as bus:
        views = await rebuild_views(bus)
        return len(views.jobs()), views.position


@click.command(help=VERIFY_HELP)
@bus_options
def verify(nats_url: str | None, data_dir: pathlib.Path | None) -> None:
    settings = from_flags(nats_url, data_dir)
    problems = asyncio.run(_verify(settings))
    if problems:
        for p in problems[:50]:
            click.echo(p, err=True)
        raise UserError(f"{len(problems)} difference(s) between the KV views and VCBUS_JOBS", exit_code=1)
    click.echo("the KV views equal a refold of VCBUS_JOBS", err=True)


async def _verify(settings: BusSettings) -> list[str]:
    async with open_bus(settings, name="vcbus-projections") as bus:
        return await verify_views(bus)
