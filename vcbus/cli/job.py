"""`vcbus job run|list|view|suspend|resume|delete`: Volcano's `vcctl job` commands, kubectl's conventions.

They talk to the API server, not to the bus, so they work the same with vcbus or
Volcano's controller in charge. As vcctl (`pkg/cli/job/*.go`, `pkg/cli/util/util.go`),
suspend and resume create a `bus.volcano.sh/v1alpha1` Command (action AbortJob or
ResumeJob) in the job's namespace, named `<job>-<action>-<random>` and owned by the
job; both controllers consume such a Command (and delete it) exactly once.
"""

from __future__ import annotations

import click

from vcbus.cli.kubecli import (
    Cluster,
    ClusterError,
    age,
    cluster_options,
    command_object,
    emit,
    nothing_found,
    output_option,
    parse_name,
)
from vcbus.errors import UserError
from vcbus.k8s.watching import ResourceKind, resource_kind

JOBS = resource_kind("vcjobs")
COMMANDS = resource_kind("commands")
EVENTS = ResourceKind("events", "", "v1", "events", "Event", True)
JOB_TYPE_LABEL = "volcano.sh/job-type"  # Volcano's v1alpha1.JobTypeKey

HELP = """Run, list, inspect, suspend, resume and delete vcjobs on a cluster (Volcano's vcctl job).

\b
Examples:
  vcbus job run -f job.yaml                      # create the vcjob(s) of a file
  vcbus job list                                 # the context's namespace
  vcbus job list -A -o wide
  vcbus job view default/my-job                  # spec, status and events
  vcbus job suspend my-job -n team-a             # an AbortJob Command, as vcctl
  vcbus job resume my-job -n team-a              # a ResumeJob Command
  vcbus job delete default/my-job -o name        # job.batch.volcano.sh/my-job, as kubectl delete -o name

Every subcommand takes --kubeconfig and --context; the namespace is -n, else the
context's, else default. Exit codes: docs/cli.md (1 no such job; 4 the cluster is
unreachable, refused or rejected the request).
"""


def register(group: click.Group) -> None:
    group.add_command(job)


@click.group(help=HELP)
def job() -> None:
    pass


def _replicas(obj: dict) -> int:
    return sum(int(t.get("replicas") or 0) for t in (obj.get("spec") or {}).get("tasks") or ())


def job_rows(objects: list[dict], *, all_namespaces: bool, wide: bool) -> list[list[str]]:
    """vcctl's list columns (upper case, as kubectl), with NAMESPACE under -A and more under -o wide."""
    header = ["NAME", "CREATION", "PHASE", "JOBTYPE", "REPLICAS", "MIN", "PENDING", "RUNNING", "SUCCEEDED",
              "FAILED", "UNKNOWN", "RETRYCOUNT"]
    if wide:
        header += ["QUEUE", "SCHEDULER", "VERSION", "AGE"]
    rows = [(["NAMESPACE"] if all_namespaces else []) + header]
    for obj in objects:
        meta, spec, st = obj["metadata"], obj.get("spec") or {}, obj.get("status") or {}
        row = [meta["name"], (meta.get("creationTimestamp") or "")[:10] or "-",
               (st.get("state") or {}).get("phase") or "-",
               (meta.get("labels") or {}).get(JOB_TYPE_LABEL) or "Batch", str(_replicas(obj))]
        row += [str(st.get(k) or 0) for k in ("minAvailable", "pending", "running", "succeeded", "failed", "unknown",
                                               "retryCount")]
        if wide:
            row += [spec.get("queue") or "-", spec.get("schedulerName") or "-", str(st.get("version") or 0),
                    age(meta.get("creationTimestamp"))]
        rows.append(([meta.get("namespace", "")] if all_namespaces else []) + row)
    return rows


@job.command("run")
@click.option("-f", "--filename", "files", multiple=True, required=True, metavar="FILE",
              type=click.Path(dir_okay=False, allow_dash=True),
              help="A YAML or JSON file of vcjobs (repeatable; - reads standard input).")
