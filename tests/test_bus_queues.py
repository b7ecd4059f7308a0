"""The queue controller and the garbage collector through a real decider on a real nats-server.

A log with a Queue that has no state yet, its PodGroup, a CloseQueue Command and a
finished vcjob with `ttlSecondsAfterFinished` is published to VCBUS_K8S. The decider
must store the queue decisions under `_/<queue>`, leave the deletion pending while
its clock is before the expiry, append the TIMER record once the clock passes it,
and store `DeleteJob`; everything on the bus must be exactly what a fold of the
stream (TIMER record included) decides.
"""

from __future__ import annotations

import json

import pytest

from statemachines import outputs as o
from tests.builders import job, record
from tests.fixtures_nats import decide_and_project, expected_outputs, publish_file, stream_messages
from tests.test_sm_queues import pg_obj, queue_command, queue_obj
from vcbus.bus import subjects as s

pytestmark = pytest.mark.nats

FINISHED = "2026-01-01T00:05:00Z"
DUE = "2026-01-01T00:06:00Z"


def the_log() -> bytes:
    done = job("done")
    done["spec"]["ttlSecondsAfterFinished"] = 60
    done["status"] = {"state": {"phase": "Completed", "lastTransitionTime": FINISHED}, "minAvailable": 2}
    records = [
        record("ADDED", queue_obj("default", state=None), "2026-01-01T00:00:00Z"),
        record("ADDED", pg_obj("a", "default", phase="Running"), "2026-01-01T00:00:01Z"),
        record("ADDED", queue_command("default", "CloseQueue"), "2026-01-01T00:00:02Z"),
        record("ADDED", done, "2026-01-01T00:05:01Z"),
    ]
    return b"".join(r + b"\n" for r in records)


async def test_queue_and_gc_decisions_on_the_bus(bus_settings, tmp_path):
    path = tmp_path / "queues.jsonl"
    path.write_bytes(the_log())
    await publish_file(bus_settings, path)

    decider, _ = await decide_and_project(bus_settings)  # clock before every due time
    assert decider.stats.timers == 0 and decider.stats.poison == 0
    cmds = [o.command_decoder.decode(b) for _, subj, _, b in await stream_messages(bus_settings, s.CMDS_STREAM)]
    queue_cmds = [c for c in cmds if c.job == "_/default"]
    assert [type(c).__name__ for c in queue_cmds] == ["UpdateQueueStatus", "DeleteBusCommand",
                                                      "UpdateQueueStatus", "RecordEvent"]
    assert [c.state for c in queue_cmds if isinstance(c, o.UpdateQueueStatus)] == ["Open", "Closing"]
    assert not any(isinstance(c, o.DeleteJob) for c in cmds)
    subjects = {subj for _, subj, _, _ in await stream_messages(bus_settings, s.CMDS_STREAM)}
    assert "vcbus.cmd._.default" in subjects

    decider, _ = await decide_and_project(bus_settings, clock="2026-01-01T00:06:00Z")  # the clock reaches it
    assert decider.stats.timers == 1
    k8s = await stream_messages(bus_settings, s.K8S_STREAM)
    [timer] = [json.loads(body) for _, subj, _, body in k8s if subj == "vcbus.k8s.timer.default.done"]
    assert timer["time"] == DUE and timer["timer"]["due"] == DUE
    cmds = [o.command_decoder.decode(b) for _, _, _, b in await stream_messages(bus_settings, s.CMDS_STREAM)]
    [delete] = [c for c in cmds if isinstance(c, o.DeleteJob)]
    assert (delete.job, delete.uid, delete.time) == ("default/done", "uid-done", DUE)

    # everything stored is what a fold of the stream decides (the TIMER record is in it)
    expected = expected_outputs([(seq, body) for seq, _, _, body in k8s])
    for stream in (s.JOBS_STREAM, s.CMDS_STREAM):
        stored = [(subj, h["Nats-Msg-Id"], body) for _, subj, h, body in await stream_messages(bus_settings, stream)]
        assert stored == expected[stream], stream
