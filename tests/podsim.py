"""A kubelet-less pod driver, in the spirit of KWOK: fake nodes, fake scheduling, fake containers.

Test support, not part of the vcbus package. There is no kubelet or scheduler
in the test control plane, so pods created by a controller would stay Pending
and unbound forever. End-to-end tests where vcbus's own scheduler binds use
KWOK as the kubelet (`tests/kwok_env.py`, the `kwok` fixture); `PodSimulator`
is for the tests that play the scheduler themselves (no vcbus scheduler runs)
or need a step-by-step control no kubelet stand-in gives (a pod that stays
terminating, a pod started by one status write). It plays both parts through
the real API with the official `kubernetes` client:

* `create_node()` registers a Node with capacity/allocatable and a Ready
  condition (it never runs anything);
* `bind()` / `schedule()` bind unbound pods to a node through the
  `pods/binding` subresource (first fit on cpu/memory/pods requests and
  `nodeSelector`; the apiserver adds the PodScheduled condition);
  with `binds=False` the simulator is only the kubelet: someone else (vcbus's
  scheduler) binds, `schedule()` binds nothing, `step()` runs only pods that
  already have `spec.nodeName`, and starting an unbound pod is an error;
* `start()` moves a bound pod to Running (containerStatuses with
  `state.running.startedAt`, Ready conditions, pod/host IPs, startTime);
* `finish()` / `succeed()` / `fail()` terminate its containers with given
  exit codes (`state.terminated` with exitCode, reason, startedAt,
  finishedAt) and set the phase to Succeeded (all zero) or Failed;
* `reap()` does the kubelet's part of graceful deletion: pods that have a
  deletionTimestamp are deleted for good (grace period 0);
* `set_podgroup_phase()` plays the Volcano scheduler and moves a PodGroup's
  `status.phase` (e.g. to Inqueue). It writes through the status
  subresource when the PodGroup CRD has one, else (as with Volcano's own
  CRD, and ours) with a patch of the object, which is how Volcano's
  scheduler writes it too.

All pod status changes are JSON merge patches of `pods/status`. Methods are
synchronous and each returns the object the apiserver answered with, as a
plain dict. Nothing here waits or polls: the caller decides when to act.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubernetes.utils import parse_quantity

from vcbus.k8s.watching import KubeApiError, api_request, resource_kind

MERGE_PATCH = "application/merge-patch+json"
TERMINAL = ("Succeeded", "Failed")


def now_rfc3339() -> str:
    return dt.datetime.now(dt.UTC).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


def _pod_ref(pod: str | Mapping, namespace: str | None) -> tuple[str, str]:
    if isinstance(pod, Mapping):
        meta = pod["metadata"]
        return meta.get("namespace") or namespace or "default", meta["name"]
    if "/" in pod:
        ns, name = pod.split("/", 1)
        return ns, name
    return namespace or "default", pod


def _requests(pod: Mapping) -> dict[str, float]:
    """cpu (cores) / memory (bytes) the pod asks for (requests, else limits)."""
    total = {"cpu": 0.0, "memory": 0.0}
    spec = pod.get("spec") or {}
    for c in spec.get("containers") or []:
        res = c.get("resources") or {}
        req = {**(res.get("limits") or {}), **(res.get("requests") or {})}
        for k in total:
            if k in req:
                total[k] += float(parse_quantity(req[k]))
    # Init containers run one by one: the pod needs the largest of them.
    for c in spec.get("initContainers") or []:
        res = c.get("resources") or {}
        req = {**(res.get("limits") or {}), **(res.get("requests") or {})}
        for k in total:
            if k in req:
                total[k] = max(total[k], float(parse_quantity(req[k])))
    return total


@dataclass
class _NodeInfo:
    name: str
    labels: dict[str, str]
    allocatable: dict[str, float]
    host_ip: str
    used: dict[str, float] = field(default_factory=lambda: {"cpu": 0.0, "memory": 0.0, "pods": 0.0})

    def fits(self, pod: Mapping, req: Mapping[str, float]) -> bool:
        selector = (pod.get("spec") or {}).get("nodeSelector") or {}
        if any(self.labels.get(k) != v for k, v in selector.items()):
            return False
        if self.used["pods"] + 1 > self.allocatable.get("pods", float("inf")):
            return False
        return all(
            self.used[k] + req[k] <= self.allocatable.get(k, float("inf")) + 1e-9 for k in ("cpu", "memory")
        )


class PodSimulator:
    """Drives nodes and pods through the API like a scheduler + kubelet would. See the module docstring.

    `scheduler_names`: only pods whose `spec.schedulerName` is in this set are
    bound by `schedule()` (None: every unbound pod). `binds=False`: never bind
    a pod of its own choice (a scheduler does); `bind(pod, node)` with an
    explicit node is still the caller's to make.
    """

    def __init__(self, api_client, *, scheduler_names: Iterable[str] | None = None, binds: bool = True):
        self.api = api_client
        self.scheduler_names = set(scheduler_names) if scheduler_names is not None else None
        self.binds = binds
        self._ip_seq = itertools.count(2)
        self._status_subresource: dict[str, bool] = {}

    # ------------------------------------------------------------------ raw helpers

    def _req(self, method: str, path: str, **kw) -> Any:
        return api_request(self.api, method, path, **kw)

    def get_pod(self, namespace: str, name: str) -> dict:
        return self._req("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")

    def list_pods(self, namespace: str | None = None, *, label_selector: str | None = None,
                  field_selector: str | None = None) -> list[dict]:
        path = f"/api/v1/namespaces/{namespace}/pods" if namespace else "/api/v1/pods"
        out = self._req("GET", path, query={"labelSelector": label_selector, "fieldSelector": field_selector})
        return out.get("items") or []

    def _patch_pod_status(self, namespace: str, name: str, status: dict) -> dict:
        return self._req(
            "PATCH", f"/api/v1/namespaces/{namespace}/pods/{name}/status",
            body={"status": status}, content_type=MERGE_PATCH,
        )

    # ------------------------------------------------------------------ nodes

    def create_node(
        self,
        name: str,
        *,
        cpu: str = "8",
        memory: str = "32Gi",
        pods: int = 110,
        labels: Mapping[str, str] | None = None,
        extra_capacity: Mapping[str, str] | None = None,
    ) -> dict:
        """Register a Ready node with the given capacity (allocatable == capacity)."""
        n = int(hashlib.sha1(name.encode()).hexdigest(), 16) % 250 + 1
        cap = {"cpu": str(cpu), "memory": str(memory), "pods": str(pods), **(extra_capacity or {})}
        ts = now_rfc3339()
        body = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "labels": {
                    "kubernetes.io/hostname": name,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                    "type": "podsim",
                    **(labels or {}),
                },
                "annotations": {"podsim.vcbus.io/fake": "true"},
            },
            "spec": {"podCIDR": f"10.244.{n}.0/24"},
            "status": {
                "capacity": cap,
                "allocatable": dict(cap),
                "addresses": [
                    {"type": "InternalIP", "address": f"10.240.0.{n}"},
                    {"type": "Hostname", "address": name},
                ],
                "conditions": [
                    {
                        "type": "Ready", "status": "True", "reason": "KubeletReady",
                        "message": "podsim node is ready",
                        "lastHeartbeatTime": ts, "lastTransitionTime": ts,
                    },
                    *(
                        {"type": t, "status": "False", "reason": f"KubeletHas{r}", "message": "podsim",
                         "lastHeartbeatTime": ts, "lastTransitionTime": ts}
                        for t, r in (("MemoryPressure", "SufficientMemory"),
                                     ("DiskPressure", "NoDiskPressure"),
                                     ("PIDPressure", "SufficientPID"))
                    ),
                ],
                "nodeInfo": {
                    "machineID": name, "systemUUID": name, "bootID": name,
                    "kernelVersion": "podsim", "osImage": "podsim", "containerRuntimeVersion": "podsim://0",
                    "kubeletVersion": "podsim", "kubeProxyVersion": "", "operatingSystem": "linux",
                    "architecture": "amd64",
                },
            },
        }
        node = self._req("POST", "/api/v1/nodes", body=body)
        # Some versions drop status on create; make sure it is there.
        if not (node.get("status") or {}).get("allocatable"):
            node = self._req("PATCH", f"/api/v1/nodes/{name}/status",
                             body={"status": body["status"]}, content_type=MERGE_PATCH)
        return node

    def delete_node(self, name: str) -> None:
        self._req("DELETE", f"/api/v1/nodes/{name}")

    def _nodes(self) -> list[_NodeInfo]:
        nodes = []
        for node in self._req("GET", "/api/v1/nodes").get("items") or []:
            st = node.get("status") or {}
            ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in st.get("conditions") or [])
            if not ready or (node.get("spec") or {}).get("unschedulable"):
                continue
            alloc = {k: float(parse_quantity(v)) for k, v in (st.get("allocatable") or {}).items()
                     if k in ("cpu", "memory", "pods")}
            host_ip = next((a["address"] for a in st.get("addresses") or [] if a.get("type") == "InternalIP"),
                           "10.240.0.1")
            nodes.append(_NodeInfo(node["metadata"]["name"], node["metadata"].get("labels") or {}, alloc, host_ip))
        nodes.sort(key=lambda n: n.name)
        by_name = {n.name: n for n in nodes}
        for pod in self.list_pods():
            node_name = (pod.get("spec") or {}).get("nodeName")
            if node_name in by_name and (pod.get("status") or {}).get("phase") not in TERMINAL:
                info = by_name[node_name]
                req = _requests(pod)
                info.used["cpu"] += req["cpu"]
                info.used["memory"] += req["memory"]
                info.used["pods"] += 1
        return nodes

    # ------------------------------------------------------------------ scheduling

    def pending_pods(self, namespace: str | None = None, *, label_selector: str | None = None) -> list[dict]:
        """Unbound, non-terminating pods this simulator is responsible for."""
        pods = self.list_pods(namespace, label_selector=label_selector, field_selector="spec.nodeName=")
        out = []
        for p in pods:
            if p["metadata"].get("deletionTimestamp"):
                continue
            if (p.get("status") or {}).get("phase", "Pending") != "Pending":
                continue
            sched = (p.get("spec") or {}).get("schedulerName") or "default-scheduler"
            if self.scheduler_names is not None and sched not in self.scheduler_names:
                continue
            out.append(p)
        out.sort(key=lambda p: (p["metadata"].get("creationTimestamp") or "", p["metadata"]["name"]))
        return out

    def bind(self, pod: str | Mapping, node: str | None = None, *, namespace: str | None = None) -> str | None:
        """Bind one pod (to `node`, or the first node it fits). Returns the node, or None if none fits."""
        ns, name = _pod_ref(pod, namespace)
        if node is None:
            if not self.binds:
                raise RuntimeError(f"pod {ns}/{name}: this simulator does not choose nodes (binds=False)")
            obj = pod if isinstance(pod, Mapping) else self.get_pod(ns, name)
            req = _requests(obj)
            node = next((n.name for n in self._nodes() if n.fits(obj, req)), None)
            if node is None:
                return None
        self._bind(ns, name, node)
        return node

    def _bind(self, ns: str, name: str, node: str) -> None:
        self._req(
            "POST", f"/api/v1/namespaces/{ns}/pods/{name}/binding",
            body={
                "apiVersion": "v1", "kind": "Binding",
                "metadata": {"name": name, "namespace": ns},
                "target": {"apiVersion": "v1", "kind": "Node", "name": node},
            },
        )

    def schedule(self, namespace: str | None = None, *, label_selector: str | None = None) -> list[tuple[str, str, str]]:
        """Bind every pending pod that fits somewhere; returns [(namespace, pod, node)] (none if binds=False)."""
        if not self.binds:
            return []
        nodes = self._nodes()
        bound = []
        for pod in self.pending_pods(namespace, label_selector=label_selector):
            req = _requests(pod)
            target = next((n for n in nodes if n.fits(pod, req)), None)
            if target is None:
                continue
            ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
            try:
                self._bind(ns, name, target.name)
            except KubeApiError as e:
                if e.status in (404, 409):  # deleted or bound meanwhile
                    continue
                raise
            target.used["cpu"] += req["cpu"]
            target.used["memory"] += req["memory"]
            target.used["pods"] += 1
            bound.append((ns, name, target.name))
        return bound

    # ------------------------------------------------------------------ pod lifecycle

    def _ips(self, pod: Mapping) -> tuple[str, str]:
        st = pod.get("status") or {}
        if st.get("podIP") and st.get("hostIP"):
            return st["podIP"], st["hostIP"]
        node = (pod.get("spec") or {}).get("nodeName")
        host_ip = "10.240.0.1"
        try:
            n = self._req("GET", f"/api/v1/nodes/{node}")
            host_ip = next((a["address"] for a in (n.get("status") or {}).get("addresses") or []
                            if a.get("type") == "InternalIP"), host_ip)
        except KubeApiError:
            pass
        seq = next(self._ip_seq)
        subnet = host_ip.rsplit(".", 1)[-1]
        return f"10.244.{subnet}.{seq % 250 + 2}", host_ip

    @staticmethod
    def _container_id(pod: Mapping, cname: str) -> str:
        uid = pod["metadata"].get("uid", "")
        return "containerd://" + hashlib.sha256(f"{uid}/{cname}".encode()).hexdigest()

    @staticmethod
    def _conditions(pod: Mapping, ready: bool, ts: str) -> list[dict]:
        old = {c["type"]: c for c in (pod.get("status") or {}).get("conditions") or []}

        def cond(t: str, status: bool, reason: str | None = None) -> dict:
            s = "True" if status else "False"
            prev = old.get(t)
            c = {"type": t, "status": s,
                 "lastTransitionTime": prev["lastTransitionTime"] if prev and prev.get("status") == s
                 and prev.get("lastTransitionTime") else ts}
            if reason and not status:
                c["reason"] = reason
            return c

        out = [
            cond("PodReadyToStartContainers", True),
            cond("Initialized", True),
            cond("Ready", ready, "PodCompleted" if not ready else None),
            cond("ContainersReady", ready, "PodCompleted" if not ready else None),
            cond("PodScheduled", True),
        ]
        return out

    def start(self, pod: str | Mapping, *, namespace: str | None = None, ready: bool = True) -> dict:
        """Pending (bound) -> Running. Binds the pod first if it is not bound yet (an error if binds=False)."""
        ns, name = _pod_ref(pod, namespace)
        obj = self.get_pod(ns, name)
        if not (obj.get("spec") or {}).get("nodeName"):
            if not self.binds:
                raise RuntimeError(f"pod {ns}/{name} is not bound (this simulator does not bind: binds=False)")
            if self.bind(obj) is None:
                raise RuntimeError(f"pod {ns}/{name}: no node fits it")
            obj = self.get_pod(ns, name)
        ts = now_rfc3339()
        pod_ip, host_ip = self._ips(obj)
        spec = obj.get("spec") or {}
        init_statuses = [
            {
                "name": c["name"], "image": c.get("image", ""), "imageID": f"docker.io/{c.get('image', '')}",
                "containerID": self._container_id(obj, c["name"]), "ready": True, "restartCount": 0,
                "started": False,
                "state": {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": ts, "finishedAt": ts,
                                         "containerID": self._container_id(obj, c["name"])}},
            }
            for c in spec.get("initContainers") or []
        ]
        statuses = [
            {
                "name": c["name"], "image": c.get("image", ""), "imageID": f"docker.io/{c.get('image', '')}",
                "containerID": self._container_id(obj, c["name"]), "ready": ready, "restartCount": 0,
                "started": True, "state": {"running": {"startedAt": ts}}, "lastState": {},
            }
            for c in spec.get("containers") or []
        ]
        status: dict[str, Any] = {
            "phase": "Running",
            "conditions": self._conditions(obj, ready, ts),
            "hostIP": host_ip, "hostIPs": [{"ip": host_ip}],
            "podIP": pod_ip, "podIPs": [{"ip": pod_ip}],
            "startTime": (obj.get("status") or {}).get("startTime") or ts,
            "containerStatuses": statuses,
        }
        if init_statuses:
            status["initContainerStatuses"] = init_statuses
        return self._patch_pod_status(ns, name, status)

    def finish(
        self,
        pod: str | Mapping,
        exit_code: int | Mapping[str, int] = 0,
        *,
        namespace: str | None = None,
        reason: str | None = None,
        message: str | None = None,
    ) -> dict:
        """Terminate the pod's containers: Succeeded if every exit code is 0, else Failed.

        `exit_code` is one code for every container or {container name: code}
        (unlisted containers exit 0). A pod that never ran is started first.
        """
        ns, name = _pod_ref(pod, namespace)
        obj = self.get_pod(ns, name)
        if (obj.get("status") or {}).get("phase") != "Running":
            obj = self.start(obj)
        ts = now_rfc3339()
        spec = obj.get("spec") or {}
        running = {c["name"]: c for c in (obj.get("status") or {}).get("containerStatuses") or []}
        statuses, codes = [], []
        for c in spec.get("containers") or []:
            code = exit_code.get(c["name"], 0) if isinstance(exit_code, Mapping) else int(exit_code)
            codes.append(code)
            prev = running.get(c["name"]) or {}
            started = ((prev.get("state") or {}).get("running") or {}).get("startedAt") or ts
            cid = self._container_id(obj, c["name"])
            term = {"exitCode": code, "reason": "Completed" if code == 0 else "Error",
                    "startedAt": started, "finishedAt": ts, "containerID": cid}
            if message and code != 0:
                term["message"] = message
            statuses.append({
                "name": c["name"], "image": c.get("image", ""), "imageID": f"docker.io/{c.get('image', '')}",
                "containerID": cid, "ready": False, "restartCount": prev.get("restartCount", 0),
                "started": False, "state": {"terminated": term}, "lastState": {},
            })
        failed = any(codes)
        status: dict[str, Any] = {
            "phase": "Failed" if failed else "Succeeded",
            "conditions": self._conditions(obj, False, ts),
            "containerStatuses": statuses,
        }
        if reason:
            status["reason"] = reason
        if message:
            status["message"] = message
        return self._patch_pod_status(ns, name, status)

    def succeed(self, pod: str | Mapping, *, namespace: str | None = None) -> dict:
        return self.finish(pod, 0, namespace=namespace)

    def fail(self, pod: str | Mapping, exit_code: int = 1, *, namespace: str | None = None, **kw) -> dict:
        if not exit_code:
            raise ValueError("a failed pod needs a non-zero exit code")
        return self.finish(pod, exit_code, namespace=namespace, **kw)

    def run(self, pod: str | Mapping, exit_code: int | Mapping[str, int] | None = None, *,
            namespace: str | None = None) -> dict:
        """Bind (if needed) and start; with `exit_code`, also finish."""
        obj = self.start(pod, namespace=namespace)
        return obj if exit_code is None else self.finish(obj, exit_code)

    def reap(self, namespace: str | None = None, *, label_selector: str | None = None) -> list[tuple[str, str]]:
        """Finalise graceful deletions like a kubelet: delete terminating pods with grace period 0."""
        gone = []
        for p in self.list_pods(namespace, label_selector=label_selector):
            meta = p["metadata"]
            if not meta.get("deletionTimestamp"):
                continue
            try:
                self._req(
                    "DELETE", f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}",
                    body={"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0,
                          "preconditions": {"uid": meta["uid"]}},
                )
            except KubeApiError as e:
                if e.status not in (404, 409):
                    raise
                continue
            gone.append((meta["namespace"], meta["name"]))
        return gone

    def step(self, namespace: str | None = None, *, label_selector: str | None = None) -> dict[str, list]:
        """One KWOK-like pass: bind pending pods (unless binds=False), start bound ones, reap terminating ones."""
        bound = self.schedule(namespace, label_selector=label_selector)
        started = []
        for p in self.list_pods(namespace, label_selector=label_selector):
            meta, st = p["metadata"], p.get("status") or {}
            if meta.get("deletionTimestamp") or not (p.get("spec") or {}).get("nodeName"):
                continue
            if st.get("phase", "Pending") == "Pending":
                self.start(p)
                started.append((meta["namespace"], meta["name"]))
        reaped = self.reap(namespace, label_selector=label_selector)
        return {"bound": bound, "started": started, "reaped": reaped}

    # ------------------------------------------------------------------ PodGroups (the scheduler's part)

    def _has_status_subresource(self, rk) -> bool:
        key = rk.name
        if key not in self._status_subresource:
            disc = self._req("GET", f"/apis/{rk.group}/{rk.version}")
            names = {r.get("name") for r in disc.get("resources") or []}
            self._status_subresource[key] = f"{rk.plural}/status" in names
        return self._status_subresource[key]

    def set_podgroup_phase(
        self,
        namespace: str,
        name: str,
        phase: str,
        *,
        conditions: list[dict] | None = None,
        counts: Mapping[str, int] | None = None,
    ) -> dict:
        """Set a PodGroup's status.phase (Pending/Inqueue/Running/Unknown/Completed), as the scheduler does.

        `conditions` replaces status.conditions; `counts` may set running/succeeded/failed.
        """
        rk = resource_kind("podgroups")
        status: dict[str, Any] = {"phase": phase}
        if conditions is not None:
            status["conditions"] = conditions
        if counts:
            status.update({k: int(v) for k, v in counts.items()})
        path = rk.path(namespace, name)
        if self._has_status_subresource(rk):
            path += "/status"
        return self._req("PATCH", path, body={"status": status}, content_type=MERGE_PATCH)
