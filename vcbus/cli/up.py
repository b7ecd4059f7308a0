"""`vcbus up`: the bus services (decider, projector, scheduler) in one process, over a real NATS server."""

from __future__ import annotations

import asyncio
import pathlib
from typing import Any

import click

from statemachines.model.timefmt import parse_duration
from vcbus.cli.operating import Operations, operations_options
from vcbus.cli.output import namespace_scope
from vcbus import exitcodes
from vcbus.errors import UserError
from vcbus.observability.probes import DEFAULT_ADDR
from vcbus.bus.cloudevents import resolve_source
from vcbus.k8s.bridge import RESOURCES as BRIDGED
from vcbus.services import SERVICES, SchedulerOptions, choose_services, serve
from vcbus.settings import bus_options, from_flags, service_credentials_option


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
  vcbus up --cluster-nats 3                  # three local servers, streams at replicas 3
  vcbus up --nats nats://a:4222,nats://b:4222,nats://c:4222   # an existing cluster
  vcbus up --retention-max-age 30d --retention-max-bytes 50GiB
  vcbus up --kubeconfig ~/.kube/config       # job controller and scheduler on a cluster
  vcbus up --cluster --no-scheduler          # job controller only; Volcano's scheduler binds
  vcbus up --cluster --scheduler-conf sched.yaml --schedule-period 2s
  vcbus up --cluster --observe-only          # beside Volcano: record, decide, compare
  vcbus up --cluster --leader-elect          # replicas: one leads (a Lease), the others stand by
  vcbus up --metrics-addr :9464 --log-format json   # /metrics /healthz /readyz for everyone; JSON logs

