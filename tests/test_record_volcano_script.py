"""scripts/record-volcano-seed.py run whole, as `--controller vcbus`: everything it does but start Volcano.

The script is what made examples/volcano/resnet-dist-train.jsonl; Volcano's binaries cannot be
built everywhere the tests run, so here `vcbus up --kubeconfig` (bridge, decider, scheduler,
actuator) is the controller in Volcano's place. The rest is the script's own: a fresh kube-apiserver
+ etcd (envtest) with 3 KWOK nodes and the Queue `default`, `vcbus record -A` from before the
controller starts, the mutated seed job created, worker-1 failed with exit code 1 through pods/status
once its 3 pods run, the restart waited for, the master succeeded once the new pods run, the wait for
a settled job and a quiet log, the recorder stopped with Ctrl-C and the log copied out.

Checked on the log it writes: a recording of format 2 (its initial list between the two marks), the
story in it (worker-1 Failed with exit code 1, then the master Succeeded), the controller's statuses
ending Completed with retryCount 1, and `vcbus replay --compare` of it agreeing with them. What stays
untested: `Volcano.start` (its two binaries and scheduler configuration) and `volcano_crds` (its CRDs
copied from its source); tests/test_volcano_recording.py checks the log they made.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.k8s]

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "record-volcano-seed.py"
NAME = "resnet-dist-train"


def test_the_script_records_the_story_under_vcbuss_controller(tmp_path: pathlib.Path) -> None:
    out = tmp_path / "seed.jsonl"
    res = subprocess.run([sys.executable, str(SCRIPT), "--controller", "vcbus", "--hold", "1", "-o", str(out)],
                         capture_output=True, cwd=ROOT, timeout=900)
    err = res.stderr.decode()
    assert res.returncode == 0, err[-4000:]
    said = [line for line in err.splitlines() if line.startswith("record-volcano-seed: ")]
    assert said[0] == "record-volcano-seed: recording; starting vcbus up", said
    assert said[-1].startswith(f"record-volcano-seed: wrote {out} (") and said[-1].endswith(
        "vcbus's final status: phase Completed, retryCount 1"), said

    recs = [json.loads(line) for line in out.read_text().splitlines()]
    assert recs[0] == {"type": "BOOKMARK", "object": {"metadata": {"annotations": {
        "vcbus.volcano.sh/record-format": "2"}}}}
    ends = [i for i, r in enumerate(recs) if r["type"] == "BOOKMARK"
            and (r["object"]["metadata"].get("annotations") or {}).get("k8s.io/initial-events-end") == "true"]
    assert len(ends) == 1 and all(r["type"] == "ADDED" for r in recs[1:ends[0]])
    assert not [r for r in recs[: ends[0]] if r["object"].get("kind") == "Job"]  # recorded before the job

    def ended(pod: str, phase: str) -> list[dict]:
        return [r["object"] for r in recs if r["object"].get("kind") == "Pod"
                and r["object"]["metadata"]["name"] == f"{NAME}-{pod}"
                and (r["object"].get("status") or {}).get("phase") == phase]

    failed = ended("worker-1", "Failed")
    assert failed and failed[0]["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 1
    assert ended("master-0", "Succeeded")
    assert recs.index(next(r for r in recs if r["object"] is failed[0])) < recs.index(
        next(r for r in recs if r["object"] is ended("master-0", "Succeeded")[0]))
    statuses = [r["object"]["status"] for r in recs if r["object"].get("kind") == "Job" and r["object"].get("status")]
    assert statuses[-1]["state"]["phase"] == "Completed" and statuses[-1]["retryCount"] == 1
    assert "Restarting" in [s["state"].get("phase") for s in statuses]

    replay = subprocess.run([sys.executable, "-m", "vcbus.cli.main", "replay", "--compare", "--json", str(out)],
                            capture_output=True, cwd=ROOT, timeout=120)
    assert replay.returncode == 0, replay.stderr.decode()
    (job,) = json.loads(replay.stdout)["jobs"]
    assert job["status"]["state"]["phase"] == "Completed" and job["status"]["retryCount"] == 1
