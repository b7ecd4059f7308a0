"""`vcbus queue list|get|open|close`: Volcano's `vcctl queue` commands, kubectl's conventions.

As vcctl (`pkg/cli/queue/list.go`, `get.go`, `operate.go`, `util.go`): the PodGroup
counts by phase are counted from the PodGroups of every namespace, and open/close
create a `bus.volcano.sh/v1alpha1` Command (OpenQueue, CloseQueue) named
`<queue>-<action>-<random>`, owned by the queue, in namespace `default` (queues are
cluster-scoped; vcctl puts their Commands there). The queue controller, vcbus's
(`statemachines/queues/`) or Volcano's, consumes it and moves the queue's state.
"""

from __future__ import annotations

import click

from vcbus.cli.kubecli import Cluster, age, cluster_options, command_object, emit, nothing_found, output_option
from vcbus.k8s.watching import resource_kind

QUEUES = resource_kind("queues")
PODGROUPS = resource_kind("podgroups")
COMMANDS = resource_kind("commands")
COMMAND_NAMESPACE = "default"  # vcctl's createQueueCommand
COUNTED = ("Inqueue", "Pending", "Running", "Unknown", "Completed")

HELP = """List and inspect Volcano queues, and open or close them (Volcano's vcctl queue).

\b
Examples:
  vcbus queue list
  vcbus queue list -o wide
  vcbus queue get default -o yaml
  vcbus queue close team-a        # a CloseQueue Command: Closing, then Closed
  vcbus queue open team-a         # an OpenQueue Command

The INQUEUE..COMPLETED columns count the PodGroups of each queue by phase, as vcctl.
Exit codes: docs/cli.md (1 no such queue; 4 the cluster is unreachable or refused).
"""


def register(group: click.Group) -> None:
    group.add_command(queue)


@click.group(help=HELP)
def queue() -> None:
    pass


def _counts(cluster: Cluster) -> dict[str, dict[str, int]]:
    listed = cluster.request("GET", PODGROUPS, verb="list", namespace=None)
    counts: dict[str, dict[str, int]] = {}
    for pg in listed.get("items") or ():
        name = (pg.get("spec") or {}).get("queue") or ""
        phase = (pg.get("status") or {}).get("phase") or ""
        if phase in COUNTED:
            by_phase = counts.setdefault(name, dict.fromkeys(COUNTED, 0))
            by_phase[phase] += 1
    return counts


def queue_rows(objects: list[dict], counts: dict[str, dict[str, int]], *, wide: bool) -> list[list[str]]:
    header = ["NAME", "WEIGHT", "STATE", "PARENT", *(c.upper() for c in COUNTED)]
    if wide:
        header += ["RECLAIMABLE", "AGE"]
    rows = [header]
    for obj in objects:
        meta, spec, st = obj["metadata"], obj.get("spec") or {}, obj.get("status") or {}
        by_phase = counts.get(meta["name"]) or dict.fromkeys(COUNTED, 0)
        row = [meta["name"], str(spec.get("weight") or 0), st.get("state") or "-", spec.get("parent") or "-",
               *(str(by_phase[c]) for c in COUNTED)]
        if wide:
            reclaimable = spec.get("reclaimable")
            row += ["true" if reclaimable is None or reclaimable else "false", age(meta.get("creationTimestamp"))]
        rows.append(row)
    return rows


def _clean(obj: dict) -> dict:
    obj.setdefault("apiVersion", QUEUES.api_version)
    obj.setdefault("kind", "Queue")
    obj.get("metadata", {}).pop("managedFields", None)
    return obj


@queue.command("list")
@click.option("-l", "--selector", metavar="SELECTOR", help="A label selector.")
@output_option()
@cluster_options
def list_command(selector: str | None, fmt: str | None, kubeconfig: str | None, context: str | None) -> None:
    """List queues with their PodGroup counts (vcctl queue list)."""
    cluster = Cluster(kubeconfig, context)
    listed = cluster.request("GET", QUEUES, verb="list", query={"labelSelector": selector} if selector else None)
    items = sorted((_clean(dict(i, apiVersion=QUEUES.api_version, kind="Queue")) for i in listed.get("items") or ()),
                   key=lambda i: i["metadata"]["name"])
    if not items and fmt not in ("json", "yaml"):
        nothing_found(cluster, None, namespaced=False)
        return
    counts = _counts(cluster) if fmt in (None, "wide") else {}
    emit(items, fmt, single=False, rk=QUEUES, table=lambda objs: queue_rows(objs, counts, wide=fmt == "wide"))


@queue.command("get")
@click.argument("name")
@output_option()
@cluster_options
def get_command(name: str, fmt: str | None, kubeconfig: str | None, context: str | None) -> None:
    """Show one queue with its PodGroup counts (vcctl queue get)."""
    cluster = Cluster(kubeconfig, context)
    obj = _clean(cluster.request("GET", QUEUES, verb="get", name=name))
    counts = _counts(cluster) if fmt in (None, "wide") else {}
    emit([obj], fmt, single=True, rk=QUEUES, table=lambda objs: queue_rows(objs, counts, wide=fmt == "wide"))


def _operate(action: str, name: str, kubeconfig: str | None, context: str | None, fmt: str | None = None) -> None:
    cluster = Cluster(kubeconfig, context)
    target = _clean(cluster.request("GET", QUEUES, verb="get", name=name))
    cmd = cluster.request("POST", COMMANDS, verb="create", namespace=COMMAND_NAMESPACE,
                          body=command_object(target, action, COMMAND_NAMESPACE))
    if fmt is not None:  # the created Command, as `kubectl create -o`
        emit([cmd], fmt, single=True, rk=COMMANDS, table=lambda objs: [])
        return
    click.echo(f"command.bus.volcano.sh/{cmd['metadata']['name']} created in namespace {COMMAND_NAMESPACE}: "
               f"{action} queue {name}")


@queue.command("open")
@click.argument("name")
@output_option(("json", "yaml", "name"))
@cluster_options
def open_command(name: str, fmt: str | None, kubeconfig: str | None, context: str | None) -> None:
    """Open a queue: create an OpenQueue Command for it (vcctl queue operate -a open)."""
    _operate("OpenQueue", name, kubeconfig, context, fmt)


@queue.command("close")
@click.argument("name")
@output_option(("json", "yaml", "name"))
@cluster_options
def close_command(name: str, fmt: str | None, kubeconfig: str | None, context: str | None) -> None:
    """Close a queue: create a CloseQueue Command for it (vcctl queue operate -a close)."""
    _operate("CloseQueue", name, kubeconfig, context, fmt)
