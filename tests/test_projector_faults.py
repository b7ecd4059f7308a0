"""The projector through failures at every point of its cycle writes what a refold from sequence 1 writes.

A real server fails an acknowledgement or a read when it dies (the chaos test,
tests/test_nats_cluster.py, kills one at random moments), but not at a chosen
point of the projector's cycle. So here, and only here, the failures are
injected: `Writer.flush` raises after the real writes were acknowledged (the
worst case: stored, but the projector believes they were not), and the history
bucket's `get` of a job that comes back after being forgotten raises a nats
timeout. The supervisor's backoff is shortened so that dozens of failures run
in seconds. After each run the live buckets must equal a refold that keeps
every job in memory (`verify`): no history lost, deleted or cut short.
"""

from __future__ import annotations

import itertools
import random

import nats.errors
import pytest
from nats.js.kv import KeyValue

from tests.fixtures_nats import FROZEN_EARLY, publish_file
from tests.test_bus_history_retention import comes_back
from vcbus import retries
from vcbus.bus import projector as projector_module
from vcbus.bus import subjects as s
from vcbus.bus.connecting import open_bus
from vcbus.bus.decider import Decider
from vcbus.bus.errors import BusError
from vcbus.bus.projector import Projector, verify

pytestmark = pytest.mark.nats


@pytest.fixture
def quick_backoff(monkeypatch):
    monkeypatch.setattr("vcbus.retries.SESSION_UNTIL_IDLE", retries.Policy(0.01, 0.01, attempts=5))
    monkeypatch.setattr("vcbus.retries.SESSION", retries.Policy(0.01, 0.01))


async def decided(bus_settings, log) -> None:
    await publish_file(bus_settings, log)
    async with open_bus(bus_settings) as bus:
        await Decider(bus, clock=lambda: FROZEN_EARLY).run(until_idle=True)


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_acknowledgements_lost_at_every_point_of_the_cycle(
    bus_settings, many_jobs_log, monkeypatch, quick_backoff, seed
):
    await decided(bus_settings, many_jobs_log)
    real_flush, calls, injected, rng = projector_module.Writer.flush, itertools.count(1), [0], random.Random(seed)

    async def flush(self):
        await real_flush(self)
        n = next(calls)
        # the views' write or the position's, at random; never within two calls of the last failure, so that
        # the next session's rewrite gets through and the projector makes progress (it gives up otherwise)
        if n > injected[-1] + 2 and rng.random() < 0.5:  # the writes went through; the projector hears of a failure
            injected.append(n)
            raise BusError(f"injected: acknowledgement {n} lost")

    monkeypatch.setattr(projector_module.Writer, "flush", flush)
    async with open_bus(bus_settings) as bus:
        projector = Projector(bus, batch=32, write_every=0)  # a write after every batch: failures at each
        await projector.run(until_idle=True)
        monkeypatch.setattr(projector_module.Writer, "flush", real_flush)
        assert len(injected) > 20 and projector.views.deleted_jobs.evicted  # failures all along; jobs forgotten
        assert await verify(bus) == []


async def test_reading_a_returning_jobs_stored_history_fails(bus_settings, tmp_path, monkeypatch, quick_backoff):
    job, parts = comes_back()
    log = tmp_path / "comes-back.jsonl"
    log.write_bytes(b"".join(line + b"\n" for part in parts for line in part))
    await decided(bus_settings, log)
    real_get, injected = KeyValue.get, []

    async def get(self, key, *args, **kwargs):
        if self._name == s.HISTORY_BUCKET and key != s.POSITION_KEY and key not in injected:
            injected.append(key)  # the first read of each job's stored entry times out
            raise nats.errors.TimeoutError
        return await real_get(self, key, *args, **kwargs)

    monkeypatch.setattr(KeyValue, "get", get)
    async with open_bus(bus_settings) as bus:
        projector = Projector(bus, batch=1, write_every=0)  # the deletion written and forgotten before the job is back
        await projector.run(until_idle=True)
        monkeypatch.setattr(KeyValue, "get", real_get)
        assert injected == [s.kv_key(job)] and job in projector.views.deleted_jobs.bases
        assert await verify(bus) == []
