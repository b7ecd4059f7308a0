"""`vcbus replay` says why: phase-change causes, policies by their content, --explain rows,
--job listing the log's jobs, --until cuts that are no divergence, the --json schema."""

from __future__ import annotations

import json
import pathlib

import msgspec
import pytest

from statemachines import outputs as o
from statemachines.engine import Engine
from statemachines.job.causes import guard_text, policy_text
from statemachines.job.handling import Check
from statemachines.model.objects import Job
from statemachines.model.status import JobState, JobStatus
from tests.test_replay_cli import records, replay_json, vcbus, write_jsonl
from tools.replay_schema import SCHEMA_PATH, render
from vcbus.replaying import replay_stream

ROOT = pathlib.Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
SEED = EXAMPLES / "resnet-dist-train.json"
RETRIES = EXAMPLES / "retries-exhausted.jsonl"
ABORT = EXAMPLES / "abort-resume.jsonl"
TIMEOUT = EXAMPLES / "pending-timeout.jsonl"
ALL_EXAMPLES = sorted(p for p in EXAMPLES.glob("*.json*"))


def history(path: pathlib.Path, *args: str) -> list[dict]:
    (job,) = replay_json(str(path), *args)["jobs"]
    return job["history"]


def moves(hist: list[dict]) -> list[tuple[str, str, str]]:
    return [(h["from"], h["to"], h["cause"]) for h in hist]


# ------------------------------------------------------------------ causes of phase changes


def test_retries_exhausted_is_the_cause_of_failed_not_syncjob():
    hist = history(RETRIES)
    last = hist[-1]
    assert (last["from"], last["to"]) == ("Restarting", "Failed")
    assert last["cause"] == "retries exhausted (retryCount 3 of maxRetry 3)"
    assert last["reason"] == "SyncJob"  # the old field keeps its value (the action executed)
    restarts = [h for h in hist if h["to"] == "Restarting"]
    assert [h["cause"] for h in restarts] == [
        "PodFailed of pod flaky-worker-0 (exitCode 137), policy PodFailed -> RestartJob (job policy 1)"
    ] * 3
    back = [h["cause"] for h in hist if (h["from"], h["to"]) == ("Restarting", "Pending")]
    assert back and all(c.startswith("retries left (retryCount ") for c in back)


def test_every_phase_change_of_every_example_has_a_cause():
    for path in ALL_EXAMPLES:
        for job in replay_json(str(path))["jobs"]:
            for h in job["history"]:
                assert h["cause"], (path.name, h)


def test_causes_name_minavailable_commands_timeouts_and_completion():
    seed = moves(history(SEED))
    assert seed[0] == ("", "Pending", "new job: first sync")
    assert seed[1][2].startswith("minAvailable met (running 3 + succeeded 0 + failed 0 >= minAvailable 3)")
    assert ("Running", "Completing",
            "TaskCompleted of task master (pod resnet-dist-train-master-0), "
            "policy task master: TaskCompleted -> CompleteJob (task policy 1)") in seed
    assert seed[-1][:2] == ("Completing", "Completed") and seed[-1][2].startswith("all pods gone")
    restart_to_pending = next(c for f, t, c in seed if (f, t) == ("Restarting", "Pending"))
    assert "PodGroup resnet-dist-train-" in restart_to_pending and "phase changed to Inqueue" in restart_to_pending

    abort = moves(history(ABORT))
    assert ("Running", "Aborting", "command AbortJob") in abort
    assert ("Aborted", "Restarting", "command ResumeJob") in abort
    assert any(t == "Completed" and "all pods finished, minAvailable met (succeeded 2" in c for _, t, c in abort)

    timeout = moves(history(TIMEOUT))
    expired = next(c for f, t, c in timeout if (f, t) == ("Pending", "Restarting"))
    assert expired == ("timeout expired: PodPending of pod stuck-worker-1, "
                       "policy task worker: PodPending -> RestartPod after 5m (task policy 1)")


def _check(spec: dict, **status) -> Check:
    job = msgspec.json.decode(json.dumps({"metadata": {"name": "j"}, "spec": spec}), type=Job)
    return Check(job.spec, JobStatus(state=JobState(phase="Running"), **status))


def test_guard_texts_carry_the_figures_compared():
    spec = {"minAvailable": 3, "maxRetry": 5, "tasks": [{"name": "w", "replicas": 4}]}
    assert guard_text("too_many_pending", True, _check(spec, pending=2, running=2)) == (
        "minAvailable not met (pending 2 > replicas 4 - minAvailable 3)"
    )
    assert guard_text("retries_exhausted", True, _check(spec, retry_count=5)) == (
        "retries exhausted (retryCount 5 of maxRetry 5)"
    )
    assert guard_text("all_pods_finished", True, _check(spec, succeeded=1, failed=3)) == (
        "all pods finished, minAvailable not met (succeeded 1 < minAvailable 3, failed 3)"
    )


