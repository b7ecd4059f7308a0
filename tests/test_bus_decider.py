"""The decider on a real server: outputs equal a replay, ids dedupe, order holds, timers are logged."""

from __future__ import annotations

import json
import pathlib

import msgspec
import pytest

from projections.history import command_entry
from statemachines import outputs as o
from tests.fixtures_nats import (
    ROOT,
    Crash,
    crash_after,
    decide_and_project,
    expected_outputs,
    publish_file,
    stream_messages,
)
from vcbus.bus import subjects as s
from vcbus.bus.connecting import open_bus
from vcbus.bus.decider import Decider
from vcbus.bus.logs import export
from vcbus.bus.projector import live_buckets
from vcbus.replaying import replay_stream

pytestmark = pytest.mark.nats

EXAMPLES = sorted(p.name for p in (ROOT / "examples").glob("*.json*"))


def replay_report(path: pathlib.Path) -> dict:
    with open(path, "rb") as fh:
        return json.loads(json.dumps(replay_stream(fh, str(path)).report()))


@pytest.mark.parametrize("example", EXAMPLES)
async def test_bus_views_and_commands_equal_a_replay_of_the_file(bus_settings, example):
    path = ROOT / "examples" / example
    await publish_file(bus_settings, path)
    await decide_and_project(bus_settings)
    report = replay_report(path)
    async with open_bus(bus_settings) as bus:
        buckets = await live_buckets(bus)
    cmds = await stream_messages(bus_settings, s.CMDS_STREAM)
    for job in report["jobs"]:
        key = f"{job['namespace']}.{job['name']}"
        assert json.loads(buckets[s.STATUS_BUCKET][key]) == job["status"]
        commands = job.pop("commands")
        assert json.loads(buckets[s.HISTORY_BUCKET][key]) == job
        on_bus = [o.command_decoder.decode(body) for _, _, h, body in cmds if h["ce-subject"] == f"{key.replace('.', '/', 1)}"]
        # the replay report lists every command but the status writes (those are its `status`)
        assert [command_entry(c) for c in on_bus if not isinstance(c, o.UpdateJobStatus)] == commands
        writes = [c for c in on_bus if isinstance(c, o.UpdateJobStatus)]
        assert writes and msgspec.to_builtins(writes[-1].status) == job["status"]


async def test_outputs_are_stored_in_order_with_position_ids_and_cloudevents_headers(bus_settings, seed_log):
    await publish_file(bus_settings, seed_log)
    await decide_and_project(bus_settings)
    records = [(seq, body) for seq, _, _, body in await stream_messages(bus_settings, s.K8S_STREAM)]
    want = expected_outputs(records)
    for stream in (s.JOBS_STREAM, s.CMDS_STREAM):
        have = await stream_messages(bus_settings, stream)
        assert [(subj, h["Nats-Msg-Id"], body) for _, subj, h, body in have] == want[stream]
        for _, _, h, body in have:
            out = o.output_decoder.decode(body)
            assert h["ce-id"] == h["Nats-Msg-Id"] and h["ce-id"].startswith(f"{out.seq}:")
            assert h["ce-specversion"] == "1.0" and h["ce-source"] == "/vcbus"
            assert h["ce-type"] == "sh.volcano." + o.tag_of(type(out)) and h["ce-subject"] == out.job
            assert h["ce-causationid"] == str(out.seq) and h["content-type"] == "application/json"
            assert h["ce-datacontenttype"] == "application/json"
            assert h["ce-dataschema"] == "urn:vcbus:schema:" + o.tag_of(type(out))