@click.option("-n", "--namespace", metavar="NS", help="Create them here unless the file names a namespace.")
@output_option(("json", "yaml", "name"))
@cluster_options
def run_command(files: tuple[str, ...], namespace: str | None, fmt: str | None, kubeconfig: str | None,
                context: str | None) -> None:
    """Create the vcjobs of one or more files (vcctl job run -f)."""
    from vcbus.manifests import load_all

    docs = load_all(list(files))
    for doc in docs:
        if doc.obj.get("apiVersion") != JOBS.api_version or doc.obj.get("kind") != "Job":
            raise UserError(f"{doc.where}: {doc.obj.get('apiVersion')}/{doc.obj.get('kind')} is not a "
                            f"{JOBS.api_version} Job")
        meta = doc.obj.get("metadata")
        if not isinstance(meta, dict) or not (meta.get("name") or meta.get("generateName")):
            raise UserError(f"{doc.where}: the Job has no metadata.name")
        if namespace and meta.get("namespace") not in (None, namespace):
            raise UserError(f"{doc.where}: the Job names namespace {meta['namespace']} but -n says {namespace}")
    if not docs:
        raise UserError(f"{', '.join(files)}: no objects")
    cluster = Cluster(kubeconfig, context)
    created = []
    for doc in docs:
        ns = doc.obj["metadata"].get("namespace") or namespace or cluster.namespace
        try:
            obj = cluster.request("POST", JOBS, verb="create", namespace=ns, body=doc.obj)
        except ClusterError as err:
            raise ClusterError(f"{doc.where}: {err}") from None
        created.append(obj)
        if fmt is None:
            click.echo(f"job.batch.volcano.sh/{obj['metadata']['name']} created in namespace {ns}")
    if fmt is not None:
        emit(created, fmt, single=len(created) == 1, rk=JOBS, table=lambda o: [])


@job.command("list")
@click.option("-n", "--namespace", metavar="NS", help="This namespace (default: the context's, else default).")
@click.option("-A", "--all-namespaces", "all_namespaces", is_flag=True, help="Every namespace.")
@click.option("-l", "--selector", metavar="SELECTOR", help="A label selector (e.g. app=train).")
@click.option("-q", "--queue", metavar="QUEUE", help="Only jobs in this queue (as vcctl).")
@click.option("-S", "--scheduler", metavar="NAME", help="Only jobs for this scheduler (as vcctl).")
@output_option()
@cluster_options
def list_command(namespace: str | None, all_namespaces: bool, selector: str | None, queue: str | None,
                 scheduler: str | None, fmt: str | None, kubeconfig: str | None, context: str | None) -> None:
    """List vcjobs, as vcctl job list (NAME, PHASE, the pod counts, RETRYCOUNT)."""
    if namespace and all_namespaces:
        raise UserError("give --namespace or --all-namespaces (-A), not both")
    cluster = Cluster(kubeconfig, context)
    ns = None if all_namespaces else namespace or cluster.namespace
    listed = cluster.request("GET", JOBS, verb="list", namespace=ns,
                             query={"labelSelector": selector} if selector else None)
    items = [dict(i, apiVersion=JOBS.api_version, kind="Job") for i in listed.get("items") or ()]
    items = [i for i in items if (not queue or (i.get("spec") or {}).get("queue") == queue)
             and (not scheduler or (i.get("spec") or {}).get("schedulerName") == scheduler)]
    items.sort(key=lambda i: (i["metadata"].get("namespace", ""), i["metadata"]["name"]))
    for i in items:
        i["metadata"].pop("managedFields", None)
    if not items and fmt not in ("json", "yaml"):
        nothing_found(cluster, ns)
        return
    emit(items, fmt, single=False, rk=JOBS,
         table=lambda objs: job_rows(objs, all_namespaces=all_namespaces, wide=fmt == "wide"))


def _get_job(cluster: Cluster, value: str, namespace: str | None) -> dict:
    ns, name = parse_name(value, namespace, cluster.namespace, what="job")
    obj = cluster.request("GET", JOBS, verb="get", namespace=ns, name=name)
    obj.setdefault("apiVersion", JOBS.api_version)
    obj.setdefault("kind", "Job")
    obj.get("metadata", {}).pop("managedFields", None)
    return obj


