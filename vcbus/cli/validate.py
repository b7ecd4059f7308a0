"""`vcbus validate`: Volcano's job and queue admission, offline, on manifest files.

Each vcjob goes through what the API server does: the CRD defaults, the
mutating webhook (CREATE only), the CRD schema, then the validating webhook
(CREATE, or the UPDATE rules with `--old`). Each
Queue goes through the queue webhooks. The result is printed per object, one
line per problem with the field it is about, followed by the exact message
the API server would return. Exit status: 0 all admitted, 1 some object
denied, 2 unreadable input or bad options.
"""

from __future__ import annotations

import json
from typing import Any

import click

from statemachines.admission import QueueIndex, default_queues, mutate_job, validate_create, validate_update
from statemachines.admission.mutate import DEFAULT_SCHEDULER
from statemachines.admission.bounds import DEFAULT_MAX_PODS, object_problems
from statemachines.admission.mutate import apply_patch
from statemachines.admission.queues import queue_patch, validate_queue
from statemachines.admission.schema import (
    QUEUE_KIND, crd_defaults, crd_queue_defaults, name_errors, queue_schema_errors, schema_errors, schema_message,
)
from statemachines.plugins.args import parse_go_bool
from vcbus.errors import UserError
from vcbus.manifests import Document, load_all

JOB_API = "batch.volcano.sh/v1alpha1"
QUEUE_API = "scheduling.volcano.sh/v1beta1"
FEATURE_GATES = {"PodLevelResources": True}
WEBHOOKS = {"Job": "validatejob.volcano.sh", "Queue": "validatequeue.volcano.sh"}


def parse_feature_gates(values: tuple[str, ...]) -> dict[str, bool]:
    """`K=V[,K=V]` options -> gate values (known gates only)."""
    gates = dict(FEATURE_GATES)
    for value in values:
        for item in filter(None, (part.strip() for part in value.split(","))):
            key, sep, raw = item.partition("=")
            if not sep or key not in FEATURE_GATES:
                known = ", ".join(sorted(FEATURE_GATES))
                raise UserError(f"--feature-gates: {item!r} is not K=V with a known gate (known: {known})")
            try:
                gates[key] = parse_go_bool(raw)
            except ValueError:
                raise UserError(f"--feature-gates: {key}={raw}: the value must be true or false") from None
    return gates


def queue_index(queue_files: tuple[str, ...], docs: list[Document]) -> QueueIndex:
    """Queues from --queues (default: `default`, Open), plus Queue objects of the input files."""
    queues = [d.obj for d in load_all(list(queue_files)) if d.kind == "Queue"] if queue_files else None
    base = default_queues().queues.values() if queues is None else queues
    return QueueIndex(list(base) + [d.obj for d in docs if d.kind == "Queue"])


def _key(doc: Document) -> tuple[str, str, str]:
    meta = doc.obj.get("metadata") if isinstance(doc.obj.get("metadata"), dict) else {}
    return doc.kind, str(meta.get("namespace") or "default"), str(meta.get("name", ""))


def _old_for(doc: Document, olds: list[Document]) -> dict[str, Any] | None:
    same = [o for o in olds if _key(o) == _key(doc)]
    if same:
        return same[0].obj
    kinds = [o for o in olds if o.kind == doc.kind]
    return kinds[0].obj if len(kinds) == 1 else None


def check(doc: Document, *, queues: QueueIndex, olds: list[Document] | None, gates: dict[str, bool], scheduler: str,
          max_pods: int = DEFAULT_MAX_PODS) -> dict[str, Any]:
    """One object's result: {object, where, operation, allowed, problems[{field, message}], message}."""
    result: dict[str, Any] = {"object": doc.label, "where": doc.where, "allowed": True, "problems": [], "message": ""}
    broken = object_problems(doc.obj)
    if broken:  # nothing can read it: not a Kubernetes object at all
        result.update(operation="CREATE", allowed=False, webhook="", message="; ".join(m for _, m in broken))
        result["problems"] = [{"field": f, "message": m} for f, m in broken]
        return result
    api = str(doc.obj.get("apiVersion", ""))
    old = _old_for(doc, olds) if olds is not None else None
    if olds is not None and old is None:
        raise UserError(f"{doc.where}: {doc.label}: no object of that kind and name in --old")
    result["operation"] = "UPDATE" if old is not None else "CREATE"
    if doc.kind == "Job" and api == JOB_API:
        job = crd_defaults(doc.obj)
        job.setdefault("metadata", {}).setdefault("namespace", "default")
        if old is None:
            job = mutate_job(job, scheduler_name=scheduler)
        schema = schema_errors(job)
        if schema:
            result.update(allowed=False, webhook="", message=schema_message(job, schema))
            result["problems"] = [{"field": e.path, "message": e.body()} for e in schema]
            return result
        if old is None:
            verdict = validate_create(job, queues=queues, pod_level_resources=gates["PodLevelResources"], max_pods=max_pods)
        else:
            verdict = validate_update(crd_defaults(old), job, max_pods=max_pods)
        result["allowed"], result["message"] = verdict.allowed, verdict.message
        result["problems"] = [{"field": p.field, "message": p.message.strip()} for p in verdict.problems]
    elif doc.kind == "Queue" and api == QUEUE_API:
        queue = crd_queue_defaults(doc.obj)
        queue = queue if old is not None else apply_patch(queue, queue_patch(queue))
        # The API server's checks, before the validating webhook: the name (on create) and the CRD schema.
        refused = (name_errors(queue) if old is None else []) + queue_schema_errors(queue)
        if refused:
            result.update(allowed=False, webhook="", message=schema_message(queue, refused, QUEUE_KIND))
            result["problems"] = [{"field": e.path, "message": e.body()} for e in refused]
            return result
        error = validate_queue(result["operation"], queue, old, queues)
        if error:
            result.update(allowed=False, message=error, problems=[{"field": "", "message": error}])
    else:
        result["skipped"] = f"not checked: vcbus validates {JOB_API} Job and {QUEUE_API} Queue objects"
    return result


