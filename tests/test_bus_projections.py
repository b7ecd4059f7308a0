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
