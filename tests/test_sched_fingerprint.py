"""vcbus.bus.scheduling.Fingerprint: a session runs only when the projection's dump changed."""

from __future__ import annotations

import copy
import hashlib

from projections.scheduler import SchedulerCache
from tests.sched_builders import node, pod, podgroup, priority_class, queue
from vcbus.bus.scheduling import Fingerprint, _encode


def whole(cache: SchedulerCache) -> bytes:
    """The plain reading: the canonical dump, encoded and hashed whole."""
    return hashlib.blake2b(_encode(cache.state()), digest_size=16).digest()


def cluster() -> SchedulerCache:
    cache = SchedulerCache()
    for obj in (node("n1"), node("n2", cpu="8"), queue("default"), priority_class("high", 100),
                podgroup("pg", 2), pod("p-0", "pg"), pod("p-1", "pg")):
        cache.apply_object("ADDED", obj)
    return cache


def test_it_changes_exactly_when_the_dump_does():
    cache, fp = cluster(), Fingerprint()
    plain = [whole(cache)]
    seen = [fp.of(cache)]
    assert fp.of(cache) == seen[0]  # memoised encodings: the same answer again
    steps = [
        ("MODIFIED", node("n1")),  # replaced by an equal fact: nothing new for a session
        ("MODIFIED", node("n1", cpu="16")),
        ("ADDED", pod("p-2", "pg")),
        ("DELETED", pod("p-0", "pg")),
        ("MODIFIED", podgroup("pg", 3)),
        ("ADDED", priority_class("low", 1)),
    ]
    for event, obj in steps:
        cache.apply_object(event, copy.deepcopy(obj))
        plain.append(whole(cache))
        seen.append(fp.of(cache))
    for i in range(1, len(seen)):
        assert (seen[i] == seen[i - 1]) == (plain[i] == plain[i - 1]), steps[i - 1]
    assert seen[1] == seen[0] and seen[2] != seen[1]


def test_a_fresh_fingerprint_of_a_cache_folded_alike_agrees():
    a, b = cluster(), cluster()
    fp = Fingerprint()
    fp.of(a)
    a.apply_object("MODIFIED", node("n2", cpu="2"))
    b.apply_object("MODIFIED", node("n2", cpu="2"))
    assert fp.of(a) == Fingerprint().of(b)
