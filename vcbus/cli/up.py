"""`vcbus up`: the bus services (decider, projector, scheduler) in one process, over a real NATS server."""

from __future__ import annotations

import asyncio
import logging
import pathlib
import signal
import sys
from typing import Any, NamedTuple

import click

from statemachines.timefmt import parse_duration
from vcbus.bus.connecting import Bus, open_bus
from vcbus.bus.decider import Decider
from vcbus.bus.projector import Projector
from vcbus.errors import UserError
from vcbus.settings import BusSettings, bus_options, from_flags

SERVICES = ("decider", "projector", "scheduler")
BUS_SERVICES = ("decider", "projector")  # the default without a cluster
CLUSTER_SERVICES = ("bridge", "actuator")

HELP = """Run vcbus: the decider and the projector; with a cluster also the bridge, the scheduler and the actuator.

\b
Without --nats, vcbus starts its own nats-server (JetStream, fsync on every
write) over --data-dir and stops it on exit; other vcbus commands on this
machine then use that server. With --nats URL it uses yours.

\b
  bridge     Kubernetes watch (vcjobs, pods, podgroups, queues, commands, nodes,
             priorityclasses) -> VCBUS_K8S
  decider    VCBUS_K8S -> state machines -> VCBUS_JOBS (events) + VCBUS_CMDS (commands)
  projector  VCBUS_JOBS -> KV vcbus_status, vcbus_history
  scheduler  VCBUS_K8S -> scheduling sessions every --schedule-period ->
             VCBUS_JOBS (sched.* events) + VCBUS_CMDS (bind, PodGroup/queue status)
  actuator   VCBUS_CMDS -> Kubernetes (pods, bindings, PodGroups, queues, vcjob status, events)

\b
The cluster side runs with --kubeconfig PATH, or --cluster (the in-cluster
service account inside a pod, else $KUBECONFIG / ~/.kube/config). vcbus then
is the vcjob controller and the scheduler: neither Volcano's job controller
nor its scheduler may run beside it. --no-scheduler keeps Volcano's
scheduler (vcbus then only controls the jobs). With --observe-only there is
no actuator and no scheduler: vcbus runs beside a real Volcano (whose
scheduler places the pods), decides what its job controller would have done
and records every divergence between its phase and the one Volcano wrote
(`vcbus divergences`). Without a cluster (recorded logs) the scheduler runs
only with --service scheduler: the log already holds where pods were placed.

\b
Examples:
  vcbus publish examples/resnet-dist-train.json && vcbus up --once && vcbus status
  vcbus up                                   # embedded server; Ctrl-C to stop
  vcbus up --nats nats://nats.example:4222 --service decider
  vcbus up --sync-interval 2m                # NATS' default durability (faster, see docs/operations.md)
  vcbus up --kubeconfig ~/.kube/config       # job controller and scheduler on a cluster
  vcbus up --cluster --no-scheduler          # job controller only; Volcano's scheduler binds
  vcbus up --cluster --scheduler-conf sched.yaml --schedule-period 2s
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
    help="Run only this service (repeatable). Default: decider and projector, and with a cluster "
    "(not --observe-only) the scheduler.",
)
@click.option("--once", is_flag=True, help="Decide and project what is in the streams, then exit.")
@click.option("--kubeconfig", metavar="PATH", help="Run the cluster side against this cluster.")
@click.option("--context", metavar="NAME", help="The kubeconfig context to use (default: its current one).")
@click.option("--cluster", is_flag=True, help="Run the cluster side: in-cluster config, else the current context.")
@click.option(
    "--observe-only", is_flag=True, help="Cluster side without actuator and scheduler: record and compare only."
)
@click.option("--no-scheduler", is_flag=True, help="Do not run the scheduler (Volcano's scheduler places the pods).")
@click.option(
    "--scheduler-conf",
    metavar="FILE",
    help="The scheduler's config: Volcano's volcano-scheduler.conf YAML (default: the helm install's).",
)
@click.option(
    "--schedule-period", default="1s", show_default=True, help="Time between scheduling sessions (Volcano's flag)."
)
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
    no_scheduler: bool,
    scheduler_conf: str | None,
    schedule_period: str,
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
    chosen = choose_services(services, cluster=api_client is not None, observe_only=observe_only, no_scheduler=no_scheduler)
    scheduler = None
    if scheduler_conf and "scheduler" not in chosen:
        raise UserError(
            f"--scheduler-conf {scheduler_conf}: the scheduler does not run here "
            f"({', '.join(chosen)}); add --service scheduler, or drop --no-scheduler / --observe-only"
        )
    if "scheduler" in chosen:
        from vcbus.schedconf import load_config

        scheduler = SchedulerOptions(load_config(scheduler_conf), duration(schedule_period, "--schedule-period"))
    asyncio.run(
        _up(
            settings,
            chosen,
            once=once,
            api_client=api_client,
            observe_only=observe_only,
            namespace=watch_namespace,
            scheduler=scheduler,
        )
    )


class SchedulerOptions(NamedTuple):
    config: Any  # statemachines.scheduler.config.SchedulerConfig
    period: float = 1.0


def choose_services(services: tuple[str, ...], *, cluster: bool, observe_only: bool, no_scheduler: bool) -> tuple[str, ...]:
    """The bus services to run: the ones asked for, else the defaults of the mode."""
    if "scheduler" in services:
        if no_scheduler:
            raise UserError("--no-scheduler and --service scheduler contradict each other")
        if observe_only:
            raise UserError(
                "--observe-only runs beside Volcano, whose scheduler binds the pods: the vcbus scheduler "
                "cannot run there (it would bind them too)"
            )
        return services
    if services:
        return services
    if cluster and not observe_only and not no_scheduler:
        return SERVICES
    return BUS_SERVICES


async def _up(
    settings: BusSettings,
    services: tuple[str, ...],
    *,
    once: bool,
    api_client=None,
    observe_only: bool = False,
    namespace: str | None = None,
    scheduler: SchedulerOptions | None = None,
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
            await run_services(bus, services, stop=stop, once=once, cluster=cluster, scheduler=scheduler)
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


async def run_services(
    bus: Bus,
    services: tuple[str, ...],
    *,
    stop: asyncio.Event,
    once: bool,
    cluster=None,
    scheduler: SchedulerOptions | None = None,
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
    sched = None
    if "scheduler" in services:
        from vcbus.bus.scheduling import SchedulerService

        opts = scheduler or SchedulerOptions(None)
        sched = SchedulerService(bus, period=opts.period, **({"config": opts.config} if opts.config else {}))
    if once:
        if decider is not None:
            await decider.run(stop=stop, until_idle=True)
        if sched is not None and not stop.is_set():
            await sched.run(stop=stop, until_idle=True)
        if projector is not None and not stop.is_set():
            await projector.run(stop=stop, until_idle=True)
    else:
        tasks = []
        if decider is not None:
            tasks.append(asyncio.create_task(decider.run(stop=stop), name="decider"))
        if projector is not None:
            tasks.append(asyncio.create_task(projector.run(stop=stop), name="projector"))
        if sched is not None:
            tasks.append(asyncio.create_task(sched.run(stop=stop), name="scheduler"))
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
    if sched is not None:
        log_scheduler_stats(sched)


def log_scheduler_stats(sched) -> None:
    st = sched.stats
    logging.getLogger("vcbus").info(
        "scheduler: %d sessions (last number %d), %d binds, %d evictions, %d outputs stored "
        "(%d duplicates dropped), %d records skipped",
        st.sessions,
        sched.number,
        st.binds,
        st.evictions,
        st.outputs,
        st.duplicates,
        st.skipped,
    )
