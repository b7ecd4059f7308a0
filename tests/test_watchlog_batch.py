"""`iter_log`'s batches: the same records whatever the batch, and none held back at batch 1.

A replay of a whole file decodes records 64 at a time (`vcbus.watchlog.BATCH`);
a pipe or a followed file hands each record on as it arrives. Built from the
seed log, with every kind of line the JSON reader treats specially: a plain
object (rescued as a snapshot), a pretty-printed record, an invalid line, and a
last record cut short.
"""

from __future__ import annotations

import json

import pytest

from tests.test_replay_cli import SEED, records
from vcbus.watchlog import BATCH, InvalidRecord, iter_log


def mixed_lines() -> list[bytes]:
    recs = records(SEED)
    lines = [json.dumps(r).encode() + b"\n" for r in recs[:10]]
    lines.append(json.dumps(recs[10]["object"]).encode() + b"\n")  # no event type: an ADDED snapshot
    lines.extend((json.dumps(recs[11], indent=4) + "\n").encode().splitlines(keepends=True))  # pretty
    lines.append(b'{"type":"MODIFIED","object":[1,2]}\n')  # invalid
    lines.extend(json.dumps(r).encode() + b"\n" for r in recs[12:])
    lines.append(json.dumps(recs[-1]).encode()[:40] + b"\n")  # cut short
    return lines


def comparable(items) -> list[tuple]:
    return [(seq, data, str(d) if isinstance(d, InvalidRecord) else d) for seq, data, d in items]


@pytest.mark.parametrize("batch", [2, 7, BATCH, 10_000])
def test_any_batch_gives_the_records_of_batch_one(batch):
    one = comparable(iter_log(mixed_lines(), "mixed.log"))
    assert len(one) > 20 and any(isinstance(d, str) for _, _, d in one)
    assert comparable(iter_log(mixed_lines(), "mixed.log", batch=batch)) == one


def test_batch_one_hands_each_record_on_before_reading_the_next_line():
    lines = mixed_lines()
    pulled = []

    def source():
        for line in lines:
            pulled.append(line)
            yield line

    items = iter_log(source(), "pipe")
    for _ in range(10):  # the first ten records are one line each
        seq, data, _ = next(items)
        assert pulled[-1].strip() == data  # nothing read beyond the record just handed on
        assert len(pulled) == seq
