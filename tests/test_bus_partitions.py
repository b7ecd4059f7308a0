"""Partitions and ownership on a real server: one decider per partition, enforced; N partitions decide
what one does (job by job, and the queue role the queues); a second decider for an owned partition is
refused; shared records arriving while the deciders run are merged in stream order, across a restart."""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import json

import pytest

from tests.fixtures_nats import FROZEN_EARLY, expected_outputs, publish_file, stream_messages, vcbus_cli
from vcbus.bus import subjects as s
from vcbus.bus.connecting import open_bus
from vcbus.bus.decider import Decider
from vcbus.bus.ownership import GROUP, PartitionOwned
from vcbus.bus.pulling import Puller
from vcbus.bus.queueing import QueueDecider

pytestmark = pytest.mark.nats


def per_job(items: list[tuple[str, str, bytes]]) -> dict[str, list[tuple[str, bytes]]]:
    out: dict[str, list[tuple[str, bytes]]] = collections.defaultdict(list)
    for subject, msg_id, body in items:
        out[s.job_of_subject(subject)].append((msg_id, body))
    return out


def untimed(items: list[tuple[str, bytes]]) -> list[dict]:
    return [{k: v for k, v in json.loads(body).items() if k != "time"} for _, body in items]


async def test_two_partitions_decide_every_job_as_one_decider_does(bus_settings, many_jobs_log):
    settings = dataclasses.replace(bus_settings, partitions=2)
    await publish_file(settings, many_jobs_log)
    k8s = await stream_messages(settings, s.K8S_STREAM)
    # the server partitioned the job records (a 7th token); the queue record is shared (5 tokens)
    shape = collections.Counter(subject.split(".")[-1] if subject.count(".") == 6 else "shared" for _, subject, _, _ in k8s)
    assert shape["0"] > 100 and shape["1"] > 100 and shape["shared"] >= 1
    by_job = collections.defaultdict(set)
    for _, subject, headers, _ in k8s:
        if "Vcbus-Job" in headers:
            by_job[headers["Vcbus-Job"]].add(subject.split(".")[-1])
    assert by_job and all(len(p) == 1 for p in by_job.values())  # a job's records: one partition

    async with open_bus(settings) as bus:
        deciders = [Decider(bus, clock=lambda: FROZEN_EARLY, partition=k) for k in (0, 1)]
        role = QueueDecider(bus, clock=lambda: FROZEN_EARLY)  # the queues' decisions (vcbus.bus.queueing)
        await asyncio.gather(*(d.run(until_idle=True) for d in [*deciders, role]))
    assert all(d.stats.decided > 100 for d in deciders)
    assert sum(d.stats.decided for d in deciders) == len(k8s) + shape["shared"]  # shared: decided by both

    want = expected_outputs([(seq, body) for seq, _, _, body in k8s])
    for stream in (s.JOBS_STREAM, s.CMDS_STREAM):
        have = per_job([(subj, h["Nats-Msg-Id"], body) for _, subj, h, body in await stream_messages(settings, stream)])
        ref = per_job(want[stream])
        jobs = [j for j in ref if not j.startswith("_/")]
        assert jobs and all(have[j] == ref[j] for j in jobs), stream
        # queue-scoped outputs: the queue role's, under ids of its own (vcbus.bus.queueing); this log's
        # times are its objects' (they go back and forth), so the role's clock may differ: decisions equal.
        # (This log's queue is Open throughout, so it has none: the queue controller writes a queue's state
        # only when it changes; tests/test_queue_role.py closes and reopens queues across partitions.)
        queues = sorted(j for j in ref if j.startswith("_/"))
        assert sorted(j for j in have if j.startswith("_/")) == queues, stream
        assert all(untimed(have[j]) == untimed(ref[j]) for j in queues), stream


