"""Replay cuts a vcjob's known spec out of its records before decoding; the records decode the same.

`statemachines.model.replay_decode._cut_spec` compares a vcjob record's spec bytes
with the spec the job's last record had (memcmp) and decodes the rest with a
placeholder in its place. These tests feed records one after another, as a replay
does, and check each against `statemachines.model.records.decode`: the same
record, or the same error message. The hostile shapes are the ones where a span of
bytes equal to a known spec is not the object's one spec: a second `spec` key
(before or after, valid or not, spelled with an escape or spaces), the known spec
nested somewhere else, the placeholder's own text in the record (spaced or escaped
too), an object that does not name its kind.
"""

from __future__ import annotations

import json

import pytest

from statemachines.model import replay_decode
from statemachines.model.records import Observed, RecordError, decode
from statemachines.model.replay_decode import decode_replay
from tests.builders import job, task
from tests.test_determinism import LOGS, log_bytes
from vcbus.watchlog import read_records


def outcome(fn, data: bytes):
    try:
        got = fn(data)
    except RecordError as err:
        return ("error", str(err))
    if isinstance(got, Observed):
        return (got.type, got.object, got.time, got.notes)
    return got


def same(data: bytes) -> None:
    assert outcome(decode_replay, data) == outcome(decode, data), data[:300]


@pytest.fixture(autouse=True)
def fresh() -> None:
    replay_decode.forget_specs()


def test_every_record_of_the_logs_in_order() -> None:
    cut = 0
    for name in LOGS:
        replay_decode.forget_specs()
        for rec in read_records(iter(log_bytes(name).splitlines(keepends=True))):
            before = len(replay_decode._known)
            same(rec.data)
            cut += len(replay_decode._known) != before or b'"kind":"Job"' in rec.data
    assert cut > 50  # the logs hold vcjob records, and the cut path saw them


def _job(**status) -> dict:
    return job("cut", tasks=[task("master", 1), task("worker", 2)], status=status or {"state": {"phase": "Running"}})


def _text(obj: dict, rtype: str = "MODIFIED", *, kind_last: bool = False) -> bytes:
    if kind_last:
        obj = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")} | {
            "apiVersion": obj["apiVersion"], "kind": obj["kind"]}
    return json.dumps({"type": rtype, "object": obj}, separators=(",", ":")).encode()


def _spec_text(obj: dict) -> str:
    return json.dumps(obj["spec"], separators=(",", ":"))


@pytest.mark.parametrize("kind_last", [False, True])
def test_a_job_s_records_in_a_row(kind_last: bool) -> None:
    j = _job()
    first = _text(j, "ADDED", kind_last=kind_last)
    same(first)
    for phase in ("Running", "Restarting", "Running"):
        j["status"] = {"state": {"phase": phase}, "running": 3}
        same(_text(j, kind_last=kind_last))
    assert replay_decode._known  # the job's spec is known: the next records were cut
    # the metadata grows, so the spec moves; then the spec itself changes
    j["metadata"]["labels"] = {"team": "vision", "tier": "x" * 40}
    same(_text(j, kind_last=kind_last))
    j["spec"]["tasks"][1]["replicas"] = 4
    same(_text(j, kind_last=kind_last))
    j["spec"]["maxRetry"] = 7
    same(_text(j, "DELETED", kind_last=kind_last))
    assert not replay_decode._known  # dropped with the job


def _known_then(data: bytes) -> None:
    """Teach the decoder the job's spec, then check `data`."""
    same(_text(_job()))
    assert replay_decode._known
    same(data)


def _with(obj: dict, text: str, key: str = "status") -> bytes:
    """The record of `obj` with `text` inserted before `"<key>":` in the object."""
    data = _text(obj).decode()
    at = data.index(f'"{key}":')
    return (data[:at] + text + data[at:]).encode()


