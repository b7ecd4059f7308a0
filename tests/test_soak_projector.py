"""Soak: 100k VCBUS_JOBS events, every job deleted, and the projector's RSS stays flat.

The projector used to keep every deleted job's history in memory (+0.54 MB per
1,000 records). It runs here in a process of its own (`tests/soak_projector.py`)
over a real nats-server: RSS is read after the first 20k events and again after
all 100k, with the same projector. The events are the engine's own decisions for
a generated log (50 jobs, each created, run, retried and deleted), repeated in
fresh namespaces up to 100k events. The bound on the growth is generous: the
old behaviour grows by tens of MB over those 80k events, the new by next to
nothing but the deleted jobs' keys.

The nats-server is the test's own, writing to disk without an fsync per message
(`sync_interval: 2m`): what is measured is the projector's memory, which the
server's fsync policy does not touch, and with an fsync per message publishing
the 100k events took 141 of the test's 177 s (load 16 on two cores).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

from statemachines import outputs as o
from statemachines.engine import Engine
from statemachines.model.records import decode
from tests.poison_logs import ROOT
from vcbus.bus import subjects as s
from vcbus.bus.connecting import open_bus
from vcbus.bus.publisher import Prepared, Publisher
from vcbus.bus.server import EmbeddedServer
from vcbus.settings import BusSettings

pytestmark = [pytest.mark.nats, pytest.mark.slow]

TOTAL, FIRST = 100_000, 20_000
MAX_GROWTH_KB = 12 * 1024


@pytest.fixture
def soak_bus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BusSettings]:
    """A nats-server of the test's own that fsyncs every 2 minutes rather than every message."""
    server = EmbeddedServer(data_dir=tmp_path_factory.mktemp("nats-soak"), sync_interval="2m")
    server.start(timeout=30)
    try:
        yield BusSettings(nats_url=server.url)
    finally:
        server.stop()


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


async def test_projector_rss_is_flat_over_100k_events_with_every_job_deleted(soak_bus, tmp_path):
    events = one_log_of_events(tmp_path)
    msgs: list[Prepared] = []
    copy = 0
    while len(msgs) < TOTAL:
        msgs += messages(events, copy)
        copy += 1
    msgs = msgs[:TOTAL]
    await publish(soak_bus, msgs[:FIRST])
    proc = subprocess.Popen([sys.executable, "-m", "tests.soak_projector", soak_bus.nats_url], cwd=ROOT,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        first = reading(proc)
        assert first["position"] == FIRST
        await publish(soak_bus, msgs[FIRST:])
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
