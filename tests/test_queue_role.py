"""The queue controller without the job controller: `Engine(job_controller=False)` decides what the
whole engine's queue controller decides, and with 2 partitions on a real nats-server the queue role
stores the queue decisions a 1-partition decider stores (docs/operations.md "Partitions")."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import pathlib

import msgspec
import pytest

from statemachines import outputs as o
from statemachines.engine import Engine
from statemachines.model.objects import Command, Job, PodGroup, Queue
from statemachines.model.records import Observed, decode
from statemachines.queues.elsewhere import QueuesElsewhere
from tests.builders import record
from tests.fixtures_nats import FROZEN_EARLY, publish_file, stream_messages, vcbus_cli, wipe
from tests.test_sm_queues import pg_obj, queue_command, queue_obj
from vcbus.bus import statesnap
from vcbus.bus import subjects as s
from vcbus.bus.connecting import open_bus
from vcbus.bus.decider import Decider
from vcbus.bus.ownership import PartitionOwned
from vcbus.bus.queueing import CONSUMER, QueueDecider, role_engine


def queue_story() -> list[bytes]:
    """A second queue with PodGroups of several jobs (so of both partitions), closed by a Command while
    they run, then emptied: counts by phase, Closing, Closed, a reopen, events."""
    def at(second: int) -> str:
        return f"2026-11-30T23:00:{second:02d}Z"

    names = [f"story-{i}" for i in range(8)]
    recs = [record("ADDED", queue_obj("q2", state=None), at(0))]
    for i, name in enumerate(names):
        recs.append(record("ADDED", pg_obj(name, "q2", phase="Pending", namespace=f"ns-{i % 3}"), at(1 + i)))
    for i, name in enumerate(names[:5]):
        recs.append(record("MODIFIED", pg_obj(name, "q2", phase="Running", namespace=f"ns-{i % 3}"), at(10 + i)))
    recs.append(record("ADDED", queue_command("q2", "CloseQueue"), at(20)))
    for i, name in enumerate(names):
        recs.append(record("DELETED", pg_obj(name, "q2", phase="Running", namespace=f"ns-{i % 3}"), at(21 + i)))
    recs.append(record("ADDED", queue_command("q2", "OpenQueue", name="q2-open-2"), at(40)))
    return recs


def the_log(many_jobs_log: pathlib.Path) -> list[bytes]:
    lines = [line.strip() for line in open(many_jobs_log, "rb") if line.strip()]
    return lines + queue_story()


def as_observed(lines: list[bytes]) -> list[bytes]:
    """The records as the bridge stores them: each with the time it was observed, in log order."""
    out = []
    for n, line in enumerate(lines):
        rec = msgspec.json.decode(line)
        rec["time"] = f"2026-12-01T{n // 3600:02d}:{n // 60 % 60:02d}:{n % 60:02d}Z"
        out.append(msgspec.json.encode(rec))
    return out


def queue_kinds(data: bytes) -> bool:
    return isinstance(decoded := decode(data), Observed) and isinstance(decoded.object, (PodGroup, Queue, Command))


def is_vcjob(data: bytes) -> bool:
    return isinstance(decoded := decode(data), Observed) and isinstance(decoded.object, Job)


@pytest.mark.parametrize("observed", [False, True], ids=["object-times", "bridge-times"])
def test_the_role_engine_decides_what_the_engines_queue_controller_decides(many_jobs_log, observed):
    """Given every record, exactly the engine's; given only the records the queue role reads, the same
    decisions, and the same bytes when the times grow with the log (bridge records)."""
    lines = the_log(many_jobs_log)
    if observed:
        lines = as_observed(lines)
    engine, fold, role = Engine(), role_engine(), role_engine()
    compared = 0
    for seq, data in enumerate(lines, 1):
        decoded = decode(data)
        raw = data if isinstance(decoded, Observed) and isinstance(decoded.object, Job) else None
        want = [out for out in engine.apply(seq, decoded, raw=raw) if out.job.startswith("_/")]
        assert [o.encoder.encode(x) for x in fold.apply(seq, decode(data))] == [o.encoder.encode(x) for x in want], seq
        if queue_kinds(data):
            have = role.apply(seq, decode(data))
            if observed:
                assert [o.encoder.encode(x) for x in have] == [o.encoder.encode(x) for x in want], seq
            else:
                assert [msgspec.structs.replace(x, time="") for x in have] == [
                    msgspec.structs.replace(x, time="") for x in want], seq
        else:
            assert not want
        compared += len(want)
    assert compared > 8  # the queues' state writes, their QueueStateChanged and Events (no count writes)


def test_an_engine_without_the_queue_controller_decides_the_rest_as_the_engine_does(many_jobs_log):
    """`Engine(queue_controller=False)` (the partitions' deciders with N > 1): no queue-scoped output
    and no queue state; every other output the engine's, at the same index of the record's outputs."""
    lines = as_observed(the_log(many_jobs_log))
    full, off = Engine(), Engine(queue_controller=False)
    dropped = kept = 0
    for seq, data in enumerate(lines, 1):
        decoded = decode(data)
        raw = data if isinstance(decoded, Observed) and isinstance(decoded.object, Job) else None
        want = [(i, o.encoder.encode(x)) for i, x in enumerate(full.apply(seq, decoded, raw=raw))]
        have = [(i, o.encoder.encode(x)) for i, x in enumerate(off.apply(seq, decode(data), raw=raw))]
        mine = [(i, b) for i, b in want if b'"job":"_/' not in b]
        assert have == mine, seq
        dropped += len(want) - len(mine)
        kept += len(mine)
    assert dropped > 8 and kept > 1000
    assert isinstance(off.queue_controller, QueuesElsewhere) and not off.queue_controller_on
    assert full.queue_controller.queues and full.queue_controller_on


def queue_outputs(messages: list) -> list[tuple[str, bytes]]:  # noqa: ANN001
    return [(subject, body) for _, subject, _, body in messages if s.job_of_subject(subject).startswith("_/")]


@pytest.mark.nats
async def test_two_partitions_and_the_queue_role_store_the_queue_decisions_of_one_partition(
    bus_settings, many_jobs_log, tmp_path
):
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"\n".join(as_observed(the_log(many_jobs_log))) + b"\n")  # as the bridge stores them

    # one partition: the decider stores the queue decisions itself
    await publish_file(bus_settings, path)
    async with open_bus(bus_settings) as bus:
        await Decider(bus, clock=lambda: FROZEN_EARLY).run(until_idle=True)
    one = {st: await stream_messages(bus_settings, st) for st in (s.JOBS_STREAM, s.CMDS_STREAM)}

    # two partitions: the deciders store none; the queue role stores them all
    await wipe(bus_settings.nats_url)
    settings = dataclasses.replace(bus_settings, partitions=2)
    await publish_file(settings, path)
    k8s = await stream_messages(settings, s.K8S_STREAM)
    pgs = {subj.split(".")[-1] for _, subj, _, _ in k8s if ".podgroup." in subj and "story-" in subj}
    assert pgs == {"0", "1"}  # the story's PodGroups are in both partitions
    async with open_bus(settings) as bus:
        deciders = [Decider(bus, clock=lambda: FROZEN_EARLY, partition=k) for k in (0, 1)]
        await asyncio.gather(*(d.run(until_idle=True) for d in deciders))
        mid = {st: await stream_messages(settings, st) for st in (s.JOBS_STREAM, s.CMDS_STREAM)}
        assert all(not queue_outputs(m) for m in mid.values())
        # and their engines never decided any: they run no queue controller
        assert all(isinstance(d.engine.queue_controller, QueuesElsewhere) for d in deciders)
        role = QueueDecider(bus, clock=lambda: FROZEN_EARLY)
        await role.run(until_idle=True)
        # the records of the kinds the role's controllers read: the queue controller's, and the vcjobs
        # (the cronjob and jobflow controllers list every vcjob)
        role_kinds = sum(1 for _, _, _, body in k8s if queue_kinds(body) or is_vcjob(body))
        assert role.stats.decided == role_kinds > 100
        assert role.partition.consumer == CONSUMER
    two = {st: await stream_messages(settings, st) for st in (s.JOBS_STREAM, s.CMDS_STREAM)}

    for stream in (s.JOBS_STREAM, s.CMDS_STREAM):
        want = queue_outputs(one[stream])
        assert queue_outputs(two[stream]) == want, stream
    cmds = [o.command_decoder.decode(b) for _, b in queue_outputs(one[s.CMDS_STREAM])]
    states = [c.state for c in cmds if isinstance(c, o.UpdateQueueStatus) and c.queue == "q2"]
    assert "Closing" in states and "Closed" in states and states[-1] == "Open"
    # the state alone, as Volcano's queue controller writes it: no PodGroup counts (statemachines/queues/)
    assert not [c for c in cmds if isinstance(c, o.UpdateQueueStatus) and c.counts is not None]
    ids = [h["Nats-Msg-Id"] for _, subj, h, _ in two[s.CMDS_STREAM] if s.job_of_subject(subj).startswith("_/")]
    assert ids and all(":q" in i for i in ids)


@pytest.mark.nats
async def test_a_second_queue_role_is_refused(bus_settings, seed_log):
    settings = dataclasses.replace(bus_settings, partitions=2)
    await publish_file(settings, seed_log)
    stop = asyncio.Event()
    async with open_bus(settings) as bus:
        owner = QueueDecider(bus, clock=lambda: FROZEN_EARLY)
        running = asyncio.create_task(owner.run(stop=stop))
        try:
            await asyncio.wait_for(owner.ready.wait(), 30)
            async with open_bus(settings) as other:
                with pytest.raises(PartitionOwned, match="owned by a running decider"):
                    await QueueDecider(other, clock=lambda: FROZEN_EARLY).run(until_idle=True)
        finally:
            stop.set()
            await running


@pytest.mark.nats
async def test_vcbus_up_runs_the_queue_role_with_partition_0s_decider(bus_settings, many_jobs_log, tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"\n".join(as_observed(the_log(many_jobs_log))) + b"\n")
    settings = dataclasses.replace(bus_settings, partitions=2)
    await publish_file(settings, path)
    url = settings.nats_url
    only_1 = await asyncio.to_thread(vcbus_cli, "up", "--nats", url, "--service", "decider", "--partition", "1", "--once")
    assert only_1.returncode == 0, only_1.stderr
    cmds = await stream_messages(settings, s.CMDS_STREAM)
    assert cmds and not queue_outputs(cmds)  # partition 1's process runs no queue role
    res = await asyncio.to_thread(vcbus_cli, "up", "--nats", url, "--service", "decider", "--partition", "0", "--once")
    assert res.returncode == 0, res.stderr
    assert b"decider (queues): decided" in res.stderr, res.stderr
    cmds = await stream_messages(settings, s.CMDS_STREAM)
    states = [o.command_decoder.decode(b).state for _, b in queue_outputs(cmds)
              if b'"cmd.queue.status.v1"' in b and b'"q2"' in b]
    assert "Closed" in states and states[-1] == "Open"


class ControllerOnDecider(Decider):
    """A partition's decider as it was before the queue controller could be left out: its engine runs it."""

    def _fresh_engine(self) -> Engine:
        e = self.engine
        return Engine(render_pod=e._render_pod, render_podgroup=e._render_podgroup, max_pods=e.max_pods)


@pytest.mark.nats
async def test_a_partition_snapshot_is_restored_only_into_an_engine_with_the_queue_controller_as_it_was(
    bus_settings, seed_log, caplog
):
    """With N > 1 a partition's snapshot holds an engine without the queue controller: one saved with it
    is ignored (and refolded), and the other way round; a matching one is restored, controller still off."""
    settings = dataclasses.replace(bus_settings, partitions=2)
    await publish_file(settings, seed_log)
    caplog.set_level("WARNING", logger="vcbus.statesnap")
    async with open_bus(settings) as bus:
        on = ControllerOnDecider(bus, clock=lambda: FROZEN_EARLY, partition=0)
        await on.run(until_idle=True)  # a clean stop saves a snapshot
        assert on.engine.queue_controller_on and on.stats.snapshots == 1 and on.stats.decided > 0

        off = Decider(bus, clock=lambda: FROZEN_EARLY, partition=0)
        await off.run(until_idle=True)
        assert off.stats.restored == 0 and off.stats.rebuilt > 0 and off.stats.snapshots == 1
        assert any("config" in r.getMessage() and "ignored" in r.getMessage() for r in caplog.records)
        caplog.clear()

        again = ControllerOnDecider(bus, clock=lambda: FROZEN_EARLY, partition=0)
        await again.run(until_idle=True)
        assert again.stats.restored == 0 and again.stats.rebuilt > 0
        assert any("config" in r.getMessage() and "ignored" in r.getMessage() for r in caplog.records)

        # `again` saved over it (same sequence): one more decider without the controller, then its snapshot
        await Decider(bus, clock=lambda: FROZEN_EARLY, partition=0).run(until_idle=True)
        last = Decider(bus, clock=lambda: FROZEN_EARLY, partition=0)
        await last.run(until_idle=True)
        assert last.stats.restored > 0 and last.stats.rebuilt == 0
        assert isinstance(last.engine.queue_controller, QueuesElsewhere)


CRASH_PG = "crash-pg"


def with_a_crashing_podgroup(lines: list[bytes]) -> tuple[list[bytes], list[bytes]]:
    """The log as the bridge stores it, with a PodGroup of queue q2 (of a job, so of one partition)
    after the story's first PodGroups, stamped a day after every other record; cut in two halves
    before the story's CloseQueue."""
    lines = as_observed(lines)
    at = next(n for n, line in enumerate(lines) if b'"story-7"' in line) + 1
    crash = record("ADDED", pg_obj(CRASH_PG, "q2", phase="Running", namespace="ns-1"), "2026-12-02T00:00:00Z")
    lines = lines[:at] + [crash] + lines[at:]
    cut = next(n for n, line in enumerate(lines) if b'"CloseQueue"' in line)
    return lines[:cut], lines[cut:]


@pytest.fixture
def crashing_podgroups(monkeypatch):  # noqa: ANN201
    """Fault injected (no real PodGroup breaks the job controller): `Engine.apply` fails on the crash-pg
    PodGroup after folding it, so a decider sets the record aside after decoding it. The queue role's
    engine (no job controller) is not touched: folding the record there would change q2's counts and clock."""
    original = Engine.apply

    def apply(self, seq, record, *, raw=None):  # noqa: ANN001, ANN202
        outs = original(self, seq, record, raw=raw)
        obj = getattr(record, "object", None)
        if self.job_controller_on and isinstance(obj, PodGroup) and obj.metadata.name == CRASH_PG:
            raise KeyError("injected fault: the job controller broke on crash-pg")
        return outs

    monkeypatch.setattr(Engine, "apply", apply)


@pytest.mark.nats
async def test_a_record_a_partition_sets_aside_after_decoding_never_reaches_the_queue_role(
    bus_settings, many_jobs_log, tmp_path, crashing_podgroups
):
    """One partition sets the crash-pg record aside whole (rolled back: no controller folds it, its time
    moves no clock). With 2 partitions its partition sets it aside, and the queue role, running beside the
    deciders, skips it too, live and when it refolds after a restart: the queue decisions are one
    partition's, byte for byte, and the record has one poison event."""
    first, second = with_a_crashing_podgroup(the_log(many_jobs_log))
    # the record matters: folded by the queue controller, it changes the queue decisions
    folded, skipped = role_engine(), role_engine()
    a, b = [], []
    for seq, data in enumerate(first + second, 1):
        a += [o.encoder.encode(x) for x in folded.apply(seq, decode(data))]
        if CRASH_PG.encode() not in data:
            b += [o.encoder.encode(x) for x in skipped.apply(seq, decode(data))]
    assert a != b and folded.now > skipped.now

    paths = []
    for n, part in enumerate((first, second)):
        paths.append(tmp_path / f"part-{n}.jsonl")
        paths[-1].write_bytes(b"\n".join(part) + b"\n")

    # one partition
    for path in paths:
        await publish_file(bus_settings, path)
    async with open_bus(bus_settings) as bus:
        one_decider = Decider(bus, clock=lambda: FROZEN_EARLY)
        await one_decider.run(until_idle=True)
    assert one_decider.stats.poison == 1 and one_decider.stats.rollbacks == 1
    one = {st: await stream_messages(bus_settings, st) for st in (s.JOBS_STREAM, s.CMDS_STREAM)}

    # two partitions and the queue role, all at once; restarted (a refold from sequence 1) in between
    await wipe(bus_settings.nats_url)
    settings = dataclasses.replace(bus_settings, partitions=2)
    roles = []
    for path in paths:
        await publish_file(settings, path)
        async with open_bus(settings) as bus:
            await statesnap.delete_all(bus.js)  # the next starts refold from sequence 1
            deciders = [Decider(bus, clock=lambda: FROZEN_EARLY, partition=k) for k in (0, 1)]
            roles.append(QueueDecider(bus, clock=lambda: FROZEN_EARLY))
            await asyncio.gather(*(d.run(until_idle=True) for d in [*deciders, roles[-1]]))
    assert roles[0].verdicts.requests > 0 and roles[1].stats.rebuilt > 0
    assert all(r.stats.poison == 0 for r in roles)
    two = {st: await stream_messages(settings, st) for st in (s.JOBS_STREAM, s.CMDS_STREAM)}

    for stream in (s.JOBS_STREAM, s.CMDS_STREAM):
        want = queue_outputs(one[stream])
        assert want and queue_outputs(two[stream]) == want, stream
    poison = [json.loads(body) for _, subj, _, body in two[s.JOBS_STREAM] if subj.endswith(".record.poison.v1")]
    assert [(e["component"], e["subject"].split(".")[2]) for e in poison] == [("decider", "podgroup")]


@pytest.mark.nats
async def test_the_queue_role_run_once_without_the_partitions_deciders_stops_with_a_warning(
    bus_settings, many_jobs_log, tmp_path, caplog
):
    """Until idle (`vcbus up --once`), the role does not fold a partition's record before that partition's
    decider has decided it; with no decider running for it, it stops there with a warning, deciding
    nothing of it (the records stay for the next run), instead of waiting forever."""
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"\n".join(as_observed(the_log(many_jobs_log))) + b"\n")
    settings = dataclasses.replace(bus_settings, partitions=2)
    await publish_file(settings, path)
    caplog.set_level("WARNING", logger="vcbus.decider")
    async with open_bus(settings) as bus:
        role = QueueDecider(bus, clock=lambda: FROZEN_EARLY)
        await role.run(until_idle=True)
        info = await bus.js.consumer_info(s.K8S_STREAM, CONSUMER)
    assert any("has no decider" in r.getMessage() for r in caplog.records)
    assert info.num_ack_pending + info.num_pending > 100  # left for the next run
    k8s = await stream_messages(settings, s.K8S_STREAM)
    first_own = next(seq for seq, subj, _, _ in k8s if subj.count(".") == 6 and subj.split(".")[2] in ("podgroup", "command"))
    assert role.applied < first_own
