"""`vcbus schedule` as a user runs it: a real process, the example snapshots in every input form,
the worked examples of Volcano's scheduler (two and three nodes), sessions that see the previous
session's decisions, and bad input that exits 2 with one line and no traceback."""

from __future__ import annotations

import copy
import json
import pathlib
import subprocess
import sys

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "scheduler"
TWO = EXAMPLES / "two-nodes.yaml"
THREE = EXAMPLES / "three-nodes.yaml"
THREE_LIST = EXAMPLES / "three-nodes.json"
TWO_WATCH = EXAMPLES / "two-nodes.watch.json"
PG = "resnet-dist-train-00000002-3dde-4002-803e-000000033232"
PODS = ["resnet-dist-train-master-0", "resnet-dist-train-worker-0", "resnet-dist-train-worker-1"]

# Volcano's condition for the two-node case (reference section 10.2, step 9), word for word.
TWO_NODE_MESSAGE = (
    "1/3 tasks in gang unschedulable: pod group is not ready, 3 Pending, 3 minAvailable; "
    "Pending: 1 Unschedulable, 2 Schedulable. Origin reason is resnet-dist-train-worker-1: "
    "0/2 nodes are unavailable: 2 Insufficient cpu."
)


def vcbus(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "vcbus.cli.main", *args], input=stdin, capture_output=True, cwd=ROOT, timeout=120
    )


def schedule_json(*args: str, stdin: bytes | None = None) -> dict:
    res = vcbus("schedule", "--json", *args, stdin=stdin)
    assert res.returncode == 0, res.stderr.decode()
    return json.loads(res.stdout)


def bad(*args: str, stdin: bytes | None = None) -> str:
    """Run a command that must fail on bad input; return its one-line message."""
    res = vcbus(*args, stdin=stdin)
    err = res.stderr.decode()
    assert res.returncode == 2, (res.returncode, err)
    assert "Traceback" not in err and res.stdout == b""
    assert err.count("\n") == 1 and err.startswith("error: "), err
    return err.strip()


def objects(path: pathlib.Path) -> list[dict]:
    return [o for o in yaml.safe_load_all(path.read_text()) if o]


def watch_records(path: pathlib.Path) -> list[dict]:
    """The records of a kubectl-style (pretty, concatenated) watch log."""
    text, dec, pos, recs = path.read_text(), json.JSONDecoder(), 0, []
    while text[pos:].strip():
        while text[pos].isspace():
            pos += 1
        rec, pos = dec.raw_decode(text, pos)
        recs.append(rec)
    return recs


def check_two_nodes(doc: dict) -> None:
    """Reference section 10.2: the gang never fits on two nodes; nothing is bound."""
    assert doc["binds"] == [] and doc["evictions"] == []
    (pg,) = doc["podGroups"]
    assert (pg["namespace"], pg["name"], pg["phase"]) == ("default", PG, "Inqueue")
    assert pg["conditions"] == [
        {"type": "Unschedulable", "status": "True", "reason": "NotEnoughResources", "message": TWO_NODE_MESSAGE}
    ]
    queue = next(q for q in doc["queues"] if q["name"] == "default")
    assert queue["state"] == "Open"


def check_three_nodes_first_session(doc: dict) -> None:
    """Reference section 10.3, session 2: the gang fits, one pod per node, committed together."""
    binds = doc["binds"]
    assert [b["name"] for b in binds] == PODS  # master-0 and worker-0 tie on index: pod UID decides
    assert {b["namespace"] for b in binds} == {"default"}
    assert sorted(b["node"] for b in binds) == ["node-1", "node-2", "node-3"]
    (pg,) = doc["podGroups"]
    assert pg["phase"] == "Inqueue"  # scheduled (Bound/Running) is still 0: Binding does not count
    assert pg["conditions"] == [
        {"type": "Scheduled", "status": "True", "reason": "tasks in gang are ready to be scheduled", "message": ""}
    ]
    queue = next(q for q in doc["queues"] if q["name"] == "default")
    assert queue["allocated"] == {"cpu": "9", "memory": "24Gi", "pods": "3"}


# ------------------------------------------------------------------ input forms


def test_multi_document_yaml_two_nodes_gives_volcanos_condition_word_for_word():
    doc = schedule_json(str(TWO))
    assert doc["sessions"] == 1
    check_two_nodes(doc)


def test_v1_list_json_three_nodes_binds_the_gang():
    check_three_nodes_first_session(schedule_json(str(THREE_LIST)))


def test_v1_list_yaml_and_a_json_array_read_the_same(tmp_path):
    items = json.loads(THREE_LIST.read_text())["items"]
    as_yaml = tmp_path / "list.yaml"
    as_yaml.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    as_array = tmp_path / "array.json"
    as_array.write_text(json.dumps(items))
    first = schedule_json(str(as_yaml))
    check_three_nodes_first_session(first)
    assert schedule_json(str(as_array)) == first == schedule_json(str(THREE))


