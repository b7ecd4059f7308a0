"""A 10,000-pod job: the same decisions, rendered lazily, stored in bounded batches (vcbus.bus.bigrecords).

The record that makes the job's PodGroup Inqueue decides 10,000 CreatePods at
once (Volcano's syncJob creates every missing pod in one pass). The decider
must store exactly what the eager fold decides (same subjects, msg ids and
bytes, in order) while holding O(batch) rendered messages, one batch in flight
at a time, and keep exactly-once when it dies or its session fails part-way.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

from statemachines import outputs as o
from statemachines.engine import Engine
from statemachines.manifests.renderer import Renderer
from statemachines.model.objects import Job
from statemachines.model.records import Observed, decode
from tests.big_job import PODS, big_log, engine_as_up_builds_it, publish, reference
from tests.fixtures_nats import FROZEN_EARLY, stream_messages
from tests.test_replay_cli import records
from vcbus.bus import bigrecords
from vcbus.bus import subjects as s
from vcbus.bus.batching import BatchWriter
from vcbus.bus.connecting import open_bus
from vcbus.bus.decider import Decider
from vcbus.bus.errors import BusError

ROOT = pathlib.Path(__file__).resolve().parents[1]
EXAMPLES = sorted([*ROOT.glob("examples/*.jsonl"), ROOT / "examples" / "resnet-dist-train.json"])


def _fold(lines: list[bytes], *, lazy: bool) -> list[bytes]:
    renderer = Renderer()
    render = bigrecords.lazy(renderer.pod) if lazy else renderer.pod
    engine = Engine(render_pod=render, render_podgroup=renderer.podgroup)
    bodies = []
    for seq, data in enumerate(lines, 1):
        decoded = decode(data)
        raw = data if isinstance(decoded, Observed) and isinstance(decoded.object, Job) else None
        for out in engine.apply(seq, decoded, raw=raw):
            bodies.append(bigrecords.encode(out) if lazy else o.encoder.encode(out))
    return bodies


@pytest.mark.parametrize("log", EXAMPLES, ids=lambda p: p.name)
def test_lazy_pods_encode_to_the_eager_bytes(log):
    lines = [json.dumps(r).encode() for r in records(log)]
    eager = _fold(lines, lazy=False)
    assert sum(b'"cmd.pod.create.v1"' in b for b in eager) > 0
    assert _fold(lines, lazy=True) == eager


def test_a_10000_pod_job_encodes_to_the_eager_bytes_and_is_one_big_record():
    lines = big_log()
    eager = _fold(lines, lazy=False)
    assert _fold(lines, lazy=True) == eager
    renderer = Renderer()
    engine = Engine(render_pod=bigrecords.lazy(renderer.pod), render_podgroup=renderer.podgroup)
    for seq, data in enumerate(lines[:-1], 1):
        engine.apply(seq, decode(data), raw=data)
    outs = engine.apply(len(lines), decode(lines[-1]))
    pods = [out.pod for out in outs if isinstance(out, o.CreatePod)]
    assert len(pods) == PODS and all(isinstance(p, bigrecords.LazyPod) for p in pods)  # nothing rendered yet
    split = bigrecords.split(len(lines), outs, source="test", count=False)
    assert split.big() and len(split) == len(outs) > bigrecords.OUTPUT_BATCH
    commands = [i for i, out in enumerate(outs) if o.is_command(out)]  # sent first, with their own indexes
    assert [m.headers["Nats-Msg-Id"] for m in split[:3]] == [f"{len(lines)}:{i}" for i in commands[:3]]
    assert split[0].body == o.encoder.encode(outs[commands[0]]) and commands[0] > 0


class _Watched(BatchWriter):
    """The decider's writer, unchanged, noting each send: its size, and whether every earlier send
    was stored (acknowledged) before it; `fail_at`: the n-th send raises `fail` instead (a fault
    injected at an exact point, which killing a real process cannot hit reliably)."""

    def __init__(self, *args, fail_at: int = 0, fail: BaseException | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.sizes: list[int] = []
        self.earlier_stored: list[bool] = []
        self.sents: list = []
        self.fail_at = fail_at
        self.fail = fail

    async def send(self, msgs, *, atomic=True):  # noqa: ANN001
        if self.fail_at and len(self.sizes) + 1 == self.fail_at:
            self.fail_at = 0
            raise self.fail
        self.earlier_stored.append(all(sent.result is not None for sent in self.sents))
        self.sizes.append(len(msgs))
        out = await super().send(msgs, atomic=atomic)
        self.sents += out
        return out


async def _stored_exactly_the_reference(settings, lines) -> None:  # noqa: ANN001
    want = reference(lines)
    for stream in (s.CMDS_STREAM, s.JOBS_STREAM):
        have = [(subject, headers.get("Nats-Msg-Id"), body) for _, subject, headers, body in
                await stream_messages(settings, stream)]
        assert len(have) == len(want[stream]), stream
        assert have == want[stream], stream


@pytest.mark.nats
async def test_a_10000_pod_job_is_stored_in_bounded_batches_exactly_as_decided(bus_settings):
    lines = big_log()
    async with open_bus(bus_settings) as bus:
        await publish(bus, lines)
        decider = Decider(bus, engine=engine_as_up_builds_it(), clock=lambda: FROZEN_EARLY)
        writer = decider.outbox.writer = _Watched(bus.nc)
        await decider.run(until_idle=True)
        info = await bus.js.consumer_info(s.K8S_STREAM, decider.partition.consumer)
    assert decider.stats.decided == len(lines) and decider.stats.duplicates == 0
    assert info.ack_floor.stream_seq == len(lines)  # every record acked, the big one after all its outputs
    assert max(writer.sizes) <= bigrecords.OUTPUT_BATCH and sum(writer.sizes) == decider.stats.outputs
    assert sum(1 for n in writer.sizes if n == bigrecords.OUTPUT_BATCH) >= PODS // bigrecords.OUTPUT_BATCH
    first = writer.sizes.index(bigrecords.OUTPUT_BATCH)  # the big record's sends: one batch in flight at a time
    big = range(first, first + PODS // bigrecords.OUTPUT_BATCH + 2)  # its commands in 1000s, the rest, its events
    assert all(writer.earlier_stored[k] for k in big), list(zip(writer.sizes, writer.earlier_stored))
    await _stored_exactly_the_reference(bus_settings, lines)


@pytest.mark.nats
async def test_a_decider_dying_part_way_leaves_the_rest_to_the_next_one_exactly_once(bus_settings):
    lines = big_log()

    class Died(Exception):
        pass

    async with open_bus(bus_settings) as bus:
        await publish(bus, lines)
        first = Decider(bus, engine=engine_as_up_builds_it(), clock=lambda: FROZEN_EARLY)
        first.outbox.writer = _Watched(bus.nc, fail_at=5, fail=Died())
        with pytest.raises(Died):
            await first.run(until_idle=True)
    stored = len(await stream_messages(bus_settings, s.CMDS_STREAM))
    assert 0 < stored < PODS  # part of the big record is stored, and it is not acked
    async with open_bus(bus_settings) as bus:  # a new process: a new connection, a fresh engine
        second = Decider(bus, engine=engine_as_up_builds_it(), clock=lambda: FROZEN_EARLY)
        await second.run(until_idle=True)
        info = await bus.js.consumer_info(s.K8S_STREAM, second.partition.consumer)
    assert second.stats.duplicates >= stored - 10  # what the first one stored came again and was dropped
    assert info.ack_floor.stream_seq == len(lines)
    await _stored_exactly_the_reference(bus_settings, lines)


@pytest.mark.nats
async def test_a_session_failing_part_way_restores_the_big_record_exactly_once(bus_settings):
    lines = big_log()
    async with open_bus(bus_settings) as bus:
        await publish(bus, lines)
        decider = Decider(bus, engine=engine_as_up_builds_it(), clock=lambda: FROZEN_EARLY)
        decider.outbox.writer = _Watched(bus.nc, fail_at=5, fail=BusError("storing failed (injected)"))
        await decider.run(until_idle=True)  # the session fails, the next one restores what it left
        info = await bus.js.consumer_info(s.K8S_STREAM, decider.partition.consumer)
    assert decider.stats.duplicates > 0
    assert info.ack_floor.stream_seq == len(lines)
    await _stored_exactly_the_reference(bus_settings, lines)


@pytest.mark.nats
def test_the_decider_of_a_10000_pod_job_stays_within_a_memory_bound(bus_settings):
    """Peak RSS growth while deciding, in a process of its own: 136 MB before pods were rendered
    per batch (about 13.6 KB of Python objects per pod), 26 MB after (2026-11-30, 2 cores)."""
    res = subprocess.run([sys.executable, "-m", "tests.big_job", bus_settings.nats_url], capture_output=True,
                         cwd=ROOT, timeout=600)
    assert res.returncode == 0, res.stderr.decode()[-2000:]
    figures = json.loads(res.stdout.decode().splitlines()[-1])
    assert figures["stats"]["decided"] == len(big_log()) and figures["stats"]["outputs"] > PODS
    growth = figures["peak_mb"] - figures["before_mb"]
    assert growth < 70, figures


def test_a_snapshot_holding_lazy_pods_restores_and_encodes_the_same_bytes():
    """A decider's snapshot pickles its engine, the last record's outputs included (vcbus.bus.statesnap
    admits only the pure domain's classes, so a lazy pod must be one of them)."""
    import io

    from vcbus.bus import statesnap

    renderer = Renderer()
    engine = Engine(render_pod=bigrecords.lazy(renderer.pod), render_podgroup=renderer.podgroup)
    for seq, data in enumerate(big_log(), 1):
        engine.apply(seq, decode(data), raw=data)
    hooks = {"render_pod": engine._render_pod, "render_podgroup": engine._render_podgroup}
    buf = io.BytesIO()
    statesnap._Pickler(buf, protocol=5, hooks=hooks).dump(engine)
    restored = statesnap.load_payload(buf.getvalue(), hooks=hooks)
    # the CreatePods: other outputs may differ in bytes after a pickle round trip, for a reason of their own
    # (msgspec's omit_defaults tells a default string by identity; noted in progress-C4.md)
    before = [bigrecords.encode(out) for out in engine.out if isinstance(out, o.CreatePod)]
    after = [bigrecords.encode(out) for out in restored.out if isinstance(out, o.CreatePod)]
    assert len(before) == PODS and after == before


@pytest.mark.parametrize("replicas", [10, 10_000_000])
def test_a_jobs_memory_before_its_pods_exist_does_not_grow_with_its_replicas(replicas):
    """O(tasks): the job record of a 10,000,000-replica job (allowed by a raised pod limit), before its
    PodGroup is Inqueue, costs the engine what a 10-replica job costs (about 10 KB, 2026-11-30)."""
    import tracemalloc

    from tests.poison_logs import RV_SHIFT, job_record

    rec = job_record("huge", "default", RV_SHIFT - 4)
    rec["object"]["spec"]["tasks"][1]["replicas"] = replicas
    raw = json.dumps(rec).encode()
    renderer = Renderer()
    engine = Engine(render_pod=bigrecords.lazy(renderer.pod), render_podgroup=renderer.podgroup, max_pods=20_000_000)
    queue = json.dumps([r for r in records(ROOT / "examples" / "resnet-dist-train.json")
                        if r["object"]["kind"] == "Queue"][0]).encode()
    engine.apply(1, decode(queue))
    record = decode(raw)
    tracemalloc.start()
    try:
        engine.apply(2, record, raw=raw)
        grown, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert engine.jobs["default/huge"].job.spec.tasks[1].replicas == replicas
    assert grown < 200_000, grown
