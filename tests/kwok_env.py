"""KWOK (sigs.k8s.io/kwok) as the kubelets of fake nodes, on the envtest kube-apiserver.

The `kwok` controller binary comes from `scripts/kwok.sh` (`$KWOK_BIN`, else the cache
`~/.cache/vcbus/kwok/<version>/kwok`); the version is pinned in `scripts/envtest-versions.env`
(`KWOK_VERSION`, what Volcano's benchmark installs). The session fixture lives in
`tests/fixtures_kwok.py`; this module holds the non-fixture logic, shared with
`benchmarks/cluster.py`.

What `Kwok.start()` runs (one process, no container, nothing in kube-system)::

    kwok --kubeconfig=<envtest kubeconfig> --config=<workdir>/stages.yaml
         --manage-all-nodes=false --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake
         --node-lease-duration-seconds=40 --cidr=10.244.0.1/16 --node-ip=10.240.0.1
         --server-address=127.0.0.1:<free port>

* Only nodes annotated `kwok.x-k8s.io/node=fake` are KWOK's (`create_nodes()` annotates them, as
  Volcano's `benchmark/scripts/create-kwok-nodes.sh` does); other fake nodes of the suite
  (`tests.podsim`) are left alone, and so are their pods.
* `stages.yaml` holds KWOK's own stages, verbatim from the v0.7.0 module
  (`tests/data/kwok-stages/`, see its README): node-initialize (a managed node becomes Ready),
  node-heartbeat-with-lease (plus a Lease per node in kube-node-lease, renewed by kwok), pod-ready
  (a pod *bound* to a managed node becomes Running, with IPs and running containerStatuses) and
  pod-delete (a deleted pod goes at once: the kubelet's part of graceful deletion). That is
  Volcano's benchmark set (`stage-fast.yaml`) **without pod-complete**, which would finish every
  pod owned by a `Job` (a vcjob's pods too) as soon as it runs: here pods run until a test ends
  them (`fail_pod()` / `succeed_pod()`, the pods/status write a kubelet makes), or with
  `Kwok(..., complete=True)`. With `--config` given and holding node and pod stages, kwok uses
  exactly these, not its built-in defaults (which include pod-complete).
* KWOK never binds: pods wait for a scheduler (vcbus's, or Volcano's) to post a Binding.
* `start()` returns once kwok's own server answers `/healthz` (it starts after the controllers);
  `stop()` sends SIGTERM, then SIGKILL. The process dies with the test process too
  (PR_SET_PDEATHSIG), so a killed session leaves no kwok behind. Its log is `<workdir>/kwok.log`
  (`log_tail()`).

There is no kube-controller-manager: the TaintNodesByCondition admission plugin gives every new
node the `node.kubernetes.io/not-ready:NoSchedule` taint and nothing lifts it. `wait_nodes_ready()`
plays the node lifecycle controller's part and removes it once KWOK reports the node Ready.
"""

from __future__ import annotations

import datetime as dt
import os
import pathlib
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from typing import Any

import yaml

from tests.k8s_env import REPO, free_port, read_versions
from tests.k8s_env import _terminate as terminate

STAGE_DIR = REPO / "tests" / "data" / "kwok-stages"
NODE_ANNOTATION = "kwok.x-k8s.io/node"
NODE_ANNOTATION_VALUE = "fake"
NODE_SELECTOR = f"{NODE_ANNOTATION}={NODE_ANNOTATION_VALUE}"
NOT_READY_TAINT = "node.kubernetes.io/not-ready"
POD_CIDR = "10.244.0.1/16"  # the pod IPs kwok hands out (podsim uses 10.244.x.y too)
NODE_IP = "10.240.0.1"  # the nodes' InternalIP and the pods' hostIP
NODE_LEASE_SECONDS = 40  # as Volcano's benchmark configures kwok (kustomize/kwok/kwok.yaml)
MERGE_PATCH = "application/merge-patch+json"

_TERM_TIMEOUT = 10.0


class KwokError(RuntimeError):
    """kwok could not be started, died, or did not do what was waited for."""


# --------------------------------------------------------------------------- the binary


def kwok_version() -> str:
    return read_versions()["KWOK_VERSION"]


def cache_dir() -> pathlib.Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return pathlib.Path(base) / "vcbus" / "kwok" / kwok_version()


