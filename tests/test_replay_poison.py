"""File replay with poison records: one stderr line each, the rest replays; --strict stops at the first."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.poison_logs import CRASH_JOB, ROOT, crashing_engine, poison_lines, poison_log
from vcbus.replaying import PoisonedRecord, replay_inputs, replay_stream


def vcbus(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vcbus.cli.main", *args], capture_output=True, cwd=ROOT, timeout=300)


def phases(report: dict) -> dict[str, str]:
    return {f"{j['namespace']}/{j['name']}": j["status"]["state"].get("phase", "") for j in report["jobs"]}


def test_bad_records_are_reported_one_line_each_and_both_good_jobs_complete(tmp_path):
    log = poison_log(tmp_path / "poison.jsonl")
    res = vcbus("replay", "--json", str(log))
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    assert report["input"]["invalid"] == 3
    got = phases(report)
    assert got["default/resnet-dist-train"] == "Completed" and got["team-b/resnet-dist-train"] == "Completed"
    # the bad times count as absent: the job is decided, not dropped
    assert got["default/bad-time"] == "Pending"
    assert not any(j.startswith("/") for j in got)  # the namespace-less vcjob was set aside
    err = res.stderr.decode()
    skipped = [line for line in err.splitlines() if line.startswith("warning: skipped")]
    assert len(skipped) == 3, err
    assert "without metadata.namespace" in skipped[0] and "poison.jsonl:65:" in skipped[0]
    assert "nested too deeply" in skipped[1] and "invalid JSON" in skipped[2]
    assert "'not-a-time' is not an RFC 3339 time" in err and "'yesterday' is not an RFC 3339 time" in err
    assert "Traceback" not in err


def test_strict_stops_at_the_first_bad_record_with_exit_2(tmp_path):
    log = poison_log(tmp_path / "poison.jsonl")
    res = vcbus("replay", "--strict", str(log))
    assert res.returncode == 2
    err = res.stderr.decode()
    assert err.count("\n") == 1 and "poison.jsonl:65:" in err and "without metadata.namespace" in err
    assert "Traceback" not in err
    both = vcbus("replay", "--strict", "--skip-invalid", str(log))
    assert both.returncode == 2 and b"not both" in both.stderr


def test_a_record_the_engine_fails_on_is_skipped_and_the_replay_starts_again_without_it(tmp_path, monkeypatch):
    log = poison_log(tmp_path / "poison.jsonl")
    without = tmp_path / "without-crash.jsonl"
    crash_line = poison_lines()["crash-me"]
    without.write_bytes(b"".join(line + b"\n" for line in log.read_bytes().splitlines() if line != crash_line))
    with open(without, "rb") as fh:
        reference = json.loads(json.dumps(replay_stream(fh, str(without), skip_invalid=True).report()))
    problems: list[str] = []
    with crashing_engine(monkeypatch), open(log, "rb") as fh:
        result = replay_stream(fh, str(log), skip_invalid=True, on_problem=problems.append)
    report = json.loads(json.dumps(result.report()))
    assert f"default/{CRASH_JOB}" not in phases(report)  # no half-applied job left behind
    assert [p for p in problems if "engine failed" in p] == [
        f"record 69: the engine failed on it: KeyError: 'injected fault: the engine broke on {CRASH_JOB}'"
    ]
    assert report["input"]["invalid"] == 4
    # everything else is exactly what the log without that record gives (records keep their numbers
    # in the reference minus one after the crash line, so compare the jobs' outcomes)
    assert phases(report) == phases(reference)
    for mine, ref in zip(report["jobs"], reference["jobs"]):
        assert mine["status"] == ref["status"]


def test_strict_replay_stops_at_an_engine_failure(tmp_path, monkeypatch):
    log = poison_log(tmp_path / "poison.jsonl")
    clean = tmp_path / "clean.jsonl"
    bad = set(poison_lines().values()) - {poison_lines()["crash-me"]}
    clean.write_bytes(b"".join(line + b"\n" for line in log.read_bytes().splitlines() if line not in bad))
    with crashing_engine(monkeypatch), open(clean, "rb") as fh, pytest.raises(PoisonedRecord, match="engine failed"):
        replay_stream(fh, str(clean))


def test_merged_inputs_set_an_engine_failure_aside_too(tmp_path, monkeypatch):
    log = poison_log(tmp_path / "poison.jsonl")
    lines = log.read_bytes().splitlines()
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_bytes(b"".join(line + b"\n" for line in lines[:70]))
    second.write_bytes(b"".join(line + b"\n" for line in lines[70:]))
    problems: list[str] = []
    with crashing_engine(monkeypatch), open(first, "rb") as fa, open(second, "rb") as fb:
        result = replay_inputs([(fa, str(first)), (fb, str(second))], skip_invalid=True, on_problem=problems.append)
    got = phases(json.loads(json.dumps(result.report())))
    assert got["default/resnet-dist-train"] == "Completed" and got["team-b/resnet-dist-train"] == "Completed"
    assert f"default/{CRASH_JOB}" not in got
    assert sum("engine failed" in p for p in problems) == 1


def _rec(obj: dict, **extra) -> bytes:
    return json.dumps({"type": "MODIFIED", "object": obj, **extra}).encode()


def test_decode_turns_every_bad_record_into_a_record_error_and_bad_times_into_notes():
    from statemachines.model.records import Observed, RecordError, decode
    from statemachines.model.timefmt import ZERO_TIME

    for name, line in poison_lines().items():
        if name in ("no-namespace", "deep", "invalid-json"):
            with pytest.raises(RecordError):
                decode(line)
    pod = {
        "kind": "Pod", "apiVersion": "v1",
        "metadata": {"name": "p", "namespace": "d", "creationTimestamp": "2026-11-30T08:00:00Z",
                     "deletionTimestamp": "soon"},
        "status": {"conditions": [{"type": "Ready", "lastTransitionTime": "2026-13-01T00:00:00Z"}],
                   "containerStatuses": [{"state": {"terminated": {"exitCode": 1, "finishedAt": "later"}}}]},
    }
    rec = decode(_rec(pod, time="2026-11-30T08:00:05+01:00"))
    assert isinstance(rec, Observed) and rec.time == "2026-11-30T08:00:05+01:00"
    assert rec.object.metadata.deletion_timestamp == ZERO_TIME  # still being deleted, no time
    assert rec.object.metadata.creation_timestamp == "2026-11-30T08:00:00Z"
    assert rec.object.status.conditions[0].last_transition_time is None
    assert rec.object.status.container_statuses[0].state.terminated.finished_at is None
    assert [n.split(":")[0] for n in rec.notes] == [
        "metadata.deletionTimestamp",
        "status.conditions[0].lastTransitionTime",
        "status.containerStatuses[0].state.terminated.finishedAt",
    ]
    good = decode(_rec({**pod, "metadata": {"name": "p", "namespace": "d"}, "status": {}}))
    assert good.notes == ()
