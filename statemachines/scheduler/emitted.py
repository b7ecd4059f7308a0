"""The scheduler's memory of what it told the cluster, keyed per object and channel.

A session emits a RecordEvent or UpdatePodCondition only when its content differs from the
last one emitted on the same key (Volcano repeats them every second and leaves the
deduplication to Kubernetes' event aggregation). Keys:

- `PodGroup:<ns>/<name>:gang`    the gang event (Warning Unschedulable / Normal Scheduled)
- `PodGroup:<ns>/<name>:enqueue` an enqueue vote's rejection (Normal Unschedulable)
- `Pod:<ns>/<name>:condition`    the PodScheduled=False condition (with its FailedScheduling event):
                                 (reason, message, nominated node)

The nominated node remembered is the last one written: a condition written without one leaves
the pod's `status.nominatedNodeName` as it was (Volcano never clears it, `taskUnschedulable` in
`pkg/scheduler/cache/cache.go`), so the memory keeps it too.
"""

from __future__ import annotations

from statemachines import outputs as out

CHANNELS = ("gang", "enqueue")  # a PodGroup's


def condition_key(pod: str) -> str:
    """The key of a pod's (`<ns>/<name>`) PodScheduled=False condition."""
    return f"Pod:{pod}:condition"


def group_key(group: str, channel: str) -> str:
    """The key of a PodGroup's (`<ns>/<name>`) event on `channel` (CHANNELS)."""
    return f"PodGroup:{group}:{channel}"


def emission(o: out.Output) -> tuple[str, tuple] | None:
    """(key, content) for an output the memory tracks, else None."""
    ns = o.job.split("/", 1)[0]
    if isinstance(o, out.RecordEvent) and o.kind == "PodGroup":
        channel = "enqueue" if (o.event_type == "Normal" and o.reason == "Unschedulable") else "gang"
        return group_key(f"{ns}/{o.name}", channel), (o.event_type, o.reason, o.message)
    if isinstance(o, out.UpdatePodCondition):
        return condition_key(f"{ns}/{o.name}"), (o.reason, o.message, o.nominated_node)
    return None


def object_keys(kind: str, key: str) -> tuple[str, ...]:
    """Every memory key of one object (`kind` Pod or PodGroup, `key` `<ns>/<name>`): what goes with it."""
    if kind == "Pod":
        return (condition_key(key),)
    return tuple(group_key(key, channel) for channel in CHANNELS)


def forget(memory: dict[str, tuple], kind: str, key: str) -> None:
    """The object is gone: its keys go too (a lookup each, not a scan of the memory)."""
    for k in object_keys(kind, key):
        memory.pop(k, None)


def remember(memory: dict[str, tuple], o: out.Output) -> None:
    """Fold one output into the memory (a condition without a nominated node keeps the last one)."""
    tracked = emission(o)
    if tracked is None:
        return
    key, content = tracked
    if isinstance(o, out.UpdatePodCondition) and not o.nominated_node:
        previous = memory.get(key)
        if previous is not None and previous[2]:
            content = (content[0], content[1], previous[2])
    memory[key] = content


def condition_due(previous: tuple | None, recorded: tuple[str, str] | None, recorded_nominated: str,
                  reason: str, message: str, nominated: str) -> bool:
    """Whether Volcano would write a task's pod (`taskUnschedulable`, `pkg/scheduler/cache/cache.go`).

    It writes (UpdateStatus, and records the FailedScheduling event) when the PodScheduled=False
    condition differs from the pod's (`podConditionHaveUpdate`: status, reason, message; an equal
    status keeps lastTransitionTime, so that never differs alone), or when a non-empty nominated
    node differs from the pod's `status.nominatedNodeName`; an empty one changes nothing. What
    the pod has is what vcbus last wrote (`previous`, from the memory), else what its record shows
    (`recorded`: the PodScheduled=False (reason, message), None without one)."""
    known: tuple | None
    if previous is not None:
        known, known_nominated = (previous[0], previous[1]), previous[2] or recorded_nominated
    else:
        known, known_nominated = recorded, recorded_nominated
    if known != (reason, message):
        return True
    return bool(nominated) and nominated != known_nominated
