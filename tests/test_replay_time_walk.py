"""Replay checks a record's timestamps and takes its object's time in one walk; both answers stay the same.

`statemachines.model.timestamps.object_time_if_valid` does what `all_valid` and
`statemachines.model.record_time.object_time` do, at once (replay's decoder hands the
time on as `Observed.at`). This checks it against those two on every record of the
example and scenario logs, and on pods, vcjobs and podgroups with one bad or missing
timestamp in each place a record can hold one.
"""

from __future__ import annotations

import copy

import msgspec
import pytest

from statemachines.model.objects import Job, Pod, PodGroup
from statemachines.model.record_time import object_time
from statemachines.model.records import Observed, decode
from statemachines.model.replay_decode import decode_replay
from statemachines.model.timestamps import INVALID, all_valid, object_time_if_valid
from tests.builders import job, pod, podgroup, task
from tests.test_determinism import LOGS, log_bytes
from vcbus.watchlog import read_records


def expected(when: str | None, obj: object) -> str | None:
    return object_time(obj) if all_valid(when, obj) else INVALID  # type: ignore[arg-type]


def test_every_record_of_the_logs() -> None:
    seen = 0
    for name in LOGS:
        for rec in read_records(iter(log_bytes(name).splitlines(keepends=True))):
            try:
                decoded = decode(rec.data)
            except Exception:  # noqa: BLE001 - invalid records are other tests' business
                continue
            if decoded.__class__ is not Observed:
                continue
            seen += 1
            assert object_time_if_valid(decoded.time, decoded.object) == expected(decoded.time, decoded.object)
    assert seen > 100


T1, T2, T3, T4 = "2026-11-30T08:00:01Z", "2026-11-30T08:00:05Z", "2026-11-30T08:00:09Z", "2026-11-30T08:00:07Z"
BAD = "2026-13-45T99:99:99Z"  # looks like one, is not a time


def _pod() -> dict:
    p = pod("j", "worker", 0, phase="Running")
    p["metadata"].update(creationTimestamp=T1, managedFields=[{"time": T2}, {"manager": "x"}])
    p["status"]["conditions"] = [{"type": "Ready", "status": "True", "lastTransitionTime": T2}]
    p["status"]["containerStatuses"] = [
        {"name": "a", "ready": True, "restartCount": 0, "state": {"running": {"startedAt": T3}}},
        {"name": "b", "ready": False, "restartCount": 1,
         "state": {"terminated": {"exitCode": 1, "startedAt": T2, "finishedAt": T4}, "running": {"startedAt": T3}}},
        {"name": "c", "state": {"terminated": {"exitCode": 0, "startedAt": T4}}},
        {"name": "d"},
    ]
    p["status"]["initContainerStatuses"] = [
        {"name": "i", "state": {"terminated": {"exitCode": 0, "startedAt": T1, "finishedAt": "2026-11-30T09:00:00Z"}}},
        {"name": "k", "state": {"running": {"startedAt": T1}}},
    ]
    return p


POD_PLACES = [
    ("metadata", "creationTimestamp"),
    ("metadata", "deletionTimestamp"),
    ("metadata", "managedFields", 0, "time"),
    ("status", "conditions", 0, "lastTransitionTime"),
    ("status", "containerStatuses", 0, "state", "running", "startedAt"),
    ("status", "containerStatuses", 1, "state", "terminated", "startedAt"),
    ("status", "containerStatuses", 1, "state", "terminated", "finishedAt"),
    ("status", "containerStatuses", 1, "state", "running", "startedAt"),
    ("status", "containerStatuses", 2, "state", "terminated", "startedAt"),
    ("status", "initContainerStatuses", 0, "state", "terminated", "startedAt"),
    ("status", "initContainerStatuses", 0, "state", "terminated", "finishedAt"),
    ("status", "initContainerStatuses", 1, "state", "running", "startedAt"),
]


def _set(obj: dict, path: tuple, value: object) -> dict:
    obj = copy.deepcopy(obj)
    node = obj
    for key in path[:-1]:
        node = node[key]
    if value is None:
        node.pop(path[-1], None)
    else:
        node[path[-1]] = value
    return obj


def _variants() -> list[tuple[str | None, dict]]:
    base = _pod()
    out: list[tuple[str | None, dict]] = [(None, base), (T1, base), (BAD, base)]
    for path in POD_PLACES:
        for value in (BAD, None, "2026-11-30T10:00:00Z", "2026-11-30T08:00:09.5+01:00"):
            out.append((None, _set(base, path, value)))
    deleting = _set(base, ("metadata", "deletionTimestamp"), "2026-11-30T08:01:00Z")
    out.append((None, _set(deleting, ("metadata", "deletionGracePeriodSeconds"), 30)))
    j = job("j", tasks=[task("worker", 2)], created=T1, status={"state": {"phase": "Running", "lastTransitionTime": T3}})
    out += [(None, j), (None, _set(j, ("status", "state", "lastTransitionTime"), BAD)),
            (None, _set(j, ("status", "state", "lastTransitionTime"), None))]
    pg = podgroup("j", "Running")
    out += [(None, _set(pg, ("metadata", "creationTimestamp"), T2)),
            (None, _set(pg, ("metadata", "creationTimestamp"), BAD))]
    return out


_OBJECT = {"Pod": Pod, "Job": Job, "PodGroup": PodGroup}


@pytest.mark.parametrize("when, obj", _variants())
def test_each_place_a_timestamp_can_be(when: str | None, obj: dict) -> None:
    typed_obj = msgspec.json.decode(msgspec.json.encode(obj), type=_OBJECT[obj["kind"]])
    assert object_time_if_valid(when, typed_obj) == expected(when, typed_obj)
    record: dict = {"type": "MODIFIED", "object": obj}
    if when is not None:
        record["time"] = when
    data = msgspec.json.encode(record)
    plain, fast = decode(data), decode_replay(data)
    assert isinstance(plain, Observed) and isinstance(fast, Observed)
    # the replay decoder's record is the general one's, with the object's time on it when every timestamp was fine
    assert (fast.type, fast.object, fast.time, fast.notes) == (plain.type, plain.object, plain.time, plain.notes)
    assert fast.at == (object_time(typed_obj) if all_valid(when, typed_obj) else None)  # None: the engine works it out
