"""`vcbus.client`: an outside subscriber sees every event in order, and resumes without loss or repeats."""

from __future__ import annotations

import asyncio
import os
import pathlib
import re
import subprocess
import sys

import pytest

from statemachines import outputs as o
from tests.fixtures_nats import ROOT, decide_and_project, publish_file
from vcbus.bus.connecting import open_bus
from vcbus.bus.decider import Decider
from vcbus.client import subscribe

pytestmark = pytest.mark.nats

JOB = "default/resnet-dist-train"
PHASES = ["Pending", "Running", "Restarting", "Pending", "Running", "Completing", "Completed"]


async def take(events, n: int) -> list:
    out = []
    async with asyncio.timeout(20):
        async for ev in events:
            out.append(ev)
            if len(out) == n:
                break
    return out


async def test_a_subscriber_receives_every_phase_change_while_the_decider_runs(bus_settings, seed_log):
    url = bus_settings.nats_url
    async with subscribe("live", url=url, job=JOB, types=["phase.changed"]) as events:
        async with open_bus(bus_settings) as bus:
            decider = Decider(bus, clock=lambda: "1970-01-01T00:00:00Z")
            task = asyncio.create_task(decider.run(until_idle=True))
            await publish_file(bus_settings, seed_log)
            got = await take(events, len(PHASES))
            await task
    assert [ev.data.to_phase for ev in got] == PHASES
    assert all(isinstance(ev.data, o.PhaseChanged) and ev.subject == JOB for ev in got)
    assert [ev.stream_seq for ev in got] == sorted(ev.stream_seq for ev in got)


async def test_a_restarted_subscriber_misses_none_and_repeats_none(bus_settings, seed_log):
    await publish_file(bus_settings, seed_log)
    await decide_and_project(bus_settings)
    url = bus_settings.nats_url
    async with subscribe("billing", url=url, job=JOB, types=["phase.changed"]) as events:
        first = await take(events, 3)
    async with subscribe("billing", url=url, job=JOB, types=["phase.changed"]) as events:
        rest = await take(events, len(PHASES) - 3)
        assert await events.pending() == 0
    seen = first + rest
    assert [ev.data.to_phase for ev in seen] == PHASES
    assert len({ev.id for ev in seen}) == len(PHASES)


async def test_an_event_whose_handler_failed_comes_again(bus_settings, seed_log):
    await publish_file(bus_settings, seed_log)
    await decide_and_project(bus_settings)
    url = bus_settings.nats_url
    with pytest.raises(RuntimeError):
        async with subscribe("fragile", url=url, job=JOB, types=["phase"]) as events:
            async for ev in events:
                if ev.data.to_phase == "Restarting":
                    raise RuntimeError("handler failed")
    async with subscribe("fragile", url=url, job=JOB, types=["phase"]) as events:
        (again,) = await take(events, 1)
    assert again.data.to_phase == "Restarting"


async def test_a_namespace_subscriber_gets_all_event_types_typed(bus_settings, seed_log):
    await publish_file(bus_settings, seed_log)
    await decide_and_project(bus_settings)
    async with subscribe("audit", url=bus_settings.nats_url, namespace="default") as events:
        got = await take(events, 40)
    types = {type(ev.data) for ev in got}
    assert {o.JobObserved, o.ActionResolved, o.PhaseChanged, o.StatusChanged} <= types
    # a job's stream carries the job's events and its tasks' (task.phase.changed)
    assert {ev.type.split(".")[2] for ev in got} <= {"job", "task"}
    assert all(ev.type.startswith(("sh.volcano.job.", "sh.volcano.task.")) for ev in got)
    ids = [tuple(map(int, ev.id.split(":"))) for ev in got]
    assert ids == sorted(ids)


def test_the_consumer_in_docs_subscribing_md_runs(bus_settings, seed_log):
    text = (ROOT / "docs" / "subscribing.md").read_text()
    code = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    assert len(code.strip().splitlines()) <= 25
    asyncio.run(publish_file(bus_settings, seed_log))
    asyncio.run(decide_and_project(bus_settings))
    env = {**os.environ, "VCBUS_NATS_URL": bus_settings.nats_url, "PYTHONPATH": str(ROOT)}
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, timeout=60, cwd=pathlib.Path("/"))
    assert res.returncode == 0, res.stderr.decode()
    lines = res.stdout.decode().splitlines()
    assert [line.split()[-1] for line in lines] == PHASES