def test_hostile_shapes() -> None:
    j = _job()
    spec = _spec_text(j)
    no_spec = {k: v for k, v in j.items() if k != "spec"}
    cases = {
        "duplicate spec after, invalid": _with(j, '"spec":{"tasks":7},'),
        "duplicate spec after, valid": _with(j, '"spec":{"queue":"other"},'),
        "duplicate spec after, null": _with(j, '"spec":null,'),
        "duplicate spec before, invalid": _with(j, '"spec":{"minAvailable":"x"},', "metadata"),
        "duplicate spec before, null": _with(j, '"spec":null,', "metadata"),
        "duplicate spelled with an escape": _with(j, '"sp\\u0065c":{"tasks":7},'),
        "duplicate spelled with spaces": _with(j, '"spec" : {"tasks":7},', "metadata"),
        "known spec nested, none on top": _with(no_spec, f'"extra":{{"spec":{spec}}},'),
        "known spec nested in metadata, none on top": _with(no_spec, f'"x":{{"spec":{spec}}},', "name"),
        "placeholder as the object's spec": _with(no_spec, f'"extra":{{"spec":{spec}}},"spec":{{"vcbus":"\\u0000"}},'),
        "placeholder as a duplicate": _with(j, '"spec":{"vcbus":"\\u0000"},'),
        "placeholder spaced, as a duplicate": _with(j, '"spec":{ "vcbus" : "\\u0000" },'),
        "placeholder with an escaped key, as a duplicate": _with(j, '"spec":{"\\u0076cbus":"\\u0000"},'),
        "placeholder before the known spec": _with(no_spec, f'"spec":{{"vcbus":"\\u0000"}},"x":{{"spec":{spec}}},'),
        "spec not an object": _with(no_spec, '"spec":0,'),
        "spec null": _with(no_spec, '"spec":null,'),
        "truncated": _text(j)[:-40],
        "trailing garbage": _text(j) + b"}",
        "crlf": _text(j) + b"\r\n",
        "no status": _text(no_spec | {"spec": j["spec"]}),
        "bookmark": _text(j, "BOOKMARK"),
        "unknown type": _text(j, "CHANGED"),
        "another api group": _text(j | {"apiVersion": "batch/v1"}),
        "no kind": _text({k: v for k, v in j.items() if k != "kind"}),
        "a second kind, another one": _with(j, '"kind":"Pod",'),
        "no name": _text(j | {"metadata": {"namespace": "default", "uid": "u"}}),
    }
    for name, data in cases.items():
        replay_decode.forget_specs()
        try:
            _known_then(data)
        except AssertionError as err:
            raise AssertionError(f"{name}: {err}") from None


def test_an_escape_elsewhere_is_no_reason_to_decode_whole() -> None:
    """A backslash in an annotation (kubectl's last-applied configuration) leaves the cut on."""
    j = _job()
    j["metadata"]["annotations"] = {"kubectl.kubernetes.io/last-applied-configuration": json.dumps(j["spec"])}
    same(_text(j))
    assert replay_decode._cut_spec(_text(j)) is not None  # decoded with the spec cut out
    same(_text(j))


def held() -> int:
    return sum(len(text) for text, _, _ in replay_decode._known.values())


def test_memory_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(replay_decode, "_KNOWN_MAX", 8)
    for i in range(50):
        j = job(f"j{i}", uid=f"u{i}")
        same(_text(j))
        same(_text(j))
        assert len(replay_decode._known) <= 8
        assert replay_decode._held[0] == held()


def test_spec_text_held_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Few jobs of large specs: the bytes bound the cache, not the count."""
    monkeypatch.setattr(replay_decode, "_KNOWN_BYTES", 20_000)
    for i in range(30):
        j = job(f"big{i}", uid=f"u{i}", tasks=[task(f"t{k}", 1) for k in range(12)])
        for phase in ("Pending", "Running"):
            j["status"] = {"state": {"phase": phase}}
            same(_text(j))
        assert replay_decode._held[0] == held() <= 20_000
    j["status"] = {"state": {"phase": "Completed"}}
    same(_text(j, "DELETED"))
    assert replay_decode._held[0] == held()
