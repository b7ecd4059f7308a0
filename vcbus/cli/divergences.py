"""`vcbus divergences`: where the status a controller wrote differs from vcbus's decision."""

from __future__ import annotations

import asyncio
import pathlib
import sys

import click
import msgspec

from statemachines import outputs as o
from vcbus.bus import subjects as s
from vcbus.bus.connecting import open_bus
from vcbus.bus.reading import read_stream
from vcbus.errors import UserError
from vcbus.settings import bus_options, from_flags

HELP = """List every divergence between the status recorded on a vcjob and vcbus's decision.

\b
Run vcbus beside a real Volcano installation without acting on the cluster:
  vcbus up --kubeconfig ~/.kube/config --observe-only
then ask where Volcano and vcbus disagree:
  vcbus divergences
  vcbus divergences --job default/resnet-dist-train -o json

A divergence names the job, the field (phase or retryCount), what the log
recorded and what vcbus decided, and the record that showed it. Exit code 1
when there is at least one (handy in CI); 0 when none.
"""


def register(group: click.Group) -> None:
    group.add_command(divergences)


@click.command(help=HELP)
@bus_options
@click.option("--job", metavar="NS/NAME", help="Only this job.")
@click.option("-o", "--output", type=click.Choice(["table", "json"]), default="table", show_default=True)
def divergences(nats_url: str | None, data_dir: pathlib.Path | None, job: str | None, output: str) -> None:
    namespace = name = None
    if job:
        namespace, _, name = job.partition("/")
        if not namespace or not name:
            raise UserError(f"--job {job!r}: expected NAMESPACE/NAME")
    rows = asyncio.run(_collect(from_flags(nats_url, data_dir), namespace, name))
    if output == "json":
        sys.stdout.buffer.write(msgspec.json.encode(rows) + b"\n")
    else:
        if not rows:
            click.echo("no divergence")
        for r in rows:
            click.echo(
                f"{r['job']:<40} seq {r['seq']:<8} {r['field']:<24} recorded {r['recorded']:<12} "
                f"vcbus {r['decided']}"
            )
    if rows:
        raise SystemExit(1)


async def _collect(settings, namespace: str | None, name: str | None) -> list[dict]:
    filters = s.event_filter(namespace=namespace, name=name, types=("divergence",))
    rows = []
    async with open_bus(settings, name="vcbus-divergences") as bus:
        async for batch in read_stream(bus.js, s.JOBS_STREAM, start_seq=1, filters=filters):
            for msg in batch:
                ev = o.event_decoder.decode(msg.data)
                if isinstance(ev, o.Divergence):
                    rows.append(
                        {
                            "job": ev.job,
                            "seq": ev.seq,
                            "time": ev.time,
                            "field": ev.field,
                            "recorded": ev.recorded,
                            "decided": ev.decided,
                        }
                    )
    return rows
