"""System-default topology spreading: Volcano configures kube-scheduler's PodTopologySpread score with
`defaultingType: System` (pkg/scheduler/plugins/nodeorder/nodeorder.go), so a pod without
topologySpreadConstraints of its own is scored as if it had ScheduleAnyway constraints on
`kubernetes.io/hostname` (maxSkew 3) and `topology.kubernetes.io/zone` (maxSkew 5) over the selector of
the Services, ReplicationControllers, ReplicaSets and StatefulSets that select it.

Cases after kube-scheduler's `helper/spread_test.go` (TestGetPodServices, TestDefaultSelector) and
`podtopologyspread/scoring_test.go` (the system-default cases of TestPodTopologySpreadScore and
TestPreScoreStateEmptyNodes)."""

from __future__ import annotations

import pytest

from statemachines.scheduler.plugins.nodeorder import SpreadScorer
from statemachines.scheduler.workloads import Workloads
from tests.sched_builders import Cluster, node, pod, podgroup, queue
from tests.test_sched_pod_scores import LOADED, binds, config, k8s_pod, session_task, spec

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
NS = "default"


def service(name: str, selector: dict | None, namespace: str = NS) -> dict:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": namespace},
            "spec": {"ports": [{"port": 80}], **({"selector": selector} if selector is not None else {})}}


def controller(kind: str, name: str, selector, namespace: str = NS) -> dict:
    api = "v1" if kind == "ReplicationController" else "apps/v1"
    return {"apiVersion": api, "kind": kind, "metadata": {"name": name, "namespace": namespace},
            "spec": {} if selector is None else {"selector": selector}}


def owned(p: dict, kind: str, name: str, *, api: str | None = None, is_controller: bool = True) -> dict:
    api = api or ("v1" if kind == "ReplicationController" else "apps/v1")
    p["metadata"]["ownerReferences"] = [{"apiVersion": api, "kind": kind, "name": name, "uid": f"uid-{name}",
                                         **({"controller": True} if is_controller else {})}]
    return p


# --- DefaultSelector (kube-scheduler's helper/spread_test.go shapes)

POD_LABELS = {"podLabelKey": "podLabelVal"}
SVC = service("test-service", POD_LABELS)
RS = controller("ReplicaSet", "test-replicaset", {"matchLabels": {"replicaSetLabelKey": "replicaSetLabelVal"}})
RC = controller("ReplicationController", "test-rc", {"replicationLabelKey": "replicationLabelVal"})
SS = controller("StatefulSet", "test-statefulset", {"matchLabels": {"statefulSetLabelKey": "statefulSetLabelVal"}})
IN_POD = ("podLabelKey", "In", ("podLabelVal",))
IN_RS = ("replicaSetLabelKey", "In", ("replicaSetLabelVal",))


def selector_of(p: dict, *objects: dict):
    cluster = Cluster(queue(), podgroup("pg", 1), *objects, p)
    snapshot = cluster.cache.snapshot()
    return Workloads(snapshot.workloads).selector(snapshot.tasks[f"{NS}/{p['metadata']['name']}"])


def test_pod_services_are_those_whose_selector_matches_the_pod():
    services = [service(f"service-{i}", {"app": f"test-{i}"}) for i in range(3)]
    for i in range(5):
        p = pod(f"test-pod-{i}", "pg", labels={"app": f"test-{i}", "label": f"label-{i}"})
        expected = (("app", "In", (f"test-{i}",)),) if i < 3 else None
        assert selector_of(p, *services) == expected, i


