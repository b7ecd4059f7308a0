"""nodeorder's ImageLocality score (kube-scheduler's `imagelocality/image_locality.go`, as Volcano's
nodeorder runs it with `imagelocality.weight`): the per-node scores of kube-scheduler's
`TestImageLocalityPriority` shapes, Volcano's cache bookkeeping of `status.images` (a node's image
counts as of its own last record), and where a pod lands."""

from __future__ import annotations

import pytest

from statemachines.scheduler.config import DEFAULT_CONFIG
from statemachines.scheduler.images import image_score, normalized_image_name
from statemachines.scheduler.plugins.nodeorder import image_locality
from statemachines.scheduler.session import open_session
from tests.sched_builders import Cluster, node, pod, podgroup, queue
from tests.test_sched_scoring import nodeorder_config, scene

MB = 1024 * 1024


def imaged(name: str, *images: tuple, **kw) -> dict:
    """A node with `status.images`: (size in MB, name, ...) each."""
    n = node(name, **kw)
    n["status"]["images"] = [{"names": list(names), "sizeBytes": size * MB} for size, *names in images]
    return n


def with_images(p: dict, *images: str, init: tuple = (), volumes: tuple = ()) -> dict:
    spec = p["spec"]
    main = spec["containers"][0]
    spec["containers"] = [{**main, "name": f"c{i}", "image": image} for i, image in enumerate(images)]
    if init:
        spec["initContainers"] = [{"name": f"i{i}", "image": image} for i, image in enumerate(init)]
    if volumes:
        spec["volumes"] = [{"name": f"v{i}", "image": {"reference": ref}} for i, ref in enumerate(volumes)]
    return p


def scores(nodes: list[dict], incoming: dict) -> dict[str, int]:
    """ImageLocality's score per node, every node folded twice (a status update each, so that every
    node's counts see all the others)."""
    cluster = Cluster(queue(), podgroup("pg", 1, phase="Inqueue"), *nodes, incoming)
    for n in nodes:
        cluster.update(n)
    ssn, task = scene_of(cluster)
    total = len(ssn.node_list)
    return {name: image_score(task.fact.images, task.fact.containers, ssn.nodes[name].fact.images, total)
            for name in sorted(ssn.nodes)}


def scene_of(cluster: Cluster):
    ssn = open_session(cluster.cache.snapshot(), DEFAULT_CONFIG, uid="u", number=1, seq=1, time="t")
    [task] = ssn.jobs["default/pg"].tasks.values()
    return ssn, task


def incoming(*images: str, **kw) -> dict:
    return with_images(pod("pg-w-0", "pg"), *images, **kw)


G40, G250, G300, G2000, G10, G600, G900, G4000, G20, G30 = (
    ("gcr.io/40:latest", "gcr.io/40:v1"), ("gcr.io/250:latest",), ("gcr.io/300:latest", "gcr.io/300:v1"),
    ("gcr.io/2000:latest",), ("gcr.io/10:latest", "gcr.io/10:v1"), ("gcr.io/600:latest",), ("gcr.io/900:latest",),
    ("gcr.io/4000:latest",), ("gcr.io/20:latest",), ("gcr.io/30:latest",))


@pytest.mark.parametrize(
    ("nodes", "pod_", "expected"),
    [
        # two images on two nodes: 40 MB / 2 nodes is under the 23 MB floor; 100 * (250/2 - 23) / (2000 - 23)
        ([imaged("n1", (40, *G40), (300, *G300), (2000, *G2000)), imaged("n2", (250, *G250), (10, *G10))],
         incoming("gcr.io/40", "gcr.io/250"), {"n1": 0, "n2": 5}),
        # both images on one node: 100 * ((40 + 300) / 2 - 23) / (2000 - 23)
        ([imaged("n1", (40, *G40), (300, *G300), (2000, *G2000)), imaged("n2", (250, *G250), (10, *G10))],
         incoming("gcr.io/40", "gcr.io/300"), {"n1": 7, "n2": 0}),
        # over the ceiling (1000 MB per container): 100
        ([imaged("n1", (4000, *G4000)), imaged("n2", (10, *G10))], incoming("gcr.io/4000", "gcr.io/10"),
         {"n1": 100, "n2": 0}),
        # a third node without images dilutes the spread: 100 * (4000 / 3 - 23) / (2000 - 23)
        ([imaged("n1", (4000, *G4000)), imaged("n2", (10, *G10)), node("n3")], incoming("gcr.io/4000", "gcr.io/10"),
         {"n1": 66, "n2": 0, "n3": 0}),
        # three large images, two of them on two of three nodes
        ([imaged("n1", (600, *G600), (900, *G900)), imaged("n2", (300, *G300), (600, *G600), (900, *G900)), node("n3")],
         incoming("gcr.io/300", "gcr.io/600", "gcr.io/900"), {"n1": 32, "n2": 36, "n3": 0}),
        # small images: 100 * (30 / 2 + 40 - 23) / (2000 - 23) = 1
        ([imaged("n1", (20, *G20), (30, *G30), (40, *G40)), imaged("n2", (40, *G40))],
         incoming("gcr.io/30", "gcr.io/40"), {"n1": 1, "n2": 0}),
        # an image volume counts as an image, not as a container: 100 * (300 / 2 - 23) / (1000 - 23)
        ([imaged("n1", (300, *G300)), imaged("n2", (30, *G30))],
         incoming("gcr.io/30", volumes=("gcr.io/300",)), {"n1": 12, "n2": 0}),
        # init containers count as containers: 100 * (30 / 2 + 300 / 2 - 23) / (2000 - 23)
        ([imaged("n1", (30, *G30), (300, *G300)), imaged("n2", (2000, *G2000))],
         incoming("gcr.io/30", init=("gcr.io/300",)), {"n1": 7, "n2": 0}),
        # a tag given matches that name only; a digest is taken as written
        ([imaged("n1", (300, *G300)), imaged("n2", (300, "gcr.io/300@sha256:ab"))],
         incoming("gcr.io/300:v1"), {"n1": 12, "n2": 0}),
        ([imaged("n1", (300, *G300)), imaged("n2", (300, "gcr.io/300@sha256:ab"))],
         incoming("gcr.io/300@sha256:ab"), {"n1": 0, "n2": 12}),
    ],
)
def test_image_locality_scores(nodes, pod_, expected):
    assert scores(nodes, pod_) == expected


