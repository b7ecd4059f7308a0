"""`vcbus scheduler`: the scheduler service on its own (`vcbus up` runs it with the others)."""

from __future__ import annotations

import asyncio
import logging
import pathlib
import signal

import click

from vcbus.bus.connecting import open_bus
from vcbus.cli.operating import Operations, operations_options
from vcbus.cli.up import duration, setup_logging
from vcbus.services import log_scheduler_stats
from vcbus.settings import BusSettings, bus_options, from_flags

HELP = """Run the scheduler service: Volcano's scheduling sessions over the bus's log, decisions to the bus.

\b
The service folds the stream VCBUS_K8S (nodes, queues, PodGroups, pods, PriorityClasses
as the bridge records them) into the scheduler's view of the cluster and, every --period
when that view changed, runs one session of Volcano's scheduler over it (enqueue,
allocate, backfill... as --config says). Its decisions go to the bus: events (sched.*) to
VCBUS_JOBS, commands (bind a pod, write PodGroup and queue status, record Events) to
VCBUS_CMDS, which the actuator of `vcbus up --kubeconfig/--cluster` carries out. On
restart it rebuilds its view from the log alone and continues the session numbering.

\b
`vcbus up` with a cluster already runs it; run it on its own with `vcbus up
--no-scheduler ...` elsewhere. Run one scheduler per bus, and none beside Volcano's
scheduler. For a one-off look at decisions without a bus, see `vcbus schedule`.

\b
Examples:
  vcbus scheduler --nats nats://nats.example:4222
  vcbus scheduler --nats nats://nats.example:4222 --config volcano-scheduler.conf --period 2s
  kubectl -n volcano-system get cm volcano-scheduler-configmap -o yaml > sched.yaml
  vcbus scheduler --config sched.yaml -v          # the embedded server; -vv logs every session
  vcbus scheduler --once                          # schedule what is in the log until nothing changes

Stops cleanly on Ctrl-C / SIGTERM. Exit codes: 0 ok; 2 bad config (the message names the
file and the field); 3 the bus is unavailable.
"""


def register(group: click.Group) -> None:
    group.add_command(scheduler)


@click.command(help=HELP)
@bus_options
@operations_options()
@click.option(
    "--config",
    "--scheduler-conf",
    "config_path",
    metavar="FILE",
    help="Volcano's volcano-scheduler.conf YAML, or its ConfigMap (default: the helm install's).",
)
@click.option("--period", "--schedule-period", default="1s", show_default=True, help="Time between sessions.")
@click.option("--once", is_flag=True, help="Fold the log, run sessions until one changes nothing, then exit.")
@click.option("--source", metavar="URI", envvar="VCBUS_CE_SOURCE",
              help="CloudEvents source of the sessions' events and commands [env VCBUS_CE_SOURCE; default: /vcbus].")
@click.option("-v", "--verbose", count=True, help="More logging (-vv: every session).")
@click.option("-q", "--quiet", is_flag=True, help="Only warnings and errors.")
def scheduler(
    nats_url: str | None,
    data_dir: pathlib.Path | None,
    config_path: str | None,
    period: str,
    once: bool,
    source: str | None,
    verbose: int,
    quiet: bool,
) -> None:
    from vcbus.bus.cloudevents import resolve_source
    from vcbus.schedconf import load_config

    setup_logging(-1 if quiet else verbose)
    config = load_config(config_path)
    seconds = duration(period, "--period")
    settings = from_flags(nats_url, data_dir, ce_source=resolve_source(source))
    asyncio.run(_run(settings, config, seconds, once=once, ops=Operations.current()))


async def _run(settings: BusSettings, config, period: float, *, once: bool, ops: Operations | None = None) -> None:
    from vcbus.bus.scheduling import SchedulerService

    log = logging.getLogger("vcbus")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        async with open_bus(settings, own_server=not once, name="vcbus-scheduler") as bus:
            log.info("vcbus scheduler: %s; a session every %gs at most", bus.describe(), period)
            service = SchedulerService(bus, config=config, period=period)
            ops = ops or Operations()
            ops.watch(scheduler=service)
            async with ops.running(bus, stop, probes=not once):
                await service.run(stop=stop, until_idle=once)
            log_scheduler_stats(service)
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
