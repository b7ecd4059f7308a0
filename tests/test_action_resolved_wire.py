"""The bytes of `ActionResolved` on the bus: `"action":"SyncJob"` is written out, as it always was.

`ActionResolved.action` defaults to "SyncJob" and outputs are encoded with
msgspec's `omit_defaults`, which leaves a field out only when it holds that
default *str*; the engine resolves with the `Action.SYNC_JOB` member, which is
written out. The hot paths compare plain str for speed (statemachines/model/vocabulary.py),
so this pins the member down: a "clean-up" to `Action.SYNC_JOB.value` would change
every SyncJob resolution on the bus (and every digest of a replay) without any
other test noticing.
"""

from __future__ import annotations

import io

from statemachines import outputs as o
from statemachines.engine import Engine
from statemachines.model.vocabulary import Action
from tests.test_determinism import ROOT
from vcbus.watchlog import decode_record, read_records


def _resolutions(name: str) -> list[o.ActionResolved]:
    engine = Engine()
    found: list[o.ActionResolved] = []
    for rec in read_records(io.BytesIO((ROOT / "examples" / name).read_bytes())):
        found.extend(out for out in engine.apply(rec.seq, decode_record(name, rec)) if isinstance(out, o.ActionResolved))
    return found


def test_sync_resolutions_write_their_action():
    resolved = _resolutions("abort-resume.jsonl")
    syncs = [r for r in resolved if r.action == Action.SYNC_JOB.value]
    reasons = {r.reason.split(" ")[0] for r in syncs}
    assert {"internal", "no"} <= reasons  # internal events and requests no policy matched
    for r in syncs:
        assert b'"action":"SyncJob"' in o.encoder.encode(r), r


def test_the_default_str_itself_is_left_out():
    """What the test above guards against: the plain str is omitted."""
    plain = o.ActionResolved(job="default/j", seq=1, time="2026-11-30T08:00:00Z", action="SyncJob")
    member = o.ActionResolved(job="default/j", seq=1, time="2026-11-30T08:00:00Z", action=Action.SYNC_JOB)
    assert b'"action"' not in o.encoder.encode(plain)
    assert b'"action":"SyncJob"' in o.encoder.encode(member)