def _checked(doc: Document, **options: Any) -> dict[str, Any]:
    """`check`, with a clear error for an object too malformed to check (wrong types deep inside)."""
    try:
        return check(doc, **options)
    except (ValueError, TypeError, AttributeError, KeyError) as err:
        raise UserError(f"{doc.where}: {doc.label}: malformed object, cannot check it: {err!r}") from err


def _print_text(result: dict[str, Any]) -> None:
    head = f"{result['where']}: {result['object']}"
    if result.get("skipped"):
        click.echo(f"{head}: skipped ({result['skipped']})")
        return
    if result["allowed"]:
        click.echo(f"{head}: ok")
        return
    click.echo(f"{head}: denied ({result['operation']})")
    for problem in result["problems"]:
        text = problem["message"].replace("\n", "\n      ")
        click.echo(f"  - {problem['field']}: {text}" if problem["field"] else f"  - {text}")
    webhook = result.get("webhook", WEBHOOKS.get(result["object"].split(" ")[0], ""))
    if webhook:
        click.echo(f'  kubectl would say: admission webhook "{webhook}" denied the request: {result["message"]}')
    else:
        click.echo(f"  kubectl would say: {result['message']} (API server: object name and CRD schema)")


@click.command("validate")
@click.argument("files", nargs=-1, required=True, metavar="FILE...")
@click.option("--queues", "queue_files", multiple=True, metavar="FILE",
              help="Queue objects to check against (List or multi-document YAML). Default: a queue `default`, Open.")
@click.option("--old", "old_files", multiple=True, metavar="FILE",
              help="The objects before the change: validate an UPDATE instead of a CREATE.")
@click.option("--feature-gates", "feature_gates", multiple=True, metavar="K=V",
              help="Kubernetes feature gates that change validation: PodLevelResources (default true).")
@click.option("--scheduler-name", default=DEFAULT_SCHEDULER, show_default=True,
              help="The mutating webhook's default spec.schedulerName.")
@click.option("--max-pods-per-job", "max_pods", type=click.IntRange(min=1), default=DEFAULT_MAX_PODS, show_default=True,
              help="Deny a job whose tasks ask for more pods than this in all (a vcbus bound; the webhook's flag of the same name).")
@click.option("-o", "--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
def validate_command(files: tuple[str, ...], queue_files: tuple[str, ...], old_files: tuple[str, ...],
                     feature_gates: tuple[str, ...], scheduler_name: str, max_pods: int, output: str) -> None:
    """Run Volcano's admission webhooks on vcjob and Queue manifests, without a cluster.

    A vcjob goes through what the API server would do with it: the CRD defaults,
    the mutating webhook's defaults (queue, schedulerName, maxRetry, minAvailable,
    task names, implicit svc/ssh plugins), the API server's name check (a DNS-1123
    subdomain) and the CRD schema, then every rule of the
    validating webhook, with Volcano's own messages. Each problem is printed
    with its field. Exit status: 0 admitted, 1 denied, 2 unreadable input.

    \b
    Examples:
      vcbus validate examples/resnet-dist-train.yaml
      vcbus validate job.yaml --queues queues.yaml          # check queue existence and state
      vcbus validate new.yaml --old live.yaml               # an UPDATE: only some fields may change
      vcbus validate job.yaml --feature-gates PodLevelResources=false
      kubectl get vcjob my-job -o yaml | vcbus validate -
    """
    docs = load_all(list(files))
    if not docs:
        raise UserError(f"no objects in {', '.join(files)}")
    gates = parse_feature_gates(feature_gates)
    queues = queue_index(queue_files, docs)
    olds = load_all(list(old_files)) if old_files else None
    results = [_checked(d, queues=queues, olds=olds, gates=gates, scheduler=scheduler_name, max_pods=max_pods) for d in docs]
    if output == "json":
        click.echo(json.dumps(results, indent=2, ensure_ascii=False))
    else:
        for result in results:
            _print_text(result)
    if not all(r["allowed"] for r in results):
        denied = sum(not r["allowed"] for r in results)
        raise UserError(f"{denied} of {len(results)} objects denied", exit_code=1)


def register(group: click.Group) -> None:
    group.add_command(validate_command)