@pytest.mark.parametrize(
    ("objects", "owner", "expected"),
    [
        pytest.param([SVC], None, (IN_POD,), id="only service"),
        pytest.param([RS], ("ReplicaSet", "test-replicaset"), (IN_RS,), id="only replicaset"),
        pytest.param([RC], ("ReplicationController", "test-rc"),
                     (("replicationLabelKey", "In", ("replicationLabelVal",)),), id="only replicationcontroller"),
        pytest.param([SS], ("StatefulSet", "test-statefulset"),
                     (("statefulSetLabelKey", "In", ("statefulSetLabelVal",)),), id="only statefulset"),
        pytest.param([SVC, RS], ("ReplicaSet", "test-replicaset"), (IN_POD, IN_RS), id="service and replicaset"),
        pytest.param([SVC, RC], ("ReplicationController", "test-rc"),
                     (IN_POD, ("replicationLabelKey", "In", ("replicationLabelVal",))),
                     id="service and replicationcontroller"),
        pytest.param([SVC, SS], ("StatefulSet", "test-statefulset"),
                     (IN_POD, ("statefulSetLabelKey", "In", ("statefulSetLabelVal",))), id="service and statefulset"),
        pytest.param([SVC], ("ReplicaSet", "test-replicaset"), (IN_POD,), id="the owner does not exist"),
        pytest.param([RS], None, None, id="a replicaset that is not the pod's controller"),
        pytest.param([controller("ReplicaSet", "test-replicaset", None)], ("ReplicaSet", "test-replicaset"), None,
                     id="a replicaset without a selector adds nothing"),
        pytest.param([controller("ReplicaSet", "test-replicaset",
                                 {"matchExpressions": [{"key": "a", "operator": "In"}]})],
                     ("ReplicaSet", "test-replicaset"), None, id="a selector that does not parse adds nothing"),
        pytest.param([controller("ReplicaSet", "test-replicaset",
                                 {"matchExpressions": [{"key": "a", "operator": "Exists"}]})],
                     ("ReplicaSet", "test-replicaset"), (("a", "Exists", ()),), id="a replicaset's expression"),
        pytest.param([service("s", None)], None, None, id="a service without a selector selects nothing"),
        pytest.param([service("s", POD_LABELS, namespace="other")], None, None,
                     id="a service of another namespace"),
        pytest.param([service("s", {"podLabelKey": "other"})], None, None, id="a service that does not match"),
    ],
)
def test_default_selector(objects, owner, expected):
    p = pod("test-pod", "pg", labels=POD_LABELS)
    if owner is not None:
        owned(p, *owner)
    assert selector_of(p, *objects) == expected


def test_only_a_controller_of_the_kinds_and_versions_it_reads_counts():
    p = owned(pod("test-pod", "pg", labels=POD_LABELS), "ReplicaSet", "test-replicaset", api="apps/v1beta2")
    assert selector_of(p, RS) is None
    p = owned(pod("test-pod", "pg", labels=POD_LABELS), "ReplicaSet", "test-replicaset", is_controller=False)
    assert selector_of(p, RS) is None


# --- the score (kube-scheduler's scoring_test.go system-default cases)

def four_nodes(zones: dict[str, str | None]) -> list[dict]:
    return [node(n, labels={HOST: n, **({ZONE: z} if z else {})}) for n, z in zones.items()]


def scores(objects: list[dict], incoming: dict, candidates: list[str]) -> list[float] | None:
    ssn, task = session_task([*objects, incoming])
    scorer = SpreadScorer(ssn, 1)
    needed, score = scorer.needed, scorer.score
    if not needed(task.fact):
        return None
    return score(task.fact, [ssn.nodes[n] for n in candidates])


NODES = ("node-a", "node-b", "node-c", "node-d")


def test_nodes_without_a_zone_and_pods_matching_a_service_score_as_one_hostname_constraint():
    """'system defaulting, nodes don't have zone, pods match service': matching pods spread 4/3/2/1."""
    existing = [k8s_pod(f"p-{n}{i}", n, {"foo": ""}) for n, count in zip(NODES, (4, 3, 2, 1)) for i in range(count)]
    objects = [*four_nodes(dict.fromkeys(NODES)), *existing, service("s", {"foo": ""})]
    assert scores(objects, pod("pg-w-0", "pg", labels={"foo": ""}), list(NODES)) == [44, 66, 77, 100]


