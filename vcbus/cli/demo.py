"""`vcbus demo`: the bus end to end on embedded defaults, in one finite command."""

from __future__ import annotations

import asyncio
import os
import pathlib
import shlex
import tempfile

import click
import msgspec

from statemachines import outputs as o
from vcbus.bus import subjects as s
from vcbus.bus.connecting import open_bus
from vcbus.bus.decider import Decider
from vcbus.bus.projector import Projector
from vcbus.bus.publisher import publish_records
from vcbus.cli.publish import checked_input
from vcbus.bus.reading import read_bucket, read_stream
from vcbus.cli.status import print_table
from vcbus.cli.replay import warn
from vcbus.errors import UserError
from vcbus.logmerge import in_etcd_order
from vcbus.settings import ENV_DATA_DIR, BusSettings, default_data_dir, from_flags

SEED = pathlib.Path(__file__).resolve().parents[2] / "examples" / "resnet-dist-train.json"

HELP = """Run the whole bus once on embedded defaults and show what it decided.

\b
Starts a private nats-server (JetStream, fsync on every write) in a temporary
directory, publishes a recorded watch log into VCBUS_K8S (default: the seed
job resnet-dist-train of examples/), runs the decider and the projector until
the log is used up, prints the phase changes an outside subscriber sees on
VCBUS_JOBS and the projected statuses from the KV bucket, writes the log's
timeline as an HTML page (`vcbus replay --html`; into the kept store, else a
temporary file) and prints its path, and stops.

\b
With --keep the bus stays: its store is --data-dir, by default the one every
vcbus command uses, so `vcbus status`, `vcbus events tail` and the others read
it with no flags (each starts the store's server while it runs). The demo ends
with those commands, ready to paste.

\b
Examples:
  vcbus demo
  vcbus demo examples/retries-exhausted.jsonl
  vcbus demo --keep && vcbus status -o wide       # keep the bus in the default store
  vcbus demo watch.log --keep --data-dir /tmp/vcbus-demo
"""


def register(group: click.Group) -> None:
    group.add_command(demo)


@click.command(help=HELP)
@click.argument("file", required=False, metavar="[FILE]")
@click.option("--keep", is_flag=True, help="Keep the bus (its store is --data-dir) for the other vcbus commands.")
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=pathlib.Path),
              help=f"With --keep: the store to keep [env {ENV_DATA_DIR}; default {default_data_dir()}, where every "
              "command looks].")
def demo(file: str | None, keep: bool, data_dir: pathlib.Path | None) -> None:
    path = pathlib.Path(file) if file else SEED
    if path.is_dir():
        raise UserError(f"{path} is a directory, not a watch log: the store to keep is --keep --data-dir {path}")
    if not path.is_file():
        raise UserError(f"{path}: no such file")
    if data_dir is not None and not keep:
        raise UserError("--data-dir is the store --keep keeps: add --keep (without it the demo's store is temporary)")
    with open(path, "rb") as fh:
        checked_input(fh, str(path), stdin=False)  # no watch log at all (empty, compressed, other kinds): say so, exit 2
    if keep:
        store = from_flags(None, data_dir).data_dir
        store.mkdir(parents=True, exist_ok=True)
        jobs = asyncio.run(_demo(path, store))
        _page(path, store / "timeline.html")
        _next_commands(store, jobs, default=data_dir is None)
        return
    with tempfile.TemporaryDirectory(prefix="vcbus-demo-") as tmp:
        asyncio.run(_demo(path, pathlib.Path(tmp)))
    fd, page = tempfile.mkstemp(prefix="vcbus-demo-", suffix=".html")
    os.close(fd)
    _page(path, pathlib.Path(page))


def _page(log: pathlib.Path, out: pathlib.Path) -> None:
    from vcbus.replay_html import html_for_log

    click.echo(f"\ntimeline page (open it in a browser): {html_for_log(log, out)}")


def _next_commands(store: pathlib.Path, jobs: list[str], *, default: bool) -> None:
    """What to run on the kept bus, ready to paste (with --data-dir when it is not the default store)."""
    flag = "" if default else f" --data-dir {shlex.quote(str(store))}"
    job = jobs[0] if jobs else "default/resnet-dist-train"
    click.echo(f"\nthe bus is kept in {store}; each vcbus command starts its server while it runs:")
    for command in (f"vcbus status -o wide{flag}", f"vcbus events tail --since 1 --no-follow{flag}",
                    f"vcbus projections history {job}{flag}", f"vcbus replay --nats --job {job}{flag}"):
        click.echo(f"  {command}")


async def _demo(path: pathlib.Path, data_dir: pathlib.Path) -> list[str]:
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
        return sorted(statuses)
