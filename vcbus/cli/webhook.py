"""`vcbus webhook`: serve Volcano's job and queue admission webhooks over HTTPS.

Paths: `/jobs/mutate`, `/jobs/validate`, `/queues/mutate`, `/queues/validate`
(AdmissionReview v1) and `GET /healthz`. Register them with the manifests in
deploy/webhook/ (failurePolicy Fail). Queues come from the cluster
(`--kubeconfig`, or the in-cluster service account) or from `--queues` files.
"""

from __future__ import annotations

import logging
import signal
import ssl
from typing import Any

import click

from statemachines.admission.mutate import DEFAULT_SCHEDULER
from statemachines.admission.bounds import DEFAULT_MAX_PODS
from statemachines.admission.review import Settings
from vcbus.cli.operating import Operations, operations_options
from vcbus.cli.validate import parse_feature_gates
from vcbus.errors import UserError
from vcbus.observability.probes import Readiness, serve
from vcbus.webhook.queues import StaticQueues, cluster_queues
from vcbus.webhook.server import AdmissionServer

log = logging.getLogger("vcbus.webhook")


def _queue_source(queue_files: tuple[str, ...], kubeconfig: str | None, context: str | None = None) -> Any:
    if queue_files:
        return StaticQueues(list(queue_files))
    try:
        return cluster_queues(kubeconfig, context=context)
    except Exception as err:  # the kubernetes client raises several unrelated types
        raise UserError(f"cannot reach the cluster for queues ({err}); give --kubeconfig or --queues") from err


def _queues_problem(queues: Any) -> str | None:
    """/readyz: the webhook answers only once it can read the Queues it validates against."""
    try:
        queues()
    except Exception as err:  # the queue source raises whatever its cluster client raises
        return f"cannot read queues: {err}"
    return None


def _stop(*_: object) -> None:
    """SIGTERM ends `serve_forever` like Ctrl-C does (shutdown() would deadlock in this thread)."""
    raise KeyboardInterrupt


@click.command("webhook")
@operations_options(bus=False)
@click.option("--tls-cert", required=True, type=click.Path(exists=True, dir_okay=False), help="PEM certificate (chain).")
@click.option("--tls-key", required=True, type=click.Path(exists=True, dir_okay=False), help="PEM private key.")
@click.option("--port", default=8443, show_default=True, type=click.IntRange(0, 65535), help="0 picks a free port.")
@click.option("--host", default="0.0.0.0", show_default=True, help="Address to listen on.")
@click.option("--kubeconfig", type=click.Path(exists=True, dir_okay=False), help="Cluster to read Queues from.")
@click.option("--context", metavar="NAME", help="The kubeconfig context to use (default: its current one).")
@click.option("--queues", "queue_files", multiple=True, metavar="FILE", help="Read Queues from files instead.")
@click.option("--scheduler-name", default=DEFAULT_SCHEDULER, show_default=True, help="Default spec.schedulerName.")
@click.option("--feature-gates", "feature_gates", multiple=True, metavar="K=V", help="PodLevelResources=true|false.")
@click.option("--max-queue-depth", default=5, show_default=True, type=int)
@click.option("--enable-root-queue-protection/--disable-root-queue-protection", default=True, show_default=True)
@click.option("--enable-queue-allocated-pods-check", is_flag=True, default=False)
@click.option("--max-pods-per-job", "max_pods", type=click.IntRange(min=1), default=DEFAULT_MAX_PODS, show_default=True,
              help="Deny a job whose tasks ask for more pods than this in all (a vcbus bound).")
def webhook_command(tls_cert: str, tls_key: str, port: int, host: str, kubeconfig: str | None, context: str | None,
                    queue_files: tuple[str, ...], scheduler_name: str, feature_gates: tuple[str, ...],
                    max_queue_depth: int, enable_root_queue_protection: bool,
                    enable_queue_allocated_pods_check: bool, max_pods: int) -> None:
    """Serve the vcjob and Queue admission webhooks (mutate + validate) over HTTPS.

    The answers are Volcano's: defaults on CREATE, every validation rule with
    Volcano's message text. The server fails closed: anything it cannot read
    or decide is denied with the reason.

    \b
    Examples:
      vcbus webhook --tls-cert tls.crt --tls-key tls.key --kubeconfig ~/.kube/config
      vcbus webhook --tls-cert tls.crt --tls-key tls.key --port 9443 --queues queues.yaml
      kubectl apply -f deploy/webhook/       # Service, Deployment and webhook configurations
    """
    gates = parse_feature_gates(feature_gates)
    settings = Settings(
        scheduler_name=scheduler_name,
        pod_level_resources=gates["PodLevelResources"],
        max_queue_depth=max_queue_depth,
        root_queue_protection=enable_root_queue_protection,
        queue_allocated_pods_check=enable_queue_allocated_pods_check,
        max_pods_per_job=max_pods,
    )
    ops = Operations.current()
    ops.configure_logging(0)
    queues = _queue_source(queue_files, kubeconfig, context)
    try:
        server = AdmissionServer((host, port), cert_file=tls_cert, key_file=tls_key, queues=queues, settings=settings)
    except ssl.SSLError as err:
        raise UserError(f"cannot load --tls-cert/--tls-key: {err}") from err
    except OSError as err:
        raise UserError(f"cannot listen on {host}:{port}: {err.strerror or err}") from err
    readiness = Readiness(role=None, connected=None, checks=[lambda: _queues_problem(queues)])
    probes = serve(ops.metrics_addr or "", readiness)
    signal.signal(signal.SIGTERM, _stop)
    log.info("vcbus webhook listening on https://%s:%d", host, server.port)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        if probes is not None:
            probes.stop()


def register(group: click.Group) -> None:
    group.add_command(webhook_command)
