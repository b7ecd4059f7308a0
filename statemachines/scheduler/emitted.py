"""The scheduler's memory of what it told the cluster, keyed per object and channel.

A session emits a RecordEvent or UpdatePodCondition only when its content differs from the
last one emitted on the same key (Volcano repeats them every second and leaves the
deduplication to Kubernetes' event aggregation). Keys:

- `PodGroup:<ns>/<name>:gang`    the gang event (Warning Unschedulable / Normal Scheduled)
- `PodGroup:<ns>/<name>:enqueue` an enqueue vote's rejection (Normal Unschedulable)
- `Pod:<ns>/<name>:condition`    the PodScheduled=False condition (with its FailedScheduling event)
"""

from __future__ import annotations

from statemachines import outputs as out


def emission(o: out.Output) -> tuple[str, tuple] | None:
    """(key, content) for an output the memory tracks, else None."""
    ns = o.job.split("/", 1)[0]
    if isinstance(o, out.RecordEvent) and o.kind == "PodGroup":
        channel = "enqueue" if (o.event_type == "Normal" and o.reason == "Unschedulable") else "gang"
        return f"PodGroup:{ns}/{o.name}:{channel}", (o.event_type, o.reason, o.message)
    if isinstance(o, out.UpdatePodCondition):
        return f"Pod:{ns}/{o.name}:condition", (o.reason, o.message, o.nominated_node)
    return None
