"""What the long-running folds hold does not grow with the number of jobs created and deleted.

The one-hour soak (docs/operations.md "Memory over an hour") creates, completes and
deletes about 20,000 jobs; whatever a fold keeps per job after its deletion grows
`vcbus up` for good. Here the same folds the services run (the decider's engine,
the projector's views with eviction, the scheduler's cache) take a generated log of
N jobs, every one created, run, retried and deleted, and every container reachable
from them is counted (entries, not bytes: no timing, no allocator in the figure).
A log three times as long must leave every count as it is: O(1) per deleted job,
not O(N); with each PodGroup deleted before its job, and after it (Kubernetes'
garbage collector, once the vcjob is gone: the engine used to keep an empty entry
for every such job). The history retention is shorter than the log, as in the soak, so what
the retention bounds (the deleted jobs still within it) is the same in both.
"""

from __future__ import annotations

import collections
import json
import pathlib

import msgspec
import pytest

from projections.scheduler import SchedulerCache
from statemachines.engine import Engine
from statemachines.model.records import decode
from vcbus.bus.views import Views

RETENTION = 600.0  # seconds of record time: a few of the log's waves (each about 15 minutes long)


def census(root: object, name: str) -> collections.Counter:
    """Entries of every dict, set, list and tuple reachable from `root` through vcbus's own objects,
    by path (`views.statuses.pods[]`: the values of that dict)."""
    sizes: collections.Counter = collections.Counter()
    seen: set[int] = set()
    stack: list[tuple[object, str]] = [(root, name)]
    while stack:
        obj, path = stack.pop()
        if id(obj) in seen or isinstance(obj, (str, bytes, int, float, bool, type(None))):
            continue
        seen.add(id(obj))
        if isinstance(obj, (dict, set, frozenset, list, tuple)):
            sizes[path] += len(obj)
            stack += [(v, path + "[]") for v in (obj.values() if isinstance(obj, dict) else obj)]
            continue
        if not type(obj).__module__.startswith(("statemachines", "projections", "vcbus")):
            continue
        attrs = dict(vars(obj)) if hasattr(obj, "__dict__") else {}
        attrs.update({s: getattr(obj, s) for s in getattr(type(obj), "__slots__", ()) if hasattr(obj, s)})
        stack += [(v, f"{path}.{k}") for k, v in attrs.items()]
    return sizes


def fold(path: pathlib.Path) -> collections.Counter:
    engine = Engine(timers="by-time")
    views = Views(retention=RETENTION, evict=True)
    cache = SchedulerCache()
    encode = msgspec.json.Encoder().encode
    events = 0
    for seq, line in enumerate(path.read_bytes().splitlines(), 1):
        cache.apply(seq, line)
        for out in engine.apply(seq, decode(line)):
            events += 1
            views.apply(events, encode(out))
        for job in views.deleted_jobs.expired():  # what the projector does once it has written them
            views.deleted_jobs.drop(job)
            views.forget(job)
        views.evict_deleted()
    assert views.deleted_jobs.deleted and not views.history.jobs  # the last wave within the retention
    return census(engine, "engine") + census(views, "views") + census(cache, "cache")


def podgroups_deleted_after_their_jobs(src: pathlib.Path, dst: pathlib.Path) -> pathlib.Path:
    """`src` with each PodGroup's DELETED record moved after its vcjob's: the order Kubernetes' garbage
    collector gives when a vcjob is deleted in the background (`kubectl delete vcjob`), its PodGroup
    removed once its owner is gone."""
    held: dict[str, list[bytes]] = {}
    out: list[bytes] = []
    for line in src.read_bytes().splitlines():
        rec = json.loads(line)
        obj, meta = rec["object"], rec["object"]["metadata"]
        if obj["kind"] == "PodGroup" and rec["type"] == "DELETED":
            owner = next(ref["name"] for ref in meta["ownerReferences"] if ref["kind"] == "Job")
            held.setdefault(owner, []).append(line)
            continue
        out.append(line)
        if obj["kind"] == "Job" and rec["type"] == "DELETED":
            out += held.pop(meta["name"], [])
    assert not held
    dst.write_bytes(b"\n".join(out) + b"\n")
    return dst


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, int], pathlib.Path]:
    from benchmarks.replay import generate

    out = {}
    for jobs in (40, 120):
        tmp = tmp_path_factory.mktemp("logs")
        out[("foreground", jobs)] = tmp / f"jobs-{jobs}.jsonl"  # the simulator deletes a job's PodGroup first
        generate(out[("foreground", jobs)], jobs, wave=10)
        out[("background", jobs)] = podgroups_deleted_after_their_jobs(out[("foreground", jobs)], tmp / "gc.jsonl")
    return out


@pytest.mark.parametrize("deletion", ["foreground", "background"])
def test_what_the_folds_hold_does_not_grow_with_the_jobs_deleted(logs, deletion):
    small, large = fold(logs[(deletion, 40)]), fold(logs[(deletion, 120)])
    grown = {path: (small[path], large[path]) for path in sorted(set(small) | set(large)) if large[path] > small[path]}
    assert not grown, f"entries that grow with the jobs deleted (40 jobs -> 120 jobs): {grown}"
    assert small["engine.jobs"] == 0 and small["views.statuses.statuses"] == 0