def test_phase_changed_on_the_bus_carries_the_cause():
    """Bus subscribers get the cause: it is a field of the domain event, encoded on the wire."""
    result = replay_stream(open(RETRIES, "rb"), str(RETRIES))
    h = result.history.jobs["default/flaky"]
    failed = h.phases[-1]
    wire = json.loads(msgspec.json.encode(failed))
    assert wire["type"] == "job.phase.changed.v1"
    assert wire["cause"] == "retries exhausted (retryCount 3 of maxRetry 3)"
    assert msgspec.json.decode(msgspec.json.encode(failed), type=o.PhaseChanged) == failed
    # an event written before the field existed still decodes (the field has a default)
    old = {k: v for k, v in wire.items() if k != "cause"}
    assert msgspec.json.decode(json.dumps(old), type=o.PhaseChanged).cause == ""


# ------------------------------------------------------------------ policies by their content


def test_policy_texts_show_content_not_position():
    job = msgspec.json.decode(json.dumps({
        "metadata": {"name": "j"},
        "spec": {
            "policies": [
                {"event": "PodFailed", "action": "RestartJob"},
                {"exitCode": 3, "action": "RestartJob"},
                {"events": ["PodPending"], "action": "AbortJob", "timeout": "10m"},
            ],
            "tasks": [{"name": "worker", "replicas": 1,
                       "policies": [{"event": "PodEvicted", "action": "RestartTask"}]}],
        },
    }), type=Job)
    assert policy_text(job, "job[0]") == "PodFailed -> RestartJob (job policy 1)"
    assert policy_text(job, "job[1]") == "exitCode 3 -> RestartJob (job policy 2)"
    assert policy_text(job, "job[2]") == "PodPending -> AbortJob after 10m (job policy 3)"
    assert policy_text(job, "timer:job[2]") == "PodPending -> AbortJob after 10m (job policy 3)"
    assert policy_text(job, "task[worker][0]") == "task worker: PodEvicted -> RestartTask (task policy 1)"
    assert policy_text(job, "default") == policy_text(job, "command") == policy_text(job, "job[9]") == ""


def test_actions_carry_policy_text_and_keep_the_label():
    (job,) = replay_json(str(SEED))["jobs"]
    decisive = [(a["policy"], a.get("policyText")) for a in job["actions"] if a["action"] != "SyncJob"]
    assert decisive == [
        ("job[0]", "PodEvicted, PodFailed -> RestartJob (job policy 1)"),
        ("task[master][0]", "task master: TaskCompleted -> CompleteJob (task policy 1)"),
    ]
    assert all("policyText" not in a for a in job["actions"] if a["policy"] in ("default", "command"))


# ------------------------------------------------------------------ --explain alone adds rows


def test_explain_alone_adds_reasoning_rows():
    plain = vcbus("replay", str(RETRIES))
    explained = vcbus("replay", str(RETRIES), "--explain")
    assert plain.returncode == explained.returncode == 0
    p, e = plain.stdout.decode(), explained.stdout.decode()
    assert len(e.splitlines()) > len(p.splitlines())
    # why the only job policy did not match a PodPending: a row --explain adds, not shown without it
    assert "not job policy 1: events ['PodFailed'] do not include PodPending" in e
    assert "do not include PodPending" not in p
    assert "while executing RestartJob in phase Running" in e and "while executing" not in p
    # the cause of each phase change is always there
    assert "because retries exhausted (retryCount 3 of maxRetry 3)" in p
    # --all-actions still lists every resolution, --explain does not turn it on
    full = vcbus("replay", str(RETRIES), "--all-actions").stdout.decode()
    assert full.count("-> SyncJob") > e.count("-> SyncJob") > 0


# ------------------------------------------------------------------ --job with an unknown name


def test_unknown_job_lists_the_jobs_in_the_log():
    res = vcbus("replay", str(RETRIES), "--job", "default/nope")
    assert res.returncode == 1
    err = res.stderr.decode()
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "job default/nope does not appear in" in err and "the jobs in it: default/flaky" in err


# ------------------------------------------------------------------ --until in mid-transition


def test_until_cut_in_mid_transition_is_no_divergence():
    full = replay_json(str(RETRIES))["jobs"][0]
    cuts = sorted({h["seq"] for h in full["history"]})
    assert len(cuts) >= 5
    for seq in cuts:  # vcbus has moved, the log's status write is still to come
        res = vcbus("replay", str(RETRIES), "--until", str(seq), "--compare", "--json")
        assert res.returncode == 0, (seq, res.stdout.decode()[-800:])
        assert json.loads(res.stdout)["jobs"][0]["divergences"] == []