def _stamp_ok(d: pathlib.Path) -> bool:
    stamp = d / "VERSIONS"
    try:
        lines = stamp.read_text().splitlines()
    except OSError:
        return False
    versions = read_versions()
    return (os.access(d / "kwok", os.X_OK) and f"KWOK_VERSION={versions['KWOK_VERSION']}" in lines
            and f"KWOK_PATCH={versions['KWOK_PATCH']}" in lines)


def kwok_binary() -> pathlib.Path | None:
    """The kwok binary, by the same rules as scripts/kwok.sh: $KWOK_BIN, else the stamped cache."""
    env = os.environ.get("KWOK_BIN")
    if env and os.path.isfile(env) and os.access(env, os.X_OK):
        return pathlib.Path(env)
    d = cache_dir()
    return d / "kwok" if _stamp_ok(d) else None


def missing_kwok_message() -> str:
    return (
        f"no kwok binary: run `make kwok` (builds sigs.k8s.io/kwok/cmd/kwok v{kwok_version()} into "
        f"{cache_dir()}, needs Go and the Go module proxy) or set KWOK_BIN to a kwok v{kwok_version()} binary"
    )


# --------------------------------------------------------------------------- stages


def stage_documents(*, complete: bool = False, lease: bool = True) -> list[dict]:
    """KWOK's stages for `--config`: node init + heartbeat, pod ready + delete (+ pod-complete)."""
    names = ["node-initialize", "node-heartbeat-with-lease" if lease else "node-heartbeat", "pod-ready"]
    if complete:
        names.append("pod-complete")
    names.append("pod-delete")
    return [yaml.safe_load((STAGE_DIR / f"{n}.yaml").read_text()) for n in names]


# --------------------------------------------------------------------------- the process


def _die_with_parent() -> None:  # runs in the child between fork and exec
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG


class Kwok:
    """One kwok controller process against an API server. See the module docstring."""

    def __init__(
        self,
        binary: pathlib.Path | str,
        kubeconfig: pathlib.Path | str,
        workdir: pathlib.Path | str,
        *,
        complete: bool = False,
        node_lease_seconds: int = NODE_LEASE_SECONDS,
        extra_args: Iterable[str] = (),
    ) -> None:
        self.binary = pathlib.Path(binary)
        self.kubeconfig = pathlib.Path(kubeconfig)
        self.workdir = pathlib.Path(workdir)
        self.complete = complete
        self.node_lease_seconds = node_lease_seconds
        self.extra_args = list(extra_args)
        self.config = self.workdir / "stages.yaml"
        self.log = self.workdir / "kwok.log"
        self.port = 0
        self.proc: subprocess.Popen | None = None
        self._stopping = False

    def command(self) -> list[str]:
        return [
            str(self.binary),
            f"--kubeconfig={self.kubeconfig}",
            f"--config={self.config}",
            "--manage-all-nodes=false",
            f"--manage-nodes-with-annotation-selector={NODE_SELECTOR}",
            f"--node-lease-duration-seconds={self.node_lease_seconds}",
            f"--cidr={POD_CIDR}",
            f"--node-ip={NODE_IP}",
            f"--server-address=127.0.0.1:{self.port}",
            *self.extra_args,
        ]

    def start(self, timeout: float = 60.0) -> Kwok:
        if self.running:
            return self
        self.workdir.mkdir(parents=True, exist_ok=True)
        docs = stage_documents(complete=self.complete, lease=self.node_lease_seconds > 0)
        self.config.write_text(yaml.safe_dump_all(docs, sort_keys=False))
        self.port = free_port()
        cmd = self.command()
        with open(self.log, "ab") as f:
            f.write(f"==== start {dt.datetime.now().isoformat()}: {' '.join(cmd)}\n".encode())
            f.flush()
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT,
                                         cwd=self.workdir, preexec_fn=_die_with_parent)
        self._stopping = False
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise KwokError(f"kwok exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/healthz", timeout=2) as r:
                    if r.status == 200:
                        return self
            except urllib.error.HTTPError as e:
                last = f"HTTP {e.code}"
            except OSError as e:
                last = str(e)
            time.sleep(0.2)
        self.stop()
        raise KwokError(f"kwok not healthy after {timeout}s ({last}):\n{self.log_tail()}")

    def stop(self, grace: float = _TERM_TIMEOUT) -> None:
        """SIGTERM, then SIGKILL after `grace` seconds."""
        self._stopping = True
        proc, self.proc = self.proc, None
        terminate(proc, grace)

    def restart(self, timeout: float = 60.0) -> Kwok:
        self.stop()
        return self.start(timeout)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def check(self) -> None:
        """Raise if kwok died (it is not meant to exit while the tests run)."""
        if self.proc is not None and self.proc.poll() is not None and not self._stopping:
            raise KwokError(f"kwok exited with {self.proc.returncode}:\n{self.log_tail()}")

    def log_tail(self, n: int = 60) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return "(no kwok log)"


