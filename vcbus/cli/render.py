"""`vcbus render`: what a vcjob turns into, before it is applied (like `helm template`).

Prints the vcjob after the mutating webhook, then its PodGroup, PVCs, pods and
plugin objects (`statemachines.manifests.job.render_job`), as multi-document YAML or
a `v1 List` in JSON. The job is checked first like the API server would (CRD
schema, then the webhook; queue existence only with `--queues`); a job the
cluster would refuse is not rendered (exit 1).
"""

from __future__ import annotations

from typing import Any

import click

from statemachines.admission import QueueIndex, mutate_job, validate_create
from statemachines.admission.bounds import DEFAULT_MAX_PODS, object_problems
from statemachines.admission.decoding import kind_problem, type_errors
from statemachines.admission.mutate import DEFAULT_SCHEDULER
from statemachines.admission.plugin_warnings import plugin_warnings
from statemachines.admission.schema import JOB_SCHEMA, crd_defaults, schema_errors, schema_message
from statemachines.manifests.job import prepare, render_job
from statemachines.plugins import PluginError
from vcbus.cli.validate import JOB_API, decode_refusal, describe_kinds, parse_feature_gates, stored_refusal
from vcbus.cli.output import name_of
from vcbus.errors import UserError
from vcbus.manifests import Document, dump_json, dump_yaml, load_all, load_documents
from vcbus.sshkeys import generate_ssh_keypair


def _needs_ssh_keys(job: dict[str, Any]) -> bool:
    plugins = (job.get("spec") or {}).get("plugins") or {}
    return "ssh" in plugins or "mpi" in plugins


def _queues(job: dict[str, Any], queue_files: tuple[str, ...]) -> QueueIndex:
    if queue_files:
        return QueueIndex([d.obj for d in load_all(list(queue_files)) if d.kind == "Queue"])
    name = str((job.get("spec") or {}).get("queue", ""))
    return QueueIndex([{"metadata": {"name": name}, "status": {"state": "Open"}}])


def _render_one(doc: Document, *, file: str, namespace: str, scheduler_name: str, queue_files: tuple[str, ...],
                pod_level_resources: bool, max_pods: int = DEFAULT_MAX_PODS) -> list[dict[str, Any]]:
    """Check one job as kubectl and the API server would, then render it."""
    hint = f"\n(run `vcbus validate {file}` for each problem and its field)"
    refusal = decode_refusal(doc)
    if refusal is not None:
        raise UserError(f"{doc.where}: {doc.label}: {refusal['message']}{hint}", exit_code=1)
    broken = object_problems(doc.obj)
    if broken:
        raise UserError(f"{doc.where}: {doc.label}: not a readable job: {'; '.join(m for _, m in broken)}", exit_code=1)
    job = crd_defaults(prepare(doc.obj, namespace=namespace))
    mistyped = type_errors(job, JOB_SCHEMA)
    if mistyped:
        raise UserError(f"{doc.where}: {doc.label}: {schema_message(job, mistyped)}{hint}", exit_code=1)
    mutated = mutate_job(job, scheduler_name=scheduler_name)
    schema = schema_errors(mutated)
    verdict = validate_create(mutated, queues=_queues(mutated, queue_files), pod_level_resources=pod_level_resources,
                              max_pods=max_pods)
    if schema or not verdict.allowed:
        why = schema_message(mutated, schema) if schema else f"the admission webhook would deny it: {verdict.message}"
        raise UserError(f"{doc.where}: {doc.label}: {why}{hint}", exit_code=1)
    stored = stored_refusal(doc)  # etcd's limit, last, as in the API server
    if stored is not None:
        raise UserError(f"{doc.where}: {doc.label}: {stored['message']}{hint}", exit_code=1)
    for field, warning in plugin_warnings(mutated):
        click.echo(f"warning: {doc.where}: {field}: {warning}", err=True)
    keys = generate_ssh_keypair() if _needs_ssh_keys(job) else None
    queue = _queues(mutated, queue_files).get(str((mutated.get("spec") or {}).get("queue", ""))) or {}
    forwarding = bool((queue.get("spec") or {}).get("extendClusters"))
    return render_job(job, scheduler_name=scheduler_name, namespace=namespace, ssh_keys=keys, job_forwarding=forwarding)


@click.command("render")
@click.argument("file", metavar="FILE")
@click.option("-o", "--output", type=click.Choice(["yaml", "json", "name"]), default="yaml", show_default=True,
              help="yaml, json (a v1 List), or name (kubectl's kind.group/name, one per object).")