def test_until_cut_still_reports_a_real_divergence(tmp_path):
    recs = records(RETRIES)
    at = next(i for i, r in enumerate(recs)
              if r["object"].get("kind") == "Job" and (r["object"].get("status") or {}).get("state", {}).get("phase")
              == "Restarting")
    recs[at]["object"]["status"]["state"]["phase"] = "Completed"  # a write vcbus never made
    log = write_jsonl(tmp_path / "bad.jsonl", recs)
    res = vcbus("replay", str(log), "--until", str(at + 1), "--compare", "--json")
    assert res.returncode == 1
    divs = json.loads(res.stdout)["jobs"][0]["divergences"]
    assert any(d["field"].startswith("phase") and d["recorded"] == "Completed" for d in divs)


# ------------------------------------------------------------------ the --json schema


def _validate(value, schema: dict, root: dict, path: str = "$") -> list[str]:
    """The JSON Schema subset msgspec generates: $ref, type, properties, required, items, anyOf."""
    if "$ref" in schema:
        return _validate(value, root["$defs"][schema["$ref"].rsplit("/", 1)[1]], root, path)
    if "anyOf" in schema:
        if any(not _validate(value, s, root, path) for s in schema["anyOf"]):
            return []
        return [f"{path}: matches none of anyOf"]
    kind = schema.get("type")
    types = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}
    if kind == "integer":
        if not isinstance(value, int) or isinstance(value, bool):
            return [f"{path}: not an integer"]
    elif kind is not None and not isinstance(value, types[kind]):
        return [f"{path}: not {kind}"]
    problems: list[str] = []
    if isinstance(value, dict):
        props = schema.get("properties")
        for key in schema.get("required", ()):
            if key not in value:
                problems.append(f"{path}: missing {key}")
        for key, item in value.items():
            if props is not None and key in props:
                problems += _validate(item, props[key], root, f"{path}.{key}")
            elif props is not None:
                problems.append(f"{path}: key {key} is not in the schema")  # undocumented output
            elif isinstance(schema.get("additionalProperties"), dict):
                problems += _validate(item, schema["additionalProperties"], root, f"{path}.{key}")
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            problems += _validate(item, schema["items"], root, f"{path}[{i}]")
    return problems


def test_schema_in_docs_is_generated_from_the_report_types():
    assert SCHEMA_PATH.read_text() == render(), "run: .venv/bin/python -m tools.replay_schema"


@pytest.mark.parametrize("path", ALL_EXAMPLES, ids=lambda p: p.name)
def test_real_output_of_every_example_matches_the_schema(path):
    schema = json.loads(SCHEMA_PATH.read_text())
    for args in ((), ("--explain", "--compare")):
        res = vcbus("replay", "--json", str(path), *args)
        assert res.returncode in (0, 1), res.stderr.decode()
        report = json.loads(res.stdout)
        assert report["jobs"]
        assert _validate(report, schema, schema) == []


def test_the_schema_check_catches_a_wrong_report():
    schema = json.loads(SCHEMA_PATH.read_text())
    report = replay_json(str(RETRIES))
    del report["jobs"][0]["history"][0]["cause"]
    report["jobs"][0]["actions"][0]["exitCode"] = "1"
    report["jobs"][0]["surprise"] = True
    problems = _validate(report, schema, schema)
    assert any("missing cause" in p for p in problems)
    assert any("exitCode: not an integer" in p for p in problems)
    assert any("surprise" in p for p in problems)


def test_engine_without_history_still_decides_the_same():
    """The cause is computed from the decision, it does not change it: same statuses either way."""
    a = replay_stream(open(RETRIES, "rb"), str(RETRIES))
    b = replay_stream(open(RETRIES, "rb"), str(RETRIES), keep_history=False)
    assert a.statuses.status("default/flaky") == b.statuses.status("default/flaky")
    engine = Engine()
    assert engine.cause(engine.entry("default", "x"), "") == ""  # nothing executed yet: no cause


# ------------------------------------------------------------------ the benchmark's floors


def test_benchmark_floors_decode_the_same_records_typed_and_as_dicts():
    """The typed floor decodes exactly what the engine decodes (statemachines.model.records), record for record."""
    from benchmarks.replay import run_floor, run_typed_floor

    jsonl = RETRIES
    typed, plain = run_typed_floor(str(jsonl)), run_floor(str(jsonl))
    n = len(jsonl.read_bytes().splitlines())
    assert typed["events"] == plain["events"] == n == replay_json(str(jsonl))["input"]["events"]