def test_kubectl_watch_log_folds_to_the_last_state_of_each_object():
    # node-3 is added then deleted and the PodGroup goes Pending -> Inqueue: the two-node case
    check_two_nodes(schedule_json(str(TWO_WATCH)))


def test_watch_log_as_json_lines_from_standard_input():
    lines = "".join(json.dumps(r) + "\n" for r in watch_records(TWO_WATCH)).encode()
    check_two_nodes(schedule_json("-", stdin=lines))


def test_yaml_from_standard_input_and_other_kinds_are_ignored():
    extra = [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "resnet-dist-train", "namespace": "default"}},
             {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "resnet-dist-train", "namespace": "default"},
              "spec": {"selector": {"volcano.sh/job-name": "resnet-dist-train"}}}]
    text = TWO.read_text() + "---\n" + yaml.safe_dump_all(extra)
    check_two_nodes(schedule_json("-", stdin=text.encode()))
    res = vcbus("schedule", "-", stdin=text.encode())
    first = res.stdout.decode().splitlines()[0]
    assert res.returncode == 0 and first.endswith("3 Pods, 1 Service; ignored 1 ConfigMap"), first


# ------------------------------------------------------------------ text output


def test_text_output_two_nodes_shows_the_condition_and_no_binds():
    res = vcbus("schedule", str(TWO))
    out = res.stdout.decode()
    assert res.returncode == 0, res.stderr.decode()
    assert "Session 1" in out and "0 binds" in out
    assert TWO_NODE_MESSAGE in out
    row = next(line for line in out.splitlines() if PG in line and "Inqueue" in line)
    assert row.split() == ["default", PG, "Inqueue", "Unschedulable=True"]


def test_text_output_three_nodes_lists_the_binds():
    out = vcbus("schedule", str(THREE)).stdout.decode()
    assert "3 binds" in out
    for pod in PODS:
        assert pod in out
    assert "cpu 9, memory 24Gi, pods 3" in out  # the queue's allocated


# ------------------------------------------------------------------ sessions


def test_sessions_apply_the_decisions_between_sessions():
    """Three nodes: session 1 binds 3 pods; they show with spec.nodeName; session 2: Running."""
    doc = schedule_json(str(THREE), "--sessions", "2")
    assert doc["sessions"] == 2
    assert [b["name"] for b in doc["binds"]] == PODS  # bound once, not again in session 2
    (pg,) = doc["podGroups"]
    assert pg["phase"] == "Running"
    assert {"type": "Scheduled", "status": "True", "reason": "tasks in gang are ready to be scheduled",
            "message": ""} in pg["conditions"]
    queue = next(q for q in doc["queues"] if q["name"] == "default")
    assert queue["allocated"] == {"cpu": "9", "memory": "24Gi", "pods": "3"}


def test_sessions_over_two_nodes_stay_unschedulable():
    doc = schedule_json(str(TWO), "--sessions", "3")
    assert doc["sessions"] == 3
    check_two_nodes(doc)


def test_a_bound_pod_in_the_snapshot_is_not_bound_again(tmp_path):
    objs = objects(THREE)
    for o in objs:
        if o["kind"] == "Pod" and o["metadata"]["name"] == PODS[0]:
            o["spec"]["nodeName"] = "node-2"
    path = tmp_path / "one-bound.yaml"
    path.write_text(yaml.safe_dump_all(objs))
    doc = schedule_json(str(path))
    assert [b["name"] for b in doc["binds"]] == PODS[1:]
    assert "node-2" not in {b["node"] for b in doc["binds"]}  # node-2 holds master-0: 2 cpu left


def test_config_changes_the_session(tmp_path):
    conf = tmp_path / "enqueue-only.conf"
    conf.write_text('actions: "enqueue"\ntiers:\n- plugins:\n  - name: gang\n  - name: proportion\n')
    doc = schedule_json(str(THREE), "--config", str(conf))
    assert doc["binds"] == []
    configmap = tmp_path / "cm.yaml"
    configmap.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "volcano-scheduler-configmap"},
        "data": {"volcano-scheduler.conf": conf.read_text()},
    }))
    assert schedule_json(str(THREE), "--config", str(configmap))["binds"] == []


# ------------------------------------------------------------------ bad input


def test_help_teaches_with_examples():
    res = vcbus("schedule", "--help")
    assert res.returncode == 0 and b"Examples:" in res.stdout and b"--sessions" in res.stdout


