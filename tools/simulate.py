"""A small simulated cluster that records kubectl-style watch logs.

It stands in for the API server, the scheduler and the kubelets: the engine's
commands are applied to in-memory objects, and every change is written out as
the watch event `kubectl get vcjob,pods,podgroups,queues,commands --watch
--output-watch-events -o json` would print, status writes included (as a
Volcano controller would make them). A scenario script then moves pods along
(`run`, `fail`, `succeed`, `evict`). Used to make the example logs, the
benchmark's synthetic logs and test fixtures; it is not part of the product
path.
"""

from __future__ import annotations

import copy
import zlib
from collections import deque
from collections.abc import Callable
from typing import Any

import msgspec

from statemachines import outputs as o
from statemachines.engine import Engine
from statemachines.manifests.renderer import Renderer
from statemachines.model.objects import Job
from statemachines.model.records import Observed, decode
from statemachines.model.timefmt import fmt, parse

_enc = msgspec.json.Encoder()


class SimCluster:
    def __init__(
        self,
        *,
        start: str = "2026-11-30T08:00:00Z",
        write: Callable[[bytes], Any] | None = None,
        engine: Engine | None = None,
        node: str = "node-1",
        pretty: bool = False,
    ) -> None:
        self.clock = parse(start)
        self.rv = 1000
        self.uid_seq = 0
        self.objects: dict[tuple[str, str, str], dict] = {}
        if engine is None:
            renderer = Renderer()
            engine = Engine(render_pod=renderer.pod, render_podgroup=renderer.podgroup)
        self.engine = engine
        self.lines: list[bytes] = []
        self._write = write or self.lines.append
        self.node = node
        self.pretty = pretty
        self.pending: deque[bytes] = deque()
        self.deferred: list[dict] = []  # pods whose grace period runs: DELETED comes later
        self.seq = 0
        self.outputs: list[o.Output] = []
        self.keep_outputs = write is None

    # --------------------------------------------------------------- plumbing

    def tick(self, seconds: int = 1) -> None:
        self.clock += seconds

    @property
    def now(self) -> str:
        return fmt(self.clock)

    def _uid(self, name: str) -> str:
        self.uid_seq += 1
        n = self.uid_seq
        return f"{n:08x}-{(n * 7919) % 65536:04x}-4{n % 4096:03x}-8{(n * 31) % 4096:03x}-{n * 104729 % 2**48:012x}"

    def _record(self, rtype: str, obj: dict) -> None:
        record = {"type": rtype, "object": obj}
        if self.pretty:
            import json

            data = json.dumps(record, indent=4).encode() + b"\n"
        else:
            data = _enc.encode(record)
        self._write(data if self.pretty else data + b"\n")
        self.pending.append(data)

    def _put(self, rtype: str, kind: str, obj: dict) -> dict:
        self.rv += 1
        meta = obj["metadata"]
        meta["resourceVersion"] = str(self.rv)
        key = (kind, meta.get("namespace", ""), meta["name"])
        if rtype == "DELETED":
            self.objects.pop(key, None)
        else:
            self.objects[key] = obj
        self._record(rtype, obj)  # encoded at once: later changes to obj do not reach the record
        return obj

    def get(self, kind: str, namespace: str, name: str) -> dict | None:
        return self.objects.get((kind, namespace, name))

    def settle(self, limit: int = 100000) -> None:
        """Feed every new record to the engine and apply its commands until quiet.

        Pods being deleted disappear (DELETED) only once everything else has
        settled, a second later: their grace period.
        """
        n = 0
        while (self.pending or self.deferred) and n < limit:
            if not self.pending:
                self.tick()
                gone, self.deferred = self.deferred, []
                for pod in gone:
                    self._put("DELETED", "Pod", pod)
                continue
            data = self.pending.popleft()
            self.seq += 1
            rec = decode(data)
            is_job = isinstance(rec, Observed) and isinstance(rec.object, Job)
            outs = self.engine.apply(self.seq, rec, raw=data if is_job else None)
            if self.keep_outputs:
                self.outputs.extend(outs)
            for out in outs:
                self._apply(out)
            n += 1

    # --------------------------------------------------------------- the API side

    def add_queue(self, name: str = "default") -> dict:
        obj = {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": name, "uid": self._uid(name), "creationTimestamp": self.now},
            "spec": {"weight": 1, "reclaimable": True, "parent": "root"},
            "status": {"state": "Open"},
        }
        return self._put("ADDED", "Queue", obj)

    def create_job(self, job: dict) -> dict:
        job = copy.deepcopy(job)
        job.setdefault("apiVersion", "batch.volcano.sh/v1alpha1")
        job.setdefault("kind", "Job")
        meta = job.setdefault("metadata", {})
        meta.setdefault("namespace", "default")
        meta["uid"] = self._uid(meta["name"])
        meta["creationTimestamp"] = self.now
        meta["generation"] = 1
        spec = job.setdefault("spec", {})
        spec.setdefault("queue", "default")
        spec.setdefault("maxRetry", 3)
        spec.setdefault("schedulerName", "volcano")
        for i, task in enumerate(spec.get("tasks", [])):
            task.setdefault("name", f"default{i}")
            task.setdefault("maxRetry", 3)
            task.setdefault("minAvailable", task.get("replicas", 0))
        if not spec.get("minAvailable"):
            spec["minAvailable"] = sum(t.get("minAvailable", t.get("replicas", 0)) for t in spec.get("tasks", []))
        return self._put("ADDED", "Job", job)

    def delete_job(self, namespace: str, name: str) -> None:
        job = self.get("Job", namespace, name)
        if job is not None:
            self._put("DELETED", "Job", job)

    def issue_command(self, namespace: str, job_name: str, action: str) -> None:
        job = self.get("Job", namespace, job_name)
        assert job is not None
        name = f"{job_name}-{action.lower()}-{self.uid_seq:05d}"
        ref = {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "name": job_name,
            "uid": job["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
        cmd = {
            "apiVersion": "bus.volcano.sh/v1alpha1",
            "kind": "Command",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "uid": self._uid(name),
                "creationTimestamp": self.now,
                "ownerReferences": [ref],
            },
            "action": action,
            "target": ref,
        }
        self._put("ADDED", "Command", cmd)

    # --------------------------------------------------------------- the controller's writes

    def _apply(self, out: o.Output) -> None:
        ns, name = out.job.split("/", 1)
        if isinstance(out, o.UpdateJobStatus):
            job = self.get("Job", ns, name)
            if job is not None:
                job["status"] = msgspec.to_builtins(out.status)
                self._put("MODIFIED", "Job", job)
        elif isinstance(out, o.CreatePodGroup):
            job = self.get("Job", ns, name)
            if job is None or self.get("PodGroup", ns, out.name) is not None:
                return
            if out.podgroup is not None:
                pg = copy.deepcopy(out.podgroup)
                pg["metadata"].update(uid=self._uid(out.name), creationTimestamp=self.now)
                pg["status"] = {}
                self._put("ADDED", "PodGroup", pg)
                return
            pg = {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "PodGroup",
                "metadata": {
                    "name": out.name,
                    "namespace": ns,
                    "uid": self._uid(out.name),
                    "creationTimestamp": self.now,
                    "ownerReferences": [_owner(job)],
                },
                "spec": {
                    "minMember": out.min_member,
                    "minTaskMember": out.min_task_member,
                    "queue": out.queue,
                },
                "status": {},
            }
            self._put("ADDED", "PodGroup", pg)
        elif isinstance(out, o.DeletePodGroup):
            pg = self.get("PodGroup", ns, out.name)
            if pg is not None:
                self._put("DELETED", "PodGroup", pg)
        elif isinstance(out, o.CreatePod):
            job = self.get("Job", ns, name)
            if job is None or self.get("Pod", ns, out.name) is not None:
                return
            self._put("ADDED", "Pod", self._pod(job, out))
        elif isinstance(out, o.DeletePod):
            pod = self.get("Pod", ns, out.name)
            if pod is None:
                return
            if out.mark_out_of_sync:
                pod["metadata"].setdefault("annotations", {})["volcano.sh/controller-out-of-sync"] = "true"
                self._put("MODIFIED", "Pod", pod)
            if "deletionTimestamp" not in pod["metadata"]:  # as the API server sets it: now + the grace period
                pod["metadata"]["deletionTimestamp"] = fmt(self.clock + 30)
                pod["metadata"]["deletionGracePeriodSeconds"] = 30
                self._put("MODIFIED", "Pod", pod)
                self.deferred.append(pod)
        elif isinstance(out, o.DeleteBusCommand):
            cmd = self.get("Command", out.namespace, out.name)
            if cmd is not None:
                self._put("DELETED", "Command", cmd)

    def _pod(self, job: dict, cmd: o.CreatePod) -> dict:
        if cmd.pod is not None:
            pod = copy.deepcopy(cmd.pod)
            pod["metadata"].update(uid=self._uid(cmd.name), creationTimestamp=self.now)
            pod["spec"].setdefault("restartPolicy", "Always")
            pod["spec"].setdefault("terminationGracePeriodSeconds", 30)
            pod["spec"].setdefault("dnsPolicy", "ClusterFirst")
            pod["status"] = {"phase": "Pending", "qosClass": "BestEffort"}
            return pod
        spec = job["spec"]
        task = next(t for t in spec["tasks"] if t["name"] == cmd.task)
        template = copy.deepcopy(task.get("template") or {})
        tmeta = template.get("metadata") or {}
        pod_spec = template.get("spec") or {}
        pod_spec.setdefault("schedulerName", spec.get("schedulerName", "volcano"))
        pod_spec.setdefault("restartPolicy", "OnFailure")
        pod_spec.setdefault("terminationGracePeriodSeconds", 30)
        pod_spec.setdefault("dnsPolicy", "ClusterFirst")
        for c in pod_spec.get("containers", []):
            c.setdefault("terminationMessagePath", "/dev/termination-log")
            c.setdefault("terminationMessagePolicy", "File")
            c.setdefault("resources", {})
        jname = job["metadata"]["name"]
        labels = dict(tmeta.get("labels") or {})
        labels.update(
            {
                "volcano.sh/job-name": jname,
                "volcano.sh/job-namespace": job["metadata"]["namespace"],
                "volcano.sh/queue-name": spec.get("queue", "default"),
                "volcano.sh/task-index": str(cmd.index),
                "volcano.sh/task-spec": cmd.task,
            }
        )
        annotations = dict(tmeta.get("annotations") or {})
        annotations.update(
            {
                "scheduling.k8s.io/group-name": f"{jname}-{job['metadata']['uid']}",
                "volcano.sh/job-name": jname,
                "volcano.sh/job-retry-count": str(cmd.retry_count),
                "volcano.sh/job-version": str(cmd.job_version),
                "volcano.sh/queue-name": spec.get("queue", "default"),
                "volcano.sh/task-index": str(cmd.index),
                "volcano.sh/task-spec": cmd.task,
                "volcano.sh/template-uid": f"{jname}-{cmd.task}",
            }
        )
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": cmd.name,
                "namespace": job["metadata"]["namespace"],
                "uid": self._uid(cmd.name),
                "creationTimestamp": self.now,
                "labels": labels,
                "annotations": annotations,
                "ownerReferences": [_owner(job)],
            },
            "spec": pod_spec,
            "status": {"phase": "Pending", "qosClass": "BestEffort"},
        }

    # --------------------------------------------------------------- scheduler and kubelets

    def schedule(self, namespace: str, job_name: str, phase: str = "Inqueue") -> None:
        """The scheduler moves the job's PodGroup: "" -> Pending -> Inqueue (or `phase`)."""
        for (kind, ns, _), pg in list(self.objects.items()):
            if kind != "PodGroup" or ns != namespace:
                continue
            if pg["metadata"]["ownerReferences"][0]["name"] != job_name:
                continue
            for step in ("Pending", phase):
                if pg["status"].get("phase") == step:
                    continue
                pg["status"] = {"phase": step}
                self._put("MODIFIED", "PodGroup", pg)

    def pods_of(self, namespace: str, job_name: str) -> list[dict]:
        out = []
        for (kind, ns, _), pod in self.objects.items():
            if kind == "Pod" and ns == namespace and pod["metadata"]["labels"].get("volcano.sh/job-name") == job_name:
                out.append(pod)
        return sorted(out, key=lambda p: p["metadata"]["name"])

    def bind(self, pod: dict) -> None:
        pod["spec"]["nodeName"] = self.node
        pod["status"]["conditions"] = [
            {"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": self.now}
        ]
        self._put("MODIFIED", "Pod", pod)

    def run(self, pod: dict) -> None:
        if not pod["spec"].get("nodeName"):
            self.bind(pod)
        now = self.now
        pod["status"].update(
            {
                "phase": "Running",
                "hostIP": "10.0.0.11",
                "podIP": f"172.16.0.{10 + (zlib.crc32(pod['metadata']['name'].encode()) % 200)}",
                "startTime": now,
                "conditions": [
                    {"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": now}
                    for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")
                ],
                "containerStatuses": [
                    {
                        "name": c["name"],
                        "image": c.get("image", ""),
                        "imageID": "",
                        "containerID": f"containerd://{self._uid(c['name']).replace('-', '')}",
                        "ready": True,
                        "restartCount": 0,
                        "started": True,
                        "state": {"running": {"startedAt": now}},
                        "lastState": {},
                    }
                    for c in pod["spec"].get("containers", [])
                ],
            }
        )
        self._put("MODIFIED", "Pod", pod)

    def _terminate(self, pod: dict, phase: str, exit_code: int) -> None:
        now = self.now
        pod["status"]["phase"] = phase
        for cond in pod["status"].get("conditions", []):
            if cond["type"] in ("Ready", "ContainersReady"):
                cond["status"] = "False"
                cond["lastTransitionTime"] = now
                cond["reason"] = "PodCompleted" if phase == "Succeeded" else "PodFailed"
        for cs in pod["status"].get("containerStatuses", []):
            started = (cs.get("state", {}).get("running") or {}).get("startedAt", now)
            cs["ready"] = False
            cs["started"] = False
            cs["state"] = {
                "terminated": {
                    "exitCode": exit_code,
                    "reason": "Completed" if exit_code == 0 else "Error",
                    "startedAt": started,
                    "finishedAt": now,
                    "containerID": cs.get("containerID", ""),
                }
            }
        self._put("MODIFIED", "Pod", pod)

    def succeed(self, pod: dict) -> None:
        self._terminate(pod, "Succeeded", 0)

    def fail(self, pod: dict, exit_code: int = 1) -> None:
        self._terminate(pod, "Failed", exit_code)

    def evict(self, pod: dict) -> None:
        """Deleted by someone else (eviction, node drain): no out-of-sync mark."""
        pod["metadata"]["deletionTimestamp"] = self.now
        self._put("MODIFIED", "Pod", pod)
        self.deferred.append(pod)


def _owner(job: dict) -> dict:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "name": job["metadata"]["name"],
        "uid": job["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
