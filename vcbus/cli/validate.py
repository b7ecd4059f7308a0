"""`vcbus validate`: Volcano's job and queue admission, offline, on manifest files.

Each object first goes through what `kubectl apply` and the API server's
decoding do (`decode_refusal`): kubectl's apiVersion/kind checks and REST
mapping, ObjectMeta's Go types, strict field validation (unknown and
duplicated fields, with their lines). Then each vcjob goes
through the CRD defaults, the schema's type check (Volcano's webhook decodes
into Go types), the mutating webhook (CREATE only), the CRD schema and the
annotations' size, then the validating webhook (CREATE, or the UPDATE rules
with `--old`), and last etcd's limit on an object's size (`stored_refusal`). Each Queue goes
through the queue webhooks. The result is printed per object, one line per
problem with the field it is about (and its line), followed by the exact
message kubectl would print. An object of a kind vcbus does not check is an
error unless `--skip-unknown`. Exit status: 0 all admitted, 1 some object
denied, 2 unreadable input, an object vcbus does not check, or bad options.
"""

from __future__ import annotations

from typing import Any

import click

from statemachines.admission import QueueIndex, default_queues, mutate_job, validate_create, validate_update
from statemachines.admission.mutate import DEFAULT_SCHEDULER
from statemachines.admission.bounds import DEFAULT_MAX_PODS, object_problems
from statemachines.admission.cronjobs import validate_cronjob
from statemachines.admission.jobflows import validate_jobflow
from statemachines.admission.decoding import (
    decode_message, kind_problem, metadata_error, strict_errors, strict_message, type_errors,
)
from statemachines.admission.limits import size_error
from statemachines.admission.mutate import apply_patch
from statemachines.admission.plugin_warnings import plugin_warnings
from statemachines.admission.queues import queue_patch, validate_queue
from statemachines.admission.schema import (
    JOB_SCHEMA, JOBFLOW_KIND, JOBFLOW_SCHEMA, QUEUE_KIND, QUEUE_SCHEMA, crd_defaults, crd_queue_defaults, meta_errors, queue_schema_errors,
    schema_errors, schema_message,
)
from statemachines.plugins.args import parse_go_bool
from vcbus.cronjobs.zonedata import zones_for
from vcbus.cli.output import output_options, print_document
from vcbus.errors import UserError
from vcbus.manifests import Document, load_all, load_documents

JOB_API = "batch.volcano.sh/v1alpha1"
QUEUE_API = "scheduling.volcano.sh/v1beta1"
FLOW_API = "flow.volcano.sh/v1alpha1"
FEATURE_GATES = {"PodLevelResources": True}
WEBHOOKS = {"Job": "validatejob.volcano.sh", "Queue": "validatequeue.volcano.sh", "CronJob": "validatecronjob.volcano.sh",
            "JobFlow": "validatejobflow.volcano.sh"}
CHECKED = {(JOB_API, "Job"): JOB_SCHEMA, (QUEUE_API, "Queue"): QUEUE_SCHEMA}
NOT_CHECKED = f"vcbus checks {JOB_API} Job and {QUEUE_API} Queue objects"


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


def _problem(doc: Document, field: str, message: str, line: int | None = None) -> dict[str, Any]:
    """A problem's record: its field, its message, and the line of its key when the file shows it."""
    problem: dict[str, Any] = {"field": field, "message": message}
    where = line if line is not None else doc.lines.get(field)
    if where is not None:
        problem["line"] = where
    return problem


