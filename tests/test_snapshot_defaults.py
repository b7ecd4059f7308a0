"""A snapshot restores structs so they encode byte for byte as before the save.

msgspec's `omit_defaults` leaves a field out only when its value *is* the default object; plain
unpickling makes new objects, so a restored `ActionResolved(policy="default")` would encode
`"policy":"default"` where the live one omits it. vcbus/bus/statesnap.py saves which fields held
the default object and restores them (no server needed: this is the payload format alone).
"""

from __future__ import annotations

import io

import msgspec

from statemachines import outputs as o
from vcbus.bus import statesnap


def _round_trip(state: object) -> object:
    buf = io.BytesIO()
    statesnap._Pickler(buf, protocol=5, hooks={}).dump(state)
    return statesnap.load_payload(buf.getvalue())


def test_default_objects_survive_a_round_trip() -> None:
    live = [o.ActionResolved(job="ns/j", event="PodFailed", action="RestartJob", seq=1)]
    restored = _round_trip(live)
    assert msgspec.json.encode(restored) == msgspec.json.encode(live)
    assert b'"policy"' not in msgspec.json.encode(restored)  # the default stays omitted


def test_a_value_equal_to_the_default_but_not_it_stays_so() -> None:
    # decoded from a record: equal to the default, another object; the live struct encodes it, so must the restored one
    policy = "".join(["def", "ault"])
    live = o.ActionResolved(job="ns/j", event="PodFailed", action="RestartJob", seq=1, policy=policy)
    assert b'"policy":"default"' in msgspec.json.encode(live)
    assert msgspec.json.encode(_round_trip(live)) == msgspec.json.encode(live)


def test_a_forged_struct_reduce_is_invalid() -> None:
    import collections
    import pickle

    class Evil:
        def __reduce__(self):  # noqa: ANN204
            return statesnap._struct, (collections.OrderedDict, (), 0)

    blob = pickle.dumps(Evil(), protocol=5)
    try:
        statesnap.load_payload(blob)
    except statesnap.Invalid as err:
        assert "struct" in str(err)
    else:  # pragma: no cover - the assertion is the test
        raise AssertionError("a forged struct reduce was accepted")