@job.command("view")
@click.argument("name", metavar="NS/NAME")
@click.option("-n", "--namespace", metavar="NS", help="The job's namespace when NAME has none.")
@output_option(("json", "yaml", "name"))
@cluster_options
def view_command(name: str, namespace: str | None, fmt: str | None, kubeconfig: str | None,
                 context: str | None) -> None:
    """Show one vcjob: spec, status and its Events (vcctl job view)."""
    cluster = Cluster(kubeconfig, context)
    obj = _get_job(cluster, name, namespace)
    if fmt is not None:
        emit([obj], fmt, single=True, rk=JOBS, table=lambda o: [])
        return
    meta = obj["metadata"]
    events = cluster.request("GET", EVENTS, verb="list", namespace=meta["namespace"], query={
        "fieldSelector": f"involvedObject.name={meta['name']},involvedObject.kind=Job"})
    from vcbus.cli.job_view import describe

    click.echo(describe(obj, events.get("items") or []), nl=False)


def _command(action: str, name: str, namespace: str | None, kubeconfig: str | None, context: str | None,
             fmt: str | None = None) -> None:
    cluster = Cluster(kubeconfig, context)
    target = _get_job(cluster, name, namespace)
    ns = target["metadata"]["namespace"]
    cmd = cluster.request("POST", COMMANDS, verb="create", namespace=ns, body=command_object(target, action, ns))
    if fmt is not None:  # the created Command, as `kubectl create -o`
        emit([cmd], fmt, single=True, rk=COMMANDS, table=lambda objs: [])
        return
    click.echo(f"command.bus.volcano.sh/{cmd['metadata']['name']} created: {action} job {ns}/{target['metadata']['name']}")


@job.command("suspend")
@click.argument("name", metavar="NS/NAME")
@click.option("-n", "--namespace", metavar="NS", help="The job's namespace when NAME has none.")
@output_option(("json", "yaml", "name"))
@cluster_options
def suspend_command(name: str, namespace: str | None, fmt: str | None, kubeconfig: str | None,
                  context: str | None) -> None:
    """Abort a vcjob: create an AbortJob Command for it (vcctl job suspend)."""
    _command("AbortJob", name, namespace, kubeconfig, context, fmt)


@job.command("resume")
@click.argument("name", metavar="NS/NAME")
@click.option("-n", "--namespace", metavar="NS", help="The job's namespace when NAME has none.")
@output_option(("json", "yaml", "name"))
@cluster_options
def resume_command(name: str, namespace: str | None, fmt: str | None, kubeconfig: str | None,
                  context: str | None) -> None:
    """Resume an aborted vcjob: create a ResumeJob Command for it (vcctl job resume)."""
    _command("ResumeJob", name, namespace, kubeconfig, context, fmt)


@job.command("delete")
@click.argument("name", metavar="NS/NAME")
@click.option("-n", "--namespace", metavar="NS", help="The job's namespace when NAME has none.")
@output_option(("json", "yaml", "name"), default_help="a line; json or yaml: the job as it was deleted; "
               "name: job.batch.volcano.sh/NAME, as kubectl delete -o name")
@cluster_options
def delete_command(name: str, namespace: str | None, fmt: str | None, kubeconfig: str | None,
                   context: str | None) -> None:
    """Delete a vcjob (vcctl job delete); its pods and PodGroup go with it (owner references)."""
    cluster = Cluster(kubeconfig, context)
    ns, job_name = parse_name(name, namespace, cluster.namespace, what="job")
    if fmt in ("json", "yaml"):  # the job as it was deleted: read, then deleted only if it is still that one
        job = _get_job(cluster, name, namespace)
        answer = cluster.request("DELETE", JOBS, verb="delete", namespace=ns, name=job_name,
                                 body={"apiVersion": "v1", "kind": "DeleteOptions",
                                       "preconditions": {"uid": job["metadata"]["uid"]}})
        if isinstance(answer, dict) and answer.get("kind") == "Job":  # still there (finalizers): as it is now
            answer.get("metadata", {}).pop("managedFields", None)
            job = answer
        emit([job], fmt, single=True, rk=JOBS, table=lambda objs: [])
        return
    cluster.request("DELETE", JOBS, verb="delete", namespace=ns, name=job_name)
    if fmt == "name":  # as `kubectl delete -o name`
        click.echo(f"job.batch.volcano.sh/{job_name}")
        return
    click.echo(f"job.batch.volcano.sh/{job_name} deleted from namespace {ns}")
