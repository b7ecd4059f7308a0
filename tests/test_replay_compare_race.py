"""`vcbus replay --compare` labels the divergences Volcano's delayed-action race explains.

Volcano runs a delayed action (a policy `timeout`) outside the job's work queue
and its status write usually loses a 409 conflict: the recorded job keeps
cycling Pending/Running while vcbus applies the firing (docs/fidelity.md). Those
divergences are shown as the known race, and alone they do not make `--compare`
fail. The logs are kubectl logs (no `time`) of such a run, as Volcano wrote them.
"""

from __future__ import annotations

import copy
import json

import pytest

from tests.builders import job, policy, task
from tests.test_replay_cli import vcbus
from tests.test_replay_clock import START, KubectlLog, at, running, started

RACE = "volcano-delayed-action-race"


def volcano_log(tmp_path, *, then: tuple[str, int] = ("Running", 0), early: str | None = None):
    """A job whose second pod stays Pending past its PodPending timeout (10s) while the first runs.

    vcbus fires the timeout at 08:00:20 (RestartJob, retryCount 1). Volcano's firing lost its
    write: the job is recorded Pending, then `then` (phase, retryCount). `early`: a phase Volcano
    recorded before any timeout fired (a divergence the race cannot explain)."""
    log = KubectlLog()
    spec = job(tasks=[task("t", 2, min_available=1)], policies=[policy("RestartJob", "PodPending", timeout="10s")],
               created=START)
    pods = started(log, spec)
    first = log.put("MODIFIED", running(pods[0], 2))
    recorded = copy.deepcopy(spec)
    recorded["status"] = {"state": {"phase": early or "Running", "lastTransitionTime": at(2)}, "minAvailable": 1}
    log.put("MODIFIED", recorded)
    later = copy.deepcopy(first)
    later["status"]["conditions"].append({"type": "ContainersReady", "status": "True", "lastTransitionTime": at(20)})
    log.put("MODIFIED", later)  # 08:00:20: past the second pod's timeout (due 08:00:11)
    for second, (phase, retry) in ((21, ("Pending", 0)), (22, then)):
        recorded = copy.deepcopy(recorded)
        recorded["status"]["state"] = {"phase": phase, "lastTransitionTime": at(second)}
        recorded["status"]["retryCount"] = retry
        log.put("MODIFIED", recorded)
    path = tmp_path / "volcano.jsonl"
    path.write_bytes(b"".join(log.lines))
    return path


def compare(path) -> tuple[int, dict, str]:
    res = vcbus("replay", "--compare", "--json", str(path))
    text = vcbus("replay", "--compare", str(path))
    assert text.returncode == res.returncode
    return res.returncode, json.loads(res.stdout), text.stdout.decode()


def test_divergences_of_a_lost_delayed_action_are_the_known_race_and_pass(tmp_path):
    code, report, text = compare(volcano_log(tmp_path))
    (j,) = report["jobs"]
    assert any(a["policy"].startswith("timer:") and a["action"] == "RestartJob" for a in j["actions"])
    assert j["status"]["retryCount"] == 1
    divs = j["divergences"]
    assert {(d["field"], d["recorded"]) for d in divs} >= {("phase", "Pending"), ("retryCount", "0")}
    assert all(d["known"] == RACE for d in divs)
    assert code == 0
    assert "known Volcano race" in text and f"{len(divs)} of them the known Volcano race" in text


def test_a_divergence_the_race_cannot_explain_still_fails(tmp_path):
    code, report, text = compare(volcano_log(tmp_path, then=("Completed", 0)))
    (j,) = report["jobs"]
    unexplained = [d for d in j["divergences"] if "known" not in d]
    assert {(d["field"], d["recorded"]) for d in unexplained} >= {("phase", "Completed")}
    assert code == 1
    assert "DIVERGENCE phase: log says Completed" in text


def test_a_divergence_before_any_delayed_action_fired_is_not_the_race(tmp_path):
    code, report, _ = compare(volcano_log(tmp_path, early="Completing"))  # vcbus is Running at 2s
    (j,) = report["jobs"]
    fired = min(a["seq"] for a in j["actions"] if a["policy"].startswith("timer:"))
    before = [d for d in j["divergences"] if d["seq"] < fired]
    assert before and all("known" not in d for d in before)
    assert code == 1


@pytest.mark.nats
@pytest.mark.parametrize("then, fails", [(("Running", 0), False), (("Completed", 0), True)], ids=["race", "other"])
async def test_vcbus_divergences_on_the_bus_labels_the_race_the_same_way(bus_settings, tmp_path, then, fails):
    """The same log on the bus, the delayed action fired by the decider's clock (a TIMER record)."""
    from tests.fixtures_nats import decide_and_project, publish_file, vcbus_cli

    lines = volcano_log(tmp_path, then=then).read_bytes().splitlines(keepends=True)
    first, rest = tmp_path / "first.jsonl", tmp_path / "rest.jsonl"
    first.write_bytes(b"".join(lines[:7]))  # up to the pod update at 08:00:20
    rest.write_bytes(b"".join(lines[7:]))  # Volcano's status writes after its firing was lost
    await publish_file(bus_settings, first)
    decider, _ = await decide_and_project(bus_settings, clock=at(20))  # the timeout (due 08:00:11) fires
    assert decider.stats.timers == 1
    await publish_file(bus_settings, rest)
    await decide_and_project(bus_settings, clock=at(20))
    res = vcbus_cli("divergences", "-o", "json", "--nats", bus_settings.nats_url)
    rows = json.loads(res.stdout)
    assert {(r["field"], r["recorded"]) for r in rows} >= {("phase", "Pending"), ("retryCount", "0")}
    assert res.returncode == (1 if fails else 0), res.stderr.decode()
    assert [r for r in rows if r["recorded"] in ("Pending", "Running") and r["field"] == "phase"]
    assert all(r.get("known") == RACE for r in rows if r["recorded"] != "Completed")
    assert [r.get("known") for r in rows if r["recorded"] == "Completed"] == ([None] if fails else [])
    table = vcbus_cli("divergences", "--nats", bus_settings.nats_url)
    assert table.returncode == res.returncode and b"(known Volcano race)" in table.stdout
