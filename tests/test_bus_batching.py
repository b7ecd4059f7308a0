"""Atomic batch publish on a real server: a batch is stored whole with one commit; a batch holding an id the
stream has already is stored message by message, in order, the repeat dropped; the decider uses batches."""

from __future__ import annotations

import pytest

from tests.fixtures_nats import decide_and_project, publish_file, stream_messages
from vcbus.bus import subjects as s
from vcbus.bus.batching import BatchWriter, Stored
from vcbus.bus.connecting import open_bus
from vcbus.bus.publisher import Prepared

pytestmark = pytest.mark.nats


def message(i: int) -> Prepared:
    return Prepared(f"{s.JOBS_PREFIX}.test.batch.probe.v1", f'{{"i": {i}}}'.encode(), {"Nats-Msg-Id": f"probe:{i}"})


async def send(bus, msgs: list[Prepared]) -> Stored:  # noqa: ANN001
    writer = BatchWriter(bus.nc, min_atomic=2)  # atomic even for these few messages
    try:
        total = Stored(0, 0)
        for sent in await writer.send(msgs):
            res = await sent.wait(10)
            total = Stored(total.stored + res.stored, total.duplicates + res.duplicates)
        return total
    finally:
        await writer.close()


async def test_a_batch_is_stored_whole_with_one_commit(bus_settings):
    async with open_bus(bus_settings) as bus:
        assert await send(bus, [message(i) for i in range(10)]) == Stored(10, 0)
    stored = await stream_messages(bus_settings, s.JOBS_STREAM)
    assert [h["Nats-Msg-Id"] for _, _, h, _ in stored] == [f"probe:{i}" for i in range(10)]
    assert len({h["Nats-Batch-Id"] for _, _, h, _ in stored}) == 1  # one atomic batch
    assert [h.get("Nats-Batch-Commit") for _, _, h, _ in stored][-1] == "1"


async def test_a_batch_holding_a_stored_id_goes_message_by_message_in_order(bus_settings):
    async with open_bus(bus_settings) as bus:
        assert await send(bus, [message(1)]) == Stored(1, 0)
        # the server refuses the whole batch (duplicate id inside); the writer then stores it one by one
        assert await send(bus, [message(i) for i in range(4)]) == Stored(3, 1)
    stored = await stream_messages(bus_settings, s.JOBS_STREAM)
    assert [h["Nats-Msg-Id"] for _, _, h, _ in stored] == ["probe:1", "probe:0", "probe:2", "probe:3"]


async def test_the_decider_stores_its_outputs_in_atomic_batches(bus_settings, many_jobs_log):
    await publish_file(bus_settings, many_jobs_log)
    decider, _ = await decide_and_project(bus_settings)
    for stream in (s.JOBS_STREAM, s.CMDS_STREAM):
        stored = await stream_messages(bus_settings, stream)
        commits = sum(1 for _, _, h, _ in stored if h.get("Nats-Batch-Commit") == "1")
        assert commits > 0 and commits * 5 < len(stored), (stream, commits, len(stored))
    assert decider.stats.duplicates == 0
