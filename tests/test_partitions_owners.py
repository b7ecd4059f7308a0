"""CronJobs and JobFlows with 2 partitions on a real nats-server: the queue role runs the cronjob and
jobflow controllers over every partition (a CronJob's runs and a flow's vcjobs each have a name of
their own, so a partition of their own), appends the CronJob's TIMER records, and stores the outputs
a 1-partition decider stores, byte for byte but for their ids (docs/operations.md "Partitions")."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from statemachines.hosted import split_owner_key
from tests.fixtures_nats import publish_file, stream_messages, wipe
from tests.test_engine_cronjobs import at, cronjob_bytes, vcjob_bytes
from tests.test_jobflow_controller import jobflow, template
from tests.test_jobflow_controller import vcjob as flow_vcjob
from vcbus.bus import subjects as s
from vcbus.bus.connecting import open_bus
from vcbus.bus.decider import Decider
from vcbus.bus.queueing import QueueDecider

RUN = "tick-29453760"  # the CronJob's run at 00:00:05 (Volcano names it by the minute)


def first_part() -> list[bytes]:
    """A CronJob every 5 s; a JobFlow a -> b with its JobTemplates."""
    return [cronjob_bytes(seconds=1), template("a", seconds=1), template("b", seconds=1),
            jobflow([{"name": "a"}, {"name": "b", "dependsOn": {"targets": ["a"]}}], seconds=1)]


def second_part() -> list[bytes]:
    """What the cluster sends back: the run's vcjob, which completes; the flow's first, which completes, and
    its second, which runs."""
    return [vcjob_bytes(RUN, seconds=7), flow_vcjob("a", seconds=7, rv="20", rtype="ADDED", phase="Pending"),
            vcjob_bytes(RUN, seconds=8, rv="11", phase="Completed", rtype="MODIFIED"),
            flow_vcjob("a", seconds=8, rv="21", phase="Completed"),
            flow_vcjob("b", seconds=9, rv="30", rtype="ADDED", phase="Pending"),
            flow_vcjob("b", seconds=10, rv="31", phase="Running")]


def owners(messages: list) -> list[tuple[str, bytes]]:  # noqa: ANN001
    return [(subject, body) for _, subject, _, body in messages if split_owner_key(s.job_of_subject(subject))]


async def decide(settings, *, clock: str, partitions: int) -> None:  # noqa: ANN001
    async with open_bus(settings) as bus:
        if partitions == 1:
            await Decider(bus, clock=lambda: clock).run(until_idle=True)
            return
        await asyncio.gather(*(Decider(bus, clock=lambda: clock, partition=k).run(until_idle=True)
                               for k in range(partitions)))
        await QueueDecider(bus, clock=lambda: clock).run(until_idle=True)


async def play(settings, tmp_path, partitions: int) -> dict[str, list]:  # noqa: ANN001
    await wipe(settings.nats_url)
    settings = dataclasses.replace(settings, partitions=partitions)
    for n, (part, clock) in enumerate(((first_part(), at(6)), (second_part(), at(11)))):
        path = tmp_path / f"part-{partitions}-{n}.jsonl"
        path.write_bytes(b"\n".join(part) + b"\n")
        await publish_file(settings, path)
        await decide(settings, clock=clock, partitions=partitions)
    return {st: await stream_messages(settings, st) for st in (s.K8S_STREAM, s.JOBS_STREAM, s.CMDS_STREAM)}


@pytest.mark.nats
async def test_cronjobs_and_jobflows_with_two_partitions_decide_as_one_partition(bus_settings, tmp_path):
    one = await play(bus_settings, tmp_path, 1)
    two = await play(bus_settings, tmp_path, 2)
    vcjobs = {subj.split(".")[-1] for _, subj, _, _ in two[s.K8S_STREAM] if subj.startswith("vcbus.k8s.job.")}
    assert vcjobs == {"0", "1"}  # the run and flow-a in partition 0, flow-b in 1 (NATS's hash of the names)
    timers = [subj for _, subj, _, _ in two[s.K8S_STREAM] if subj.startswith("vcbus.k8s.timer.")]
    # the run at 5 s: the log is quiet past it, so the role appends its TIMER record (shared by every partition);
    # the one at 10 s fires on flow-b's record at 10 s, as it does in one partition's decider
    assert timers == ["vcbus.k8s.timer.default.cronjob:tick"]
    for stream in (s.JOBS_STREAM, s.CMDS_STREAM):
        want = owners(one[stream])
        assert want and owners(two[stream]) == want, stream
    cmds = [b for _, b in owners(one[s.CMDS_STREAM])]
    assert any(b'"cmd.cronjob.job.create.v1"' in b for b in cmds)
    assert sum(b'"cmd.jobflow.job.create.v1"' in b for b in cmds) == 2  # a, then b once a Completed
    assert any(b'"lastSuccessfulTime"' in b for b in cmds)  # the run seen Completed by the role
    ids = [h["Nats-Msg-Id"] for _, subj, h, _ in two[s.CMDS_STREAM] if split_owner_key(s.job_of_subject(subj))]
    assert ids and all(":q" in i for i in ids)
