"""predicates (reference §5.4): every failure message, exactly as the pod condition carries it."""

from __future__ import annotations

import pytest

from statemachines import outputs as o
from tests.sched_builders import Cluster, node, outs_of, pod, podgroup, queue

NOSCHED = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}


def why(*nodes: dict, **pod_args) -> str:
    """The PodScheduled message of a lone 1-pod job, or 'bound to <node>'."""
    cluster = Cluster(queue(), *nodes, podgroup("pg", 1, phase="Inqueue"), pod("pg-w-0", "pg", **pod_args))
    result = cluster.session()
    if result.binds:
        return f"bound to {result.binds[0].node}"
    [cond] = outs_of(result.outputs, o.UpdatePodCondition)
    return cond.message


@pytest.mark.parametrize(
    ("nodes", "pod_args", "message"),
    [
        ([node("n1", cpu="2"), node("n2", cpu="9")], {"cpu": "3"}, "bound to n2"),
        ([node("n1", cpu="2"), node("n2", cpu="2")], {"cpu": "3"}, "0/2 nodes are unavailable: 2 Insufficient cpu."),
        # (two nodes: a request above the cluster total never passes proportion's queue check)
        ([node("n1", memory="1Gi"), node("n2", memory="1Gi")], {"memory": "2Gi"},
         "0/2 nodes are unavailable: 2 Insufficient memory."),
        ([node("n1", cpu="1", memory="1Gi"), node("n2", cpu="1", memory="1Gi")], {"cpu": "2", "memory": "2Gi"},
         "0/2 nodes are unavailable: 2 Insufficient cpu."),  # first failing dimension only
        ([node("n1", pods="0")], {}, "0/1 nodes are unavailable: 1 Insufficient pods."),
        ([node("n1", extra={"nvidia.com/gpu": "1"}), node("n2", extra={"nvidia.com/gpu": "1"})],
         {"extra": {"nvidia.com/gpu": "2"}}, "0/2 nodes are unavailable: 2 Insufficient nvidia.com/gpu."),
        ([node("n1", unschedulable=True), node("n2", taints=[NOSCHED])], {},
         "0/2 nodes are unavailable: 1 node(s) had untolerated taint {dedicated: gpu}, 1 node(s) were unschedulable."),
        ([node("n1", labels={"zone": "a"}), node("n2", labels={"zone": "b"})], {"node_selector": {"zone": "c"}},
         "0/2 nodes are unavailable: 2 node(s) didn't match Pod's node affinity/selector."),
        ([node("n1", labels={"zone": "a"}), node("n2", labels={"zone": "b"})], {"node_selector": {"zone": "b"}},
         "bound to n2"),
        ([node("n1", taints=[NOSCHED])], {"tolerations": [{"key": "dedicated", "operator": "Equal", "value": "gpu",
                                                            "effect": "NoSchedule"}]}, "bound to n1"),
        ([node("n1", taints=[NOSCHED])], {"tolerations": [{"operator": "Exists"}]}, "bound to n1"),
        ([node("n1", taints=[NOSCHED])], {"tolerations": [{"key": "dedicated", "operator": "Equal", "value": "cpu"}]},
         "0/1 nodes are unavailable: 1 node(s) had untolerated taint {dedicated: gpu}."),
        ([node("n1", taints=[{"key": "soft", "effect": "PreferNoSchedule"}])], {}, "bound to n1"),
        ([node("n1", unschedulable=True)], {"tolerations": [{"key": "node.kubernetes.io/unschedulable",
                                                             "operator": "Exists", "effect": "NoSchedule"}]},
         "bound to n1"),
    ],
)
def test_failure_messages(nodes, pod_args, message):
    assert why(*nodes, **pod_args) == message


AFFINITY_NODES = [node("n1", labels={"zone": "a", "gen": "3"}), node("n2", labels={"zone": "b", "gen": "5"})]


def required(*terms: dict) -> dict:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}}


@pytest.mark.parametrize(
    ("affinity", "expected"),
    [
        (required({"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}), "bound to n2"),
        (required({"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["a"]}]}), "bound to n2"),
        (required({"matchExpressions": [{"key": "gen", "operator": "Gt", "values": ["4"]}]}), "bound to n2"),
        (required({"matchExpressions": [{"key": "gen", "operator": "Lt", "values": ["4"]}]}), "bound to n1"),
        (required({"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}),
         "0/2 nodes are unavailable: 2 node(s) didn't match Pod's node affinity/selector."),
        (required({"matchExpressions": [{"key": "gpu", "operator": "DoesNotExist"},
                                        {"key": "zone", "operator": "In", "values": ["b"]}]}), "bound to n2"),
        (required({"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]}), "bound to n2"),
        (required({"matchExpressions": [{"key": "zone", "operator": "In", "values": ["x"]}]},
                  {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}), "bound to n1"),
        (required({}), "0/2 nodes are unavailable: 2 node(s) didn't match Pod's node affinity/selector."),
    ],
)
def test_required_node_affinity(affinity, expected):
    assert why(*AFFINITY_NODES, affinity=affinity) == expected


def test_pod_count_exceeded_and_a_static_failure_on_one_node():
    cluster = Cluster(queue(), node("n1", pods="1", unschedulable=True, cpu="8"),
                      podgroup("other", 1, phase="Running"), pod("other-0", "other", node="n1", phase="Running"),
                      podgroup("pg", 1, phase="Inqueue"), pod("pg-w-0", "pg", cpu="1"))
    [cond] = [c for c in outs_of(cluster.session().outputs, o.UpdatePodCondition) if c.name == "pg-w-0"]
    # the resource check passes on cpu/memory but pods: 1 is full
    assert cond.message == "0/1 nodes are unavailable: 1 Insufficient pods."
    cluster = Cluster(queue(), node("n1", pods="1", unschedulable=True, cpu="8"),
                      podgroup("other", 1, phase="Running"), pod("other-0", "other", node="n1", phase="Running",
                                                                    cpu=None, memory=None),
                      podgroup("pg", 1, phase="Inqueue"), pod("pg-w-0", "pg", cpu=None, memory=None))
    [cond] = [c for c in outs_of(cluster.session().outputs, o.UpdatePodCondition) if c.name == "pg-w-0"]
    # best-effort pod (backfill: no resource check): pod count, then the stable filters
    assert cond.message == "0/1 nodes are unavailable: 1 node(s) pod number exceeded, 1 node(s) were unschedulable."


def test_pods_of_other_schedulers_are_ignored_unless_bound():
    cluster = Cluster(queue(), node("n1", cpu="2"), podgroup("pg", 1, phase="Inqueue"),
                      pod("pg-w-0", "pg", cpu="1"), pod("foreign", None, cpu="1", scheduler="default-scheduler"),
                      pod("foreign-bound", None, cpu="1", scheduler="default-scheduler", node="n1", phase="Running"))
    result = cluster.session()
    assert [b.name for b in result.binds] == ["pg-w-0"]
    assert "default/foreign" not in cluster.cache.state()["pods"]
    assert "default/foreign-bound" in cluster.cache.state()["pods"]
