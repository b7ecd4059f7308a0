"""Job forwarding: a queue with `extendClusters` marks the job, its PodGroup and its pods.

Volcano's syncJob (`pkg/controllers/job/job_controller_actions.go`) annotates the job
`volcano.sh/job-forwarding: "true"` when the job's queue has `spec.extendClusters`, before it
creates the PodGroup (which copies the job's annotations); `createJobPod`
(`pkg/controllers/job/job_controller_util.go`) puts the key on each pod as a label and an
annotation. Checked on the controller path (the engine's CreatePodGroup/CreatePod manifests)
and in `vcbus render --queues`.
"""

from __future__ import annotations

import json

import pytest
import yaml

from statemachines import outputs as o
from statemachines.engine import Engine
from statemachines.manifests.renderer import Renderer
from tests.builders import Harness, job, queue
from vcbus.cli.main import main

KEY = "volcano.sh/job-forwarding"


def forwarding_queue(name: str = "default") -> dict:
    q = queue(name)
    q["spec"]["extendClusters"] = [{"name": "cluster-b", "weight": 1}]
    return q


def created(q: dict) -> tuple[list[dict], list[dict]]:
    """(PodGroups, pods) the controller creates for a 2-replica job on queue `q`."""
    renderer = Renderer()
    h = Harness(engine=Engine(render_pod=renderer.pod, render_podgroup=renderer.podgroup))
    h.feed("ADDED", q)
    outs = h.create(job())
    outs += h.pg("Inqueue")
    pgs = [c.podgroup for c in outs.of(o.CreatePodGroup)]
    pods = [c.pod for c in outs.of(o.CreatePod)]
    assert len(pgs) == 1 and len(pods) == 2
    return pgs, pods


def test_a_queue_with_extend_clusters_marks_the_podgroup_and_every_pod():
    pgs, pods = created(forwarding_queue())
    assert pgs[0]["metadata"]["annotations"][KEY] == "true"
    for pod in pods:
        assert pod["metadata"]["labels"][KEY] == "true"
        assert pod["metadata"]["annotations"][KEY] == "true"


def test_a_queue_without_extend_clusters_marks_nothing():
    pgs, pods = created(queue())
    assert KEY not in (pgs[0]["metadata"].get("annotations") or {})
    for pod in pods:
        assert KEY not in pod["metadata"]["labels"] and KEY not in pod["metadata"]["annotations"]


VCJOB = {
    "apiVersion": "batch.volcano.sh/v1alpha1",
    "kind": "Job",
    "metadata": {"name": "fw"},
    "spec": {"queue": "q1", "tasks": [{"name": "t", "replicas": 2,
                                        "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}]},
}


@pytest.mark.parametrize("extend, marked", [([{"name": "cluster-b"}], True), (None, False)])
def test_render_with_a_forwarding_queue(tmp_path, capsys, extend, marked):
    q = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "q1"},
         "spec": {"weight": 1}, "status": {"state": "Open"}}
    if extend is not None:
        q["spec"]["extendClusters"] = extend
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(VCJOB))
    (tmp_path / "queues.yaml").write_text(yaml.safe_dump(q))
    code = main(["render", str(tmp_path / "job.yaml"), "--queues", str(tmp_path / "queues.yaml"), "-o", "json"])
    out, err = capsys.readouterr()
    assert code in (0, None), err
    items = json.loads(out)["items"]
    by_kind: dict[str, list[dict]] = {}
    for item in items:
        by_kind.setdefault(item["kind"], []).append(item)
    (vcjob,) = by_kind["Job"]
    (pg,) = by_kind["PodGroup"]
    pods = by_kind["Pod"]
    assert len(pods) == 2
    for obj in (vcjob, pg):
        assert ((obj["metadata"].get("annotations") or {}).get(KEY) == "true") is marked
    for pod in pods:
        assert (pod["metadata"]["labels"].get(KEY) == "true") is marked
        assert (pod["metadata"]["annotations"].get(KEY) == "true") is marked