# --------------------------------------------------------------------------- nodes


def _api_request(api, method: str, path: str, **kw) -> Any:
    from vcbus.k8s.watching import api_request

    return api_request(api, method, path, **kw)


def node_manifest(
    name: str,
    *,
    cpu: str | int = "32",
    memory: str = "256Gi",
    pods: str | int = "110",
    labels: Mapping[str, str] | None = None,
    taints: list[dict] | None = None,
) -> dict:
    """A node for KWOK, shaped as Volcano's benchmark makes them (create-kwok-nodes.sh): the
    kwok annotation, its labels (`type: kwok`), capacity == allocatable. No conditions: KWOK's
    node-initialize stage makes it Ready. No taint unless given (the benchmark's
    `kwok.x-k8s.io/node=fake:NoSchedule` needs a toleration on every pod)."""
    res = {"cpu": str(cpu), "memory": str(memory), "pods": str(pods)}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {"node.alpha.kubernetes.io/ttl": "0", NODE_ANNOTATION: NODE_ANNOTATION_VALUE},
            "labels": {
                "beta.kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/role": "agent",
                "node-role.kubernetes.io/agent": "",
                "type": "kwok",
                **(labels or {}),
            },
        },
        "spec": {"taints": list(taints)} if taints else {},
        "status": {"allocatable": dict(res), "capacity": dict(res)},
    }


def create_nodes(
    api,
    n: int,
    *,
    cpu: str | int = "32",
    memory: str = "256Gi",
    pods: str | int = "110",
    prefix: str = "kwok-node",
    labels: Mapping[str, str] | None = None,
    taints: list[dict] | None = None,
    start: int = 0,
) -> list[str]:
    """Create `n` KWOK nodes `<prefix>-<start>` ... (Volcano's benchmark: 32 cpu / 256Gi / 110 pods)."""
    names = []
    for i in range(start, start + n):
        name = f"{prefix}-{i}"
        _api_request(api, "POST", "/api/v1/nodes",
                     body=node_manifest(name, cpu=cpu, memory=memory, pods=pods, labels=labels, taints=taints))
        names.append(name)
    return names


def _ready(node: Mapping) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (node.get("status") or {}).get("conditions") or [])


def wait_nodes_ready(api, names: Iterable[str], timeout: float = 120.0, *, kwok: Kwok | None = None,
                     lift_not_ready_taint: bool = True) -> list[dict]:
    """Wait until KWOK reports every node Ready; then lift the not-ready taint (see the module
    docstring) unless told not to. Returns the nodes as they are then."""
    want = set(names)
    deadline = time.monotonic() + timeout
    lifted: set[str] = set()
    while True:
        if kwok is not None:
            kwok.check()
        nodes = {n["metadata"]["name"]: n for n in _api_request(api, "GET", "/api/v1/nodes").get("items") or []}
        missing = want - set(nodes)
        if missing:
            raise KwokError(f"nodes {sorted(missing)} do not exist")
        waiting = []
        for name in sorted(want):
            node = nodes[name]
            if not _ready(node):
                waiting.append(name)
                continue
            taints = (node.get("spec") or {}).get("taints") or []
            if lift_not_ready_taint and name not in lifted and any(t.get("key") == NOT_READY_TAINT for t in taints):
                rest = [t for t in taints if t.get("key") != NOT_READY_TAINT]
                _api_request(api, "PATCH", f"/api/v1/nodes/{name}", body={"spec": {"taints": rest or None}},
                             content_type=MERGE_PATCH)
                lifted.add(name)
                waiting.append(name)  # read it back once more
        if not waiting:
            return [nodes[n] for n in sorted(want)]
        if time.monotonic() > deadline:
            tail = f"\nkwok log:\n{kwok.log_tail()}" if kwok is not None else ""
            raise KwokError(f"nodes not Ready after {timeout:.0f}s: {waiting}{tail}")
        time.sleep(0.2)


