"""`vcbus replay` as a user runs it: a real process, real files, stdin, exit codes."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
SEED = ROOT / "examples" / "resnet-dist-train.json"
NL = b"\n"


def vcbus(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "vcbus.cli.main", *args],
        input=stdin,
        capture_output=True,
        cwd=ROOT,
        timeout=120,
    )


def replay_json(*args: str, stdin: bytes | None = None) -> dict:
    res = vcbus("replay", "--json", *args, stdin=stdin)
    assert res.returncode == 0, res.stderr.decode()
    return json.loads(res.stdout)


def records(path: pathlib.Path) -> list[dict]:
    """The records of a kubectl-style (pretty, concatenated) or JSON-lines log."""
    text = path.read_text()
    dec = json.JSONDecoder()
    out, pos = [], 0
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            return out
        obj, pos = dec.raw_decode(text, pos)
        out.append(obj)


def write_jsonl(path: pathlib.Path, recs: list[dict]) -> pathlib.Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return path


def test_seed_job_restarts_once_then_completes_when_the_master_completes():
    report = replay_json(str(SEED))
    (job,) = report["jobs"]
    assert (job["namespace"], job["name"]) == ("default", "resnet-dist-train")
    assert job["status"]["state"]["phase"] == "Completed"
    assert job["status"]["retryCount"] == 1
    phases = [(h["from"], h["to"]) for h in job["history"]]
    assert phases == [
        ("", "Pending"),
        ("Pending", "Running"),
        ("Running", "Restarting"),
        ("Restarting", "Pending"),
        ("Pending", "Running"),
        ("Running", "Completing"),
        ("Completing", "Completed"),
    ]
    decisive = [(a["event"], a["pod"], a["action"], a["policy"]) for a in job["actions"] if a["action"] != "SyncJob"]
    assert decisive == [
        ("PodFailed", "resnet-dist-train-worker-1", "RestartJob", "job[0]"),
        ("TaskCompleted", "resnet-dist-train-master-0", "CompleteJob", "task[master][0]"),
    ]
    failed = next(a for a in job["actions"] if a["event"] == "PodFailed")
    assert failed["exitCode"] == 1 and failed["task"] == "worker"
    # the restart deletes all three pods and recreates them at job version 1
    restart_seq = failed["seq"]
    deleted = sorted(c["name"] for c in job["commands"] if c["seq"] == restart_seq and c["command"] == "DeletePod")
    assert deleted == [f"resnet-dist-train-{t}" for t in ("master-0", "worker-0", "worker-1")]
    recreated = [c for c in job["commands"] if c["command"] == "CreatePod" and c.get("jobVersion") == 1]
    assert len(recreated) == 3
    assert job["divergences"] == []


def test_json_report_is_the_documented_contract():
    report = replay_json(str(SEED))
    assert set(report) == {"input", "jobs"}
    assert set(report["input"]) == {"events", "ignored", "invalid"}
    assert report["input"]["invalid"] == 0 and report["input"]["events"] > 50
    job = report["jobs"][0]
    for key in ("namespace", "name", "uid", "status", "history", "actions", "commands"):
        assert key in job
    assert {"seq", "time", "from", "to", "reason"} <= set(job["history"][0])
    assert {"seq", "event", "exitCode", "task", "pod", "action", "policy"} <= set(job["actions"][0])
    assert {"seq", "command", "name"} <= set(job["commands"][0])
    # every seq is a 1-based record position within the input
    n = report["input"]["events"]
    assert all(1 <= e["seq"] <= n for e in job["history"] + job["actions"] + job["commands"])
    # actions list every resolution, the default SyncJob included
    assert any(a["policy"] == "default" and a["action"] == "SyncJob" for a in job["actions"])


def test_pretty_printed_and_json_lines_logs_replay_identically(tmp_path):
    jsonl = write_jsonl(tmp_path / "seed.jsonl", records(SEED))
    assert replay_json(str(SEED)) == replay_json(str(jsonl))


def test_stdin_dash_reads_the_log_from_a_pipe():
    assert replay_json("-", stdin=SEED.read_bytes()) == replay_json(str(SEED))


def test_until_seq_is_time_travel_to_just_before_the_failure():
    full = replay_json(str(SEED))["jobs"][0]
    fail_seq = next(a["seq"] for a in full["actions"] if a["event"] == "PodFailed")
    before = replay_json(str(SEED), "--until", str(fail_seq - 1))["jobs"][0]
    assert before["status"]["state"]["phase"] == "Running"
    assert before["status"].get("retryCount", 0) == 0
    assert before["status"]["running"] == 3
    at = replay_json(str(SEED), "--until", str(fail_seq))["jobs"][0]
    assert at["status"]["state"]["phase"] == "Restarting"
    assert at["status"]["retryCount"] == 1


def test_until_time_stops_at_the_first_record_after_it():
    full = replay_json(str(SEED))["jobs"][0]
    failed = next(a for a in full["actions"] if a["event"] == "PodFailed")
    report = replay_json(str(SEED), "--until", "2026-11-30T08:05:00Z")
    assert report["jobs"][0]["status"]["state"]["phase"] == "Running"
    assert report["input"]["events"] < failed["seq"]
    later = replay_json(str(SEED), "--until", failed["time"])
    assert later["jobs"][0]["status"]["retryCount"] == 1


def test_explain_says_why_the_other_policies_did_not_match():
    job = replay_json(str(SEED), "--explain")["jobs"][0]
    complete = next(a for a in job["actions"] if a["action"] == "CompleteJob")
    assert complete["policy"] == "task[master][0]"
    pending = next(a for a in job["actions"] if a["event"] == "PodPending")
    assert any("job[0]" in line and "PodPending" in line for line in pending["explain"])
    human = vcbus("replay", str(SEED), "--explain")
    assert human.returncode == 0
    # policies are shown by their content (the label stays in --json's `policy`)
    assert "task master: TaskCompleted -> CompleteJob (task policy 1)" in human.stdout.decode()
    assert "not job policy 1: events ['PodEvicted', 'PodFailed'] do not include PodPending" in human.stdout.decode()


def test_human_output_shows_timeline_and_final_status():
    res = vcbus("replay", str(SEED), "--job", "default/resnet-dist-train")
    out = res.stdout.decode()
    assert res.returncode == 0
    for text in (
        "RestartJob",
        "PodEvicted, PodFailed -> RestartJob (job policy 1)",
        "Running -> Restarting",
        "Completing -> Completed",
        "final status",
    ):
        assert text in out, text


def test_job_filter_and_unknown_job():
    assert len(replay_json(str(SEED), "--job", "resnet-dist-train")["jobs"]) == 1
    res = vcbus("replay", str(SEED), "--job", "default/nope")
    assert res.returncode == 1
    assert b"does not appear" in res.stderr


def test_compare_lists_where_the_recorded_phase_differs(tmp_path):
    recs = records(SEED)
    # Pretend the recording controller wrote "Failed" where vcbus decides Completing.
    for r in recs:
        st = r["object"].get("status") or {}
        if r["object"]["kind"] == "Job" and st.get("state", {}).get("phase") == "Completing":
            st["state"]["phase"] = "Failed"
            break
    log = write_jsonl(tmp_path / "diverged.jsonl", recs)
    res = vcbus("replay", "--compare", str(log))
    assert res.returncode == 1
    assert b"DIVERGENCE" in res.stdout
    job = replay_json(str(log))["jobs"][0]
    fields = {(d["field"], d["recorded"], d["decided"]) for d in job["divergences"]}
    assert ("phase", "Failed", "Completing") in fields
    assert vcbus("replay", "--compare", str(SEED)).returncode == 0


def test_first_appearance_with_a_status_is_adopted_not_restarted(tmp_path):
    recs = records(SEED)
    # cut the log after the restart: a restarted controller sees the job as it is now
    job_recs = [i for i, r in enumerate(recs) if r["object"]["kind"] == "Job"]
    running_after_restart = next(
        i
        for i in job_recs
        if recs[i]["object"].get("status", {}).get("retryCount") == 1
        and recs[i]["object"]["status"]["state"]["phase"] == "Running"
    )
    tail = recs[running_after_restart:]
    tail[0]["type"] = "ADDED"
    log = write_jsonl(tmp_path / "tail.jsonl", tail)
    job = replay_json(str(log))["jobs"][0]
    assert job["adopted"]["phase"] == "Running" and job["adopted"]["retryCount"] == 1
    assert job["history"][0]["from"] == "Running"  # never went back through Pending
    assert job["status"]["state"]["phase"] == "Completed" and job["status"]["retryCount"] == 1


@pytest.mark.parametrize(
    "content, message",
    [
        (b'{"type": "ADDED", "object": {"kind": "Job"\n{"type": "ADDED"}\n', b"invalid JSON"),
        (b"[1, 2, 3]\n", b"expected a JSON object"),
        (b'{"object": {"kind": "Pod", "metadata": {"name": "p"}}}\n', b'missing field "type"'),
        (b'{"type": "ADDED"}\n', b'missing field "object"'),
        (
            b'{"type": "ADDED", "object": {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {}}}\n',
            b"vcjob without metadata.name",
        ),
        (
            b'{"type": "ADDED", "object": {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", '
            b'"metadata": {"name": "x"}, "spec": {"minAvailable": "three"}}}\n',
            b"spec.minAvailable",
        ),
        (b"not json at all\n", b"invalid JSON"),
    ],
    ids=["truncated-mid-log", "not-an-object", "missing-type", "missing-object", "vcjob-without-name", "bad-field", "garbage"],
)
def test_bad_input_names_the_place_and_exits_2_without_traceback(tmp_path, content, message):
    good = SEED.read_bytes()
    log = tmp_path / "bad.log"
    log.write_bytes(good + content)
    res = vcbus("replay", "--strict", str(log))
    assert res.returncode == 2
    err = res.stderr
    assert message in err, err
    assert b"Traceback" not in err
    first_bad_line = good.count(b"\n") + 1
    assert f"bad.log:{first_bad_line}:".encode() in err
    for flags in ((), ("--skip-invalid",)):  # skipping is the default; --skip-invalid an accepted alias
        skipped = vcbus("replay", "--json", *flags, str(log))
        assert skipped.returncode == 0, skipped.stderr
        assert json.loads(skipped.stdout)["input"]["invalid"] == 1
        assert b"warning: skipped" in skipped.stderr and message in skipped.stderr


def test_a_last_record_cut_short_is_skipped_with_a_warning_and_the_rest_replays(tmp_path):
    """The log was copied while kubectl was writing it, or kubectl was killed mid-record."""
    good = SEED.read_bytes()
    for tail in (b'{"type": "ADDED", "object": {"kind": "Job"', b'{\n    "type": "MODIFIED",\n    "object": {\n'):
        log = tmp_path / "cut.log"
        log.write_bytes(good + tail)
        res = vcbus("replay", "--json", str(log))
        assert res.returncode == 0, res.stderr
        err = res.stderr.decode()
        assert f"cut.log:{good.count(NL) + 1}:" in err and "incomplete" in err and "truncated" in err
        report = json.loads(res.stdout)
        assert report["input"]["invalid"] == 1
        assert report["jobs"] == replay_json(str(SEED))["jobs"]


def test_missing_file_and_bad_until_are_clear_errors(tmp_path):
    res = vcbus("replay", str(tmp_path / "nope.log"))
    assert res.returncode == 2 and b"no such file" in res.stderr
    res = vcbus("replay", str(SEED), "--until", "yesterday")
    assert res.returncode == 2 and b"--until" in res.stderr
    assert b"Traceback" not in res.stderr


def test_other_kinds_and_bookmarks_are_counted_and_ignored(tmp_path):
    recs = records(SEED)
    node = {"type": "ADDED", "object": {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}}
    bookmark = {"type": "BOOKMARK", "object": {"kind": "Pod", "apiVersion": "v1", "metadata": {"resourceVersion": "9"}}}
    batch_job = {"type": "ADDED", "object": {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "k8s-job"}}}
    log = write_jsonl(tmp_path / "mixed.jsonl", [node, bookmark, batch_job, *recs])
    report = replay_json(str(log))
    assert report["input"]["ignored"] == 3
    assert [j["name"] for j in report["jobs"]] == ["resnet-dist-train"]
    assert report["jobs"][0]["status"] == replay_json(str(SEED))["jobs"][0]["status"]


def test_help_teaches_with_examples():
    out = vcbus("replay", "--help").stdout.decode()
    for text in ("--until", "--explain", "--compare", "kubectl get vcjob", "Exit codes"):
        assert text in out
