"""Exact repeats (same uid, resourceVersion and event type) fold once, in a file replay as on the bus.

The bus stores a watch record once per `Nats-Msg-Id` `<uid>:<resourceVersion>:<type>`,
so a log published twice is decided once. `vcbus replay` drops the same repeats
(`vcbus.replaying.Repeats`), so a log concatenated twice replays to the status
the bus gives for it. Real files and processes; the bus test uses a real
nats-server.
"""

from __future__ import annotations

import io
import json
import pathlib

import msgspec
import pytest

from tests.test_replay_cli import SEED, records, replay_json, vcbus, write_jsonl
from vcbus.replaying import Repeats, replay_stream


def timed(recs: list[dict]) -> list[dict]:
    """The records as `vcbus log export` writes them: each with the time the bus observed it.

    A record that carries its time is not checked for resourceVersion order, so a
    repeated block is not taken for concatenated per-kind watches (no merge): the
    repeats themselves must be dropped."""
    return [{**r, "time": f"2026-11-30T08:{i // 60:02d}:{i % 60:02d}Z"} for i, r in enumerate(recs)]


def status_of(report: dict) -> list[tuple[str, dict]]:
    return [(j["name"], j["status"]) for j in report["jobs"]]


@pytest.fixture(scope="module")
def seed_records() -> list[dict]:
    return records(SEED)


def test_a_log_concatenated_twice_replays_as_the_log_once(tmp_path, seed_records):
    once = write_jsonl(tmp_path / "once.jsonl", seed_records)
    twice = write_jsonl(tmp_path / "twice.jsonl", seed_records + seed_records)
    res = vcbus("replay", "--json", str(twice))
    assert res.returncode == 0, res.stderr.decode()
    assert json.loads(res.stdout) == replay_json(str(once))
    assert f"dropped {len(seed_records)} duplicate record(s)".encode() in res.stderr


def test_a_bus_export_concatenated_twice_replays_as_once_without_a_merge(tmp_path, seed_records):
    recs = timed(seed_records)
    once = write_jsonl(tmp_path / "once.jsonl", recs)
    twice = write_jsonl(tmp_path / "twice.jsonl", recs + recs)
    res = vcbus("replay", "--json", str(twice))
    assert res.returncode == 0, res.stderr.decode()
    assert b"merging" not in res.stderr and b"out of resourceVersion order" not in res.stderr
    assert f"dropped {len(recs)} duplicate record(s)".encode() in res.stderr
    report = json.loads(res.stdout)
    assert report == replay_json(str(once))
    assert status_of(report)[0][1]["state"]["phase"] == "Completed"


def test_a_live_replay_from_a_pipe_drops_repeats_too(seed_records):
    recs = timed(seed_records)
    data = "".join(json.dumps(r) + "\n" for r in recs).encode()
    res = vcbus("replay", "--json", "-", stdin=data + data)
    assert res.returncode == 0, res.stderr.decode()
    assert json.loads(res.stdout)["jobs"] == replay_json("-", stdin=data)["jobs"]


def test_a_repeated_pod_record_decides_nothing_more_but_another_type_is_no_repeat(seed_records):
    first_pod = next(i for i, r in enumerate(seed_records) if r["object"]["kind"] == "Pod")
    assert seed_records[first_pod]["type"] == "ADDED"

    def outputs(recs: list[dict]) -> list[str]:
        """Every decision, without its record number (inserting a record shifts the later ones)."""
        lines = "".join(json.dumps(r) + "\n" for r in recs).encode()
        seen: list[str] = []
        replay_stream(io.BytesIO(lines), "log", on_record=lambda seq, outs: seen.extend(
            repr(msgspec.structs.replace(o, seq=0)) for o in outs))
        return seen

    plain = outputs(seed_records)
    repeated = seed_records[: first_pod + 1] + [seed_records[first_pod]] + seed_records[first_pod + 1 :]
    assert outputs(repeated) == plain  # the ADDED pod again would be a PodPending request again
    as_modified = {**seed_records[first_pod], "type": "MODIFIED"}  # same uid and rv, another type: kept
    kept = seed_records[: first_pod + 1] + [as_modified] + seed_records[first_pod + 1 :]
    assert len(outputs(kept)) == len(plain)  # kept, and ignored by the engine as an informer resync


def test_the_window_of_remembered_records_is_bounded():
    repeats = Repeats()
    window = Repeats.WINDOW
    for i in range(3 * window):
        assert not repeats.seen("uid", str(i), "MODIFIED")
        assert len(repeats.current) + len(repeats.previous) <= 2 * window
    assert repeats.seen("uid", str(3 * window - 1), "MODIFIED")  # a recent one is a repeat
    assert not repeats.seen("uid", "0", "MODIFIED")  # long gone from the window: taken again
    assert repeats.dropped == 1


@pytest.mark.nats
async def test_the_bus_and_a_replay_of_a_log_concatenated_twice_give_the_same_status(
    bus_settings, tmp_path: pathlib.Path, seed_records
):
    from tests.fixtures_nats import decide_and_project, publish_file
    from vcbus.bus import subjects as s
    from vcbus.bus.connecting import open_bus
    from vcbus.bus.projector import live_buckets

    twice = write_jsonl(tmp_path / "twice.jsonl", seed_records + seed_records)
    await publish_file(bus_settings, twice)
    await decide_and_project(bus_settings)
    async with open_bus(bus_settings) as bus:
        buckets = await live_buckets(bus)
    on_bus = json.loads(buckets[s.STATUS_BUCKET]["default.resnet-dist-train"])
    ((name, replayed),) = status_of(replay_json(str(twice)))
    assert name == "resnet-dist-train"
    assert on_bus == replayed
    assert on_bus["state"]["phase"] == "Completed" and on_bus["retryCount"] == 1
