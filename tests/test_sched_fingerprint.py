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


def test_the_facts_beside_nodes_queues_podgroups_and_pods_change_it_too():
    """Namespaces, PVCs, PVs, StorageClasses, Services and the pods' controllers are read by a session
    (namespaceSelector, the volume checks, default spreading): a change to one is something new to
    schedule on (a claim bound since the last session lets its pods go), an equal record is not."""
    cache, fp = cluster(), Fingerprint()
    claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data", "namespace": "default"},
             "spec": {"storageClassName": "fast"}}
    bound = copy.deepcopy(claim)
    bound["spec"]["volumeName"] = "pv"
    bound["metadata"]["annotations"] = {"pv.kubernetes.io/bind-completed": "yes"}
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "default"},
               "spec": {"selector": {"app": "a"}}}
    steps = [
        ("ADDED", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team", "labels": {"t": "x"}}}),
        ("MODIFIED", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team", "labels": {"t": "y"}}}),
        ("ADDED", claim),
        ("MODIFIED", bound),
        ("ADDED", {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "fast"}}),
        ("ADDED", {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv"}}),
        ("ADDED", service),
        ("ADDED", {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "r", "namespace": "default"},
                   "spec": {"selector": {"matchLabels": {"app": "a"}}}}),
        ("DELETED", service),
    ]
    seen = [fp.of(cache)]
    plain = [whole(cache)]
    for event, obj in steps:
        cache.apply_object(event, copy.deepcopy(obj))
        seen.append(fp.of(cache))
        plain.append(whole(cache))
        assert seen[-1] != seen[-2] and plain[-1] != plain[-2], (event, obj["kind"])
    cache.apply_object("MODIFIED", copy.deepcopy(bound))  # the same claim again: nothing new
    assert fp.of(cache) == seen[-1] and whole(cache) == plain[-1]
