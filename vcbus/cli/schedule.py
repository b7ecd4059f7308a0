"""`vcbus schedule`: Volcano scheduling sessions over a cluster snapshot, offline."""

from __future__ import annotations

from typing import Any

import click

from vcbus.cli.output import chosen, output_options, print_document

HELP = """Run Volcano scheduling sessions over a snapshot of a cluster, offline, and show the decisions.

\b
INPUT (a file, or - for standard input) is one of
  - a v1 List, JSON or YAML:  kubectl get KINDS -A -o json
  - YAML documents of those kinds (spec.nodeName for bound pods)
  - a watch log, as `vcbus replay` reads it (the last state of each object is the snapshot)
with KINDS the ones the scheduler reads:
  nodes,queues,podgroups,pods,priorityclasses,namespaces,pvc,pv,storageclasses,csinodes,volumeattachments,
  services,rc,rs,sts
(namespaces for pod affinity's namespaceSelector; pvc, pv and storageclasses for the volume checks,
csinodes and volumeattachments for the nodes' volume limits;
services, rc, rs and sts for the default topology spreading); vcjobs are read to name a job by its
vcjob. Other kinds are ignored. The scheduler configuration is Volcano's default (the helm install's
volcano-scheduler.conf) unless --config names another (the .conf YAML, or its ConfigMap).

\b
Between sessions the decisions show as the cluster would show them: a bound pod gets
spec.nodeName (its phase is unchanged), an evicted pod a deletionTimestamp, PodGroup and
queue status writes take effect. Session n runs 1 s after session n-1.

\b
Examples:
  vcbus schedule examples/scheduler/three-nodes.yaml
  vcbus schedule examples/scheduler/three-nodes.yaml --sessions 2     # binds, then Running
  vcbus schedule examples/scheduler/two-nodes.yaml --json | jq '.podGroups[].conditions'
  vcbus schedule watch.log --config volcano-scheduler.conf
  kubectl get nodes,queues,podgroups,pods,priorityclasses,namespaces,pvc,pv,storageclasses,csinodes,volumeattachments,services,rc,rs,sts \\
    -A -o json | vcbus schedule -

\b
-o json (or --json) prints one object, -o yaml the same as YAML:
{"sessions", "binds": [{"namespace","name","node"}] (in decision order, every session), "evictions": [{"namespace","name"}], "podGroups": [{"namespace","name","phase",
"conditions"}] and "queues": [{"name","state","allocated","deserved"}] (after the last session)}.

Exit codes: 0 ok; 2 bad input (the message names the file and the object).
"""


def register(group: click.Group) -> None:
    group.add_command(schedule)


def bind_row(b: Any) -> dict[str, str]:  # a Bind
    return {"namespace": b.namespace, "name": b.name, "node": b.node}


def podgroup_row(pg: dict[str, Any]) -> dict[str, Any]:
    return {
        "namespace": pg["namespace"],
        "name": pg["name"],
        "phase": pg.get("phase", ""),
        "conditions": [
            {k: c.get(k, "") for k in ("type", "status", "reason", "message")} for c in pg.get("conditions") or []
        ],
    }


def queue_row(q: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": q["name"],
        "state": q.get("state", ""),
        "allocated": dict(q.get("allocated") or {}),
        "deserved": dict(q.get("deserved") or {}),
    }


def report(results: list[Any]) -> dict[str, Any]:
    """The --json document for the sessions run."""
    last = results[-1]
    return {
        "sessions": len(results),
        "binds": [bind_row(b) for r in results for b in r.binds],
        "evictions": [{"namespace": e.namespace, "name": e.name} for r in results for e in r.evictions],
        "podGroups": [podgroup_row(pg) for pg in last.podgroups],
        "queues": [queue_row(q) for q in last.queues],
    }


@click.command(help=HELP)
@click.argument("input_path", metavar="INPUT")
@click.option("--config", "config_path", metavar="CONF.yaml", help="Scheduler configuration (default: Volcano's).")
@click.option("--sessions", type=click.IntRange(1, 10_000), default=1, show_default=True, help="Sessions to run.")
@output_options(("json", "yaml"), default_help="the sessions as text")
def schedule(input_path: str, config_path: str | None, sessions: int, fmt: str | None, as_json: bool) -> None:
    from vcbus.offline_cluster import OfflineCluster
    from vcbus.schedconf import load_config
    from vcbus.snapshots import open_snapshot

    config = load_config(config_path)
    data, source = open_snapshot(input_path)
    cluster = OfflineCluster(config)
    from vcbus.cli.schedule_text import print_sessions, snapshot_line

    head = snapshot_line(cluster.load(data, source))
    results = cluster.run(sessions)
    form = chosen(fmt, as_json)
    if form in ("json", "yaml"):
        print_document(report(results), form)
        return
    print_sessions(head, cluster.base_time(), results)