def decode_refusal(doc: Document) -> dict[str, Any] | None:
    """What kubectl or the API server's decoding answers before any webhook, else None.

    {message, kubectl, problems}: `message` the API server's (or kubectl's) text,
    `kubectl` the whole line `kubectl apply -f` prints. Objects of kinds vcbus does
    not check pass (`check` reports them).
    """
    obj, source = doc.obj, doc.source
    kind = kind_problem(obj)
    if kind is not None:
        stage, text = kind
        field = text.split(" ")[0]  # `kind not set`, `apiVersion isn't string type`, `no matches for kind ...`
        if stage == "validation":
            line = (f'error: error validating "{source}": error validating data: {text}; if you choose to ignore'
                    " these errors, turn validation off with --validate=false")
        else:
            field = "kind"
            meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
            line = (f'error: resource mapping not found for name: "{meta.get("name", "")}" namespace:'
                    f' "{meta.get("namespace", "")}" from "{source}": {text}\nensure CRDs are installed first')
        return {"message": text, "kubectl": line, "problems": [_problem(doc, field, text)]}
    schema = CHECKED.get((obj["apiVersion"], obj["kind"]))
    if schema is None:
        return None
    created = f'Error from server (BadRequest): error when creating "{source}": '
    undecodable = metadata_error(obj)
    if undecodable is not None:
        field, error = undecodable
        message = decode_message(obj["kind"], obj["apiVersion"], error)
        _, client_error = metadata_error(obj, "metadata.") or undecodable  # kubectl decodes metadata first
        return {"message": message, "kubectl": f'error: unable to decode "{source}": {client_error}',
                "problems": [_problem(doc, field, error)]}
    errors = strict_errors(obj, schema, [path for path, _ in doc.duplicates])
    if errors:
        message = strict_message(obj["kind"], obj["apiVersion"], errors)
        lines = [line for _, line in doc.duplicates] + [None] * (len(errors) - len(doc.duplicates))
        problems = [_problem(doc, path, text, line) for (path, text), line in zip(errors, lines)]
        return {"message": message, "kubectl": created + message, "problems": problems}
    return None


def stored_refusal(doc: Document) -> dict[str, Any] | None:
    """etcd's answer to an admitted object it cannot store (over 1.5 MiB), else None. Last: the API
    server validates the metadata and the schema, then the validating webhooks run, and only the write
    meets etcd's limit (tests/test_validate_strict.py sees that order on a real API server)."""
    too_large = size_error(doc.obj)
    if not too_large:
        return None
    return {"message": too_large, "kubectl": f'Error from server: error when creating "{doc.source}": {too_large}',
            "problems": [_problem(doc, "", too_large)]}


MISTYPED = "the CRD schema's words; in a cluster Volcano's webhook refuses it first, failing to decode it"


def _refused(result: dict[str, Any], doc: Document, errors: list[Any], message: str,
             note: str = "API server: object name and CRD schema") -> dict[str, Any]:
    """`result` denied by the API server itself (schema, name) or by decoding (types): one problem per field error."""
    result.update(allowed=False, webhook="", message=message, note=note)
    result["problems"] = [_problem(doc, e.path, e.body()) for e in errors]
    return result


