"""Soak: 100k VCBUS_JOBS events, every job deleted, and the projector's RSS stays flat.

The projector used to keep every deleted job's history in memory (+0.54 MB per
1,000 records). It runs here in a process of its own (`tests/soak_projector.py`)
over a real nats-server: RSS is read after the first 20k events and again after
all 100k, with the same projector. The events are the engine's own decisions for
a generated log (50 jobs, each created, run, retried and deleted), repeated in
fresh namespaces up to 100k events. The bound on the growth is generous: the
old behaviour grows by tens of MB over those 80k events, the new by next to
nothing but the deleted jobs' keys.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from statemachines import outputs as o
from statemachines.engine import Engine
from statemachines.model.records import decode
from tests.poison_logs import ROOT
from vcbus.bus import subjects as s
from vcbus.bus.connecting import open_bus
from vcbus.bus.publisher import Prepared, Publisher

pytestmark = [pytest.mark.nats, pytest.mark.slow]

TOTAL, FIRST = 100_000, 20_000
MAX_GROWTH_KB = 12 * 1024


def one_log_of_events(tmp_path) -> list[o.Output]:
    from benchmarks.replay import generate

    path = tmp_path / "jobs-50.jsonl"
    generate(path, 50, wave=25)
    engine, events = Engine(timers="recorded"), []
    for i, line in enumerate(path.read_bytes().splitlines(), 1):
        events += [e for e in engine.apply(i, decode(line)) if not o.is_command(e) and not e.job.startswith("_/")]
    assert sum(isinstance(e, o.JobDeleted) for e in events) == 50
    return events


def messages(events: list[o.Output], copy: int) -> list[Prepared]:
    out = []
    for event in events:
        ns, name = s.split_job(event.job)
        job = f"soak-{copy}/{name}"
        body = o.encoder.encode(event).replace(f'"job":"{event.job}"'.encode(), f'"job":"{job}"'.encode())
        out.append(Prepared(s.event_subject(job, o.tag_of(type(event))), body, {}))
    return out


async def publish(settings, msgs: list[Prepared]) -> None:
    async with open_bus(settings) as bus:
        pub = Publisher(bus.js)
        for msg in msgs:
            await pub.publish(msg)
        await pub.flush()


def reading(proc: subprocess.Popen) -> dict[str, int]:
    line = proc.stdout.readline()
    parts = line.split()
    assert parts and parts[0] == "rss", line
    return {parts[i]: int(parts[i + 1]) for i in range(0, len(parts), 2)}


async def test_projector_rss_is_flat_over_100k_events_with_every_job_deleted(bus_settings, tmp_path):
    events = one_log_of_events(tmp_path)
    msgs: list[Prepared] = []
    copy = 0
    while len(msgs) < TOTAL:
        msgs += messages(events, copy)
        copy += 1
    msgs = msgs[:TOTAL]
    await publish(bus_settings, msgs[:FIRST])
    proc = subprocess.Popen([sys.executable, "-m", "tests.soak_projector", bus_settings.nats_url], cwd=ROOT,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        first = reading(proc)
        assert first["position"] == FIRST
        await publish(bus_settings, msgs[FIRST:])
        proc.stdin.write("again\n")
        proc.stdin.flush()
        last = reading(proc)
    finally:
        proc.stdin.close()
        proc.wait(timeout=120)
    assert last["position"] == TOTAL
    assert last["jobs"] <= 50  # only jobs not deleted yet (the last copy, cut short) are held
    growth = last["rss"] - first["rss"]
    assert growth < MAX_GROWTH_KB, f"RSS grew {growth} kB from {FIRST} to {TOTAL} events"