@pytest.mark.parametrize(
    ("name", "normalized"),
    [("busybox", "busybox:latest"), ("busybox:1.36", "busybox:1.36"), ("localhost:5000/app", "localhost:5000/app:latest"),
     ("localhost:5000/app:v2", "localhost:5000/app:v2"), ("app@sha256:ab", "app@sha256:ab")],
)
def test_normalized_image_name(name, normalized):
    assert normalized_image_name(name) == normalized


def test_a_nodes_counts_are_those_of_its_own_last_record():
    # Volcano's addNodeImageStates: the summary is made when the node is folded; n1 was folded first
    n1, n2 = imaged("n1", (300, *G300)), imaged("n2", (300, *G300))
    cluster = Cluster(queue(), podgroup("pg", 1, phase="Inqueue"), n1, n2, incoming("gcr.io/300"))
    facts = cluster.cache.snapshot().nodes
    assert facts["n1"].images["gcr.io/300:latest"] == (300 * MB, 1)
    assert facts["n2"].images["gcr.io/300:latest"] == (300 * MB, 2)
    cluster.update(n1)  # its next status update sees n2's copy
    assert cluster.cache.snapshot().nodes["n1"].images["gcr.io/300:latest"] == (300 * MB, 2)
    cluster.add(n2, "DELETED")
    cluster.update(n1)
    assert cluster.cache.snapshot().nodes["n1"].images["gcr.io/300:latest"] == (300 * MB, 1)
    assert cluster.cache.images.states == {name: [300 * MB, {"n1"}] for name in G300}
    cluster.update(imaged("n1"))  # pruned: no node holds it
    assert cluster.cache.images.states == {}


def test_the_weighted_score_is_in_the_node_order():
    ssn, task = scene(imaged("n1", (300, *G300)), node("n2"), incoming("gcr.io/300"))
    assert image_locality(ssn, 3)(task, ssn.nodes["n1"]) == 3.0 * (100 * (300 * MB // 2 - 23 * MB) // (977 * MB))
    assert image_locality(ssn, 3)(task, ssn.nodes["n2"]) == 0.0


# n2 is emptier (LeastAllocated prefers it by 50, BalancedAllocation ties); n1 holds the 4000 MB image
LOADED = [imaged("n1", (4000, *G4000)), node("n2"),
          pod("x", None, cpu="2", memory="8Gi", node="n1", phase="Running")]


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (nodeorder_config(), "n1"),  # weight 1: 4000 / 2 over 1000 clamps to 100, over LeastAllocated's lead
        (nodeorder_config(**{"imagelocality.weight": 0}), "n2"),  # off
    ],
)
def test_a_pod_goes_where_its_image_is(config, expected):
    cluster = Cluster(queue(), podgroup("pg", 1, phase="Inqueue"), *LOADED, incoming("gcr.io/4000"), config=config)
    assert [b.node for b in cluster.session().binds] == [expected]


def test_with_volcanos_default_config_two_equal_nodes_are_told_apart_by_the_image():
    cluster = Cluster(queue(), podgroup("pg", 1, phase="Inqueue"), node("n1"), imaged("n2", (600, *G600)),
                      incoming("gcr.io/600"))
    assert [b.node for b in cluster.session().binds] == ["n2"]