def check(doc: Document, *, queues: QueueIndex, olds: list[Document] | None, gates: dict[str, bool], scheduler: str,
          max_pods: int = DEFAULT_MAX_PODS) -> dict[str, Any]:
    """One object's result: {object, where, operation, allowed, problems[{field, message, line?}], message}."""
    result: dict[str, Any] = {"object": doc.label, "where": doc.where, "allowed": True, "problems": [], "message": ""}
    refusal = decode_refusal(doc)
    if refusal is not None:
        result.update(operation="CREATE", allowed=False, webhook="", **refusal)
        return result
    broken = object_problems(doc.obj)
    if broken:  # nothing can read it: not a Kubernetes object at all
        result.update(operation="CREATE", allowed=False, webhook="", message="; ".join(m for _, m in broken))
        result["problems"] = [_problem(doc, f, m) for f, m in broken]
        return result
    api = str(doc.obj.get("apiVersion", ""))
    if (api, doc.kind) == (JOB_API, "CronJob"):  # Volcano's CronJob webhook (statemachines/admission/cronjobs.py)
        result["operation"] = "UPDATE" if olds is not None and _old_for(doc, olds) is not None else "CREATE"
        spec = doc.obj.get("spec") if isinstance(doc.obj.get("spec"), dict) else {}
        zone = spec.get("timeZone")
        error = validate_cronjob(doc.obj, zones_for(zone if isinstance(zone, str) else None))
        if error:
            result.update(allowed=False, message=error, problems=[_problem(doc, "", error)])
        return result
    if (api, doc.kind) == (FLOW_API, "JobFlow"):  # Volcano's JobFlow webhook (statemachines/admission/jobflows.py)
        result["operation"] = "UPDATE" if olds is not None and _old_for(doc, olds) is not None else "CREATE"
        mistyped = type_errors(doc.obj, JOBFLOW_SCHEMA)
        if mistyped:
            return _refused(result, doc, mistyped, schema_message(doc.obj, mistyped, JOBFLOW_KIND), MISTYPED)
        error = validate_jobflow(doc.obj)
        if error:
            result.update(allowed=False, message=error, problems=[_problem(doc, "spec.flows", error)])
        return result
    if (api, doc.kind) not in CHECKED:
        result.update(allowed=None, skipped=f"not checked: {NOT_CHECKED}")
        return result
    old = _old_for(doc, olds) if olds is not None else None
    if olds is not None and old is None:
        raise UserError(f"{doc.where}: {doc.label}: no object of that kind and name in --old")
    result["operation"] = "UPDATE" if old is not None else "CREATE"
    if doc.kind == "Job":
        job = crd_defaults(doc.obj)
        job.setdefault("metadata", {}).setdefault("namespace", "default")
        mistyped = type_errors(job, JOB_SCHEMA)  # Volcano's webhook decodes into Go types before anything else
        if mistyped:
            return _refused(result, doc, mistyped, schema_message(job, mistyped), MISTYPED)
        if old is None:
            job = mutate_job(job, scheduler_name=scheduler)
        schema = schema_errors(job)
        if schema:
            return _refused(result, doc, schema, schema_message(job, schema))
        if old is None:
            verdict = validate_create(job, queues=queues, pod_level_resources=gates["PodLevelResources"], max_pods=max_pods)
        else:
            verdict = validate_update(crd_defaults(old), job, max_pods=max_pods)
        result["allowed"], result["message"] = verdict.allowed, verdict.message
        result["problems"] = [_problem(doc, p.field, p.message.strip()) for p in verdict.problems]
        warnings = [_problem(doc, field, message) for field, message in plugin_warnings(job)]
        if warnings:
            result["warnings"] = warnings
    else:
        queue = crd_queue_defaults(doc.obj)
        mistyped = type_errors(queue, QUEUE_SCHEMA)
        if mistyped:
            return _refused(result, doc, mistyped, schema_message(queue, mistyped, QUEUE_KIND), MISTYPED)
        queue = queue if old is not None else apply_patch(queue, queue_patch(queue))
        # The API server's checks, before the validating webhook: the metadata and the CRD schema.
        refused = meta_errors(queue, create=old is None) + queue_schema_errors(queue)
        if refused:
            return _refused(result, doc, refused, schema_message(queue, refused, QUEUE_KIND))
        error = validate_queue(result["operation"], queue, old, queues)
        if error:
            result.update(allowed=False, message=error, problems=[_problem(doc, "", error)])
    if result["allowed"]:
        refusal = stored_refusal(doc)
        if refusal is not None:
            result.update(allowed=False, webhook="", **refusal)
    return result


def _checked(doc: Document, **options: Any) -> dict[str, Any]:
    """`check`, with a clear error for an object too malformed to check (a case no rule above names)."""
    try:
        return check(doc, **options)
    except (ValueError, TypeError, AttributeError, KeyError) as err:
        raise UserError(f"{doc.where}: {doc.label}: malformed object, cannot check it ({type(err).__name__}: {err})") from err


def _problem_text(problem: dict[str, Any], source: str) -> str:
    """`field: message (file:line)`, continuation lines indented."""
    text = problem["message"].replace("\n", "\n      ")
    if "line" in problem:
        text += f" ({source}:{problem['line']})"
    return f"{problem['field']}: {text}" if problem["field"] else text


def _print_text(result: dict[str, Any], skip_unknown: bool) -> None:
    head = f"{result['where']}: {result['object']}"
    if result.get("skipped"):
        hint = "" if skip_unknown else "; --skip-unknown to pass over it"
        click.echo(f"{head}: {'skipped' if skip_unknown else 'not checked'} ({result['skipped']}{hint})")
        return
    source = result["where"].rpartition(":")[0]
    click.echo(f"{head}: ok" if result["allowed"] else f"{head}: denied ({result['operation']})")
    for warning in result.get("warnings", ()):
        click.echo(f"  warning: {_problem_text(warning, source)}")
    if result["allowed"]:
        return
    for problem in result["problems"]:
        click.echo(f"  - {_problem_text(problem, source)}")
    webhook = result.get("webhook", WEBHOOKS.get(result["object"].split(" ")[0], ""))
    if result.get("kubectl"):
        click.echo("  kubectl would say: " + result["kubectl"].replace("\n", "\n    "))
    elif webhook:
        click.echo(f'  kubectl would say: admission webhook "{webhook}" denied the request: {result["message"]}')
    else:
        click.echo(f"  kubectl would say: {result['message']} ({result.get('note', 'API server')})")