def test_missing_and_unparsable_files(tmp_path):
    assert bad("schedule", str(tmp_path / "nope.yaml")) == f"error: {tmp_path / 'nope.yaml'}: no such file"
    broken = tmp_path / "broken.json"
    broken.write_text('{"apiVersion": "v1", "kind": "List", "items": [')
    msg = bad("schedule", str(broken))
    assert str(broken) in msg and "invalid JSON" in msg
    yml = tmp_path / "broken.yaml"
    yml.write_text("kind: Node\nmetadata: {name: [x\n")
    assert bad("schedule", str(yml)).startswith(f"error: {yml}:")


def test_object_without_kind_or_name(tmp_path):
    objs = objects(TWO)
    del objs[3]["kind"]
    path = tmp_path / "nokind.yaml"
    path.write_text(yaml.safe_dump_all(objs))
    msg = bad("schedule", str(path))
    assert str(path) in msg and "document 4" in msg and "without kind" in msg and PG in msg
    objs = objects(TWO)
    del objs[4]["metadata"]["name"]
    path.write_text(yaml.safe_dump_all(objs))
    msg = bad("schedule", str(path))
    assert "document 5" in msg and "Pod without metadata.name" in msg


def test_bad_quantity_names_the_file_and_the_object(tmp_path):
    objs = json.loads(THREE_LIST.read_text())
    objs["items"][5]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "3 cores"
    path = tmp_path / "quantity.json"
    path.write_text(json.dumps(objs))
    msg = bad("schedule", str(path))
    assert str(path) in msg and "items[5]" in msg and "Pod default/resnet-dist-train-master-0" in msg
    assert "3 cores" in msg


def test_bad_record_in_a_watch_log_names_its_line(tmp_path):
    recs = watch_records(TWO_WATCH)
    recs[1]["object"]["status"]["allocatable"]["cpu"] = "five"
    path = tmp_path / "watch.json"
    path.write_text("".join(json.dumps(r, indent=4) + "\n" for r in recs))
    line = 1 + len(json.dumps(recs[0], indent=4).splitlines())
    msg = bad("schedule", str(path))
    assert msg.startswith(f"error: {path}:{line}: record 2 (Node node-2)") and "'five'" in msg


def test_yaml_alias_bomb_and_deep_nesting_are_refused(tmp_path):
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 10)]
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("kind: Node\nmetadata: {name: n}\n" + "\n".join(lines) + "\n")
    msg = bad("schedule", str(bomb))
    assert str(bomb) in msg and "alias" in msg
    deep = tmp_path / "deep.yaml"
    deep.write_text("kind: Node\nmetadata: {name: n}\nspec: " + "[" * 10_000 + "]" * 10_000 + "\n")
    msg = bad("schedule", str(deep))
    assert str(deep) in msg and "nesting deeper than" in msg
    deep_json = tmp_path / "deep.json"
    deep_json.write_text('{"kind": "List", "items": [' + '{"a": ' * 10_000 + "1" + "}" * 10_000 + "]}")
    assert "nesting deeper than" in bad("schedule", str(deep_json))
    deep_log = tmp_path / "deep.log"
    deep_log.write_text('{"type": "ADDED", "object": {"kind": "Node", "metadata": {"name": "n"}, "x": '
                        + "[" * 10_000 + "]" * 10_000 + "}}\n")
    assert "nesting deeper than" in bad("schedule", str(deep_log))


def test_bad_config_names_the_field(tmp_path):
    conf = tmp_path / "bad.conf"
    conf.write_text('actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - name: gang\n  - name: foo\n')
    msg = bad("schedule", str(THREE), "--config", str(conf))
    assert str(conf) in msg and "tiers[0].plugins[1].name" in msg and "foo" in msg


@pytest.mark.parametrize("arg", ["0", "x"])
def test_bad_session_count(arg):
    res = vcbus("schedule", str(TWO), "--sessions", arg)
    assert res.returncode == 2 and b"Traceback" not in res.stderr


def test_snapshot_objects_are_not_changed_by_sessions(tmp_path):
    """The offline cluster works on copies: the input file's objects stay as read."""
    from statemachines.scheduler.config import DEFAULT_CONFIG
    from vcbus.offline_cluster import OfflineCluster

    cluster = OfflineCluster(DEFAULT_CONFIG)
    snap = cluster.load(THREE.read_bytes(), str(THREE))
    before = copy.deepcopy(snap.objects)
    pods_before = {k: v for k, v in snap.objects.items() if k[0] == "Pod"}
    cluster.run(2)
    assert all("nodeName" not in p["spec"] for p in pods_before.values())
    assert set(snap.objects) == set(before) | {("Queue", "", "root")}  # the scheduler's CreateQueue shows
    assert snap.objects[("Queue", "", "root")]["status"]["state"] == "Open"
    bound = [o for k, o in snap.objects.items() if k[0] == "Pod"]
    assert sorted(p["spec"]["nodeName"] for p in bound) == ["node-1", "node-2", "node-3"]