async def test_a_second_decider_for_an_owned_partition_is_refused(bus_settings, seed_log):
    await publish_file(bus_settings, seed_log)
    stop = asyncio.Event()
    async with open_bus(bus_settings) as bus:
        owner = Decider(bus, clock=lambda: FROZEN_EARLY)
        running = asyncio.create_task(owner.run(stop=stop))
        try:
            await asyncio.wait_for(owner.ready.wait(), 30)
            # in the same process, on another connection
            async with open_bus(bus_settings) as other:
                with pytest.raises(PartitionOwned, match="owned by a running decider"):
                    await Decider(other, clock=lambda: FROZEN_EARLY).run(until_idle=True)
            # as a user starts it: a clear one-line error, exit code 4
            res = await asyncio.to_thread(vcbus_cli, "up", "--nats", bus_settings.nats_url, "--service", "decider", "--once")
            err = res.stderr.decode()
            assert res.returncode == 4 and "partition 0 (of 1) is owned by a running decider" in err, err
            assert "Traceback" not in err

            # the server side: a client that skips the owner check is never served while the owner is pinned
            async with open_bus(bus_settings) as rogue:
                puller = Puller(rogue.nc, s.K8S_STREAM, "vcbus-decider", batch=8, group=GROUP)
                await puller.start()
                try:
                    for i in range(20):  # unpinned, the server would hand some of these to the rogue's request
                        await rogue.js.publish(*queue_record(i))
                    async with asyncio.timeout(30):
                        while owner.applied < await last(rogue):
                            await asyncio.sleep(0.05)
                    assert await puller.take(8, timeout=1.0) == []
                finally:
                    await puller.close()
        finally:
            stop.set()
            await running
    # once the owner has stopped, a new decider takes the partition over and continues
    async with open_bus(bus_settings) as bus:
        successor = Decider(bus, clock=lambda: FROZEN_EARLY)
        stats = await successor.run(until_idle=True)
    assert successor.applied == owner.applied and stats.decided == 0


def queue_record(i: int) -> tuple[str, bytes]:
    """A queue record (decided like any other; what it decides does not matter here)."""
    body = ('{"type":"ADDED","object":{"apiVersion":"scheduling.volcano.sh/v1beta1","kind":"Queue",'
            f'"metadata":{{"name":"extra-{i}","uid":"q-extra-{i}","resourceVersion":"{9 + i}"}},"spec":{{"weight":1}}}}}}')
    return f"vcbus.k8s.queue._.extra-{i}", body.encode()


async def last(bus) -> int:  # noqa: ANN001
    info = await bus.js.stream_info(s.K8S_STREAM)
    return int(info.state.last_seq or 0)


def test_a_partition_the_stream_does_not_have_is_bad_input(bus_settings):
    res = vcbus_cli("up", "--nats", bus_settings.nats_url, "--service", "decider", "--once", "--partition", "3")
    err = res.stderr.decode()
    assert res.returncode == 2 and "partition 3" in err and "0..0" in err and "Traceback" not in err, err


async def test_repartition_keeps_every_sequence_and_the_deciders_continue(bus_settings, many_jobs_log, seed_log):
    await publish_file(bus_settings, many_jobs_log)
    res = await asyncio.to_thread(vcbus_cli, "bus", "repartition", "2", "--nats", bus_settings.nats_url)
    assert res.returncode == 2 and b"decide the log first" in res.stderr, res.stderr  # no decider has run
    async with open_bus(bus_settings) as bus:
        await Decider(bus, clock=lambda: FROZEN_EARLY).run(until_idle=True)
    before = await stream_messages(bus_settings, s.K8S_STREAM)
    outputs_before = {st: await stream_messages(bus_settings, st) for st in (s.JOBS_STREAM, s.CMDS_STREAM)}

    res = await asyncio.to_thread(vcbus_cli, "bus", "repartition", "2", "--nats", bus_settings.nats_url)
    assert res.returncode == 0, res.stderr
    after = await stream_messages(bus_settings, s.K8S_STREAM)
    # same sequences, bodies and headers; job records now carry the job name and their partition
    assert [(q, b) for q, _, _, b in after] == [(q, b) for q, _, _, b in before]
    assert [h.get("Nats-Msg-Id") for _, _, h, _ in after] == [h.get("Nats-Msg-Id") for _, _, h, _ in before]
    assert {subj.split(".")[-1] for _, subj, h, _ in after if "Vcbus-Job" in h} == {"0", "1"}
    table = await asyncio.to_thread(vcbus_cli, "bus", "partitions", "-o", "json", "--nats", bus_settings.nats_url)
    rows = json.loads(table.stdout)
    assert [(r["partition"], r["ack_floor"], r["pending"]) for r in rows] == [
        (0, before[-1][0], 0), (1, before[-1][0], 0), ("queues", before[-1][0], 0)]

    # the deciders of the new layout rebuild (deciding nothing again), then decide what comes next
    await publish_file(bus_settings, seed_log)
    async with open_bus(bus_settings) as bus:
        deciders = [Decider(bus, clock=lambda: FROZEN_EARLY, partition=k) for k in (0, 1)]
        role = QueueDecider(bus, clock=lambda: FROZEN_EARLY)
        await asyncio.gather(*(d.run(until_idle=True) for d in [*deciders, role]))
    assert all(d.stats.rebuilt > 0 for d in [*deciders, role])  # each folded its past records
    k8s = await stream_messages(bus_settings, s.K8S_STREAM)
    want = expected_outputs([(seq, body) for seq, _, _, body in k8s])
    for stream in (s.JOBS_STREAM, s.CMDS_STREAM):
        have = await stream_messages(bus_settings, stream)
        assert have[: len(outputs_before[stream])] == outputs_before[stream]  # nothing decided twice
        got, ref = per_job([(subj, h["Nats-Msg-Id"], b) for _, subj, h, b in have]), per_job(want[stream])
        assert got["default/resnet-dist-train"] == ref["default/resnet-dist-train"]

    # and back to one partition
    res = await asyncio.to_thread(vcbus_cli, "bus", "repartition", "1", "--nats", bus_settings.nats_url)
    assert res.returncode == 0, res.stderr
    again = await stream_messages(bus_settings, s.K8S_STREAM)
    assert [(q, b) for q, _, _, b in again] == [(q, b) for q, _, _, b in k8s]
    assert all(subj.count(".") == 4 for _, subj, _, _ in again)


