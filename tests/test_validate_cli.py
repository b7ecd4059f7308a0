"""`vcbus validate` as a user runs it: files in, one line per problem, exit 0/1/2."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest
import yaml

from vcbus.cli.main import main

REPO = pathlib.Path(__file__).resolve().parents[1]
SEED = REPO / "examples" / "resnet-dist-train.yaml"


def job(name="j", **spec):
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": name},
            "spec": {"tasks": [{"name": "t", "replicas": 1, "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}],
                     **spec}}


def write(tmp_path, name, *docs):
    path = tmp_path / name
    path.write_text("".join("---\n" + yaml.safe_dump(d) for d in docs))
    return str(path)


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_seed_job_is_admitted(capsys):
    code, out, _ = run(capsys, "validate", str(SEED))
    assert code == 0
    assert out == f"{SEED}:4: Job resnet-dist-train: ok\n"


def test_denied_job_prints_each_problem_with_field_and_exits_1(tmp_path, capsys):
    path = write(tmp_path, "bad.yaml", job(minAvailable=3, plugins={"nope": []}))
    code, out, err = run(capsys, "validate", path)
    assert code == 1
    assert f"{path}:2: Job j: denied (CREATE)" in out
    assert "  - spec.minAvailable: job 'minAvailable' should not be greater than total replicas in tasks;" in out
    assert "  - spec.plugins.nope: unable to find job plugin: nope;" in out
    assert ('kubectl would say: admission webhook "validatejob.volcano.sh" denied the request: '
            "job 'minAvailable' should not be greater than total replicas in tasks; unable to find job plugin: nope;") in out
    assert err == "error: 1 of 1 objects denied\n"


def test_multi_document_file_reports_every_object_and_other_kinds_need_skip_unknown(tmp_path, capsys):
    path = write(tmp_path, "many.yaml", job("a"), {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}}, job("b", queue="x"))
    code, out, err = run(capsys, "validate", path)
    assert code == 2
    lines = out.splitlines()
    assert lines[0].endswith("Job a: ok")
    assert "ConfigMap cm: not checked (" in lines[1] and "--skip-unknown to pass over it" in lines[1]
    assert "Job b: denied" in lines[2]
    assert err == ("error: 1 of 3 objects not checked (1 ConfigMap (v1): vcbus checks batch.volcano.sh/v1alpha1 Job and "
                   "scheduling.volcano.sh/v1beta1 Queue objects) and 1 denied; give --skip-unknown to pass over other kinds\n")
    code, out, _ = run(capsys, "validate", "--skip-unknown", path)
    assert code == 1
    assert "ConfigMap cm: skipped (" in out.splitlines()[1]


def test_queues_file_supplies_the_queues(tmp_path, capsys):
    queues = {"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "research"}, "status": {"state": "Closed"}}]}
    qpath = tmp_path / "queues.json"
    qpath.write_text(json.dumps(queues))
    path = write(tmp_path, "job.yaml", job(queue="research"))
    code, out, _ = run(capsys, "validate", path, "--queues", str(qpath))
    assert code == 1
    assert "can only submit job to queue with state `Open`, queue `research` status is `Closed`;" in out
    code, out, _ = run(capsys, "validate", write(tmp_path, "d.yaml", job()), "--queues", str(qpath))
    assert 'unable to find job queue: queue.scheduling.volcano.sh "default" not found;' in out


def test_queue_objects_in_the_input_are_known_and_validated(tmp_path, capsys):
    queue = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "team"}, "status": {"state": "Open"}}
    code, out, _ = run(capsys, "validate", write(tmp_path, "both.yaml", queue, job(queue="team")))
    assert code == 0 and out.count(": ok") == 2


def test_old_file_validates_an_update(tmp_path, capsys):
    old = job(queue="default", minAvailable=1)
    new = job(queue="other", minAvailable=1)
    code, out, _ = run(capsys, "validate", write(tmp_path, "new.yaml", new), "--old", write(tmp_path, "old.yaml", old))
    assert code == 1
    assert "denied (UPDATE)" in out
    assert "job updates may not change fields other than `minAvailable`, `tasks[*].replicas under spec` and `PriorityClassName`" in out
    scaled = job(queue="default", minAvailable=1)
    scaled["spec"]["tasks"][0]["replicas"] = 4
    code, _, _ = run(capsys, "validate", write(tmp_path, "scaled.yaml", scaled), "--old", write(tmp_path, "old2.yaml", old))
    assert code == 0


def test_feature_gates_turn_pod_level_resources_off(tmp_path, capsys):
    bad = job()
    spec = bad["spec"]["tasks"][0]["template"]["spec"]
    spec["resources"] = {"requests": {"cpu": "1"}}
    spec["containers"][0]["resources"] = {"requests": {"cpu": "2"}}
    path = write(tmp_path, "plr.yaml", bad)
    assert run(capsys, "validate", path)[0] == 1
    assert run(capsys, "validate", path, "--feature-gates", "PodLevelResources=false")[0] == 0
    code, _, err = run(capsys, "validate", path, "--feature-gates", "Bogus=true")
    assert code == 2 and "known: PodLevelResources" in err


def test_json_output(tmp_path, capsys):
    code, out, _ = run(capsys, "validate", "-o", "json", write(tmp_path, "j.yaml", job(minAvailable=2)))
    result = json.loads(out)[0]
    assert code == 1 and result["allowed"] is False
    assert result["problems"] == [{"field": "spec.minAvailable", "line": 7,
                                   "message": "job 'minAvailable' should not be greater than total replicas in tasks;"}]


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("apiVersion: v1\nkind: Job\nmetadata:\n  name: x\n   bad: indent\n", ":5:"),
        ("---\nkind: A\n---\na: [1, 2\n", "document 2"),
        ('{"kind": "Job",}', "invalid JSON"),
        ("- just\n- a list\n", "expected an object"),
    ],
    ids=["bad_indentation", "unclosed_flow_sequence_in_second_document", "bad_json", "not_a_mapping"],
)
def test_bad_input_exits_2_naming_file_and_line(tmp_path, capsys, content, expected):
    path = tmp_path / "bad.yaml"
    path.write_text(content)
    code, out, err = run(capsys, "validate", str(path))
    assert code == 2 and out == ""
    assert err.startswith(f"error: {path}") and expected in err


BOMB = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 8))


@pytest.mark.parametrize("command", ["validate", "render"])
@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (BOMB, "alias bomb"),
        ("a: " + "[" * 3000 + "]" * 3000 + "\n", "nesting deeper than 100 levels"),
    ],
    ids=["alias_bomb", "deep_nesting"],
)
def test_hostile_yaml_exits_2_without_expanding_it(tmp_path, capsys, command, content, expected):
    path = tmp_path / "hostile.yaml"
    path.write_text(content)
    code, out, err = run(capsys, command, str(path))
    assert code == 2 and out == ""
    assert err.startswith(f"error: {path}:1: document 1: ") and expected in err and "Traceback" not in err


def test_an_unquoted_date_is_a_string_as_in_kubernetes(tmp_path, capsys):
    path = tmp_path / "date.yaml"
    path.write_text(SEED.read_text().replace("name: resnet-dist-train", "name: 2026-11-30", 1))
    code, out, _ = run(capsys, "validate", str(path))
    assert (code, out) == (0, f"{path}:4: Job 2026-11-30: ok\n")


def test_missing_file_exits_2(capsys):
    code, _, err = run(capsys, "validate", "/nonexistent/job.yaml")
    assert code == 2 and err == "error: /nonexistent/job.yaml: no such file\n"


def test_stdin_and_help_through_the_real_executable():
    vcbus = str(pathlib.Path(sys.executable).parent / "vcbus")
    done = subprocess.run([vcbus, "validate", "-"], input=SEED.read_text(), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout == "-:4: Job resnet-dist-train: ok\n"
    helped = subprocess.run([vcbus, "validate", "--help"], capture_output=True, text=True, timeout=60)
    assert "Examples:" in helped.stdout and "--old" in helped.stdout


def test_crd_schema_is_checked_before_the_webhook(tmp_path, capsys):
    bad = job()
    bad["spec"]["tasks"][0]["name"] = "Worker"
    code, out, _ = run(capsys, "validate", write(tmp_path, "schema.yaml", bad))
    assert code == 1
    assert "  - spec.tasks[0].name: Invalid value: \"Worker\": spec.tasks[0].name in body should match" in out
    assert 'kubectl would say: Job.batch.volcano.sh "j" is invalid: spec.tasks[0].name:' in out


@pytest.mark.parametrize("name", ["Bad_Name", "Foo-Bar"])
def test_a_name_the_api_server_refuses_is_denied_with_its_message(tmp_path, capsys, name):
    code, out, _ = run(capsys, "validate", "-o", "json", write(tmp_path, "name.yaml", job(name)))
    assert code == 1
    (result,) = json.loads(out)
    assert result["allowed"] is False
    assert result["message"].startswith(
        f'Job.batch.volcano.sh "{name}" is invalid: metadata.name: Invalid value: "{name}": '
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters"
    )
    assert [p["field"] for p in result["problems"]] == ["metadata.name"]


def test_a_queue_name_the_api_server_refuses_is_denied_with_its_message(tmp_path, capsys):
    queue = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "Bad_Queue"},
             "spec": {"weight": 1}}
    code, out, _ = run(capsys, "validate", "-o", "json", write(tmp_path, "queue.yaml", queue))
    assert code == 1
    (result,) = json.loads(out)
    assert result["allowed"] is False
    assert result["message"].startswith(
        'Queue.scheduling.volcano.sh "Bad_Queue" is invalid: metadata.name: Invalid value: "Bad_Queue": '
        "a lowercase RFC 1123 subdomain"
    )
