"""The objects the bridge's watches hold, read by the actuator in the same process (Volcano's informers).

Volcano's controller and scheduler act on their informers' caches: creating a
job's pods, binding one, writing a PodGroup's status reads nothing from the API
server first. vcbus's actuator checks each command against the object it acts
on (the job's uid and version before a CreatePod, the pod's scheduler and uid
before a BindPod, the PodGroup's incarnation and owner before its status), and
reading each of those from the API server doubled the requests of a burst of
pods. When the bridge runs in the same process (`vcbus up` with a cluster), its
watchers already hold the last version of every vcjob, pod and PodGroup they
published, so the actuator looks there first and reads the API server only on
a miss.

What that cache can and cannot say:

- It is never older than the record a command was decided from: the bridge
  takes an event into its watcher's known objects before it publishes the
  record, and the command comes after the record.
- It can be older than the API server (as an informer is): a write the bridge
  has not seen yet. Every use tolerates that. The writes carry their own
  guards (the uid precondition of a Binding, the uid `test` of a PodGroup
  status patch, the resourceVersion `test` of a vcjob status patch), and a
  refused guard reads the API server again. A pod created for a job whose
  version moved on meanwhile is one the job's next sync deletes, as a pod
  created from Volcano's stale cache is.
- A miss says nothing (not yet seen, or not watched): the caller reads the API
  server. An object known only by the metadata a stored position keeps (the
  bridge resumed and the object has not changed since) is a miss too.
"""

from __future__ import annotations

from typing import Any, Mapping

JOBS, PODS, PODGROUPS = "vcjobs", "pods", "podgroups"


class WatchCache:
    """Reads of the bridge's watchers (`Bridge.watchers`, filled as they start) by namespace and name."""

    def __init__(self, watchers: Mapping[str, Any]) -> None:
        self.watchers = watchers
        self.hits = 0
        self.misses = 0

    def get(self, resource: str, namespace: str, name: str) -> dict | None:
        """The watched object, whole, or None (a miss: read the API server)."""
        watcher = self.watchers.get(resource)
        obj = None if watcher is None or not watcher.synced.is_set() else watcher.by_name(namespace, name)
        if obj is None or "spec" not in obj:  # unseen, or only a stored position's metadata
            self.misses += 1
            return None
        self.hits += 1
        return obj