async def test_shared_records_arriving_while_deciders_run_are_merged_in_stream_order(bus_settings, monkeypatch):
    """Queue records (shared: every partition folds them) and job records of both partitions published
    one by one while both deciders run, partition 1's decider stopped and replaced half-way: every job's
    outputs are a one-partition fold's. A job names a queue that does not exist yet, so whether its
    records are folded before or after the Queue record changes what is decided.

    Fault injected (a real server on one machine delivers both consumers' records at once): the shared
    records reach the deciders 50 ms late, so a job record stored after a Queue record arrives first."""
    from tests.builders import job, record
    from tests.test_sm_queues import queue_obj
    from vcbus.bus import merging
    from vcbus.bus.partitions import route
    from vcbus.bus.streams import ensure_streams

    class SlowShared(Puller):
        async def _on_msg(self, msg) -> None:  # noqa: ANN001
            if msg.data and not self.subject.rsplit(".", 1)[-1].startswith("vcbus-decider"):
                await asyncio.sleep(0.05)
            await super()._on_msg(msg)

    monkeypatch.setattr(merging, "Puller", SlowShared)

    settings = dataclasses.replace(bus_settings, partitions=2)
    names = [f"merge-{i}" for i in range(12)]
    specs: list[tuple[str, str | None, str, dict]] = [("vcbus.k8s.queue._.default", None, "ADDED", queue_obj("default"))]
    for i, name in enumerate(names):
        queue = f"late-{i % 4}"
        subject = f"vcbus.k8s.job.default.{name}"
        specs.append((subject, f"default/{name}", "ADDED", job(name, queue=queue)))
        if i % 3 == 2:  # a queue appears between a job's records
            q = f"late-{(i - 2) % 4}"
            specs.append((f"vcbus.k8s.queue._.{q}", None, "ADDED", queue_obj(q)))
        modified = job(name, queue=queue)
        modified["metadata"]["resourceVersion"] = "2"
        modified["metadata"]["labels"] = {"touched": "yes"}
        specs.append((subject, f"default/{name}", "MODIFIED", modified))
    # one clock for the whole log (each partition's decider sees only some records' times)
    records = [(subject, key, record(rtype, obj, f"2026-01-01T00:{n // 60:02d}:{n % 60:02d}Z"))
               for n, (subject, key, rtype, obj) in enumerate(specs)]

    async def settled(deciders) -> None:  # noqa: ANN001 - every record stored so far decided and acked
        async with asyncio.timeout(60):
            for d in deciders:
                while d._puller is None or d.outbox.flights or not await d._caught_up():
                    await asyncio.sleep(0.05)

    async with open_bus(settings) as bus:
        await ensure_streams(bus.js, settings)
        stop0, stop1 = asyncio.Event(), asyncio.Event()
        first = [Decider(bus, clock=lambda: FROZEN_EARLY, partition=k) for k in (0, 1)]
        tasks = [asyncio.create_task(first[0].run(stop=stop0)), asyncio.create_task(first[1].run(stop=stop1))]
        await asyncio.wait_for(asyncio.gather(*(d.ready.wait() for d in first)), 30)
        half = len(records) // 2
        for n, (subject, key, body) in enumerate(records):
            headers = {"Nats-Msg-Id": f"merge-{n}"} | ({"Vcbus-Job": key} if key else {})
            await bus.js.publish(route(subject, key, 2), body, headers=headers)
            if n == half:  # partition 1's decider goes away and another takes over
                await settled(first)
                stop1.set()
                await tasks[1]
                second = Decider(bus, clock=lambda: FROZEN_EARLY, partition=1)
                stop1 = asyncio.Event()
                tasks[1] = asyncio.create_task(second.run(stop=stop1))
                await asyncio.wait_for(second.ready.wait(), 30)
            elif n % 5 == 0:
                await asyncio.sleep(0.01)  # sometimes one at a time, sometimes a burst
        await settled([first[0], second])
        stop0.set()
        stop1.set()
        await asyncio.gather(*tasks)
    assert first[0].stats.decided > 0 and first[1].stats.decided > 0 and second.stats.decided > 0

    k8s = await stream_messages(settings, s.K8S_STREAM)
    assert len(k8s) == len(records)
    want = expected_outputs([(seq, body) for seq, _, _, body in k8s])
    for stream in (s.JOBS_STREAM, s.CMDS_STREAM):
        have = per_job([(subj, h["Nats-Msg-Id"], b) for _, subj, h, b in await stream_messages(settings, stream)])
        ref = per_job(want[stream])
        jobs = [j for j in ref if not j.startswith("_/")]
        assert len(jobs) >= len(names) // 2 and all(have[j] == ref[j] for j in jobs), stream