def delete_nodes(api, names: Iterable[str]) -> None:
    from vcbus.k8s.watching import KubeApiError

    for name in names:
        try:
            _api_request(api, "DELETE", f"/api/v1/nodes/{name}")
        except KubeApiError as e:
            if getattr(e, "status", None) != 404:
                raise


# --------------------------------------------------------------------------- pods


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def terminate_pod(
    api,
    namespace: str,
    name: str,
    exit_code: int | Mapping[str, int] = 0,
    *,
    reason: str | None = None,
    message: str | None = None,
    timeout: float = 60.0,
) -> dict:
    """End a pod's containers as its kubelet would: `state.terminated` with the exit code, Ready
    and ContainersReady False (PodCompleted), phase Succeeded when every code is 0, else Failed;
    one write to the pods/status subresource. `exit_code` is one code for every container, or
    {container name: code} (unlisted ones exit 0).

    The pod must be bound; a pod KWOK has not run yet is waited for first (up to `timeout`), since
    its pod-ready stage would otherwise still play on it. The write carries the resourceVersion it
    read (a conflict with KWOK's own write rereads and retries)."""
    from vcbus.k8s.watching import KubeApiError

    path = f"/api/v1/namespaces/{namespace}/pods/{name}"
    deadline = time.monotonic() + timeout
    while True:
        pod = _api_request(api, "GET", path)
        st = pod.get("status") or {}
        if not (pod.get("spec") or {}).get("nodeName"):
            raise KwokError(f"pod {namespace}/{name} is not bound: no kubelet runs it")
        if st.get("phase") in ("Succeeded", "Failed"):
            raise KwokError(f"pod {namespace}/{name} has already ended ({st['phase']})")
        if not st.get("podIP"):
            if time.monotonic() > deadline:
                raise KwokError(f"pod {namespace}/{name} not started by kwok after {timeout:.0f}s")
            time.sleep(0.1)
            continue
        now = _now()
        prev = {c["name"]: c for c in st.get("containerStatuses") or []}
        statuses, codes = [], []
        for c in (pod.get("spec") or {}).get("containers") or []:
            code = int(exit_code.get(c["name"], 0)) if isinstance(exit_code, Mapping) else int(exit_code)
            codes.append(code)
            old = prev.get(c["name"]) or {}
            started = ((old.get("state") or {}).get("running") or {}).get("startedAt") or st.get("startTime") or now
            term: dict[str, Any] = {"exitCode": code, "reason": reason or ("Completed" if code == 0 else "Error"),
                                    "startedAt": started, "finishedAt": now}
            if message and code:
                term["message"] = message
            entry = {k: old[k] for k in ("imageID", "containerID") if old.get(k)}
            if entry.get("containerID"):
                term["containerID"] = entry["containerID"]
            statuses.append({"name": c["name"], "image": c.get("image", ""), **entry, "ready": False,
                             "restartCount": old.get("restartCount", 0), "started": False,
                             "state": {"terminated": term}})
        conditions = []
        for cond in st.get("conditions") or []:
            cond = dict(cond)
            if cond.get("type") in ("Ready", "ContainersReady"):
                if cond.get("status") != "False":
                    cond["lastTransitionTime"] = now
                cond.update(status="False", reason="PodCompleted")
            conditions.append(cond)
        status: dict[str, Any] = {"phase": "Failed" if any(codes) else "Succeeded",
                                  "conditions": conditions, "containerStatuses": statuses}
        if message:
            status["message"] = message
        body = {"metadata": {"resourceVersion": pod["metadata"]["resourceVersion"]}, "status": status}
        try:
            return _api_request(api, "PATCH", path + "/status", body=body, content_type=MERGE_PATCH)
        except KubeApiError as e:
            if getattr(e, "status", None) != 409 or time.monotonic() > deadline:
                raise


def fail_pod(api, namespace: str, name: str, exit_code: int = 1, **kw) -> dict:
    """The pod's containers exit with `exit_code` (non-zero): phase Failed."""
    if not exit_code:
        raise ValueError("a failed pod needs a non-zero exit code")
    return terminate_pod(api, namespace, name, exit_code, **kw)


def succeed_pod(api, namespace: str, name: str, **kw) -> dict:
    """The pod's containers exit 0: phase Succeeded."""
    return terminate_pod(api, namespace, name, 0, **kw)
