"""`vcbus why-pending`: in words, why a job is not running, from the scheduler's own reasoning."""

from __future__ import annotations

import asyncio
import pathlib
from typing import Any

import click
import msgspec

from vcbus.cli.output import chosen, output_options, print_document

from vcbus.cli.status import parse_job
from vcbus.settings import bus_options, from_flags

HELP = """Say why a job is not running: its queue, its gang, and why each pending pod fits no node.

\b
NS/NAME is a vcjob (or a PodGroup) in namespace NS (NAME alone: namespace default). The answer
comes from one Volcano scheduling session run now over the cluster's state, exactly as the
scheduler would run it (nothing is written):
  - the queue's state, weight, share, deserved and allocated resources;
  - the PodGroup phase and, if enqueue refuses it, the refusal;
  - the gang: `3/3 tasks in gang unschedulable: ...` (Volcano's own message);
  - each pending pod: the nodes that cannot take it and why.

\b
The state is the bus's log (stream VCBUS_K8S, as `vcbus up` records it), or with --from a
snapshot file: a v1 List or YAML documents of Nodes, Queues, PodGroups, Pods and
PriorityClasses, or a watch log (the same inputs as `vcbus schedule`).

\b
Examples:
  vcbus why-pending default/resnet-dist-train
  vcbus why-pending default/resnet-dist-train --from examples/scheduler/two-nodes.yaml
  vcbus why-pending team-a/train --nats nats://127.0.0.1:4222 -o json     # or --json, -o yaml

Exit codes: 0 ok (also for a vcjob without its PodGroup yet, a PodGroup whose queue is missing and a
finished vcjob: the answer says so); 1 no such job (the known jobs are listed); 2 bad input; 3 the bus
is unreachable.
"""


def register(group: click.Group) -> None:
    group.add_command(why_pending)


@click.command("why-pending", help=HELP)
@click.argument("job", metavar="NS/NAME")
@click.option("--from", "from_path", metavar="INPUT", help="A snapshot file (or -) instead of the bus's log.")
@click.option("--config", "config_path", metavar="CONF.yaml", help="Scheduler configuration (default: Volcano's).")
@output_options(("json", "yaml"), default_help="the explanation as text")
@bus_options
def why_pending(
    job: str,
    from_path: str | None,
    config_path: str | None,
    fmt: str | None,
    as_json: bool,
    nats_url: str | None,
    data_dir: pathlib.Path | None,
) -> None:
    from vcbus.offline_cluster import OfflineCluster
    from vcbus.schedconf import load_config

    key = parse_job(job)
    form = chosen(fmt, as_json)
    cluster = OfflineCluster(load_config(config_path))
    if from_path is not None:
        from vcbus.snapshots import open_snapshot

        data, source = open_snapshot(from_path)
        cluster.load(data, source)
    else:
        source = asyncio.run(_load_bus(cluster, from_flags(nats_url, data_dir)))
    from vcbus.cli.why_text import explain, find_report, not_found, why, without_report

    result = cluster.run(1)[-1]
    report = find_report(result, key)
    if report is None:
        done = without_report(cluster.snapshot, key, source)
        if not done:
            raise not_found(cluster.snapshot, result, key, source)
        if form:
            _print({"why": done, "report": None}, form)
        else:
            click.echo(done)
        return
    if form:
        _print({"why": why(report), "report": msgspec.to_builtins(report)}, form)
        return
    for line in explain(report):
        click.echo(line)


def _print(doc: dict[str, Any], form: str) -> None:
    print_document(doc, form)


async def _load_bus(cluster: Any, settings: Any) -> str:  # OfflineCluster, BusSettings
    """Fold the bus's VCBUS_K8S into the cluster's cache; return the source's name."""
    from vcbus.bus import subjects as s
    from vcbus.bus.connecting import open_bus
    from vcbus.bus.logs import spool

    async with open_bus(settings, name="vcbus-why-pending") as bus:
        fh = await spool(bus)
        source = f"{bus.url}/{s.K8S_STREAM}"
    try:
        cluster.load_log(fh, source)
    finally:
        fh.close()
    return source
