"""RecordEvent on the cluster: a Kubernetes Event on the vcjob, a PodGroup, a Pod, a Queue, a CronJob or a JobFlow.

The involved object is the vcjob of the command's job key unless the command
names another one (`kind`/`name`): a PodGroup or a Pod in the job's namespace,
or a cluster-scoped Queue (job key `_/<queue>`), or the CronJob or JobFlow of the key (those
controllers', read with `get`). Its uid and resourceVersion
come from the watch cache of the same process when it holds the object (the
vcjob, the pod, the PodGroup: as Volcano's recorder names the object its
informer holds), else from the API server (the vcjob and the pod with `get`, a
PodGroup or Queue with a `list` on `metadata.name`, the verbs the bridge already
has); a command about an object that is gone is dropped, but for a pod: the
scheduler's `Scheduled` Event about a pod deleted since is written against the
pod's reference (namespace and name), as Kubernetes' event recorder writes an
Event against the reference it holds and the API server takes an Event whose
involvedObject is gone. The scheduler names a pod whose PodGroup it no longer
holds under the pod's own key (`<ns>/<pod>`): such an Event is judged as the
scheduler's (a pod for the `volcano` scheduler), not against a vcjob of the pod's
name. An Event about a
cluster-scoped object goes to namespace `default`, as Kubernetes' event
recorder puts it. The source component is the command's `component`, else
`vc-controller-manager`. The pod read and the Event's POST go the actuator's raw
path (vcbus.k8s.rawcalls: plain JSON, no model objects): the scheduler records
one Event per bound pod (`Scheduled`).

Whose objects (vcbus.k8s.ownership): an event is about the key's vcjob, a pod or
PodGroup whose ownerReference names that vcjob (a leftover's too), a pod of no
vcjob for the `volcano` scheduler, a PodGroup of no vcjob under its own key (the
scheduler's), or the Queue of a cluster key; anything else is refused.

Event names are derived from the command's causation, so a redelivered
RecordEvent is AlreadyExists and creates nothing new: `<object>.<digest>`,
the digest over the job key, the command's position (`<seq>/<index>`, or its
whole `Nats-Msg-Id` when that says more, e.g. the scheduler's
`sched:<seq>:<session>:<index>`: two sessions at one cut record two events),
the reason, and the involved kind and name when it is not the vcjob.
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from statemachines import outputs as o
from vcbus.bus.subjects import CLUSTER_SCOPE
from vcbus.k8s import rawcalls, watchcache
from vcbus.k8s.ownership import (
    SCHEDULER_NAMES,
    Refused,
    check_object,
    require_event_target,
    require_own_key,
    require_schedulable,
)

log = logging.getLogger("vcbus.actuator")

COMPONENT = "vc-controller-manager"
JOB_API_VERSION = "batch.volcano.sh/v1alpha1"
FLOW_API_VERSION = "flow.volcano.sh/v1alpha1"
SCHEDULING_API_VERSION = "scheduling.volcano.sh/v1beta1"
CLUSTER_EVENT_NAMESPACE = "default"  # metav1.NamespaceDefault: where events of cluster-scoped objects go
_PLURALS = {"PodGroup": "podgroups", "Queue": "queues"}


def _status(err: ApiException) -> int:
    return int(getattr(err, "status", 0) or 0)


def event_name(cmd: o.RecordEvent, index: int, msg_id: str, kind: str, name: str) -> str:
    """The Event's deterministic name (see the module docstring)."""
    cause = f"{cmd.seq}/{index}" if not msg_id or msg_id == f"{cmd.seq}:{index}" else msg_id
    key = f"{cmd.job}/{cause}/{cmd.reason}"
    if kind != "Job":
        key += f"/{kind}/{name}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return f"{name[:200]}.{digest}"