def describe_kinds(docs: list[Document]) -> str:
    """`2 Deployment (apps/v1), 1 ConfigMap (v1)`: what a file holds, for a message."""
    counts: dict[str, int] = {}
    for doc in docs:
        key = f"{doc.kind or '<no kind>'} ({doc.obj.get('apiVersion') or 'no apiVersion'})"
        counts[key] = counts.get(key, 0) + 1
    return ", ".join(f"{n} {key}" for key, n in counts.items())


def nothing_to_check(files: tuple[str, ...], docs: list[Document]) -> UserError:
    """The error for input with no object vcbus checks: what the files hold, what to give instead."""
    names = ", ".join(files)
    give = f"give {JOB_API} Job or {QUEUE_API} Queue manifests (YAML or JSON), e.g. examples/resnet-dist-train.yaml"
    if not docs:
        return UserError(f"{names}: no objects in it (empty, or only comments): {give}")
    return UserError(f"{names}: holds {describe_kinds(docs)}, nothing vcbus checks: {give}")


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
@click.option("--skip-unknown", is_flag=True,
              help="Pass over objects of kinds vcbus does not check (Deployments, ConfigMaps...) instead of failing (exit 2).")
@output_options(("text", "json", "yaml"), json_alias=False, default="text", dest="output",
                default_help="the findings as text; json or yaml: a list, one entry per object, the same either way")
def validate_command(files: tuple[str, ...], queue_files: tuple[str, ...], old_files: tuple[str, ...],
                     feature_gates: tuple[str, ...], scheduler_name: str, max_pods: int, skip_unknown: bool,
                     output: str) -> None:
    """Run Volcano's admission webhooks on vcjob and Queue manifests, without a cluster.

    Each object first gets kubectl's and the API server's strict decoding:
    apiVersion and kind, unknown and duplicated fields (`strict decoding
    error: unknown field "spec.minAvaliable"`, with its line), metadata types.
    A vcjob then goes through what the API server would do
    with it: the CRD defaults, the mutating webhook's defaults (queue,
    schedulerName, maxRetry, minAvailable, task names, implicit svc/ssh
    plugins), the API server's name check (a DNS-1123 subdomain), the
    annotations' size (256 KiB) and the CRD schema, then every rule of the
    validating webhook, with Volcano's own messages, and last etcd's limit
    (an object over 1.5 MiB). Each problem is printed with its field. Exit status: 0
    admitted, 1 denied, 2 unreadable input or an object vcbus does not check
    (unless --skip-unknown).

    \b
    Examples:
      vcbus validate examples/resnet-dist-train.yaml
      vcbus validate job.yaml --queues queues.yaml          # check queue existence and state
      vcbus validate new.yaml --old live.yaml               # an UPDATE: only some fields may change
      vcbus validate job.yaml --feature-gates PodLevelResources=false
      kubectl get vcjob my-job -o yaml | vcbus validate -
      vcbus validate --skip-unknown app.yaml                # a file that also holds Deployments, Services...
      vcbus validate job.yaml -o yaml                       # the findings as YAML (or -o json)
    """
    docs: list[Document] = []
    for name in files:  # as `kubectl apply -f`, every file must hold an object
        found = load_documents(name)
        if not found:
            raise nothing_to_check((name,), found)
        docs += found
    gates = parse_feature_gates(feature_gates)
    queues = queue_index(queue_files, docs)
    olds = load_all(list(old_files)) if old_files else None
    results = [_checked(d, queues=queues, olds=olds, gates=gates, scheduler=scheduler_name, max_pods=max_pods) for d in docs]
    unchecked = [d for d, r in zip(docs, results) if r.get("skipped")]
    if len(unchecked) == len(docs) and not skip_unknown:
        raise nothing_to_check(files, docs)
    if output in ("json", "yaml"):
        print_document(results, output)
    else:
        for result in results:
            _print_text(result, skip_unknown)
    denied = sum(r["allowed"] is False for r in results)
    if unchecked and not skip_unknown:
        raise UserError(
            f"{len(unchecked)} of {len(results)} objects not checked ({describe_kinds(unchecked)}: {NOT_CHECKED})"
            + (f" and {denied} denied" if denied else "") + "; give --skip-unknown to pass over other kinds"
        )
    if denied:
        raise UserError(f"{denied} of {len(results)} objects denied", exit_code=1)


def register(group: click.Group) -> None:
    group.add_command(validate_command)
