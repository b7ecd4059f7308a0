"""`vcbus why-pending` as a user runs it: offline from the example snapshots, and over a real
nats-server from the bus's log (VCBUS_K8S filled by `vcbus publish`)."""

from __future__ import annotations

import json
import pathlib

import pytest
import yaml

from tests.fixtures_nats import vcbus_cli
from tests.test_schedule_cli import PG, TWO_NODE_MESSAGE, objects

ROOT = pathlib.Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "scheduler"
TWO = EXAMPLES / "two-nodes.yaml"
THREE = EXAMPLES / "three-nodes.yaml"
TWO_WATCH = EXAMPLES / "two-nodes.watch.json"
FIT = "0/2 nodes are unavailable: 2 Insufficient cpu."
# The PodGroup's Warning event: P = the number of Pending tasks (3), not the condition's 1.
GANG_EVENT = "3/3 tasks in gang unschedulable: " + TWO_NODE_MESSAGE.split(": ", 1)[1]


def why(*args: str) -> tuple[int, str, str]:
    res = vcbus_cli("why-pending", *args)
    return res.returncode, res.stdout.decode(), res.stderr.decode()


def check_two_node_answer(out: str) -> None:
    lines = out.splitlines()
    assert lines[0] == (
        "default/resnet-dist-train does not fit as a gang: 2 of 3 tasks fit, then 1 fit no node beside them, "
        "and the gang needs 3 placed at once (minAvailable)."
    )
    assert f"  podgroup   {PG}: phase Inqueue, minMember 3, 3 tasks" in lines
    assert ("  queue      default: Open, share 0.00, deserved cpu 9, memory 24Gi, pods 3; "
            "allocated cpu 0, memory 0, pods 0") in lines
    # the two counts are Volcano's own (Pending tasks; tasks short of minAvailable): each line says which
    gang = lines.index(f"  gang       {GANG_EVENT}")
    assert lines[gang + 1] == "             (the PodGroup's Warning event: 3 of the 3 tasks Pending)"
    condition = lines.index(f"  condition  Unschedulable: {TWO_NODE_MESSAGE}")
    assert lines[condition + 1] == "             (the PodGroup's condition: 1 more placed task needed for minAvailable 3)"
    tasks = lines[lines.index("  tasks") + 1:]
    assert tasks == [
        "    resnet-dist-train-master-0 (master) Pending: Schedulable: Pod default/resnet-dist-train-master-0 "
        "can possibly be assigned to node-1, once minAvailable is satisfied",
        "    resnet-dist-train-worker-0 (worker) Pending: Schedulable: Pod default/resnet-dist-train-worker-0 "
        "can possibly be assigned to node-2, once minAvailable is satisfied",
        f"    resnet-dist-train-worker-1 (worker) Pending: Unschedulable: {FIT}",
        "      node-1: Insufficient cpu",
        "      node-2: Insufficient cpu",
    ]


def test_two_nodes_offline_by_vcjob_and_by_podgroup():
    code, out, err = why("default/resnet-dist-train", "--from", str(TWO))
    assert code == 0, err
    check_two_node_answer(out)
    code, by_pg, _ = why(f"default/{PG}", "--from", str(TWO))
    assert code == 0 and by_pg == out
    code, by_default_ns, _ = why("resnet-dist-train", "--from", str(TWO))
    assert code == 0 and by_default_ns == out