async def test_a_restarted_decider_continues_without_duplicates(bus_settings, many_jobs_log):
    await publish_file(bus_settings, many_jobs_log)
    async with open_bus(bus_settings) as bus:
        first = Decider(bus, clock=lambda: "1970-01-01T00:00:00Z")
        crash_after(first, 700)  # stop the first run part-way (between records), then start a fresh one
        with pytest.raises(Crash):
            await first.run(until_idle=True)
        second = Decider(bus, clock=lambda: "1970-01-01T00:00:00Z")
        stats = await second.run(until_idle=True)
    records = [(seq, body) for seq, _, _, body in await stream_messages(bus_settings, s.K8S_STREAM)]
    # the acked records were folded again (not decided again); the rest decided once more
    assert 0 < stats.rebuilt < len(records) and stats.rebuilt + stats.decided == len(records)
    want = expected_outputs(records)
    for stream in (s.JOBS_STREAM, s.CMDS_STREAM):
        have = await stream_messages(bus_settings, stream)
        assert [(subj, h["Nats-Msg-Id"], body) for _, subj, h, body in have] == want[stream]


async def test_publishing_the_same_log_twice_changes_nothing(bus_settings, seed_log):
    first = await publish_file(bus_settings, seed_log)
    again = await publish_file(bus_settings, seed_log)
    assert (first.published, first.duplicates) == (64, 0)
    assert (again.published, again.duplicates) == (0, 64)


async def test_a_poison_record_is_terminated_and_the_log_goes_on(bus_settings, seed_log):
    async with open_bus(bus_settings) as bus:
        await bus.js.publish("vcbus.k8s.pod.default.garbage", b"{not json")
        await bus.js.publish("vcbus.k8s.pod.default.nameless", b'{"type":"ADDED","object":{"kind":"Pod","metadata":{}}}')
    await publish_file(bus_settings, seed_log)
    decider, _ = await decide_and_project(bus_settings)
    assert decider.stats.poison == 2
    assert decider.stats.decided == 64
    async with open_bus(bus_settings) as bus:
        buckets = await live_buckets(bus)
        info = await bus.js.consumer_info(s.K8S_STREAM, "vcbus-decider")
    assert json.loads(buckets[s.STATUS_BUCKET]["default.resnet-dist-train"])["state"]["phase"] == "Completed"
    assert info.ack_floor.stream_seq == 66 and info.num_ack_pending == 0


async def test_a_quiet_log_past_a_due_time_fires_the_timer_through_a_timer_record(bus_settings, tmp_path):
    # the pending-timeout example up to the point where both pods' PodPending timers are scheduled
    lines = (ROOT / "examples" / "pending-timeout.jsonl").read_bytes().splitlines(keepends=True)
    log = tmp_path / "quiet.jsonl"
    log.write_bytes(b"".join(lines[:8]))
    await publish_file(bus_settings, log)
    report = replay_report(log)
    (timer,) = report["jobs"][0]["pendingTimers"][-1:]

    decider, _ = await decide_and_project(bus_settings, clock="1970-01-01T00:00:00Z")
    assert decider.stats.timers == 0  # the clock has not reached the due time: nothing fires

    decider, _ = await decide_and_project(bus_settings, clock="9999-12-31T23:59:59Z")
    assert decider.stats.timers == len(report["jobs"][0]["pendingTimers"])
    k8s = await stream_messages(bus_settings, s.K8S_STREAM)
    timers = [json.loads(body) for _, subj, _, body in k8s if subj == "vcbus.k8s.timer.default.stuck"]
    assert timers[-1]["timer"]["id"] == timer["timer"] and timers[-1]["time"] == timer["due"]
    events = [o.event_decoder.decode(b) for _, _, _, b in await stream_messages(bus_settings, s.JOBS_STREAM)]
    assert any(isinstance(e, o.TimerFired) and e.timer == timer["timer"] for e in events)

    # the stream, exported, replays to exactly what the bus projected (the firing is in the log)
    export_path = tmp_path / "export.jsonl"
    async with open_bus(bus_settings) as bus:
        with open(export_path, "wb") as fh:
            await export(bus, fh)
        buckets = await live_buckets(bus)
    (job,) = replay_report(export_path)["jobs"]
    job.pop("commands")
    # a replay compares the recorded status with its own at the end of the file; the bus has no end
    job["divergences"] = [d for d in job["divergences"] if not d["field"].endswith("(end of log)")]
    assert json.loads(buckets[s.HISTORY_BUCKET]["default.stuck"]) == job
    assert job["pendingTimers"] == [] and any(a["policy"].startswith("timer:") for a in job["actions"])
