"""A bus with 2 partitions made by the layout before 4 December 2026, whose queue role ran only the queue
controller (no role ran the cronjob or jobflow controller), upgraded: on a real nats-server, the role
finds its consumer of that layout, starts both controllers there as Volcano's controllers starting would
(a start TIMER record each, a log line), and a restart decides nothing twice (vcbus.bus.starting)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging

import pytest

from statemachines.hosted import split_owner_key
from tests.builders import queue, record
from tests.fixtures_nats import expected_outputs, publish_file, stream_messages
from tests.test_engine_cronjobs import at
from tests.test_partitions_owners import first_part, second_part
from vcbus.bus import subjects as s
from vcbus.bus.connecting import open_bus
from vcbus.bus.consumers import create_at
from vcbus.bus.decider import Decider
from vcbus.bus.queueing import QueueDecider, QueueRole, role_engine
from vcbus.bus.starting import hold

OLD_FILTERS = [f"{s.K8S_PREFIX}.{kind}.>" for kind in ("podgroup", "queue", "command", s.TIMER_KIND)]


@dataclasses.dataclass(frozen=True)
class OldQueueRole(QueueRole):
    """The queue role's consumer as the layout before 4 December 2026 made it."""

    @property
    def consumer_filters(self) -> list[str]:
        return OLD_FILTERS


def owners(stored: list) -> list[bytes]:  # noqa: ANN001
    """The bodies of the CronJob's and JobFlow's outputs (the role's ids differ from a fold's: `:q`)."""
    return [body for _, subj, _, body in stored if split_owner_key(s.job_of_subject(subj))]


async def as_folded(settings, *, held: bool) -> dict[str, list[bytes]]:  # noqa: ANN001
    """What the role's engine decides folding the whole log from sequence 1, its controllers held until
    the start records (as the role's rebuild holds them) or not."""
    engine = role_engine()
    if held:
        hold(engine, {"cronjob": at(31), "jobflow": at(31)})
    k8s = await stream_messages(settings, s.K8S_STREAM)
    want = expected_outputs([(seq, body) for seq, _, _, body in k8s], engine)
    return {stream: [body for subj, _, body in want[stream] if split_owner_key(s.job_of_subject(subj))]
            for stream in (s.JOBS_STREAM, s.CMDS_STREAM)}


def types(messages: list, kind: str) -> list[dict]:  # noqa: ANN001
    out = []
    for _, _, _, body in messages:
        doc = json.loads(body)
        if doc.get("type") == kind:
            out.append(doc)
    return out


@pytest.mark.nats
async def test_a_bus_of_the_older_layout_starts_its_cronjob_and_jobflow_controllers_once(bus_settings, tmp_path, caplog):
    settings = dataclasses.replace(bus_settings, partitions=2)
    old = queue("default")
    later = {**old, "metadata": {**old["metadata"], "resourceVersion": "2"}}
    path = tmp_path / "before.jsonl"  # a CronJob every 5 s from 00:00:00, a JobFlow a -> b; the log until 00:00:30
    path.write_bytes(b"\n".join([*first_part(), record("ADDED", old, at(2)), record("MODIFIED", later, at(30))]) + b"\n")
    await publish_file(settings, path)
    clock = at(31)
    async with open_bus(settings) as bus:
        # the partitions' deciders are as they were (no cronjob or jobflow controller with N > 1); the old
        # queue role had decided every record
        await asyncio.gather(*(Decider(bus, clock=lambda: clock, partition=k).run(until_idle=True) for k in (0, 1)))
        last = int((await bus.js.stream_info(s.K8S_STREAM)).state.last_seq)
        await create_at(bus.nc, OldQueueRole(), settings, last, max_ack_pending=1024)
        with caplog.at_level(logging.WARNING, logger="vcbus.decider"):
            await QueueDecider(bus, clock=lambda: clock).run(until_idle=True)
    assert any("layout before 4 December 2026" in r.getMessage() and f"decided up to seq {last}" in r.getMessage()
               for r in caplog.records), [r.getMessage() for r in caplog.records]
    k8s = await stream_messages(settings, s.K8S_STREAM)
    starts = [(seq, subj, h["Nats-Msg-Id"]) for seq, subj, h, _ in k8s if seq > last]
    assert starts == [(last + 1, "vcbus.k8s.timer._.cronjob:start", "timer:start:cronjob"),
                      (last + 2, "vcbus.k8s.timer._.jobflow:start", "timer:start:jobflow")]
    cmds = await stream_messages(settings, s.CMDS_STREAM)
    # Volcano's controllers, started at 00:00:31: the CronJob's most recent missed run (00:00:30) created,
    # once (its runs of 00:00:05 ... 00:00:25 are missed, none was ever made); the flow's first vcjob
    [run] = types(cmds, "cmd.cronjob.job.create.v1")
    assert (run["name"], run["annotations"]["volcano.sh/cronjob-scheduled-timestamp"]) == (
        "tick-29453760", "2026-01-01T00:00:30Z")
    assert [c["name"] for c in types(cmds, "cmd.jobflow.job.create.v1")] == ["flow-a"]
    assert all(c["seq"] > last for c in types(cmds, "cmd.cronjob.job.create.v1") + types(cmds, "cmd.jobflow.job.create.v1"))

    # the role's outputs are a fold of the log with the controllers held until the start records; folded
    # from sequence 1 as if they had always run, the runs of 00:00:05 ... would be decided at records
    # that were decided long ago, so a rebuild that did not hold them would count them as made
    folded = await as_folded(settings, held=True)
    assert owners(cmds) == folded[s.CMDS_STREAM]
    assert owners(await stream_messages(settings, s.JOBS_STREAM)) == folded[s.JOBS_STREAM]
    unheld = types([(0, "", {}, b) for b in (await as_folded(settings, held=False))[s.CMDS_STREAM]],
                   "cmd.cronjob.job.create.v1")
    assert unheld and unheld[0]["seq"] <= last

    # restarts, from the snapshot of the clean stop, then refolded from sequence 1 (the controllers held
    # until the same start record): nothing decided again, no start appended again
    for every, restored in ((settings.snapshot_every, True), (0, False)):
        async with open_bus(dataclasses.replace(settings, snapshot_every=every)) as bus:
            role = QueueDecider(bus, clock=lambda: at(32))
            await role.run(until_idle=True)
        assert (role.stats.restored > 0, role.stats.rebuilt > 0) == (restored, not restored), role.stats
        assert await stream_messages(settings, s.CMDS_STREAM) == cmds
        assert [seq for seq, *_ in await stream_messages(settings, s.K8S_STREAM)] == [seq for seq, *_ in k8s]

    # the cluster answers (the run and flow-a complete, flow-b is made and runs): the role, refolded from
    # sequence 1 again, decides as the held fold
    path = tmp_path / "after.jsonl"
    path.write_bytes(b"\n".join(second_part()) + b"\n")
    await publish_file(settings, path)
    async with open_bus(dataclasses.replace(settings, snapshot_every=0)) as bus:
        await asyncio.gather(*(Decider(bus, clock=lambda: at(40), partition=k).run(until_idle=True) for k in (0, 1)))
        await QueueDecider(bus, clock=lambda: at(40)).run(until_idle=True)
    cmds = await stream_messages(settings, s.CMDS_STREAM)
    assert [c["name"] for c in types(cmds, "cmd.jobflow.job.create.v1")] == ["flow-a", "flow-b"]
    assert owners(cmds) == (await as_folded(settings, held=True))[s.CMDS_STREAM]
