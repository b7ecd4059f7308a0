"""A deleted job leaves nothing behind in the KV buckets for good: its key is purged, the purge marker expires.

The projector deletes a key with a purge marker carrying `Nats-TTL`
(`vcbus.bus.projector.Writer`, the settings' `kv_marker_ttl`): a watcher of
the bucket sees the deletion (a PURGE operation, as nats-py's and nats.go's
`KeyValue.purge` write it), and nats-server removes the marker once its TTL is
up, so the bucket's stream holds the live keys only. Before, each deleted job
left a delete marker in `KV_vcbus_status` for ever (19,801 after the one-hour
soak of docs/operations.md "Memory over an hour").
"""

from __future__ import annotations

import asyncio
import dataclasses
import time

import pytest
from nats.js import api

from tests.fixtures_nats import decide_and_project, publish_file
from vcbus.bus import subjects as s
from vcbus.bus.connecting import open_bus
from vcbus.bus.projector import live_buckets, verify

pytestmark = pytest.mark.nats

DEADLINE = 120.0  # seconds for the server to expire 1-second markers on a loaded machine


async def stream_messages(bus, bucket: str) -> int:
    return int((await bus.js.stream_info(f"KV_{bucket}")).state.messages or 0)


async def wait_until(what: str, check, deadline: float = DEADLINE) -> None:
    end = time.monotonic() + deadline
    while not await check():
        assert time.monotonic() < end, f"not within {deadline:g} s: {what}"
        await asyncio.sleep(0.2)  # polling the server's state: the condition above is what is waited for


async def test_a_deleted_jobs_status_key_is_purged_watchers_see_it_and_the_marker_expires(bus_settings, many_jobs_log):
    settings = dataclasses.replace(bus_settings, kv_marker_ttl=1.0)
    await publish_file(settings, many_jobs_log)
    async with open_bus(settings) as bus:
        kv = await bus.js.key_value(s.STATUS_BUCKET)
        watcher = await kv.watchall()
        seen: dict[str, list[str | None]] = {}

        async def watch() -> None:
            async for entry in watcher:
                if entry is not None:
                    seen.setdefault(entry.key, []).append(entry.operation)

        watching = asyncio.create_task(watch())
        try:
            # a write after every batch: each job's status is written before its deletion is (folded
            # in one burst, a job created and deleted between two writes would only be purged)
            _, projector = await decide_and_project(settings, write_every=0)
            jobs = {s.kv_key(j) for j in projector.views.deleted_jobs.deleted}
            assert len(jobs) == 30  # every job of the log is deleted

            async def all_seen() -> bool:
                return all(seen.get(key, [None])[-1] == "PURGE" for key in jobs)

            await wait_until("the watcher seeing every deleted job's key purged", all_seen)
            assert all(None in seen[key] for key in jobs)  # each had a status before its deletion
        finally:
            watching.cancel()
            await watcher.stop()

        async def only_position() -> bool:
            return await stream_messages(bus, s.STATUS_BUCKET) == 1

        await wait_until("KV_vcbus_status holding only its _position", only_position)
        assert set((await live_buckets(bus))[s.STATUS_BUCKET]) == {s.POSITION_KEY}
        assert await verify(bus) == []


async def test_the_history_keys_dropped_by_the_retention_leave_no_marker(bus_settings, many_jobs_log):
    settings = dataclasses.replace(bus_settings, kv_marker_ttl=1.0)
    await publish_file(settings, many_jobs_log)
    async with open_bus(settings) as bus:
        from tests.fixtures_nats import FROZEN_EARLY
        from vcbus.bus.decider import Decider
        from vcbus.bus.projector import Projector

        await Decider(bus, clock=lambda: FROZEN_EARLY).run(until_idle=True)
        projector = Projector(bus, history_retention=60.0)
        await projector.run(until_idle=True)
        kept = set((await live_buckets(bus))[s.HISTORY_BUCKET])
        assert 1 < len(kept) < 31  # some histories dropped by the retention, some kept (and _position)

        async def only_kept() -> bool:
            return await stream_messages(bus, s.HISTORY_BUCKET) == len(kept)

        await wait_until("KV_vcbus_history holding only its live keys", only_kept)
        assert await verify(bus, history_retention=60.0) == []


async def test_a_bucket_made_without_message_ttls_is_given_them(bus_settings):
    async with open_bus(bus_settings) as bus:
        await bus.js.delete_stream(f"KV_{s.STATUS_BUCKET}")
        await bus.js.add_stream(api.StreamConfig(  # as nats-py before 2.11's TTLs made it
            name=f"KV_{s.STATUS_BUCKET}", subjects=[f"$KV.{s.STATUS_BUCKET}.>"], max_msgs_per_subject=1,
            allow_rollup_hdrs=True, deny_delete=True, discard=api.DiscardPolicy.NEW, storage=api.StorageType.FILE))
        assert not (await bus.js.stream_info(f"KV_{s.STATUS_BUCKET}")).config.allow_msg_ttl
    async with open_bus(bus_settings) as bus:
        assert (await bus.js.stream_info(f"KV_{s.STATUS_BUCKET}")).config.allow_msg_ttl


def test_the_marker_ttl_comes_from_the_environment(monkeypatch):
    from vcbus.errors import UserError
    from vcbus.settings import from_environment

    assert from_environment().kv_marker_ttl == 86400.0
    monkeypatch.setenv("VCBUS_KV_MARKER_TTL", "10m")
    assert from_environment().kv_marker_ttl == 600.0
    monkeypatch.setenv("VCBUS_KV_MARKER_TTL", "soon")
    with pytest.raises(UserError, match="VCBUS_KV_MARKER_TTL 'soon'"):
        from_environment()