@click.option("--pod", "pod_name", metavar="NAME", help="Print only this pod (e.g. my-job-worker-0).")
@click.option("--namespace", "-n", default="default", show_default=True, help="Namespace for jobs that name none.")
@click.option("--queues", "queue_files", multiple=True, metavar="FILE",
              help="Queue objects to validate against; without it the job's queue is assumed Open.")
@click.option("--scheduler-name", default=DEFAULT_SCHEDULER, show_default=True,
              help="The mutating webhook's default spec.schedulerName.")
@click.option("--feature-gates", "feature_gates", multiple=True, metavar="K=V",
              help="Kubernetes feature gates that change validation: PodLevelResources (default true).")
@click.option("--max-pods-per-job", "max_pods", type=click.IntRange(min=1), default=DEFAULT_MAX_PODS, show_default=True,
              help="Refuse a job whose tasks ask for more pods than this in all.")
def render_command(file: str, output: str, pod_name: str | None, namespace: str, queue_files: tuple[str, ...],
                   scheduler_name: str, feature_gates: tuple[str, ...], max_pods: int) -> None:
    """Show every object a vcjob becomes: the job with its defaults, PodGroup, pods, plugin objects.

    The first object is the vcjob after Volcano's mutating webhook (queue,
    schedulerName, maxRetry, minAvailable, implicit svc/ssh plugins). Then come
    the objects the job controller creates: the PodGroup, PVCs, each pod
    <job>-<task>-<index> with the env vars, ports, volumes, hostname and
    subdomain the plugins give it, and the plugins' Services, ConfigMaps,
    Secrets and NetworkPolicies. The uid (made up when absent) is stable; an
    ssh key pair, when the ssh plugin generates one, is fresh on every run.

    \b
    Examples:
      vcbus render examples/resnet-dist-train.yaml
      vcbus render examples/resnet-dist-train.yaml -o json | jq '.items[].kind'
      vcbus render examples/resnet-dist-train.yaml --pod resnet-dist-train-worker-1
      vcbus render job.yaml --queues queues.yaml     # also check the queue exists and is Open

    A queue (from --queues) with spec.extendClusters makes the job forwarded,
    as Volcano's syncJob does: the job and its PodGroup are annotated
    volcano.sh/job-forwarding: "true", and every pod carries that key as a
    label and an annotation.
    """
    gates = parse_feature_gates(feature_gates)
    docs = load_documents(file)
    jobs = [d for d in docs if kind_problem(d.obj) is not None or (d.kind, d.obj.get("apiVersion")) == ("Job", JOB_API)]
    if not jobs:
        holds = f"holds {describe_kinds(docs)}" if docs else "has no objects in it (empty, or only comments)"
        raise UserError(f"{file}: {holds}, no {JOB_API} Job to render: give a vcjob manifest, e.g. examples/resnet-dist-train.yaml")
    objects: list[dict[str, Any]] = []
    for doc in jobs:
        try:
            objects += _render_one(doc, file=file, namespace=namespace, scheduler_name=scheduler_name,
                                   queue_files=queue_files, pod_level_resources=gates["PodLevelResources"],
                                   max_pods=max_pods)
        except PluginError as err:
            raise UserError(f"{doc.where}: {doc.label}: the controller could not create its pods: {err}", exit_code=1) from err
        except (ValueError, TypeError, AttributeError, KeyError, RecursionError) as err:
            raise UserError(
                f"{doc.where}: {doc.label}: malformed object, cannot render it ({type(err).__name__}: {err})"
            ) from err
    if pod_name is not None:
        pods = [o for o in objects if o.get("kind") == "Pod"]
        chosen = [p for p in pods if p["metadata"]["name"] == pod_name]
        if not chosen:
            names = ", ".join(p["metadata"]["name"] for p in pods) or "none"
            raise UserError(f"no pod {pod_name} (the pods are: {names})")
        if output == "name":
            click.echo(name_of(chosen[0]))
        else:
            click.echo(dump_json(chosen[0]) if output == "json" else dump_yaml(chosen), nl=False)
        return
    if output == "name":
        for obj in objects:
            click.echo(name_of(obj))
    elif output == "json":
        click.echo(dump_json({"apiVersion": "v1", "kind": "List", "metadata": {}, "items": objects}), nl=False)
    else:
        click.echo(dump_yaml(objects), nl=False)


def register(group: click.Group) -> None:
    group.add_command(render_command)
