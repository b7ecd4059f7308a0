"""Scheduling sessions offline: a snapshot, the scheduler cache over it, and the cluster's answer.

`OfflineCluster` reads a snapshot (see `vcbus.snapshots`), folds it into a
`projections.scheduler.SchedulerCache` and runs `statemachines.scheduler.session.run_session`
over it, as many times as asked. Between two sessions it plays the part of the API server
(and of the queue controller) and shows the scheduler's decisions the way the cluster would:

- `BindPod`: the pod gets `spec.nodeName` (its phase stays what it was: kubelet is not simulated),
  after each of its `volumes`' PVs gets `spec.claimRef` to its claim, as the actuator writes it (a PV
  another claim holds, or gone: the pod is not bound; the PV controller is not simulated either, so
  the claim stays unbound, its PV bound to it);
- `EvictPod`: the pod gets `metadata.deletionTimestamp` (it is Releasing, still on its node);
- `UpdatePodCondition`: the pod's `PodScheduled` condition (and `status.nominatedNodeName`);
- `UpdatePodGroupStatus`: the PodGroup's status is replaced;
- `UpdateQueueStatus`: the queue's status is merge-patched (state, allocated, counts);
- `CreateQueue`: the queue appears, `Open` (as the queue controller would make it).

Each changed object gets a new resourceVersion and is folded back as a `MODIFIED` (or
`ADDED`) record. Session `n` runs at the snapshot's time plus `n - 1` seconds (Volcano's
schedule period); the snapshot's time is that of its last record, else its newest
`creationTimestamp`, else the epoch. Everything is deterministic: same input, same sessions.
"""

from __future__ import annotations

import copy
from typing import Any

from projections.scheduler import SchedulerCache
from statemachines import outputs as o
from statemachines.model.timefmt import ZERO_TIME, fmt, parse
from statemachines.scheduler.config import SchedulerConfig
from statemachines.scheduler.session import SessionResult, run_session
from vcbus.snapshots import Key, Sink, Snapshot, load_snapshot, load_watch_log

QUEUE_API = "scheduling.volcano.sh/v1beta1"


