"""`vcbus up`: the bus services (decider, projector) in one process, over a real NATS server."""

from __future__ import annotations

import asyncio
import logging
import pathlib
import signal
import sys

import click

from statemachines.timefmt import parse_duration
from vcbus.bus.connecting import Bus, open_bus
from vcbus.bus.decider import Decider
from vcbus.bus.projector import Projector
from vcbus.errors import UserError
from vcbus.settings import BusSettings, bus_options, from_flags

SERVICES = ("decider", "projector")
CLUSTER_SERVICES = ("bridge", "actuator")

HELP = """Run vcbus: the decider and the projector, and with a cluster the bridge and the actuator.

\b
Without --nats, vcbus starts its own nats-server (JetStream, fsync on every
write) over --data-dir and stops it on exit; other vcbus commands on this
machine then use that server. With --nats URL it uses yours.

\b
  bridge     Kubernetes watch (vcjobs, pods, podgroups, queues, commands) -> VCBUS_K8S
  decider    VCBUS_K8S -> state machines -> VCBUS_JOBS (events) + VCBUS_CMDS (commands)
  projector  VCBUS_JOBS -> KV vcbus_status, vcbus_history
  actuator   VCBUS_CMDS -> Kubernetes (pods, PodGroups, vcjob status, events, plugin objects)

\b
The cluster side runs with --kubeconfig PATH, or --cluster (the in-cluster
service account inside a pod, else $KUBECONFIG / ~/.kube/config). vcbus then
is the vcjob controller: Volcano's job controller must not run beside it.
With --observe-only there is no actuator: vcbus runs beside a real Volcano,
decides what it would have done and records every divergence between its
phase and the one Volcano wrote (`vcbus divergences`).

\b
Examples:
  vcbus publish examples/resnet-dist-train.json && vcbus up --once && vcbus status
  vcbus up                                   # embedded server; Ctrl-C to stop
  vcbus up --nats nats://nats.example:4222 --service decider
  vcbus up --sync-interval 2m                # NATS' default durability (faster, see docs/operations.md)
  vcbus up --kubeconfig ~/.kube/config       # the whole controller on a cluster
  vcbus up --cluster --observe-only          # beside Volcano: record, decide, compare

Stops cleanly on Ctrl-C / SIGTERM (the record being decided is finished first).
"""


def register(group: click.Group) -> None:
    group.add_command(up)


def setup_logging(verbose: int) -> None:
    level = logging.DEBUG if verbose > 1 else logging.INFO if verbose >= 0 else logging.WARNING
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s", "%H:%M:%S"))
    root = logging.getLogger("vcbus")
    root.handlers[:] = [handler]
    root.setLevel(level)
    root.propagate = False


def duration(text: str, option: str) -> float:
    try:
        seconds = parse_duration(text)
    except ValueError:
        raise UserError(f"{option} {text!r}: expected a duration such as 1h, 90m, 30s") from None
    if seconds <= 0:
        raise UserError(f"{option} must be positive")
    return seconds


