"""The text of `vcbus job view`: a vcjob described as `kubectl describe` / vcctl job view print it.

Pure formatting of the objects the API server returned (the Job and its Events);
`vcbus.cli.job` fetches them.
"""

from __future__ import annotations

import json
from typing import Any

from vcbus.cli.kubecli import age


def _line(out: list[str], level: int, label: str, value: Any = None) -> None:
    pad = "  " * level
    out.append(f"{pad}{label}:" if value is None else f"{pad}{label + ':':<22}{value}")


def _mapping(value: dict | None) -> str:
    return json.dumps(value, sort_keys=True) if value else "<none>"


def _resources(container: dict) -> str:
    res = container.get("resources") or {}
    parts = []
    for kind in ("requests", "limits"):
        if res.get(kind):
            parts.append(kind + " " + ",".join(f"{k}={v}" for k, v in sorted(res[kind].items())))
    return "; ".join(parts) or "<none>"


def describe(job: dict, events: list[dict]) -> str:
    meta, spec, st = job["metadata"], job.get("spec") or {}, job.get("status") or {}
    out: list[str] = []
    _line(out, 0, "Name", meta["name"])
    _line(out, 0, "Namespace", meta.get("namespace", ""))
    _line(out, 0, "Labels", _mapping(meta.get("labels")))
    _line(out, 0, "Annotations", _mapping(meta.get("annotations")))
    _line(out, 0, "API Version", job.get("apiVersion", ""))
    _line(out, 0, "Kind", job.get("kind", ""))
    _line(out, 0, "Metadata")
    _line(out, 1, "Creation Timestamp", meta.get("creationTimestamp") or "<unknown>")
    _line(out, 1, "Generation", meta.get("generation", 0))
    _line(out, 1, "Resource Version", meta.get("resourceVersion", ""))
    _line(out, 1, "UID", meta.get("uid", ""))
    _line(out, 0, "Spec")
    _line(out, 1, "Min Available", spec.get("minAvailable", 0))
    _line(out, 1, "Queue", spec.get("queue") or "default")
    _line(out, 1, "Scheduler Name", spec.get("schedulerName") or "<none>")
    _line(out, 1, "Max Retry", spec.get("maxRetry", 3))
    if spec.get("plugins"):
        _line(out, 1, "Plugins", ", ".join(f"{k}{v or ''}" for k, v in sorted(spec["plugins"].items())))
    for policy in spec.get("policies") or ():
        trigger = policy.get("event") or ",".join(policy.get("events") or ()) or policy.get("exitCode")
        _line(out, 1, "Policy", f"{trigger} -> {policy.get('action')}")
    _line(out, 1, "Tasks")
    for task in spec.get("tasks") or ():
        _line(out, 2, "Name", task.get("name", ""))
        _line(out, 3, "Replicas", task.get("replicas", 0))
        if task.get("minAvailable") is not None:
            _line(out, 3, "Min Available", task["minAvailable"])
        pod = (task.get("template") or {}).get("spec") or {}
        for c in pod.get("containers") or ():
            _line(out, 3, "Container", f"{c.get('name', '')} {c.get('image', '')}")
            if c.get("command"):
                _line(out, 4, "Command", " ".join(map(str, c["command"])))
            _line(out, 4, "Resources", _resources(c))
        _line(out, 3, "Restart Policy", pod.get("restartPolicy") or "<none>")
    _line(out, 0, "Status")
    _line(out, 1, "Phase", (st.get("state") or {}).get("phase") or "<none>")
    for label, key in (("Min Available", "minAvailable"), ("Pending", "pending"), ("Running", "running"),
                       ("Succeeded", "succeeded"), ("Failed", "failed"), ("Terminating", "terminating"),
                       ("Unknown", "unknown"), ("Retry Count", "retryCount"), ("Version", "version")):
        if st.get(key):
            _line(out, 1, label, st[key])
    for cond in st.get("conditions") or ():
        _line(out, 1, "Condition", f"{cond.get('status', '')} since {cond.get('lastTransitionTime', '')}")
    if not events:
        out.append("Events:               <none>")
        return "\n".join(out) + "\n"
    out.append("Events:")
    rows = [["Type", "Reason", "Age", "From", "Message"], ["----", "------", "----", "----", "-------"]]
    for e in sorted(events, key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or ""):
        when = age(e.get("lastTimestamp") or e.get("eventTime"))
        if (e.get("count") or 1) > 1:
            when += f" (x{e['count']} over {age(e.get('firstTimestamp'))})"
        source = (e.get("source") or {}).get("component") or e.get("reportingComponent") or ""
        rows.append([e.get("type", ""), e.get("reason", ""), when, source, (e.get("message") or "").strip()])
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    out += ["  " + "  ".join(r[i].ljust(widths[i]) for i in range(4)) + "  " + r[4] for r in rows]
    return "\n".join(out) + "\n"
