"""The PodGroup of a pod no vcjob owns, as Volcano's podgroup controller builds it.

Volcano: `buildPodGroupFromPod`, `newPGOwnerReferences` and `parseNetworkTopologyFromPod` in
`pkg/controllers/podgroup/pg_controller_handler.go`; the name is `GeneratePodgroupName`
(`staging/src/volcano.sh/apis/pkg/apis/helpers/helpers.go`); `minResources` is
`CalTaskRequests` (`pkg/controllers/util/util.go`): the pod's quota usage, `minMember` times.

- name: `podgroup-<uid of the pod's controlling owner>` when one of its ownerReferences has
  `controller: true` (a ReplicaSet, StatefulSet, Job...: all its pods share the PodGroup),
  else `podgroup-<pod uid>`;
- ownerReferences: the pod's own when one of them is a controller (the PodGroup goes with that
  owner), else a controller reference to the pod (it goes with the pod);
- the owners' annotations (Volcano's `--inherit-owner-annotations`, on by default;
  `getAnnotationsFromUpperRes`): those of each ownerReference of kind ReplicaSet, StatefulSet,
  DaemonSet or Job (a batch/v1 Job, `statemachines.model.objects.BatchJob`) the log has shown,
  the first owner's value winning a key both have;
- `minMember` from the owners' `scheduling.volcano.sh/group-min-member` (`getMinMemberFromUpperRes`:
  Go's `ParseInt(_, 10, 32)`; absent, not a number, out of range or negative: 1; "0" is 0),
  `minResources` one pod's quota usage `minMember` times (`CalTaskRequests`; 0 times: `{}`),
  every owner annotation whose key starts with `volcano.sh/` (`AnnotationPrefix`) copied
  (`inheritUpperAnnotations`);
- `priorityClassName` the pod's, `queue` from the pod's `scheduling.volcano.sh/queue-name`
  annotation (absent: the CRD's default, `default`; an owner's queue-name is not read: it is no
  `volcano.sh/` key); status phase Pending;
- copied from the pod, over the owners' values: the annotations `volcano.sh/preemptable`,
  `volcano.sh/cooldown-time`, `volcano.sh/revocable-zone`, `volcano.sh/jdb-min-available` (else
  `volcano.sh/jdb-max-unavailable`), the labels `volcano.sh/preemptable` and
  `volcano.sh/cooldown-time`, and `spec.networkTopology` from
  `volcano.sh/network-topology-mode` / `-highest-tier`.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from statemachines.admission.quantity import add_lists, print_list
from statemachines.admission.resources import pod_quota_usage
from statemachines.model.objects import Pod

PREFIX = "podgroup-"  # batch/v1alpha1 PodgroupNamePrefix
GROUP_NAME = "scheduling.k8s.io/group-name"
QUEUE_NAME = "scheduling.volcano.sh/queue-name"
PREEMPTABLE = "volcano.sh/preemptable"
COOLDOWN_TIME = "volcano.sh/cooldown-time"
REVOCABLE_ZONE = "volcano.sh/revocable-zone"
JDB_MIN_AVAILABLE = "volcano.sh/jdb-min-available"
JDB_MAX_UNAVAILABLE = "volcano.sh/jdb-max-unavailable"
TOPOLOGY_MODE = "volcano.sh/network-topology-mode"
TOPOLOGY_TIER = "volcano.sh/network-topology-highest-tier"
COPIED_ANNOTATIONS = (PREEMPTABLE, COOLDOWN_TIME, REVOCABLE_ZONE)
COPIED_LABELS = (PREEMPTABLE, COOLDOWN_TIME)
MIN_MEMBER = "scheduling.volcano.sh/group-min-member"  # VolcanoGroupMinMemberAnnotationKey
INHERITED_PREFIX = "volcano.sh/"  # scheduling/v1beta1 AnnotationPrefix
OWNER_KINDS = ("ReplicaSet", "DaemonSet", "StatefulSet", "Job")  # getAnnotationsFromUpperRes ("Job": batch/v1)
API_VERSION = "scheduling.volcano.sh/v1beta1"

_decode_any = msgspec.json.Decoder()
_ATOI = re.compile(r"[+-]?[0-9]+")  # what Go's strconv.Atoi accepts


def controller_reference(pod: Pod) -> Any:
    """The pod's ownerReference with `controller: true`, or None."""
    for ref in pod.metadata.owner_references or ():
        if ref.controller:
            return ref
    return None


def podgroup_name(pod: Pod) -> str:
    """`GeneratePodgroupName`: per controlling owner, else per pod ("" for a pod without a uid)."""
    ref = controller_reference(pod)
    uid = ref.uid if ref is not None else pod.metadata.uid
    return PREFIX + uid if uid else ""


