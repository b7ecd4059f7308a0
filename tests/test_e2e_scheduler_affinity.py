"""End to end: the seed job with a required pod anti-affinity on `kubernetes.io/hostname` (one pod
per node), placed by vcbus alone on a real API server and KWOK nodes.

The same setup as `tests/test_e2e_scheduler.py` (its `Scenario`, `Vcbus` and `scenario` fixture:
`vcbus up --kubeconfig` with its own bus, KWOK nodes of cpu 5 / memory 16Gi) but the pods request
cpu 1 / memory 1Gi, so all three would fit on any one node: only the anti-affinity spreads them.

- three nodes, the first made large (cpu 64 / memory 256Gi, so the least-requested score would
  put every pod there): one pod per node, Running;
- two nodes: nothing is ever bound (through three more sessions), and the PodGroup's
  Unschedulable condition names the anti-affinity in kube-scheduler's words;
- three nodes, the anti-affinity term choosing its namespaces by a `namespaceSelector` (the label
  the API server gives every namespace, `kubernetes.io/metadata.name`): the same one pod per node,
  which needs the Namespace records on the bus and in the scheduler's facts;
- three nodes, no affinity but the `svc` plugin: its headless Service makes the system-default
  topology spreading score apply, and the pods land one per node too (the Service records on the
  bus and in the scheduler's facts).
"""

from __future__ import annotations

import pytest

from tests.test_e2e_scheduler import (  # noqa: F401 - scenario is a fixture
    NAME,
    check_bound_one_per_node,
    scenario,
    seed_job,
    three_sessions_bind_nothing,
    unschedulable_condition,
)
from tests.test_webhook_k8s import webhook  # noqa: F401 - the admission webhook fixture

pytestmark = [pytest.mark.k8s, pytest.mark.nats, pytest.mark.slow]

SMALL = {"cpu": "1", "memory": "1Gi"}
ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"


def spread_seed_job(namespace_selector: dict | None = None) -> dict:
    """The seed job, small requests, each pod refusing a node that holds another pod of the job."""
    job = seed_job()
    for task in job["spec"]["tasks"]:
        spec = task["template"]["spec"]
        for c in spec["containers"]:
            c["resources"] = {"requests": dict(SMALL), "limits": dict(SMALL)}
        term = {"labelSelector": {"matchLabels": {"volcano.sh/job-name": NAME}}, "topologyKey": "kubernetes.io/hostname"}
        if namespace_selector is not None:
            term["namespaceSelector"] = namespace_selector
        spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    return job


@pytest.mark.parametrize("scenario", [3], indirect=True)
def test_seed_job_with_hostname_anti_affinity_lands_one_pod_per_node(scenario):
    one_pod_per_node_on_three(scenario, spread_seed_job())


@pytest.mark.parametrize("scenario", [3], indirect=True)
def test_the_same_with_the_namespaces_chosen_by_a_namespace_selector(scenario):
    sc = scenario
    one_pod_per_node_on_three(sc, spread_seed_job({"matchLabels": {"kubernetes.io/metadata.name": sc.ns}}))


def one_pod_per_node_on_three(sc, job: dict) -> None:
    big = {"cpu": "64", "memory": "256Gi", "pods": "110"}
    sc.core.patch_node_status(sc.nodes[0], {"status": {"capacity": big, "allocatable": big}})
    sc.wait("the large node seen as large", lambda: sc.core.read_node(sc.nodes[0]).status.allocatable["cpu"] == "64")
    sc.submit(job)

    def running():
        pods = sc.pods()
        ok = len(pods) == 3 and all(p["status"].get("phase") == "Running" and p["spec"].get("nodeName") for p in pods)
        return pods if ok else None

    pods = sc.wait("3 pods bound and Running", running)
    placement = check_bound_one_per_node(sc, pods)
    print(f"placement: {placement}")


@pytest.mark.parametrize("scenario", [2], indirect=True)
def test_on_two_nodes_nothing_is_bound_and_the_condition_names_the_anti_affinity(scenario, nats_server):
    sc = scenario
    sc.submit(spread_seed_job())

    def condition():
        return unschedulable_condition(sc, lambda message: ANTI_AFFINITY in message)

    _, cond = sc.wait("the Unschedulable condition naming the anti-affinity", condition)
    assert cond["status"] == "True"
    three_sessions_bind_nothing(sc, nats_server.url)
    assert condition() is not None
    print(f"condition: {cond}")


@pytest.mark.parametrize("scenario", [3], indirect=True)
def test_the_svc_plugins_service_spreads_the_seed_job_over_the_nodes(scenario):
    """No affinity at all, but the `svc` plugin: its headless Service selects the job's pods, so Volcano's
    PodTopologySpread score (system-default constraints, `defaultingType: System`) spreads them, one pod
    per node, where the least-requested score alone puts all three on the large node. Needs the Service
    watched, bridged and folded into the scheduler's facts."""
    job = seed_job()
    job["spec"].setdefault("plugins", {})["svc"] = []
    for task in job["spec"]["tasks"]:
        for c in task["template"]["spec"]["containers"]:
            c["resources"] = {"requests": dict(SMALL), "limits": dict(SMALL)}
    one_pod_per_node_on_three(scenario, job)