@click.command(help=HELP)
@bus_options
@click.option(
    "--service",
    "-s",
    "services",
    multiple=True,
    type=click.Choice(SERVICES),
    help="Run only this service (repeatable). Default: all.",
)
@click.option("--once", is_flag=True, help="Decide and project what is in the streams, then exit.")
@click.option("--kubeconfig", metavar="PATH", help="Run the cluster side against this cluster.")
@click.option("--context", metavar="NAME", help="The kubeconfig context to use (default: its current one).")
@click.option("--cluster", is_flag=True, help="Run the cluster side: in-cluster config, else the current context.")
@click.option("--observe-only", is_flag=True, help="Cluster side without the actuator: record and compare only.")
@click.option("--namespace", "watch_namespace", metavar="NS", help="Watch only this namespace (default: all).")
@click.option("--port", type=int, default=0, show_default=True, help="Embedded server's port (0: a free one).")
@click.option(
    "--sync-interval",
    default="always",
    show_default=True,
    help="Embedded server's fsync interval: 'always', or a duration such as 2m (NATS' default).",
)
@click.option(
    "--duplicate-window",
    default="1h",
    show_default=True,
    help="How long JetStream remembers message ids (a decider restart must be shorter).",
)
@click.option("-v", "--verbose", count=True, help="More logging (-vv: debug).")
@click.option("-q", "--quiet", is_flag=True, help="Only warnings and errors.")
def up(
    nats_url: str | None,
    data_dir: pathlib.Path | None,
    services: tuple[str, ...],
    once: bool,
    kubeconfig: str | None,
    context: str | None,
    cluster: bool,
    observe_only: bool,
    watch_namespace: str | None,
    port: int,
    sync_interval: str,
    duplicate_window: str,
    verbose: int,
    quiet: bool,
) -> None:
    setup_logging(-1 if quiet else verbose)
    if not 0 <= port < 65536:
        raise UserError(f"--port {port}: expected 0..65535")
    settings = from_flags(
        nats_url,
        data_dir,
        port=port,
        sync_interval=sync_interval,
        duplicate_window=duration(duplicate_window, "--duplicate-window"),
    )
    api_client = None
    if kubeconfig or cluster or context:
        from vcbus.k8s.cluster import api_client_for

        if once:
            raise UserError("--once decides what is in the streams; it cannot be combined with a cluster")
        api_client = api_client_for(kubeconfig, context=context)
    elif observe_only:
        raise UserError("--observe-only needs a cluster: add --kubeconfig PATH or --cluster")
    asyncio.run(
        _up(
            settings,
            services or SERVICES,
            once=once,
            api_client=api_client,
            observe_only=observe_only,
            namespace=watch_namespace,
        )
    )


async def _up(
    settings: BusSettings,
    services: tuple[str, ...],
    *,
    once: bool,
    api_client=None,
    observe_only: bool = False,
    namespace: str | None = None,
) -> None:
    log = logging.getLogger("vcbus")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        async with open_bus(settings, own_server=not once, name="vcbus-up") as bus:
            cluster = None
            if api_client is not None:
                from vcbus.k8s.cluster import ClusterSide

                cluster = ClusterSide(bus, api_client, observe_only=observe_only, namespace=namespace)
                names = services + (("bridge",) if observe_only else CLUSTER_SERVICES)
            else:
                names = services
            log.info("vcbus up: %s; running %s", bus.describe(), ", ".join(names))
            await run_services(bus, services, stop=stop, once=once, cluster=cluster)
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


async def run_services(
    bus: Bus, services: tuple[str, ...], *, stop: asyncio.Event, once: bool, cluster=None
) -> None:
    log = logging.getLogger("vcbus")
    engine = None
    if cluster is not None and cluster.actuator is not None:
        from statemachines.engine import Engine
        from statemachines.rendering import Renderer

        renderer = Renderer()  # the actuator needs full pod and PodGroup manifests
        engine = Engine(render_pod=renderer.pod, render_podgroup=renderer.podgroup)
    observing = cluster is not None and cluster.actuator is None
    decider = Decider(bus, engine=engine, publish_commands=not observing) if "decider" in services else None
    projector = Projector(bus) if "projector" in services else None
    if once:
        if decider is not None:
            await decider.run(stop=stop, until_idle=True)
        if projector is not None and not stop.is_set():
            await projector.run(stop=stop, until_idle=True)
    else:
        tasks = []
        if decider is not None:
            tasks.append(asyncio.create_task(decider.run(stop=stop), name="decider"))
        if projector is not None:
            tasks.append(asyncio.create_task(projector.run(stop=stop), name="projector"))
        if cluster is not None:
            tasks.extend(cluster.tasks(stop))
        await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        stop.set()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result
    if decider is not None:
        st = decider.stats
        log.info(
            "decider: decided %d records, stored %d outputs (%d duplicates dropped), %d timers fired, %d poison",
            st.decided,
            st.outputs,
            st.duplicates,
            st.timers,
            st.poison,
        )
    if projector is not None:
        log.info("projector: %d events projected; views at seq %d", projector.written, projector.views.position)