def test_a_replicasets_pods_without_a_zone_are_one_more_domain_and_score_no_zone_term():
    """'system default constraints and a replicaset': nodes without a zone label are not left out (they
    count as the empty zone's domain, 2 zone domains, 4 hostname domains) and get no zone term. Matching
    pods 2/0/1/0: raw a = 2 ln6 + 2 + 2 ln4 + 4 = 12, b = 0 + 2 + 2 ln4 + 4 = 9, c = ln6 + 2 = 4, d = 2;
    normalized 100 (12 + 2 - s) / 12."""
    fact = {"matchExpressions": [{"key": "foo", "operator": "Exists"}]}
    existing = [k8s_pod("e0", "node-a", {"foo": "x"}), k8s_pod("e1", "node-a", {"foo": "y"}),
                k8s_pod("e2", "node-c", {"foo": "z"}), k8s_pod("e3", "node-b", {"other": ""})]
    objects = [*four_nodes({"node-a": "mars", "node-b": "mars", "node-c": None, "node-d": None}), *existing,
               controller("ReplicaSet", "rs1", fact)]
    incoming = owned(pod("pg-w-0", "pg", labels={"foo": "tar", "baz": "sup"}), "ReplicaSet", "rs1")
    assert scores(objects, incoming, list(NODES)) == [16, 41, 83, 100]


def test_a_pod_with_constraints_of_its_own_gets_no_default_ones():
    """'default constraints and a replicaset, but pod has constraints': a DoNotSchedule constraint of its
    own leaves no ScheduleAnyway one, and no default either."""
    objects = [*four_nodes(dict.fromkeys(NODES)), service("s", {"foo": ""})]
    hard = [{"maxSkew": 1, "topologyKey": HOST, "whenUnsatisfiable": "DoNotSchedule",
             "labelSelector": {"matchLabels": {"foo": ""}}}]
    incoming = spec(pod("pg-w-0", "pg", labels={"foo": ""}), topologySpreadConstraints=hard)
    assert scores(objects, incoming, list(NODES)) is None
    assert scores(objects, pod("pg-w-0", "pg", labels={"foo": ""}), list(NODES)) is not None


def test_other_namespaces_and_terminating_pods_are_not_counted():
    existing = [k8s_pod("e0", "node-a", {"foo": ""}), k8s_pod("e1", "node-b", {"foo": ""})]
    existing[0]["metadata"]["namespace"] = "other"
    existing[1]["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    objects = [*four_nodes(dict.fromkeys(NODES)), *existing, service("s", {"foo": ""})]
    assert scores(objects, pod("pg-w-0", "pg", labels={"foo": ""}), list(NODES)) == [100, 100, 100, 100]


# --- in a session

SVC_A = service("a", {"app": "a"})


def test_a_service_spreads_its_pods_where_resources_alone_would_tie():
    """LOADED: n1 holds a pod of app a, n2 one of app b, the same requests: the resource scores tie and
    the name would choose n1; a Service selecting app a sends the next app-a pod to n2."""
    incoming = pod("pg-w-0", "pg", labels={"app": "a"})
    assert binds(*LOADED, incoming) == ["n1"]
    assert binds(*LOADED, SVC_A, incoming) == ["n2"]


def test_a_vcjobs_pods_spread_through_the_svc_plugins_headless_service():
    """The svc plugin's Service selects the job's pods by volcano.sh/job-name and job-namespace. With the
    resource scores off every node ties and the gang's pods all go to the first node by name; with the
    Service, each pod placed raises its node's count and the next goes elsewhere: one per node."""
    labels = {"volcano.sh/job-name": "pg", "volcano.sh/job-namespace": NS}
    nodes = [node(f"n{i}", cpu="8", memory="32Gi", labels={HOST: f"n{i}", ZONE: "z"}) for i in range(3)]
    gang = [pod(f"pg-w-{i}", "pg", role="w", labels=labels) for i in range(3)]
    conf = config(**{"leastrequested.weight": 0, "balancedresource.weight": 0, "imagelocality.weight": 0})
    assert binds(*nodes, *gang, members=3, conf=conf) == ["n0", "n0", "n0"]
    assert binds(*nodes, service("pg", labels), *gang, members=3, conf=conf) == ["n0", "n1", "n2"]


def test_the_cache_forgets_a_deleted_service():
    incoming = pod("pg-w-0", "pg", labels={"app": "a"})
    cluster = Cluster(queue(), podgroup("pg", 1, phase="Inqueue"), *LOADED, SVC_A)
    cluster.cache.apply_object("DELETED", SVC_A)
    cluster.cache.apply_object("ADDED", incoming)
    assert [b.node for b in cluster.session().binds] == ["n1"]
