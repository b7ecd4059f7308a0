"""tests/podsim.py (test support): fake nodes, binding, and pod phases through the real API (no kubelet)."""

from __future__ import annotations

import pytest
from kubernetes import client as k

from tests.podsim import PodSimulator
from vcbus.k8s.watching import KubeApiError, api_request

pytestmark = pytest.mark.k8s


@pytest.fixture(scope="module")
def sim(k8s):
    s = PodSimulator(k8s.api_client())
    for name in ("podsim-a", "podsim-b"):
        try:
            s.create_node(name, cpu="4", memory="8Gi", pods=20, labels={"pool": name[-1]})
        except KubeApiError as e:
            if e.status != 409:
                raise
    return s


def make_pod(api, ns, name, *, cpu="500m", job="train", sched="volcano", containers=("main",), **spec):
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"volcano.sh/job-name": job}},
        "spec": {
            "schedulerName": sched,
            "restartPolicy": "OnFailure",
            "containers": [
                {"name": c, "image": "busybox:1.36", "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}
                for c in containers
            ],
            **spec,
        },
    }
    return api_request(api, "POST", f"/api/v1/namespaces/{ns}/pods", body=body)


def conditions(pod):
    return {c["type"]: c["status"] for c in pod["status"].get("conditions") or []}


def test_nodes_are_registered_ready_with_capacity(k8s, sim):
    node = k.CoreV1Api(k8s.api_client()).read_node("podsim-a")
    assert node.status.capacity["cpu"] == "4" and node.status.allocatable["memory"] == "8Gi"
    assert any(c.type == "Ready" and c.status == "True" for c in node.status.conditions)
    assert node.metadata.labels["pool"] == "a"


def test_bind_run_and_succeed(k8s, k8s_namespace, sim):
    api = k8s.api_client()
    ns = k8s_namespace
    make_pod(api, ns, "ok-0", containers=("main", "sidecar"))
    pending = sim.pending_pods(ns)
    assert [p["metadata"]["name"] for p in pending] == ["ok-0"]
    assert pending[0]["status"]["phase"] == "Pending"

    ((bns, bname, node),) = sim.schedule(ns)
    assert (bns, bname) == (ns, "ok-0") and node.startswith("podsim-")
    pod = sim.get_pod(ns, "ok-0")
    assert pod["spec"]["nodeName"] == node
    assert conditions(pod)["PodScheduled"] == "True"
    assert sim.pending_pods(ns) == []

    pod = sim.start(f"{ns}/ok-0")
    st = pod["status"]
    assert st["phase"] == "Running"
    assert st["podIP"] and st["hostIP"] and st["startTime"]
    assert conditions(pod)["Ready"] == "True"
    assert [c["name"] for c in st["containerStatuses"]] == ["main", "sidecar"]
    assert all("startedAt" in c["state"]["running"] and c["ready"] for c in st["containerStatuses"])

    pod = sim.succeed(f"{ns}/ok-0")
    st = pod["status"]
    assert st["phase"] == "Succeeded"
    assert conditions(pod)["Ready"] == "False"
    for c in st["containerStatuses"]:
        term = c["state"]["terminated"]
        assert term["exitCode"] == 0 and term["reason"] == "Completed"
        assert term["startedAt"] <= term["finishedAt"]
    # The typed client agrees (the status is a valid core/v1 PodStatus).
    typed = k.CoreV1Api(api).read_namespaced_pod_status("ok-0", ns)
    assert typed.status.container_statuses[0].state.terminated.exit_code == 0


def test_fail_with_exit_code_3(k8s, k8s_namespace, sim):
    api = k8s.api_client()
    ns = k8s_namespace
    make_pod(api, ns, "bad-0")
    node = sim.bind(f"{ns}/bad-0")
    assert node is not None
    sim.start(f"{ns}/bad-0")
    pod = sim.fail(f"{ns}/bad-0", 3, message="boom")
    assert pod["status"]["phase"] == "Failed"
    (cs,) = pod["status"]["containerStatuses"]
    assert cs["state"]["terminated"]["exitCode"] == 3
    assert cs["state"]["terminated"]["reason"] == "Error"
    assert cs["state"]["terminated"]["finishedAt"]
    typed = k.CoreV1Api(api).read_namespaced_pod("bad-0", ns)
    assert typed.status.phase == "Failed"
    assert typed.status.container_statuses[0].state.terminated.exit_code == 3


