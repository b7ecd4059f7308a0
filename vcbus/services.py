"""The composition root of `vcbus up`: which services run, built from their parts and run together.

`vcbus.cli.up` turns the command line into settings, an API client and these options, and calls
`serve`; here the bus is opened (a NATS user per service), the cluster side made when there is a
cluster (`vcbus.k8s.cluster.ClusterSide`: bridge and actuator), one decider per partition and the
queue role, the projector and the scheduler built, and all of them run until stopped (with `once`,
until the streams are used up) behind the operations side (probes, metrics, leader election:
`vcbus.cli.operating.Operations`).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import signal
from typing import Any, NamedTuple

from vcbus.bus.connecting import Bus, open_bus, service_buses
from vcbus.bus.decider import Decider
from vcbus.bus.projector import Projector
from vcbus.cli.operating import Operations
from vcbus.errors import UserError
from vcbus.settings import BusSettings

SERVICES = ("decider", "projector", "scheduler")
BUS_SERVICES = ("decider", "projector")  # the default without a cluster
CLUSTER_SERVICES = ("bridge", "actuator")


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


async def serve(
    settings: BusSettings,
    services: tuple[str, ...],
    *,
    once: bool,
    api_client=None,
    observe_only: bool = False,
    ahead: bool = True,
    concurrency: int = 32,
    namespace: str | None = None,
    scheduler: SchedulerOptions | None = None,
    ops: Operations | None = None,
    decider_partitions: tuple[int, ...] | None = None,
    connect_timeout: float = 0.0,
) -> bool:
    """Run the services until stopped (with `once`, until the streams are used up); True when `once` was
    stopped by a signal before it was done."""
    log = logging.getLogger("vcbus")
    ops = ops or Operations()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        async with open_bus(settings, own_server=not once, name="vcbus-up") as bus, \
                service_buses(bus, services + (CLUSTER_SERVICES if api_client is not None else ())) as buses:  # a NATS user each
            cluster = None
            if api_client is not None:
                from vcbus.k8s.cluster import ClusterSide

                cluster = ClusterSide(buses["bridge"], api_client, observe_only=observe_only, namespace=namespace,
                                      fence=ops.fence, actuator_bus=buses.get("actuator"), ahead=ahead,
                                      concurrency=concurrency)
                names = services + (("bridge",) if observe_only else CLUSTER_SERVICES)
            else:
                names = services
            reach = None
            if api_client is not None:
                from vcbus.k8s import reach as reaching

                reach = functools.partial(reaching.reach, api_client, timeout=connect_timeout, stop=stop)
            async with ops.running(bus, stop, probes=not once, reach=reach) as leading:
                if leading:
                    log.info("vcbus up: %s; running %s", bus.describe(), ", ".join(names))
                    await run_services(bus, services, stop=stop, once=once, cluster=cluster, scheduler=scheduler, buses=buses,
                                       ops=ops, decider_partitions=decider_partitions)
        return once and stop.is_set()
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
    ops: Operations | None = None,
    buses: dict[str, Bus] | None = None,
    decider_partitions: tuple[int, ...] | None = None,
) -> None:
    log = logging.getLogger("vcbus")
    buses = buses or {}
    deciders = []
    if "decider" in services:
        from vcbus.bus.partitions import partitions as partition_count

        decider_bus = buses.get("decider", bus)
        chosen = decider_partitions or tuple(range(await partition_count(decider_bus.js)))
        observing = cluster is not None and cluster.actuator is None
        for k in chosen:  # one decider per partition (vcbus.bus.partitions); each its own engine
            engine = None
            if cluster is not None and cluster.actuator is not None:
                from statemachines.engine import Engine
                from statemachines.manifests.renderer import Renderer

                renderer = Renderer()  # the actuator needs full pod and PodGroup manifests
                engine = Engine(render_pod=renderer.pod, render_podgroup=renderer.podgroup,
                                max_pods=decider_bus.settings.max_pods_per_job)
            deciders.append(Decider(decider_bus, engine=engine, publish_commands=not observing, partition=k))
        if 0 in chosen and await partition_count(decider_bus.js) > 1:  # queue decisions of every partition
            from vcbus.bus.queueing import QueueDecider

            deciders.append(QueueDecider(decider_bus, publish_commands=not observing))
    if cluster is not None:
        cluster.feed(deciders)
    decider = deciders[0] if deciders else None
    projector = Projector(buses.get("projector", bus)) if "projector" in services else None
    sched = None
    if "scheduler" in services:
        from vcbus.bus.scheduling import SchedulerService

        opts = scheduler or SchedulerOptions(None)
        sched = SchedulerService(buses.get("scheduler", bus), period=opts.period, **({"config": opts.config} if opts.config else {}))
    if ops is not None:  # /metrics reads their stats, /readyz their lag
        queues = next((d for d in deciders if d.engine.queue_controller_on), None)
        ops.watch(decider=decider, projector=projector, scheduler=sched, actuator=getattr(cluster, "actuator", None),
                  queues=queues)
    if once:
        if deciders:
            await asyncio.gather(*(d.run(stop=stop, until_idle=True) for d in deciders))
        if sched is not None and not stop.is_set():
            await sched.run(stop=stop, until_idle=True)
        if projector is not None and not stop.is_set():
            await projector.run(stop=stop, until_idle=True)
    else:
        tasks: list[asyncio.Task[Any]] = []
        for d in deciders:
            tasks.append(asyncio.create_task(d.run(stop=stop), name="queues" if d.partition.name == "queues" else f"decider-{d.partition_index or 0}"))
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
    for d in deciders:
        st = d.stats
        log.info(
            "decider%s: decided %d records, stored %d outputs (%d duplicates dropped), %d timers fired, %d poison",
            f" {d.partition.index}" if d.partition.count > 1 else (" (queues)" if d.partition.name == "queues" else ""),
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