def owner_references(pod: Pod) -> list[dict[str, Any]]:
    """`newPGOwnerReferences`: the pod's references when one is a controller, else one to the pod."""
    if controller_reference(pod) is not None:
        return [{k: v for k, v in msgspec.to_builtins(ref).items() if v is not None}
                for ref in pod.metadata.owner_references or ()]
    meta = pod.metadata
    return [{"apiVersion": "v1", "kind": "Pod", "name": meta.name, "uid": meta.uid,
             "controller": True, "blockOwnerDeletion": True}]


def quota_usage(pod: Pod, times: int = 1) -> dict[str, str]:
    """`CalTaskRequests`: one pod's quota usage (Volcano's `GetPodQuotaUsage`) added `times` times,
    printed as a ResourceList."""
    spec = pod.spec
    fields = {
        "containers": _decode_any.decode(spec.containers),
        "initContainers": _decode_any.decode(spec.init_containers),
        "overhead": _decode_any.decode(spec.overhead),
        "resources": _decode_any.decode(spec.resources),
    }
    usage = pod_quota_usage(fields)
    total: dict = {}
    for _ in range(times):
        total = add_lists(total, usage)
    return print_list(total)


def owner_annotations(pod: Pod, owners: dict[tuple[str, str], dict[str, str]]) -> dict[str, str]:
    """`getAnnotationsFromUpperRes`: the annotations of the pod's owners, by ownerReference order, the
    first one's value kept. `owners`: `(kind, name)` -> annotations, the owners of the pod's namespace
    the log has shown (an owner it has not shown is Volcano's failed Get: skipped)."""
    result: dict[str, str] = {}
    for ref in pod.metadata.owner_references or ():
        if ref.kind and ref.name:
            for k, v in owners.get((ref.kind, ref.name), {}).items():
                result.setdefault(k, v)
    return result


def min_member(annotations: dict[str, str]) -> int:
    """`getMinMemberFromUpperRes`: `strconv.ParseInt(value, 10, 32)`, 1 when it fails or is negative."""
    value = annotations.get(MIN_MEMBER)
    if value is None or not _ATOI.fullmatch(value):
        return 1
    number = int(value)
    if not -(2 ** 31) <= number < 2 ** 31 or number < 0:
        return 1
    return number


def network_topology(annotations: dict[str, str]) -> dict[str, Any] | None:
    """`parseNetworkTopologyFromPod`: mode `hard` unless the annotation says `soft` (any case); a tier
    that is not a number is left out."""
    if TOPOLOGY_MODE not in annotations and TOPOLOGY_TIER not in annotations:
        return None
    mode = annotations.get(TOPOLOGY_MODE, "").lower()
    result: dict[str, Any] = {"mode": mode if mode in ("hard", "soft") else "hard"}
    tier = annotations.get(TOPOLOGY_TIER)
    if tier is not None and _ATOI.fullmatch(tier):
        result["highestTierAllowed"] = int(tier)
    return result


def build_podgroup(pod: Pod, name: str, owners: dict[str, str] | None = None) -> dict[str, Any]:
    """`buildPodGroupFromPod`; `owners`: the owners' annotations (`owner_annotations`)."""
    meta = pod.metadata
    notes = meta.annotations or {}
    labels = meta.labels or {}
    owners = owners or {}
    members = min_member(owners)
    annotations = {k: v for k, v in owners.items() if k.startswith(INHERITED_PREFIX)}
    annotations.update({k: notes[k] for k in COPIED_ANNOTATIONS if k in notes})
    if JDB_MIN_AVAILABLE in notes:
        annotations[JDB_MIN_AVAILABLE] = notes[JDB_MIN_AVAILABLE]
    elif JDB_MAX_UNAVAILABLE in notes:
        annotations[JDB_MAX_UNAVAILABLE] = notes[JDB_MAX_UNAVAILABLE]
    metadata: dict[str, Any] = {"name": name, "namespace": meta.namespace, "ownerReferences": owner_references(pod)}
    if annotations:
        metadata["annotations"] = annotations
    copied_labels = {k: labels[k] for k in COPIED_LABELS if k in labels}
    if copied_labels:
        metadata["labels"] = copied_labels
    spec: dict[str, Any] = {"minMember": members, "minResources": quota_usage(pod, members)}
    if notes.get(QUEUE_NAME):  # "" is Go's omitted field: the CRD defaults it
        spec["queue"] = notes[QUEUE_NAME]
    if pod.spec.priority_class_name:
        spec["priorityClassName"] = pod.spec.priority_class_name
    topology = network_topology(notes)
    if topology is not None:
        spec["networkTopology"] = topology
    return {"apiVersion": API_VERSION, "kind": "PodGroup", "metadata": metadata, "spec": spec,
            "status": {"phase": "Pending"}}
