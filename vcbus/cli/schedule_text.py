"""The text output of `vcbus schedule`: one readable block per session.

Each block says what the session decided (binds, evictions) and how the PodGroups and
queues stand after it: the PodGroup phase and its conditions (type, status, reason and,
for Unschedulable, Volcano's message in full), the queue state and its allocated and
deserved resources. Columns are aligned; nothing is wrapped, so the messages can be
copied and grepped.
"""

from __future__ import annotations

from typing import Any

import click

from statemachines import outputs as o


def table(rows: list[list[str]], indent: str = "  ") -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [(indent + "   ".join(c.ljust(w) for c, w in zip(r, widths))).rstrip() for r in rows]


def resources(values: dict[str, str]) -> str:
    """`cpu 9, memory 24Gi, pods 3` (cpu and memory first, then scalars by name); `-` when empty."""
    if not values:
        return "-"
    order = sorted(values, key=lambda k: (k not in ("cpu", "memory"), k != "cpu", k))
    return ", ".join(f"{k} {values[k]}" for k in order)


def session_line(number: int, result: Any, time: str) -> str:  # a SessionResult
    info = next((x for x in result.outputs if isinstance(x, o.SchedulingSession)), None)
    scope = f"{plural(info.nodes, 'node')}, {plural(info.jobs, 'job')}: " if info is not None else ""
    return f"Session {number} ({time}): {scope}{plural(len(result.binds), 'bind')}, " + plural(
        len(result.evictions), "eviction"
    )


def session_block(number: int, result: Any, time: str) -> list[str]:  # a SessionResult
    lines = [session_line(number, result, time)]
    if result.binds:
        lines += table([["BIND", "NAMESPACE", "POD", "NODE"]] + [["", b.namespace, b.name, b.node] for b in result.binds])
    if result.evictions:
        lines += table([["EVICT", "NAMESPACE", "POD"]] + [["", e.namespace, e.name] for e in result.evictions])
    if result.podgroups:
        lines.append("")
        rows = [["NAMESPACE", "PODGROUP", "PHASE", "CONDITIONS"]]
        for pg in result.podgroups:
            conds = pg.get("conditions") or []
            summary = ", ".join(f"{c.get('type')}={c.get('status')}" for c in conds) or "-"
            rows.append([pg["namespace"], pg["name"], pg.get("phase") or "-", summary])
        lines += table(rows)
        for pg in result.podgroups:
            for c in pg.get("conditions") or []:
                if c.get("message"):
                    lines.append(f"  {pg['namespace']}/{pg['name']} {c.get('type')} ({c.get('reason')}):")
                    lines.append(f"    {c['message']}")
    if result.queues:
        lines.append("")
        rows = [["QUEUE", "STATE", "ALLOCATED", "DESERVED"]]
        for q in result.queues:
            rows.append([q["name"], q.get("state") or "-", resources(q.get("allocated") or {}),
                         resources(q.get("deserved") or {})])
        lines += table(rows)
    return lines


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 'es' if word.endswith('s') else 's'}"


ALWAYS_COUNTED = ("Node", "Queue", "PodGroup", "Pod")
# the other kinds the scheduler reads, named when the input holds any
ALSO_COUNTED = ("PriorityClass", "Namespace", "PersistentVolumeClaim", "PersistentVolume", "StorageClass", "CSINode",
                "VolumeAttachment", "Service", "ReplicationController", "ReplicaSet", "StatefulSet")


def snapshot_line(snap: Any) -> str:  # a vcbus.snapshots.Snapshot
    """What the input held (say it before the sessions add to it)."""
    counts = ", ".join([plural(len(snap.of_kind(k)), k) for k in ALWAYS_COUNTED]
                       + [plural(n, k) for k in ALSO_COUNTED if (n := len(snap.of_kind(k)))])
    ignored = ", ".join(f"{n} {k}" for k, n in sorted(snap.ignored.items()))
    return f"{snap.source} ({snap.form}): {counts}" + (f"; ignored {ignored}" if ignored else "")


def print_sessions(head: str, base_time: str, results: list[Any]) -> None:
    from statemachines.model.timefmt import fmt, parse

    click.echo(head)
    base = parse(base_time)
    for i, result in enumerate(results, start=1):
        click.echo("")
        for line in session_block(i, result, fmt(base + i - 1)):
            click.echo(line)
