"""`vcbus demo`: the bus end to end on embedded defaults, in one finite command."""

from __future__ import annotations

import asyncio
import os
import pathlib
import tempfile

import click
import msgspec

from statemachines import outputs as o
from vcbus.bus import subjects as s
from vcbus.bus.connecting import open_bus
from vcbus.bus.decider import Decider
from vcbus.bus.projector import Projector
from vcbus.bus.publisher import publish_records
from vcbus.bus.reading import read_bucket, read_stream
from vcbus.cli.status import print_table
from vcbus.cli.replay import warn
from vcbus.errors import UserError
from vcbus.logmerge import in_etcd_order
from vcbus.settings import BusSettings

SEED = pathlib.Path(__file__).resolve().parents[2] / "examples" / "resnet-dist-train.json"

HELP = """Run the whole bus once on embedded defaults and show what it decided.

\b
Starts a private nats-server (JetStream, fsync on every write) in a temporary
directory, publishes a recorded watch log into VCBUS_K8S (default: the seed
job resnet-dist-train of examples/), runs the decider and the projector until
the log is used up, prints the phase changes an outside subscriber sees on
VCBUS_JOBS and the projected statuses from the KV bucket, writes the log's
timeline as an HTML page (`vcbus replay --html`; into the --keep dir, else a
temporary file) and prints its path, and stops.

\b
Examples:
  vcbus demo
  vcbus demo examples/retries-exhausted.jsonl
  vcbus demo watch.log --keep /tmp/vcbus-demo     # keep the store to explore it
"""


def register(group: click.Group) -> None:
    group.add_command(demo)


@click.command(help=HELP)
@click.argument("file", required=False, metavar="[FILE]")
@click.option("--keep", type=click.Path(file_okay=False, path_type=pathlib.Path), help="Use and keep this data dir.")
def demo(file: str | None, keep: pathlib.Path | None) -> None:
    path = pathlib.Path(file) if file else SEED
    if not path.is_file():
        raise UserError(f"{path}: no such file")
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        asyncio.run(_demo(path, keep))
        click.echo(f"store kept in {keep}: vcbus status --data-dir {keep}")
        _page(path, keep / "timeline.html")
        return
    with tempfile.TemporaryDirectory(prefix="vcbus-demo-") as tmp:
        asyncio.run(_demo(path, pathlib.Path(tmp)))
    fd, page = tempfile.mkstemp(prefix="vcbus-demo-", suffix=".html")
    os.close(fd)
    _page(path, pathlib.Path(page))


def _page(log: pathlib.Path, out: pathlib.Path) -> None:
    from vcbus.replay_html import html_for_log

    click.echo(f"\ntimeline page (open it in a browser): {html_for_log(log, out)}")


async def _demo(path: pathlib.Path, data_dir: pathlib.Path) -> None:
    settings = BusSettings(data_dir=data_dir)
    async with open_bus(settings, own_server=True, name="vcbus-demo") as bus:
        click.echo(f"nats-server: {bus.describe()}")
        with open(path, "rb") as fh:
            data = in_etcd_order(fh, str(path), warn=warn)  # as `vcbus replay` folds it
            pub = await publish_records(bus.js, data, str(path), timeout=settings.publish_timeout)
        click.echo(f"published {pub.published} records of {path} into {s.K8S_STREAM}")
        decider = Decider(bus)
        await decider.run(until_idle=True)
        st = decider.stats
        click.echo(f"decider: {st.decided} records decided, {st.outputs} events and commands stored")
        await Projector(bus).run(until_idle=True)
        click.echo(f"\nphase changes on {s.JOBS_STREAM} (what `vcbus events tail --type phase.changed` shows):")
        async for batch in read_stream(bus.js, s.JOBS_STREAM, filters=s.event_filter(types=("phase.changed",))):
            for msg in batch:
                ev = o.event_decoder.decode(msg.data)
                if isinstance(ev, o.PhaseChanged):
                    before = ev.from_phase or '""'
                    click.echo(
                        f"  {ev.time}  {ev.job}  {before} -> {ev.to_phase}"
                        f"  ({ev.action}, retryCount {ev.retry_count})"
                    )
                    if ev.cause:
                        click.echo(f"      because {ev.cause}")
        raw = await read_bucket(bus.js, s.STATUS_BUCKET)
        statuses = {s.job_of_key(k): msgspec.json.decode(v) for k, v in raw.items() if not k.startswith("_")}
        click.echo(f"\nstatuses in KV {s.STATUS_BUCKET} (what `vcbus status` shows):")
        print_table(statuses, wide=False)
