"""The projector's KV views: a rebuild from sequence 1 equals the live buckets byte for byte."""

from __future__ import annotations

import pytest

from tests.fixtures_nats import decide_and_project, publish_file, vcbus_cli
from vcbus.bus import subjects as s
from vcbus.bus.connecting import open_bus
from vcbus.bus.projector import Projector, live_buckets, rebuild, stored_position, verify
from vcbus.bus.streams import last_seq

pytestmark = pytest.mark.nats


async def test_a_rebuild_equals_the_live_buckets_byte_for_byte(bus_settings, many_jobs_log):
    await publish_file(bus_settings, many_jobs_log)
    await decide_and_project(bus_settings)
    async with open_bus(bus_settings) as bus:
        live = await live_buckets(bus)
        assert live[s.STATUS_BUCKET][s.POSITION_KEY] == str(await last_seq(bus.js, s.JOBS_STREAM)).encode()
        assert len(live[s.HISTORY_BUCKET]) == 31  # 30 jobs and the position
        assert await verify(bus) == []
        views = await rebuild(bus)
        rebuilt = await live_buckets(bus)
    assert views.position == await_position(live)
    assert rebuilt == live


def await_position(buckets: dict[str, dict[str, bytes]]) -> int:
    return int(buckets[s.STATUS_BUCKET][s.POSITION_KEY])


async def test_a_restarted_projector_resumes_after_its_stored_position(bus_settings, many_jobs_log, tmp_path):
    lines = many_jobs_log.read_bytes().splitlines(keepends=True)
    (tmp_path / "a.jsonl").write_bytes(b"".join(lines[:1500]))
    (tmp_path / "b.jsonl").write_bytes(b"".join(lines[1500:]))
    await publish_file(bus_settings, tmp_path / "a.jsonl")
    await decide_and_project(bus_settings)
    async with open_bus(bus_settings) as bus:
        before = await stored_position(bus)
    await publish_file(bus_settings, tmp_path / "b.jsonl")
    decider, projector = await decide_and_project(bus_settings)
    async with open_bus(bus_settings) as bus:
        after = await stored_position(bus)
        assert after == await last_seq(bus.js, s.JOBS_STREAM) > before
        assert projector.written == after - before  # only the new events were written
        assert await verify(bus) == []
        again = Projector(bus)
        await again.run(until_idle=True)
        assert again.written == 0


async def test_verify_finds_a_tampered_view_and_the_cli_rebuild_repairs_it(bus_settings, seed_log):
    await publish_file(bus_settings, seed_log)
    await decide_and_project(bus_settings)
    async with open_bus(bus_settings) as bus:
        kv = await bus.js.key_value(s.STATUS_BUCKET)
        await kv.put("default.resnet-dist-train", b'{"state":{"phase":"Running"}}')
    url = bus_settings.nats_url
    res = vcbus_cli("projections", "verify", "--nats", url)
    assert res.returncode == 1 and b"vcbus_status: key default.resnet-dist-train differs" in res.stderr
    res = vcbus_cli("projections", "rebuild", "--nats", url)
    assert res.returncode == 0, res.stderr.decode()
    assert b"rebuilt vcbus_status and vcbus_history: 1 jobs" in res.stderr
    res = vcbus_cli("projections", "verify", "--nats", url)
    assert res.returncode == 0, res.stderr.decode()


async def test_a_burst_is_folded_whole_before_writing_and_the_views_equal_a_rebuild(bus_settings, many_jobs_log):
    """While VCBUS_JOBS has more for it, the projector folds on and writes at most every `write_every`
    seconds, each touched key once; caught up, it writes at once. With batches of 20 over the whole log
    it writes far fewer times than it reads a batch, and the buckets still end equal to a rebuild, the
    position the stream's last. The write is counted by a spy around the real method."""
    from tests.fixtures_nats import FROZEN_EARLY
    from vcbus.bus.decider import Decider

    await publish_file(bus_settings, many_jobs_log)
    async with open_bus(bus_settings) as bus:
        await Decider(bus, clock=lambda: FROZEN_EARLY).run(until_idle=True)
        end = await last_seq(bus.js, s.JOBS_STREAM)
        projector = Projector(bus, batch=20, write_every=3600.0)
        writes = 0
        real = projector._write_dirty

        async def counted(writer):
            nonlocal writes
            writes += 1
            await real(writer)

        projector._write_dirty = counted
        await projector.run(until_idle=True)
        assert await stored_position(bus) == end
        assert await verify(bus) == []
    batches = -(-end // 20)
    assert batches > 50 and writes <= 3, (writes, batches)  # the burst written once (and any last batch)


def test_the_messages_still_pending_are_read_from_the_ack_subject():
    from nats.aio.msg import Msg

    from vcbus.bus.reading import pending_after

    def msg(reply: str) -> Msg:
        return Msg(_client=None, subject="x", reply=reply, data=b"")

    assert pending_after(msg("$JS.ACK.VCBUS_JOBS.c.1.17.17.1700000000000000000.42")) == 42
    assert pending_after(msg("$JS.ACK.dom.acc.VCBUS_JOBS.c.1.17.17.1700000000000000000.7.tok")) == 7
    assert pending_after(msg("$JS.ACK.VCBUS_JOBS.c.1.17.17.1700000000000000000.0")) == 0
    assert pending_after(msg("")) == 0
    assert pending_after(msg("$JS.ACK.s.c.1.x.y.z.notanumber")) == 0
