"""`vcbus status -o wide` says how a finished job's tasks ended (issue 29), on a real nats-server.

A finished job's status counts no pods (Volcano's killPods counts only those it failed to delete)
and its tasks derive Pending once the kill deleted their pods; the TASKS column showed
`master:Completed,worker:Pending` for a Completed job and `worker:Pending` for one whose retries
ran out. It now shows each task's pods that ran to an end (`Succeeded=N/Failed=M`, the history's
`taskPods`), and for a live job the task's phase with the status's `taskStatusCount`.
"""

from __future__ import annotations

import json
import pathlib

import pytest

from tests.fixtures_nats import decide_and_project, publish_file, vcbus_cli

pytestmark = pytest.mark.nats

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"
CASES = {  # one log a bus: a job and its TASKS column
    "resnet-dist-train.json": ("default/resnet-dist-train", "Completed",
                               "master:Succeeded=1/Failed=0,worker:Succeeded=0/Failed=0"),  # the workers killed
    "retries-exhausted.jsonl": ("default/flaky", "Failed", "worker:Succeeded=0/Failed=1"),  # the failed pod retained
    "abort-resume.jsonl": ("default/suspendable", "Completed", "worker:Succeeded=2/Failed=0"),
    "pending-timeout.jsonl": ("default/stuck", "Running", "worker:Running(Running=2)"),  # live: phase and counts
}


def wide_row(url: str) -> dict[str, str]:
    res = vcbus_cli("status", "-o", "wide", "--nats", url)
    assert res.returncode == 0, res.stderr.decode()
    header, row = [line.split() for line in res.stdout.decode().splitlines()]
    return dict(zip(header, row))


@pytest.mark.parametrize("log", sorted(CASES))
async def test_wide_shows_how_a_finished_jobs_tasks_ended(bus_settings, log):
    job, phase, tasks = CASES[log]
    await publish_file(bus_settings, EXAMPLES / log)
    await decide_and_project(bus_settings)
    row = wide_row(bus_settings.nats_url)
    assert (f"{row['NAMESPACE']}/{row['NAME']}", row["STATUS"], row["TASKS"]) == (job, phase, tasks)


def test_the_replay_report_holds_each_tasks_pods_when_it_last_moved():
    res = vcbus_cli("replay", "--json", str(EXAMPLES / "retries-exhausted.jsonl"))
    [job] = json.loads(res.stdout)["jobs"]
    assert job["status"]["state"]["phase"] == "Failed" and "taskStatusCount" not in job["status"]
    assert (job["tasks"], job["taskPods"]) == ({"worker": "Pending"}, {"worker": {"Failed": 1}})

