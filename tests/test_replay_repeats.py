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
        assert len(repeats) <= 2 * window
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


def _pod(uid: str, rv: str, rtype: str = "MODIFIED") -> dict:
    """A pod no job owns: the engine ignores it, so only the repeat filter decides whether it is applied."""
    return {"type": rtype, "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": f"pod-{uid}", "namespace": "default", "uid": uid, "resourceVersion": rv}}}


def _applied(recs: list[dict]) -> list[int]:
    data = "".join(json.dumps(r) + "\n" for r in recs).encode()
    applied: list[int] = []
    replay_stream(io.BytesIO(data), "log", on_record=lambda seq, outs: applied.append(seq))
    return applied


def _expected(recs: list[dict]) -> list[int]:
    """What `Repeats.seen`, one record at a time, keeps."""
    repeats = Repeats()
    kept = []
    for seq, r in enumerate(recs, 1):
        meta = r["object"]["metadata"]
        uid, rv = meta["uid"], meta["resourceVersion"]
        if not (rv and uid) or not repeats.seen(uid, rv, r["type"]):
            kept.append(seq)
    return kept


def test_the_fold_drops_what_the_window_drops_in_order_and_out_of_it(monkeypatch):
    """The fold only lists the identities of records in resourceVersion order (none can be a repeat)
    and looks records up from the first one out of that order: it keeps and drops what `Repeats.seen`
    does, generation turnovers included (a window of 8 here)."""
    import random

    monkeypatch.setattr(Repeats, "WINDOW", 8)
    in_order = [_pod(f"u{i}", str(i + 1)) for i in range(40)]
    cases = {
        "in order": in_order,
        "then repeats, recent and long gone": in_order + [in_order[i] for i in (39, 36, 33, 30, 20, 5)],
        "a repeat as another type": in_order[:10] + [_pod("u9", "10", "DELETED"), in_order[9]] + in_order[10:],
        "leading zeros, text and empty versions": [
            _pod("a", "7"), _pod("a", "007"), _pod("a", "7"), _pod("b", "10"), _pod("c", "x1"), _pod("c", "x1"),
            _pod("d", ""), _pod("d", ""), _pod("e", "11"), _pod("e", "007"), _pod("e", "011"), _pod("e", "11"),
        ],
    }
    rng = random.Random(11)
    for n in range(6):
        recs = [_pod(f"u{rng.randrange(6)}", str(rng.randrange(1, 30)), rng.choice(["ADDED", "MODIFIED"]))
                for _ in range(60)]
        cases[f"random {n}"] = recs
        cases[f"in order, then random {n}"] = in_order + recs
    for name, recs in cases.items():
        assert _applied(recs) == _expected(recs), name
    repeated = cases["then repeats, recent and long gone"]
    assert 0 < len(repeated) - len(_expected(repeated)) < 6  # the test has repeats both dropped and taken again