def test_per_container_exit_codes_and_run(k8s, k8s_namespace, sim):
    api = k8s.api_client()
    make_pod(api, k8s_namespace, "multi", containers=("a", "b"))
    pod = sim.run(f"{k8s_namespace}/multi", {"b": 137})
    codes = {c["name"]: c["state"]["terminated"]["exitCode"] for c in pod["status"]["containerStatuses"]}
    assert codes == {"a": 0, "b": 137} and pod["status"]["phase"] == "Failed"


def test_scheduling_respects_capacity_selector_and_scheduler_name(k8s, k8s_namespace, sim):
    api = k8s.api_client()
    ns = k8s_namespace
    make_pod(api, ns, "huge", cpu="64")
    make_pod(api, ns, "pinned", nodeSelector={"pool": "b"})
    make_pod(api, ns, "other-sched", sched="someone-else")
    picky = PodSimulator(api, scheduler_names={"volcano"})
    bound = {name: node for _, name, node in picky.schedule(ns)}
    assert bound == {"pinned": "podsim-b"}
    assert {p["metadata"]["name"] for p in picky.pending_pods(ns)} == {"huge"}
    assert sim.bind(f"{ns}/huge") is None  # fits nowhere


def test_step_and_reap_play_the_kubelet(k8s, k8s_namespace, sim):
    api = k8s.api_client()
    ns = k8s_namespace
    for i in range(3):
        make_pod(api, ns, f"w-{i}")
    out = sim.step(ns)
    assert len(out["bound"]) == 3 and len(out["started"]) == 3
    assert {sim.get_pod(ns, f"w-{i}")["status"]["phase"] for i in range(3)} == {"Running"}
    # Deleting a running pod only marks it (graceful deletion waits for the kubelet) ...
    k.CoreV1Api(api).delete_namespaced_pod("w-0", ns)
    assert sim.get_pod(ns, "w-0")["metadata"]["deletionTimestamp"]
    # ... and the simulator finishes the job.
    assert sim.reap(ns) == [(ns, "w-0")]
    with pytest.raises(KubeApiError) as e:
        sim.get_pod(ns, "w-0")
    assert e.value.status == 404


def test_podgroup_phase(k8s, k8s_namespace, sim):
    api = k8s.api_client()
    base = f"/apis/scheduling.volcano.sh/v1beta1/namespaces/{k8s_namespace}/podgroups"
    api_request(api, "POST", base, body={
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "train"}, "spec": {"minMember": 2},
    })
    pg = sim.set_podgroup_phase(k8s_namespace, "train", "Inqueue")
    assert pg["status"]["phase"] == "Inqueue" and pg["spec"]["minMember"] == 2
    cond = {"type": "Scheduled", "status": "True", "transitionID": "t1",
            "lastTransitionTime": "2025-01-01T00:00:00Z", "reason": "tasks in gang are ready to be scheduled"}
    pg = sim.set_podgroup_phase(k8s_namespace, "train", "Running", conditions=[cond], counts={"running": 2})
    assert pg["status"]["phase"] == "Running" and pg["status"]["running"] == 2
    assert pg["status"]["conditions"] == [cond]
    with pytest.raises(KubeApiError) as e:
        sim.set_podgroup_phase(k8s_namespace, "train", "Sideways")
    assert e.value.status == 422


def test_without_binding_it_only_runs_pods_someone_else_bound(k8s, k8s_namespace, sim):
    api = k8s.api_client()
    ns = k8s_namespace
    kubelet = PodSimulator(api, binds=False)
    for name in ("bound-0", "unbound-0"):
        make_pod(api, ns, name)
    assert kubelet.schedule(ns) == []
    kubelet.bind(f"{ns}/bound-0", "podsim-b")  # the scheduler's part, done by the caller
    out = kubelet.step(ns)
    assert out == {"bound": [], "started": [(ns, "bound-0")], "reaped": []}
    assert kubelet.get_pod(ns, "bound-0")["status"]["phase"] == "Running"
    unbound = kubelet.get_pod(ns, "unbound-0")
    assert "nodeName" not in unbound["spec"] and unbound["status"]["phase"] == "Pending"
    assert [p["metadata"]["name"] for p in kubelet.pending_pods(ns)] == ["unbound-0"]
    for act in (kubelet.start, kubelet.succeed, kubelet.bind):
        with pytest.raises(RuntimeError, match="binds=False"):
            act(f"{ns}/unbound-0")
    assert "nodeName" not in kubelet.get_pod(ns, "unbound-0")["spec"]
    assert kubelet.succeed(f"{ns}/bound-0")["status"]["phase"] == "Succeeded"
    # The binding simulator still binds and runs the same pod.
    assert sim.step(ns)["started"] == [(ns, "unbound-0")]
