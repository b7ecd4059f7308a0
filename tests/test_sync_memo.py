"""syncJob remembers when its pod reconciliation had nothing to do; the decisions are the same without it.

A pod record that changes no count (a pod scheduled, an informer's repeat of a
running pod) still runs syncJob, whose reconciliation then finds the same counts
and the same status as before: `JobEntry.idle` remembers that answer, keyed on what
it reads (statemachines/job/sync.py). This replays the example and scenario logs
and fuzzed logs with the memo and without it (`sync.IDLE_MEMO`) and compares every
output byte for byte, in both replay paths (the general decoder and replay's).
"""

from __future__ import annotations

import io
import random

import pytest

from statemachines import outputs as o
from statemachines.engine import Engine
from statemachines.job import sync
from statemachines.model.records import RecordError, decode
from tests.fuzzing import watch_log
from tests.poison_logs import seed_records
from tests.test_determinism import LOGS, log_bytes
from vcbus.replaying import replay_stream
from vcbus.watchlog import read_records

SEEDS = range(40)


def engine_outputs(data: bytes) -> bytes:
    engine, chunks = Engine(), []
    for rec in read_records(io.BytesIO(data)):
        i = rec.seq
        try:
            record = decode(rec.data)
        except RecordError:
            continue
        try:
            chunks.extend(o.encoder.encode(x) for x in engine.apply(i, record))
        except Exception as err:  # noqa: BLE001 - a refusal ends the comparison the same way both times
            chunks.append(repr(err).encode())
            engine = Engine()
    chunks.extend(o.encoder.encode(x) for x in engine.final_divergences())
    return b"\n".join(chunks)


def replay_outputs(data: bytes) -> bytes:
    chunks: list[bytes] = []
    replay_stream(io.BytesIO(data), "log", skip_invalid=True,
                  on_record=lambda seq, outs: chunks.extend(o.encoder.encode(x) for x in outs))
    return b"\n".join(chunks)


def both_ways(data: bytes) -> tuple[bytes, bytes]:
    return engine_outputs(data), replay_outputs(data)


@pytest.fixture
def without_memo(monkeypatch: pytest.MonkeyPatch):
    def run(data: bytes) -> tuple[bytes, bytes]:
        monkeypatch.setattr(sync, "IDLE_MEMO", False)
        try:
            return both_ways(data)
        finally:
            monkeypatch.setattr(sync, "IDLE_MEMO", True)
    return run


def test_the_logs_decide_the_same(without_memo) -> None:
    resolved = 0
    for name in LOGS:
        data = log_bytes(name)
        with_memo = both_ways(data)
        assert with_memo == without_memo(data), name
        resolved += with_memo[0].count(b"job.action.resolved") + with_memo[1].count(b"job.action.resolved")
    assert resolved > 500  # a comparison of real decisions


def test_fuzzed_logs_decide_the_same(without_memo) -> None:
    base = seed_records()
    for seed in SEEDS:
        data = b"\n".join(watch_log(base, random.Random(seed), mutated=6)) + b"\n"
        assert both_ways(data) == without_memo(data), seed


def test_the_memo_is_used() -> None:
    """The comparison above means something: the logs do reach the memo."""
    used = 0
    for name in LOGS:
        engine = Engine()
        for rec in read_records(io.BytesIO(log_bytes(name))):
            try:
                engine.apply(rec.seq, decode(rec.data))
            except Exception:  # noqa: BLE001 - refusals are other tests' business
                break
        used += sum(entry.idle is not None for entry in engine.jobs.values())
    assert used > 0