class OfflineCluster:
    """A snapshot's objects, the scheduler cache folded over them, and sessions run on it."""

    def __init__(self, config: SchedulerConfig) -> None:
        self.config = config
        self.cache = SchedulerCache()
        self.snapshot = Snapshot("", "")
        self.results: list[SessionResult] = []
        self._rv = 0

    # ---------------------------------------------------------------- input

    def _sink(self) -> Sink:
        return Sink(self.cache.apply, self.cache.apply_object)

    def load(self, data: bytes, source: str) -> Snapshot:
        """Fold a snapshot input (any form `vcbus.snapshots` reads)."""
        return self._loaded(load_snapshot(data, source, self._sink()))

    def load_log(self, lines: Any, source: str) -> Snapshot:  # any iterable of byte lines
        """Fold a watch log given as lines (e.g. the bus's VCBUS_K8S spooled to a file)."""
        return self._loaded(load_watch_log(lines, source, self._sink()))

    def _loaded(self, snapshot: Snapshot) -> Snapshot:
        self.snapshot = snapshot
        versions = (_int(obj["metadata"].get("resourceVersion")) for obj in snapshot.objects.values())
        self._rv = max(versions, default=0)
        return snapshot

    def base_time(self) -> str:
        """The time of the snapshot: its last record's, else its newest creationTimestamp, else the epoch."""
        if self.cache.time:
            return self.cache.time
        stamps = [
            str(obj["metadata"].get("creationTimestamp"))
            for obj in self.snapshot.objects.values()
            if obj["metadata"].get("creationTimestamp")
        ]
        return max(stamps, key=_parse, default=ZERO_TIME)

    # ---------------------------------------------------------------- sessions

    def run(self, sessions: int) -> list[SessionResult]:
        """Run `sessions` sessions, applying each one's decisions before the next."""
        base = _parse(self.base_time())
        for number in range(1, sessions + 1):
            if number > 1:
                self.apply_decisions(self.results[-1].outputs, fmt(base + number - 2))
            time = fmt(base + number - 1)
            result = run_session(
                self.cache.snapshot(), self.config, seq=self.cache.position, number=number, time=time
            )
            self.results.append(result)
        return self.results

    def apply_decisions(self, outputs: list[o.Output], time: str) -> None:
        """Show a session's commands as the API server would, and fold them back into the cache."""
        for out in outputs:
            ns = out.job.partition("/")[0]
            if isinstance(out, o.BindPod):
                if all(self._claim(ns, binding) for binding in out.volumes):
                    self._modify(("Pod", ns, out.name), lambda p, n=out.node: p.setdefault("spec", {}).update(nodeName=n))
            elif isinstance(out, o.EvictPod):
                self._modify(("Pod", ns, out.name), lambda p: p["metadata"].setdefault("deletionTimestamp", time))
            elif isinstance(out, o.UpdatePodCondition):
                self._modify(("Pod", ns, out.name), lambda p, c=out: _pod_condition(p, c, time))
            elif isinstance(out, o.UpdatePodGroupStatus):
                self._modify(("PodGroup", ns, out.name), lambda g, st=out.status: g.update(status=copy.deepcopy(st)))
            elif isinstance(out, o.UpdateQueueStatus):
                self._modify(("Queue", "", out.queue), lambda q, c=out: _queue_status(q, c))
            elif isinstance(out, o.CreateQueue):
                self._create_queue(out, time)

    def _claim(self, ns: str, binding: o.VolumeBinding) -> bool:
        """The PV's claimRef written to the binding's claim unless it has one; whether the PV is the claim's."""
        pv = self.snapshot.objects.get(("PersistentVolume", "", binding.volume))
        if pv is None:
            return False
        held = (pv.get("spec") or {}).get("claimRef")
        if held is not None:
            return held.get("namespace") == ns and held.get("name") == binding.claim and (
                held.get("uid", "") in ("", binding.claim_uid))
        ref = {"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": ns, "name": binding.claim,
               "uid": binding.claim_uid}
        self._modify(("PersistentVolume", "", binding.volume), lambda v: v.setdefault("spec", {}).update(claimRef=ref))
        return True

    def _modify(self, key: Key, change: Any) -> None:  # a callable on the object
        current = self.snapshot.objects.get(key)
        if current is None:
            return  # gone from the cluster: the API server would answer NotFound
        obj = copy.deepcopy(current)
        change(obj)
        self._rv += 1
        obj["metadata"]["resourceVersion"] = str(self._rv)
        self.snapshot.objects[key] = obj
        self.cache.apply_object("MODIFIED", obj)

    def _create_queue(self, out: o.CreateQueue, time: str) -> None:
        key = ("Queue", "", out.queue)
        if key in self.snapshot.objects:
            return  # AlreadyExists
        self._rv += 1
        spec: dict[str, Any] = {"weight": out.weight, "reclaimable": out.reclaimable}
        if out.parent:
            spec["parent"] = out.parent
        obj = {
            "apiVersion": QUEUE_API,
            "kind": "Queue",
            "metadata": {
                "name": out.queue,
                "uid": f"offline-queue-{out.queue}",
                "creationTimestamp": time,
                "resourceVersion": str(self._rv),
            },
            "spec": spec,
            "status": {"state": "Open"},
        }
        self.snapshot.objects[key] = obj
        self.cache.apply_object("ADDED", obj)


def _pod_condition(pod: dict[str, Any], c: o.UpdatePodCondition, time: str) -> None:
    status = pod.setdefault("status", {})
    cond = {"type": "PodScheduled", "status": c.status, "reason": c.reason, "message": c.message,
            "lastTransitionTime": time}
    conditions = [x for x in status.get("conditions") or [] if x.get("type") != "PodScheduled"]
    status["conditions"] = conditions + [cond]
    if c.nominated_node:
        status["nominatedNodeName"] = c.nominated_node


def _queue_status(queue: dict[str, Any], c: o.UpdateQueueStatus) -> None:
    status = queue.setdefault("status", {})
    if c.state is not None:
        status["state"] = c.state
    if c.allocated is not None:
        status["allocated"] = dict(c.allocated)
    if c.counts is not None:
        status.update(c.counts)


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def _parse(stamp: str) -> int:
    try:
        return parse(stamp)
    except ValueError:
        return 0


__all__ = ["OfflineCluster"]