class EventRecording:
    """The `_RecordEvent` handler of `vcbus.k8s.actuator.Actuator` (a mixin: uses its clients)."""

    api: Any  # the ApiClient (vcbus.k8s.rawcalls)
    core: client.CoreV1Api
    custom: client.CustomObjectsApi

    def _job(self, ns: str, name: str, *, cached: bool = False) -> dict | None:  # provided by Actuator
        raise NotImplementedError

    def _podgroup(self, ns: str, name: str, *, cached: bool = False) -> dict | None:  # provided by Actuator
        raise NotImplementedError

    def _cronjob(self, ns: str, name: str) -> dict | None:  # provided by CronJobCommands
        raise NotImplementedError

    def _jobflow(self, ns: str, name: str) -> dict | None:  # provided by JobFlowCommands
        raise NotImplementedError

    def _cached(self, resource: str, ns: str, name: str) -> dict | None:
        """The watch cache's object (vcbus.k8s.watchcache), None on a miss. An Event names its object as the
        recorder's cache holds it (Volcano's recorder takes the object from its informer's cache); the uid
        of a name re-created since is the cache's until the watch shows the new one."""
        cache = getattr(self, "cache", None)
        return None if cache is None else cache.get(resource, ns, name)

    def _by_name(self, api_version: str, kind: str, ns: str | None, name: str) -> dict | None:
        """A custom object read through `list` (fieldSelector metadata.name), or None if there is none."""
        group, version = api_version.split("/", 1)
        selector = f"metadata.name={name}"
        if ns is None:
            found = self.custom.list_cluster_custom_object(group, version, _PLURALS[kind], field_selector=selector)
        else:
            found = self.custom.list_namespaced_custom_object(group, version, ns, _PLURALS[kind], field_selector=selector)
        items = found.get("items") or []
        return items[0] if items else None

    def _involved(self, ns: str, name: str, cmd: o.RecordEvent) -> dict[str, str] | None:
        """The Event's involvedObject (an ObjectReference as JSON), None when the object is gone."""
        kind = cmd.kind or "Job"
        cluster = ns == CLUSTER_SCOPE
        if cluster and kind in ("Job", "Pod", "PodGroup", "CronJob", "JobFlow"):
            return None  # namespaced objects: never under a cluster key
        expected = {"Job": JOB_API_VERSION, "Pod": "v1", "PodGroup": SCHEDULING_API_VERSION, "Queue": SCHEDULING_API_VERSION,
                    "CronJob": JOB_API_VERSION, "JobFlow": FLOW_API_VERSION}
        if cmd.api_version and cmd.api_version != expected.get(kind, cmd.api_version):
            raise Refused(f"an event about a {kind} of {cmd.api_version}: vcbus records events only on its own kinds")
        require_event_target(kind, cmd.name or name, ns, name, cluster=cluster)
        read_job = lambda: self._job(ns, name)  # noqa: E731 - passed to check_object, which reads the job only when it needs it
        if kind == "Job":
            obj: Any = self._job(ns, name, cached=True)
            api_version = JOB_API_VERSION
        elif kind == "CronJob":  # the cronjob controller's, on the CronJob of its key (require_event_target)
            obj = self._cronjob(ns, cmd.name)
            api_version = JOB_API_VERSION
        elif kind == "JobFlow":  # the jobflow controller's, on the JobFlow of its key (require_event_target)
            obj = self._jobflow(ns, cmd.name)
            api_version = FLOW_API_VERSION
        elif kind == "Pod":  # one per bound pod (Scheduled): the watch cache's, else read as plain JSON
            target = cmd.name or name
            pod = self._cached(watchcache.PODS, ns, target) or rawcalls.read(self.api, rawcalls.pod_path(ns, target))
            if pod is None:  # deleted since: the Event names the reference, as the recorder's does
                pod = {"metadata": {"name": target, "namespace": ns}}
            else:
                schedulers = getattr(self, "scheduler_names", SCHEDULER_NAMES)
                schedulable = lambda: require_schedulable(pod, ns, schedulers)  # noqa: E731 - called here under the pod's own key, else by check_object
                if target == name:  # under the pod's own key: the scheduler's, whatever vcjob owns it
                    schedulable()
                else:
                    check_object(pod, "pod", ns, name, read_job, schedulable, gone_ok=True)
            obj = pod
            api_version = "v1"
        else:  # a PodGroup or a Queue (require_event_target: no other kind)
            target = cmd.name or name
            obj = None if kind == "Queue" else self._cached(watchcache.PODGROUPS, ns, target)
            if obj is None:
                obj = self._by_name(SCHEDULING_API_VERSION, kind, None if kind == "Queue" else ns, target)
            api_version = SCHEDULING_API_VERSION
            if obj is not None and kind == "PodGroup":
                pg = obj
                check_object(pg, "PodGroup", ns, name, read_job, lambda: require_own_key(pg, "PodGroup", ns, name),
                             gone_ok=True)
        if obj is None:
            return None
        meta = obj["metadata"]
        ref = {"apiVersion": api_version, "kind": kind, "name": meta["name"], "namespace": meta.get("namespace"),
               "uid": meta.get("uid"), "resourceVersion": meta.get("resourceVersion")}
        return {k: v for k, v in ref.items() if v}

    def _RecordEvent(self, ns: str, name: str, cmd: o.RecordEvent, index: int, msg_id: str = "") -> str:
        ref = self._involved(ns, name, cmd)
        if ref is None:
            log.info("actuator: event %s for %s dropped: %s %s is gone", cmd.reason, cmd.job, cmd.kind or "Job",
                     cmd.name or name)
            return "dropped"
        event_ns = ref.get("namespace") or CLUSTER_EVENT_NAMESPACE
        event: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": event_name(cmd, index, msg_id, ref["kind"], ref["name"]), "namespace": event_ns},
            "involvedObject": ref,
            "reason": cmd.reason,
            "message": cmd.message,
            "type": cmd.event_type,
            "source": {"component": cmd.component or COMPONENT},
            "count": 1,
        }
        if cmd.time:
            event["firstTimestamp"] = event["lastTimestamp"] = cmd.time
        try:  # the raw path (vcbus.k8s.rawcalls): no CoreV1Event model each way
            rawcalls.call(self.api, "POST", f"/api/v1/namespaces/{rawcalls.quote(event_ns, safe='')}/events", body=event)
        except ApiException as err:
            if _status(err) == 409:
                return "done"
            raise
        return "applied"