def test_json_carries_the_report():
    code, out, err = why("default/resnet-dist-train", "--from", str(TWO), "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["why"].startswith("default/resnet-dist-train does not fit as a gang")
    report = doc["report"]
    assert report["podgroup"] == f"default/{PG}" and report["job"] == "default/resnet-dist-train"
    assert report["condition_message"] == TWO_NODE_MESSAGE
    worker1 = next(t for t in report["tasks"] if t["name"] == "resnet-dist-train-worker-1")
    assert worker1["node_errors"] == {"node-1": ["Insufficient cpu"], "node-2": ["Insufficient cpu"]}


def test_a_job_that_fits_says_so():
    code, out, err = why("default/resnet-dist-train", "--from", str(THREE))
    assert code == 0, err
    assert out.splitlines()[0] == (
        "default/resnet-dist-train fits: this session binds 3 pods; "
        "its PodGroup turns Running once the binds show on the pods."
    )
    assert "    resnet-dist-train-worker-1 (worker) Binding on node-3" in out


def test_a_closed_queue_and_an_enqueue_refusal_are_named(tmp_path):
    objs = objects(TWO)
    for o in objs:
        if o["kind"] == "Queue":
            o["status"]["state"] = "Closed"
    closed = tmp_path / "closed.yaml"
    closed.write_text(yaml.safe_dump_all(objs))
    code, out, _ = why("default/resnet-dist-train", "--from", str(closed))
    assert code == 0
    assert out.splitlines()[0] == (
        "default/resnet-dist-train waits: its queue default is Closed; Volcano schedules only Open queues."
    )
    # Reference section 10.5: GPUs the cluster does not have; the PodGroup is Pending, no pods yet
    objs = [o for o in objects(TWO) if o["kind"] != "Pod"]
    for o in objs:
        if o["kind"] == "Node":
            o["status"]["allocatable"]["nvidia.com/gpu"] = "1"
        if o["kind"] == "PodGroup":
            o["status"] = {"phase": "Pending"}
            o["spec"]["minResources"]["nvidia.com/gpu"] = "3"
    gpus = tmp_path / "gpus.yaml"
    gpus.write_text(yaml.safe_dump_all(objs))
    code, out, _ = why("default/resnet-dist-train", "--from", str(gpus))
    assert code == 0
    first = out.splitlines()[0]
    assert first.startswith("default/resnet-dist-train waits for enqueue, which refuses it: ")
    assert "nvidia.com/gpu" in first


def test_unknown_job_exits_1_listing_the_known_jobs():
    code, out, err = why("default/nope", "--from", str(TWO_WATCH))
    assert code == 1 and out == ""
    assert err == f"error: job default/nope not found in {TWO_WATCH}; known jobs: default/resnet-dist-train\n"


def test_a_vcjob_without_its_podgroup_is_answered(tmp_path):
    recs = [r for r in map(json.loads, _records(TWO_WATCH)) if r["object"]["kind"] not in ("PodGroup", "Pod")]
    path = tmp_path / "no-pg.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    code, out, err = why("default/resnet-dist-train", "--from", str(path))
    assert (code, err) == (0, "")
    assert out == (f"default/resnet-dist-train waits for its PodGroup: the vcjob has none in {path} yet (the job "
                   "controller creates it first, then the pods).\n")


def test_a_podgroup_of_a_missing_queue_is_named_when_asked_by_its_vcjob(tmp_path):
    recs = list(map(json.loads, _records(TWO_WATCH)))
    for r in recs:
        if r["object"]["kind"] == "PodGroup":
            r["object"]["spec"]["queue"] = "research"
    path = tmp_path / "no-queue.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    expected = (f"waits: its PodGroup {PG} is in queue research, which does not exist in {path}; "
                "the scheduler skips PodGroups of missing queues.\n")
    for key in ("default/resnet-dist-train", f"default/{PG}"):
        code, out, err = why(key, "--from", str(path))
        assert (code, err, out) == (0, "", f"{key} {expected}")


def with_pods(tmp_path, name: str, **spec) -> pathlib.Path:
    """The two-node snapshot with every pod's spec changed."""
    objs = objects(TWO)
    for o in objs:
        if o["kind"] == "Pod":
            o["spec"].update(spec)
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(objs))
    return path


def test_a_pod_larger_than_every_node_names_the_resource_and_the_largest_node(tmp_path):
    big = [{"name": "main", "image": "x", "resources": {"requests": {"cpu": "64", "memory": "1Gi"}}}]
    code, out, _ = why("default/resnet-dist-train", "--from", str(with_pods(tmp_path, "big.yaml", containers=big)))
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == ("default/resnet-dist-train cannot run: resnet-dist-train-master-0 is larger than any node: "
                        "Insufficient cpu: requests cpu 64, the largest allocatable is cpu 5 (node-1).")
    assert lines.count("      every node: Insufficient cpu: requests cpu 64, the largest allocatable is cpu 5 (node-1)") == 3


def test_when_no_task_fits_any_node_it_says_so(tmp_path):
    path = with_pods(tmp_path, "nowhere.yaml", nodeSelector={"pool": "gpu"})
    code, out, _ = why("default/resnet-dist-train", "--from", str(path))
    assert code == 0
    assert out.splitlines()[0] == (
        "default/resnet-dist-train does not fit: no node can take any of its tasks (resnet-dist-train-master-0: "
        "0/2 nodes are unavailable: 2 node(s) didn't match Pod's node affinity/selector.)")


def test_a_finished_vcjob_is_not_pending():
    """The seed job's recorded log: it completed and its PodGroup is gone."""
    code, out, err = why("default/resnet-dist-train", "--from", str(ROOT / "examples" / "resnet-dist-train.json"))
    assert (code, out, err) == (0, "default/resnet-dist-train is not pending: the vcjob is Completed.\n", "")


def test_bad_input_exits_2(tmp_path):
    broken = tmp_path / "broken.yaml"
    broken.write_text("kind: Node\nmetadata: {name: [x\n")
    code, _, err = why("default/x", "--from", str(broken))
    assert code == 2 and err.startswith(f"error: {broken}:") and "Traceback" not in err
    code, _, err = why("a/b/c", "--from", str(TWO))
    assert code == 2 and "expected NAMESPACE/NAME" in err


def _records(path: pathlib.Path) -> list[str]:
    text, dec, pos, out = path.read_text(), json.JSONDecoder(), 0, []
    while text[pos:].strip():
        while text[pos].isspace():
            pos += 1
        rec, end = dec.raw_decode(text, pos)
        out.append(text[pos:end])
        pos = end
    return out


@pytest.mark.nats
async def test_over_the_bus_from_a_published_log(bus_settings):
    url = bus_settings.nats_url
    res = vcbus_cli("publish", str(TWO_WATCH), "--nats", url)
    assert res.returncode == 0, res.stderr.decode()
    code, out, err = why("default/resnet-dist-train", "--nats", url)
    assert code == 0, err
    check_two_node_answer(out)
    code, _, err = why("default/nope", "--nats", url)
    assert code == 1 and "known jobs: default/resnet-dist-train" in err and "/VCBUS_K8S" in err