Stops cleanly on Ctrl-C / SIGTERM (the record being decided is finished first).
"""


def register(group: click.Group) -> None:
    group.add_command(up)


def setup_logging(verbose: int) -> None:
    """The one log format (vcbus.observability.logging), as --log-format says."""
    Operations.current().configure_logging(verbose)


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
@service_credentials_option
@operations_options(default_addr=DEFAULT_ADDR, leader=True)
@click.option(
    "--service",
    "-s",
    "services",
    multiple=True,
    type=click.Choice(SERVICES),
    help="Run only this service (repeatable). Default: decider and projector, and with a cluster "
    "(not --observe-only) the scheduler.",
)
@click.option("--once", is_flag=True, help="Decide and project what is in the streams, then exit (stopped before that by Ctrl-C or SIGTERM: exit 130).")
@click.option(
    "--partition", "decider_partitions", type=int, multiple=True, metavar="K",
    help="Run the decider of partition K only (repeatable; one process per partition uses one core each). "
    "Default: a decider for every partition of VCBUS_K8S.",
)
@click.option(
    "--partitions", type=int, metavar="N",
    help="Create VCBUS_K8S with N partitions (by job; default 1). An existing stream keeps its count: "
    "`vcbus bus repartition N` changes it (docs/operations.md).",
)
@click.option("--kubeconfig", metavar="PATH", help="Run the cluster side against this cluster.")
@click.option("--context", metavar="NAME", help="The kubeconfig context to use (default: its current one).")
@click.option("--cluster", is_flag=True, help="Run the cluster side: in-cluster config, else the current context.")
@click.option(
    "--observe-only", is_flag=True, help="Cluster side without actuator and scheduler: record and compare only."
)
@click.option("--no-scheduler", is_flag=True, help="Do not run the scheduler (Volcano's scheduler places the pods).")
@click.option(
    "--stored-commands-only", is_flag=True,
    help="The actuator applies a command only once it is stored on VCBUS_CMDS. Default: a command the decider "
    "of this process decides is applied at once, while it is stored (3-4 ms sooner; docs/operations.md).",
)
@click.option(
    "--actuator-concurrency", type=int, default=32, show_default=True, metavar="N",
    help="API commands the actuator applies at once: a job's pods side by side, each pod's and each job-wide "
    "write (status, PodGroup) in order (docs/operations.md 'The actuator').",
)
@click.option(
    "--kube-api-qps", type=float, default=2000.0, show_default=True, metavar="QPS",
    help="Requests per second to the API server, on average (client-go's limiter, Volcano's flag; 0: no limit).",
)
@click.option(
    "--kube-api-burst", type=int, default=2000, show_default=True, metavar="N",
    help="Requests to the API server at once before --kube-api-qps applies (Volcano's flag).",
)
@click.option(
    "--kube-api-timeout", default="30s", show_default=True, metavar="DURATION",
    help="How long one API request may take before it is retried (watches have their own).",
)
@click.option(
    "--connect-timeout", default="5m", show_default=True, metavar="DURATION",
    help="How long to keep trying an API server never reached before exiting 4 (0: for ever). Each try is "
    "logged with the next; /readyz is not ready meanwhile. Once reached, outages are ridden out.",
)
@click.option(
    "--scheduler-conf",
    metavar="FILE",
    help="The scheduler's config: Volcano's volcano-scheduler.conf YAML (default: the helm install's).",
)
@click.option(
    "--schedule-period", default="1s", show_default=True, help="Time between scheduling sessions (Volcano's flag)."
)
@click.option("-n", "--namespace", "watch_namespace", metavar="NS", help="Watch only this namespace (default: all).")
@click.option("-A", "--all-namespaces", "watch_all", is_flag=True, help="Watch every namespace (the default).")
@click.option("--port", type=int, default=0, show_default=True, help="Embedded server's port (0: a free one).")
@click.option(
    "--sync-interval",
    default="always",
    show_default=True,
    help="Embedded server's fsync interval: 'always', or a duration such as 2m (NATS' default).",
)
@click.option(
    "--duplicate-window",
    default="10m",
    show_default=True,
    help="How long JetStream remembers message ids (a decider restart must be shorter); "
    "the streams are brought to it.",
)
@click.option(
    "--cluster-nats",
    "cluster_nats",
    type=int,
    metavar="N",
    help="Run N local nats-servers as one JetStream cluster (3 to 5) instead of the single embedded "
    "server; streams and KV get min(N, 3) replicas. Its stores live under --data-dir (n1..nN).",
)
@click.option(
    "--replicas",
    metavar="N",
    envvar="VCBUS_REPLICAS",
    help="Replicas of the streams and KV buckets [env VCBUS_REPLICAS; default: the cluster's size, at most 3; "
    "1 on a single server]. Setting it rescales existing streams.",
)
@click.option(
    "--retention-max-age",
    metavar="AGE",
    envvar="VCBUS_RETENTION_MAX_AGE",
    help="Drop stream messages older than AGE (e.g. 30d, 12h; 0: keep forever) [env VCBUS_RETENTION_MAX_AGE; "
    "default: keep forever, existing streams unchanged]. See docs/operations.md 'Retention'.",
)
@click.option(
    "--retention-max-bytes",
    metavar="SIZE",
    envvar="VCBUS_RETENTION_MAX_BYTES",
    help="Keep at most SIZE per stream, dropping the oldest (e.g. 10GiB; 0: unlimited) "
    "[env VCBUS_RETENTION_MAX_BYTES; default: unlimited, existing streams unchanged].",
)
@click.option(
    "--source", metavar="URI", envvar="VCBUS_CE_SOURCE",
    help="CloudEvents source of the events and commands published [env VCBUS_CE_SOURCE; default: "
    "/vcbus/clusters/<the kubeconfig context's cluster>, else /vcbus]; one per cluster (docs/events.md).",
)
@click.option("-v", "--verbose", count=True, help="More logging (-vv: debug).")
@click.option("-q", "--quiet", is_flag=True, help="Only warnings and errors.")
def up(
    nats_url: str | None,
    data_dir: pathlib.Path | None,
    services: tuple[str, ...],
    once: bool,
    decider_partitions: tuple[int, ...],
    partitions: int | None,
    kubeconfig: str | None,
    context: str | None,
    cluster: bool,
    observe_only: bool,
    no_scheduler: bool,
    stored_commands_only: bool,
    actuator_concurrency: int,
    kube_api_qps: float,
    kube_api_burst: int,
    kube_api_timeout: str,
    connect_timeout: str,
    scheduler_conf: str | None,
    schedule_period: str,
    watch_namespace: str | None,
    watch_all: bool,
    port: int,
    sync_interval: str,
    duplicate_window: str,
    cluster_nats: int | None,
    replicas: str | None,
    retention_max_age: str | None,
    retention_max_bytes: str | None,
    source: str | None,
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
        ce_source=resolve_source(source, kubeconfig=kubeconfig, context=context),
        **cluster_and_retention(nats_url, port, cluster_nats, replicas, retention_max_age, retention_max_bytes),
        **partition_settings(partitions, decider_partitions),
    )
    api_client = None
    ops = Operations.current(DEFAULT_ADDR)
    if kubeconfig or cluster or context:
        from vcbus.k8s.cluster import api_client_for

        if once:
            raise UserError("--once decides what is in the streams; it cannot be combined with a cluster")
        if not 1 <= actuator_concurrency <= 1024:
            raise UserError(f"--actuator-concurrency {actuator_concurrency}: expected 1..1024")
        if kube_api_qps < 0:
            raise UserError(f"--kube-api-qps {kube_api_qps:g}: expected 0 (no limit) or more")
        if kube_api_burst < 1:
            raise UserError(f"--kube-api-burst {kube_api_burst}: expected 1 or more")
        api_client = api_client_for(kubeconfig, context=context, qps=kube_api_qps, burst=kube_api_burst,
                                    timeout=duration(kube_api_timeout, "--kube-api-timeout"),
                                    connections=actuator_concurrency + len(BRIDGED) + 1)  # a watch each
        ops.elect(api_client)
    elif ops.leader_elect:
        raise UserError("--leader-elect takes a Lease on the cluster: add --kubeconfig PATH or --cluster")
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
    from vcbus import switch_interval

    switch_interval.configure()  # the actuator's threads get the GIL back within 1 ms of their socket waits
    interrupted = asyncio.run(
        serve(
            settings,
            chosen,
            once=once,
            api_client=api_client,
            observe_only=observe_only,
            ahead=not stored_commands_only,
            concurrency=actuator_concurrency,
            namespace=namespace_scope(watch_namespace, watch_all),
            scheduler=scheduler,
            ops=ops,
            decider_partitions=decider_partitions or None,
            connect_timeout=0.0 if connect_timeout.strip() in ("0", "0s") else duration(connect_timeout, "--connect-timeout"),
        )
    )
    if interrupted:  # --once is a finite command, not a server: stopped before it was done is the table's 130
        click.echo("vcbus up --once: interrupted before the streams were decided and projected to their end; "
                   "run it again to go on from where it stopped", err=True)
        raise SystemExit(exitcodes.INTERRUPTED)


def partition_settings(partitions: int | None, chosen: tuple[int, ...]) -> dict[str, Any]:
    """`--partitions N` (at creation) as settings; `--partition K` checked for range."""
    from vcbus.bus.partitions import MAX_PARTITIONS

    if partitions is not None and not 1 <= partitions <= MAX_PARTITIONS:
        raise UserError(f"--partitions {partitions}: expected 1..{MAX_PARTITIONS}")
    for k in chosen:
        if not 0 <= k < MAX_PARTITIONS:
            raise UserError(f"--partition {k}: expected 0..{MAX_PARTITIONS - 1}")
    return {"partitions": partitions} if partitions is not None else {}


def cluster_and_retention(
    nats_url: str | None,
    port: int,
    cluster_nats: int | None,
    replicas: str | None,
    max_age: str | None,
    max_bytes: str | None,
) -> dict[str, Any]:
    """The settings of `--cluster-nats`, `--replicas` and `--retention-*` (None: not given)."""
    from vcbus.settings import parse_age, parse_replicas, parse_size

    values: dict[str, Any] = {}
    if cluster_nats is not None:
        if nats_url:
            raise UserError("--cluster-nats starts local servers; it cannot be combined with --nats URL")
        if port:
            raise UserError("--port is the single embedded server's; --cluster-nats picks free ports")
        if cluster_nats != 1 and not 3 <= cluster_nats <= 5:
            raise UserError(f"--cluster-nats {cluster_nats}: expected 3 to 5 servers (1: no cluster)")
        values["nats_servers"] = cluster_nats
    if replicas is not None:
        values["replicas"] = parse_replicas(replicas, "--replicas")
    if max_age is not None:
        values["max_age"] = parse_age(max_age, "--retention-max-age")
    if max_bytes is not None:
        values["max_bytes"] = parse_size(max_bytes, "--retention-max-bytes")
    return values
