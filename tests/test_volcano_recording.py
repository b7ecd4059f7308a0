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


def test_record_script_names_missing_binaries(tmp_path: pathlib.Path) -> None:
    """scripts/record-volcano-seed.py without Volcano's binaries: one line naming them, exit 2, nothing started."""
    res = subprocess.run([sys.executable, str(ROOT / "scripts" / "record-volcano-seed.py"), "--volcano-bin", str(tmp_path),
                          "-o", str(tmp_path / "out.jsonl")], capture_output=True, cwd=ROOT, timeout=60)
    assert res.returncode == 2
    err = res.stderr.decode()
    assert err.count("\n") == 1 and "Traceback" not in err
    assert f"--volcano-bin {tmp_path}: no executable vc-controller-manager, vc-scheduler there" in err
    assert not (tmp_path / "out.jsonl").exists()
