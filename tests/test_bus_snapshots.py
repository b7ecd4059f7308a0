"""Snapshots of the decider's engine and the projector's views (vcbus.bus.statesnap) on a real server.

A restart from a snapshot must equal a full refold byte for byte: the decider's later outputs
(subjects, msg ids, bodies) equal one uninterrupted fold of the whole log, and the projector's
buckets equal a refold from sequence 1 (`verify`). A snapshot that is corrupt, truncated, of
another format, or hostile is ignored with a warning and the process refolds from the start.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import pathlib
import pickle

import msgspec
import pytest

from tests.fixtures_nats import expected_outputs, publish_file, stream_messages
from vcbus.bus import statesnap
from vcbus.bus import subjects as s
from vcbus.bus.connecting import open_bus
from vcbus.bus.decider import Decider
from vcbus.bus.projector import SNAPSHOT_OWNER, Projector, stored_position, verify

pytestmark = pytest.mark.nats

EARLY = "1970-01-01T00:00:00Z"  # a decider clock before every log: no TIMER records


class Crash(Exception):
    pass


def halves(log: pathlib.Path, tmp_path: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path]:
    lines = log.read_bytes().splitlines(keepends=True)
    cut = len(lines) // 2
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    first.write_bytes(b"".join(lines[:cut]))
    second.write_bytes(b"".join(lines[cut:]))
    return first, second


async def snapshot_names(bus, owner: str) -> list[tuple[int, str]]:  # noqa: ANN001
    return await statesnap.Store(bus.js, owner=owner, stream=s.K8S_STREAM, config="").names()


async def rewrite(bus, name: str, change) -> None:  # noqa: ANN001
    """Replace the stored object `name` by `change(its bytes)` (through the real object store)."""
    obs = await bus.js.object_store(statesnap.BUCKET)
    blob = (await obs.get(name)).data
    await obs.put(name, change(blob))


async def assert_outputs_equal_one_full_fold(settings) -> None:  # noqa: ANN001
    records = [(seq, body) for seq, _, _, body in await stream_messages(settings, s.K8S_STREAM)]
    want = expected_outputs(records)
    for stream in (s.JOBS_STREAM, s.CMDS_STREAM):
        have = await stream_messages(settings, stream)
        assert [(subj, h["Nats-Msg-Id"], body) for _, subj, h, body in have] == want[stream]


# ------------------------------------------------------------------ the decider


async def test_decider_restart_from_a_snapshot_equals_a_full_fold(bus_settings, many_jobs_log, tmp_path, caplog):
    settings = dataclasses.replace(bus_settings, snapshot_every=400)
    first, second = halves(many_jobs_log, tmp_path)
    await publish_file(settings, first)
    async with open_bus(settings) as bus:
        one = Decider(bus, clock=lambda: EARLY)
        stats = await one.run(until_idle=True)
        assert stats.snapshots >= 2 and stats.restored == 0
        names = await snapshot_names(bus, "vcbus-decider")
        assert len(names) == statesnap.KEEP and names[0][0] == one.applied  # the clean stop's
        # the newest is damaged: the older one (mid-way, before the ack floor) serves
        await rewrite(bus, names[0][1], lambda b: b[:-7])
        await publish_file(settings, second)
        caplog.set_level(logging.WARNING, logger="vcbus.statesnap")
        two = Decider(bus, clock=lambda: EARLY)
        stats2 = await two.run(until_idle=True)
    older = names[1][0]
    assert 0 < older < one.applied
    assert stats2.restored == older and stats2.rebuilt == one.applied - older  # folded only those after it
    assert stats2.decided > 0 and stats2.duplicates == 0
    assert any("ignored: truncated" in r.getMessage() for r in caplog.records)
    await assert_outputs_equal_one_full_fold(settings)


async def test_decider_stopped_right_after_a_snapshot_loses_and_repeats_nothing(bus_settings, many_jobs_log):
    """A snapshot covers only records whose outputs are stored: crash just after one, restart from it."""
    settings = dataclasses.replace(bus_settings, snapshot_every=300)
    await publish_file(settings, many_jobs_log)
    async with open_bus(settings) as bus:
        one = Decider(bus, clock=lambda: EARLY)
        save = one.rebuilder.snapshot

        async def save_then_crash(**kwargs: bool) -> None:
            await save(**kwargs)
            if one.stats.snapshots == 2:
                raise Crash  # an abrupt stop right after the second snapshot (fault injection)

        one.rebuilder.snapshot = save_then_crash  # type: ignore[method-assign]
        with pytest.raises(Crash):
            await one.run(until_idle=True)
        covered = one.applied
        two = Decider(bus, clock=lambda: EARLY)
        stats = await two.run(until_idle=True)
    assert stats.restored == covered and stats.rebuilt == 0
    assert stats.duplicates == 0  # nothing past the snapshot had been stored
    await assert_outputs_equal_one_full_fold(settings)


def flipped(blob: bytes) -> bytes:
    i = len(blob) - 20
    return blob[:i] + bytes([blob[i] ^ 0xFF]) + blob[i + 1 :]


def header_of(blob: bytes) -> tuple[dict, bytes]:
    end = blob.index(b"\n", len(statesnap.MAGIC))
    return msgspec.json.decode(blob[len(statesnap.MAGIC) : end]), blob[end + 1 :]


def with_header(blob: bytes, **changes) -> bytes:  # noqa: ANN003
    header, payload = header_of(blob)
    header.update(changes)
    return statesnap.MAGIC + msgspec.json.encode(header) + b"\n" + payload


class Evil:
    def __reduce__(self):  # noqa: ANN204
        import os

        return (os.system, ("touch /tmp/vcbus-snapshot-pwned",))


def hostile(blob: bytes) -> bytes:
    """A valid header and digest around a pickle that would run a command."""
    header, _ = header_of(blob)
    payload = pickle.dumps(Evil())
    header.update(size=len(payload), sha256=hashlib.sha256(payload).hexdigest())
    return statesnap.MAGIC + msgspec.json.encode(header) + b"\n" + payload


DAMAGE = {
    "flipped byte": (flipped, "SHA-256"),
    "truncated": (lambda b: b[: len(b) // 2], "truncated"),
    "old format": (lambda b: with_header(b, format=0), "format 0"),
    "old format header": (lambda b: statesnap.MAGIC + b'{"format": 0, "seq": 1}\n' + header_of(b)[1], "format 0"),
    "other code": (lambda b: with_header(b, code="0" * 16), "other code"),
    "not a snapshot": (lambda b: b"\x00garbage", "no magic"),
    "hostile pickle": (hostile, "posix.system"),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
async def test_decider_ignores_a_bad_snapshot_with_a_warning_and_refolds(bus_settings, seed_log, caplog, damage):
    change, reason = DAMAGE[damage]
    await publish_file(bus_settings, seed_log)
    async with open_bus(bus_settings) as bus:
        one = Decider(bus, clock=lambda: EARLY)
        await one.run(until_idle=True)
        ((seq, name),) = await snapshot_names(bus, "vcbus-decider")  # the clean stop's
        assert seq == one.applied
        await rewrite(bus, name, change)
        caplog.set_level(logging.WARNING, logger="vcbus.statesnap")
        two = Decider(bus, clock=lambda: EARLY)
        stats = await two.run(until_idle=True)
    assert stats.restored == 0 and stats.rebuilt == one.applied  # refolded from sequence 1
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(name in w and "ignored" in w and reason in w for w in warnings), warnings
    assert any("refolding from the start" in w for w in warnings)
    assert not pathlib.Path("/tmp/vcbus-snapshot-pwned").exists()
    assert two.engine.pending_timers() == one.engine.pending_timers()
    await assert_outputs_equal_one_full_fold(bus_settings)


async def test_decider_ignores_a_snapshot_of_another_configuration(bus_settings, seed_log, caplog):
    await publish_file(bus_settings, seed_log)
    async with open_bus(bus_settings) as bus:
        await Decider(bus, clock=lambda: EARLY).run(until_idle=True)
        other = dataclasses.replace(bus_settings, max_pods_per_job=5)
    async with open_bus(other) as bus:
        caplog.set_level(logging.WARNING, logger="vcbus.statesnap")
        stats = await Decider(bus, clock=lambda: EARLY).run(until_idle=True)
    assert stats.restored == 0 and stats.rebuilt > 0
    assert any("config" in r.getMessage() and "ignored" in r.getMessage() for r in caplog.records)


# ------------------------------------------------------------------ the projector


async def project(settings) -> Projector:  # noqa: ANN001
    async with open_bus(settings) as bus:
        await Decider(bus, clock=lambda: EARLY).run(until_idle=True)
        projector = Projector(bus)
        await projector.run(until_idle=True)
    return projector


async def test_projector_restart_from_a_snapshot_equals_a_full_refold(bus_settings, many_jobs_log, tmp_path):
    settings = dataclasses.replace(bus_settings, snapshot_every=500)
    first, second = halves(many_jobs_log, tmp_path)
    await publish_file(settings, first)
    one = await project(settings)
    assert one.restored == 0
    async with open_bus(settings) as bus:
        names = await snapshot_names(bus, SNAPSHOT_OWNER)
        assert names[0][0] == one.views.position == await stored_position(bus)
        obs = await bus.js.object_store(statesnap.BUCKET)
        await obs.delete(names[0][1])  # the older snapshot (mid-way) is then the newest
    await publish_file(settings, second)
    two = await project(settings)
    assert 0 < two.restored == names[1][0] < one.views.position < two.views.position
    async with open_bus(settings) as bus:
        assert await verify(bus) == []  # every key byte for byte as a refold from sequence 1
        three = Projector(bus)  # restarts from the clean stop's snapshot: folds nothing
        await three.run(until_idle=True)
        assert three.restored == two.views.position and await verify(bus) == []


@pytest.mark.parametrize("damage", ["old format", "flipped byte"])
async def test_projector_ignores_a_bad_snapshot_with_a_warning_and_refolds(bus_settings, seed_log, caplog, damage):
    change, reason = DAMAGE[damage]
    await publish_file(bus_settings, seed_log)
    one = await project(bus_settings)
    async with open_bus(bus_settings) as bus:
        ((seq, name),) = await snapshot_names(bus, SNAPSHOT_OWNER)
        await rewrite(bus, name, change)
        caplog.set_level(logging.WARNING, logger="vcbus.statesnap")
        two = Projector(bus)
        await two.run(until_idle=True)
        assert await verify(bus) == []
    assert seq == one.views.position and two.restored == 0
    assert any(name in r.getMessage() and reason in r.getMessage() for r in caplog.records)


async def test_snapshots_off_saves_none(bus_settings, seed_log):
    settings = dataclasses.replace(bus_settings, snapshot_every=0)
    await publish_file(settings, seed_log)
    one = await project(settings)
    async with open_bus(settings) as bus:
        assert await snapshot_names(bus, "vcbus-decider") == [] and await snapshot_names(bus, SNAPSHOT_OWNER) == []
    assert one.snapshots is None


async def test_a_poison_rollback_after_a_restore_refolds_from_the_snapshot(bus_settings, many_jobs_log, tmp_path,
                                                                          monkeypatch):
    """A record that breaks the engine mid-apply is rolled back by refolding from the snapshot, not sequence 1."""
    from tests.poison_logs import CRASH_JOB, crashing_engine, poison_lines

    first, second = halves(many_jobs_log, tmp_path)
    await publish_file(bus_settings, first)
    async with open_bus(bus_settings) as bus:
        one = Decider(bus, clock=lambda: EARLY)
        await one.run(until_idle=True)
        crash = tmp_path / "crash.jsonl"
        crash.write_bytes(poison_lines()["crash-me"] + b"\n")
        await publish_file(bus_settings, crash)
        await publish_file(bus_settings, second)
        with crashing_engine(monkeypatch):
            two = Decider(bus, clock=lambda: EARLY)
            fresh = two.rebuilder.fresh
            calls = []
            two.rebuilder.fresh = lambda: calls.append(1) or fresh()
            stats = await two.run(until_idle=True)
    assert stats.restored == one.applied and stats.rebuilt == 0
    assert stats.poison == 1 and stats.rollbacks == 1 and calls == []  # the rollback started at the snapshot
    assert not any(CRASH_JOB in job for job in two.engine.jobs)
    records = [(seq, body) for seq, _, _, body in await stream_messages(bus_settings, s.K8S_STREAM)
               if seq != one.applied + 1]  # the crash-me record is set aside: never folded
    want = expected_outputs(records)
    for stream in (s.JOBS_STREAM, s.CMDS_STREAM):
        have = [(subj, h["Nats-Msg-Id"], body) for _, subj, h, body in await stream_messages(bus_settings, stream)
                if not subj.endswith(".record.poison.v1")]
        assert have == want[stream]
