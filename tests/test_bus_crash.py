"""Crash safety: SIGKILL the decider (a real `vcbus up` process) at random points, 10 times.

The log of 100 jobs is published first (long enough that ten random kills do
not outlast the pipelined decider); each round starts the decider, lets it
decide for a random moment and kills it with SIGKILL, wherever it is (between
receiving a record and acking it, mid-publish, mid-rebuild). A last run then
decides the rest. The streams must hold exactly what one uninterrupted run
stores (the engine's pure fold of the same records): same subjects, same ids,
same bodies, same order; no gap, no duplicate. Set VCBUS_CRASH_SEED to replay
a failing seed.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import sys

import pytest

from tests.fixtures_nats import ROOT, expected_outputs, publish_file, stream_messages
from vcbus.bus import subjects as s
from vcbus.bus.connecting import open_bus

pytestmark = [pytest.mark.nats, pytest.mark.slow]

ROUNDS = 10


@pytest.fixture(scope="module")
def long_log(tmp_path_factory: pytest.TempPathFactory):
    from benchmarks.replay import generate

    path = tmp_path_factory.mktemp("logs") / "jobs-100.jsonl"
    generate(path, 100, wave=10)
    return path


async def start_decider(url: str, *extra: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "vcbus.cli.main", "up", "--nats", url, "--service", "decider", *extra,
        cwd=ROOT,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )


async def wait_for_line(proc: asyncio.subprocess.Process, needle: bytes, timeout: float = 30) -> None:
    assert proc.stderr is not None
    async with asyncio.timeout(timeout):
        while True:
            line = await proc.stderr.readline()
            if not line:
                raise AssertionError(f"decider exited before {needle!r} (rc {await proc.wait()})")
            if needle in line:
                return


async def ack_floor(settings) -> int:
    async with open_bus(settings) as bus:
        info = await bus.js.consumer_info(s.K8S_STREAM, "vcbus-decider")
    return info.ack_floor.stream_seq


async def test_killing_the_decider_at_random_points_loses_and_repeats_nothing(bus_settings, long_log):
    seed = int(os.environ.get("VCBUS_CRASH_SEED") or random.randrange(1 << 30))
    rng = random.Random(seed)
    url = bus_settings.nats_url
    pub = await publish_file(bus_settings, long_log)
    total = pub.last_seq

    floors = []
    for _ in range(ROUNDS):
        proc = await start_decider(url)
        try:
            await wait_for_line(proc, b"deciding from seq")
            await asyncio.sleep(rng.uniform(0.0, 0.4))
        finally:
            proc.send_signal(signal.SIGKILL)
            await proc.wait()
        floors.append(await ack_floor(bus_settings))
    print(f"seed {seed}: ack floors after each kill {floors} of {total}")
    assert floors[-1] < total, f"seed {seed}: the log was used up before the last kill; kills proved little"

    proc = await start_decider(url, "--once")
    _, err = await proc.communicate()
    assert proc.returncode == 0, f"seed {seed}: {err.decode()}"

    records = [(seq, body) for seq, _, _, body in await stream_messages(bus_settings, s.K8S_STREAM)]
    assert len(records) == total
    want = expected_outputs(records)
    for stream in (s.JOBS_STREAM, s.CMDS_STREAM):
        have = [(subj, h["Nats-Msg-Id"], body) for _, subj, h, body in await stream_messages(bus_settings, stream)]
        ids = [i for _, i, _ in have]
        assert len(ids) == len(set(ids)), f"seed {seed}: duplicates in {stream}"
        assert have == want[stream], f"seed {seed}: {stream} differs from an uninterrupted run (floors {floors})"
