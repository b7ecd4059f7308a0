"""The log recorded from real Volcano (examples/volcano/, scripts/record-volcano-seed.py) replayed:
vcbus ends the seed job where Volcano's own controller did.

The statuses in that log are vc-controller-manager's writes (their managedFields say so), so the last
one is Volcano's answer; `vcbus replay --compare` re-decides the log and must end at the same phase
and retryCount, with no divergence on the way."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
LOG = ROOT / "examples" / "volcano" / "resnet-dist-train.jsonl"


def volcano_statuses(path: pathlib.Path) -> list[dict]:
    """The seed vcjob's statuses as the log has them, each one written by Volcano's controller."""
    out = []
    for line in path.read_text().splitlines():
        obj = json.loads(line)["object"]
        if obj.get("kind") != "Job" or not obj.get("status"):
            continue
        managers = {m.get("manager") for m in obj["metadata"].get("managedFields") or []}
        assert "vc-controller-manager" in managers, f"a status not written by Volcano: {obj['metadata']}"
        out.append(obj["status"])
    return out


def volcano_writes(path: pathlib.Path) -> list[tuple[str, str]]:
    """(what, name) of the pods and PodGroups Volcano's controller created and deleted, in the log's order:
    a pod or PodGroup ADDED, a pod's first record with a deletionTimestamp, a PodGroup DELETED."""
    out, deleting = [], set()
    for line in path.read_text().splitlines():
        rec = json.loads(line)
        obj, kind = rec["object"], rec["object"].get("kind")
        meta = obj.get("metadata") or {}
        if kind == "Pod" and rec["type"] == "ADDED":
            out.append(("CreatePod", meta["name"]))
        elif kind == "Pod" and meta.get("deletionTimestamp") and meta["uid"] not in deleting:
            deleting.add(meta["uid"])
            out.append(("DeletePod", meta["name"]))
        elif kind == "PodGroup" and rec["type"] in ("ADDED", "DELETED"):
            out.append(("CreatePodGroup" if rec["type"] == "ADDED" else "DeletePodGroup", meta["name"]))
    return out


def steps(writes: list[tuple[str, str]]) -> list[tuple[str, list[str]]]:
    """Runs of the same write, each with its names sorted: the order of the pods inside a step is the
    order their requests happened to finish in, in Volcano (created and deleted in parallel)."""
    out: list[tuple[str, list[str]]] = []
    for what, name in writes:
        if out and out[-1][0] == what:
            out[-1][1].append(name)
            out[-1][1].sort()
        else:
            out.append((what, [name]))
    return out


def test_replay_ends_where_volcano_ended() -> None:
    statuses = volcano_statuses(LOG)
    volcano = statuses[-1]
    assert volcano["state"]["phase"] == "Completed" and volcano["retryCount"] == 1  # the story the script plays
    res = subprocess.run([sys.executable, "-m", "vcbus.cli.main", "replay", str(LOG), "--compare", "--json"],
                         capture_output=True, cwd=ROOT, timeout=120)
    assert res.returncode == 0, res.stderr.decode()  # exit 1 would be a divergence
    (job,) = json.loads(res.stdout)["jobs"]
    assert (job["namespace"], job["name"]) == ("default", "resnet-dist-train")
    assert job["status"]["state"]["phase"] == volcano["state"]["phase"]
    assert job["status"]["retryCount"] == volcano["retryCount"]
    assert job["divergences"] == []
    # every phase Volcano wrote is one vcbus went through, in the same order
    written = [s["state"]["phase"] for s in statuses]
    volcano_path = [p for i, p in enumerate(written) if i == 0 or p != written[i - 1]]
    vcbus_path = [h["to"] for h in job["history"]]
    assert volcano_path == vcbus_path
    # and the conditions Volcano kept (the last five phases entered) are vcbus's; their times are not
    # compared: each status write in a phase re-stamps its condition (syncJob in
    # pkg/controllers/job/job_controller_actions.go), and Volcano's work queue coalesces requests that
    # vcbus decides one by one (docs/replay.md, "A log recorded from Volcano")
    assert [c["status"] for c in job["status"]["conditions"]] == [c["status"] for c in volcano["conditions"]]
    # the pods and PodGroups created and deleted, in the same order (pods of one step in any order)
    decided = [(c["command"], c["name"]) for c in job["commands"]
               if c["command"] in ("CreatePod", "DeletePod", "CreatePodGroup", "DeletePodGroup")]
    assert steps(decided) == steps(volcano_writes(LOG)) and len(decided) == 15
    # and the job's last transition time and running duration
    assert job["status"]["state"]["lastTransitionTime"] == volcano["state"]["lastTransitionTime"]
    assert job["status"]["runningDuration"] == volcano["runningDuration"]


def test_record_script_says_what_is_wrong(tmp_path: pathlib.Path) -> None:
    """scripts/record-volcano-seed.py without Volcano's binaries, or with a negative --hold: one line saying
    what is wrong, exit 2, nothing started."""
    res = subprocess.run([sys.executable, str(ROOT / "scripts" / "record-volcano-seed.py"), "--volcano-bin", str(tmp_path),
                          "-o", str(tmp_path / "out.jsonl")], capture_output=True, cwd=ROOT, timeout=60)
    assert res.returncode == 2
    err = res.stderr.decode()
    assert err.count("\n") == 1 and "Traceback" not in err
    assert f"--volcano-bin {tmp_path}: no executable vc-controller-manager, vc-scheduler there" in err
    assert not (tmp_path / "out.jsonl").exists()
    res = subprocess.run([sys.executable, str(ROOT / "scripts" / "record-volcano-seed.py"), "--hold", "-1"],
                         capture_output=True, cwd=ROOT, timeout=60)
    assert res.returncode == 2 and res.stderr.decode() == "record-volcano-seed: --hold -1: expected seconds, 0 or more\n"