async def test_a_partitions_records_one_after_another_need_no_probe_each(bus_settings):
    """At a light load each record is merged as it arrives; the stream is asked whether a shared record lies
    before it (`Merger.probes`) only when something else may: not for a record right after the last one
    the decider handed out (records of one job, one at a time: one probe in all, not one per record)."""
    from tests.builders import job, record
    from vcbus.bus.partitions import route
    from vcbus.bus.streams import ensure_streams

    settings = dataclasses.replace(bus_settings, partitions=2)
    stop = asyncio.Event()
    async with open_bus(settings) as bus:
        await ensure_streams(bus.js, settings)
        records = []
        for rv in range(1, 13):
            obj = job("one-at-a-time")
            obj["metadata"]["resourceVersion"] = str(rv)
            obj["metadata"]["labels"] = {"round": str(rv)}
            records.append(record("ADDED" if rv == 1 else "MODIFIED", obj, f"2026-01-01T00:00:{rv:02d}Z"))
        subject = route("vcbus.k8s.job.default.one-at-a-time", "default/one-at-a-time", 2)
        ack = await bus.js.publish(subject, records[0], headers={"Nats-Msg-Id": "one-0", "Vcbus-Job": "default/one-at-a-time"})
        mine = int((await bus.js.get_msg(s.K8S_STREAM, ack.seq)).subject.rsplit(".", 1)[1])
        decider = Decider(bus, clock=lambda: FROZEN_EARLY, partition=mine)
        task = asyncio.create_task(decider.run(stop=stop))
        try:
            await asyncio.wait_for(decider.ready.wait(), 30)
            for n, body in enumerate(records[1:], 1):
                async with asyncio.timeout(30):
                    while decider.applied < ack.seq:
                        await asyncio.sleep(0.01)
                ack = await bus.js.publish(subject, body, headers={"Nats-Msg-Id": f"one-{n}", "Vcbus-Job": "default/one-at-a-time"})
            async with asyncio.timeout(30):
                while decider.applied < ack.seq:
                    await asyncio.sleep(0.01)
            probes = decider._puller.probes
        finally:
            stop.set()
            await task
    assert decider.stats.decided == len(records)
    assert probes <= 1, probes
