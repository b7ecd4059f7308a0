"""vcbus.k8s.watchcache: the actuator reads what the bridge's watches hold, on a real API server."""

from __future__ import annotations

import time

import pytest
from kubernetes import client

from statemachines import outputs as o
from vcbus.k8s.actuator import Actuator
from vcbus.k8s.watchcache import PODS, WatchCache
from vcbus.k8s.watching import ResourceWatcher, api_request

pytestmark = pytest.mark.k8s
T1 = "2026-12-02T08:00:00Z"


def pod(name: str, scheduler: str = "volcano") -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"schedulerName": scheduler, "containers": [{"name": "c", "image": "busybox"}]}}


def consume_until(w: ResourceWatcher, cond, what: str, timeout: float = 30.0) -> None:
    """Take events as the bridge does (each one into the watcher's known objects) until `cond()`."""
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"not within {timeout}s: {what}"
        try:
            w.next_event(0.2)
        except TimeoutError:
            pass


def test_objects_by_name_follow_the_watch_and_a_re_created_name_is_the_new_incarnation(k8s, k8s_namespace):
    api, ns = k8s.api_client(), k8s_namespace
    with ResourceWatcher(api, "pods", namespace=ns, label_selector="") as w:
        cache = WatchCache({"pods": w})
        assert cache.get(PODS, ns, "p") is None  # nothing seen: a miss
        first = api_request(api, "POST", f"/api/v1/namespaces/{ns}/pods", body=pod("p"))
        consume_until(w, lambda: cache.get(PODS, ns, "p") is not None, "the pod in the cache")
        assert cache.get(PODS, ns, "p")["metadata"]["uid"] == first["metadata"]["uid"]
        assert cache.get(PODS, "other", "p") is None and cache.get("vcjobs", ns, "p") is None
        api_request(api, "DELETE", f"/api/v1/namespaces/{ns}/pods/p", query={"gracePeriodSeconds": "0"})
        consume_until(w, lambda: cache.get(PODS, ns, "p") is None, "the deleted pod gone from the cache")
        second = api_request(api, "POST", f"/api/v1/namespaces/{ns}/pods", body=pod("p"))
        consume_until(w, lambda: cache.get(PODS, ns, "p") is not None, "the new pod in the cache")
        assert cache.get(PODS, ns, "p")["metadata"]["uid"] == second["metadata"]["uid"] != first["metadata"]["uid"]
        assert cache.hits >= 2 and cache.misses >= 3


def test_a_resumed_position_keeps_only_metadata_which_is_a_miss(k8s, k8s_namespace):
    api, ns = k8s.api_client(), k8s_namespace
    made = api_request(api, "POST", f"/api/v1/namespaces/{ns}/pods", body=pod("q"))
    uid = made["metadata"]["uid"]
    trimmed = {"apiVersion": "v1", "kind": "Pod", "metadata": made["metadata"]}  # as vcbus.k8s.bridge.trim stores it
    w = ResourceWatcher.from_snapshot(api, "pods", {"resourceVersion": made["metadata"]["resourceVersion"],
                                                    "known": {uid: trimmed}}, namespace=ns, label_selector="")
    assert w.by_name(ns, "q") == trimmed  # a deep copy of the position
    assert WatchCache({"pods": w}).get(PODS, ns, "q") is None  # no spec: the API server is read instead


def test_a_bind_whose_pod_the_cache_holds_as_another_incarnation_reads_the_api_server(k8s, k8s_namespace):
    api, ns = k8s.api_client(), k8s_namespace
    core = client.CoreV1Api(api)
    node = f"wc-{ns[-6:]}"
    api_request(api, "POST", "/api/v1/nodes", body={"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}})
    try:
        with ResourceWatcher(api, "pods", namespace=ns, label_selector="") as w:
            cache = WatchCache({"pods": w})
            old = api_request(api, "POST", f"/api/v1/namespaces/{ns}/pods", body=pod("b"))
            consume_until(w, lambda: cache.get(PODS, ns, "b") is not None, "the first pod in the cache")
            api_request(api, "DELETE", f"/api/v1/namespaces/{ns}/pods/b", query={"gracePeriodSeconds": "0"})
            new = api_request(api, "POST", f"/api/v1/namespaces/{ns}/pods", body=pod("b"))
            # the watcher's events are not taken: the cache still holds the first pod
            assert cache.get(PODS, ns, "b")["metadata"]["uid"] == old["metadata"]["uid"]
            actuator = Actuator(api, cache)
            bind = o.BindPod(job=f"{ns}/j", seq=1, time=T1, name="b", uid=new["metadata"]["uid"], node=node)
            assert actuator.apply(bind) == "applied"
            assert core.read_namespaced_pod("b", ns).spec.node_name == node
            stale = o.BindPod(job=f"{ns}/j", seq=1, time=T1, name="b", uid=old["metadata"]["uid"], node=node)
            assert actuator.apply(stale) == "done"  # that pod is gone: nothing to bind
    finally:
        api_request(api, "DELETE", f"/api/v1/nodes/{node}")


def test_a_bind_from_the_cache_still_refuses_a_pod_of_another_scheduler(k8s, k8s_namespace):
    api, ns = k8s.api_client(), k8s_namespace
    with ResourceWatcher(api, "pods", namespace=ns, label_selector="") as w:
        cache = WatchCache({"pods": w})
        made = api_request(api, "POST", f"/api/v1/namespaces/{ns}/pods", body=pod("d", scheduler="default-scheduler"))
        consume_until(w, lambda: cache.get(PODS, ns, "d") is not None, "the pod in the cache")
        bind = o.BindPod(job=f"{ns}/j", seq=1, time=T1, name="d", uid=made["metadata"]["uid"], node="n")
        hits = cache.hits
        assert Actuator(api, cache).apply(bind) == "refused"
        assert cache.hits == hits + 1  # decided on the cached pod, without a read
        assert not client.CoreV1Api(api).read_namespaced_pod("d", ns).spec.node_name


def test_an_event_on_a_pod_the_cache_holds_names_it_without_a_read(k8s, k8s_namespace):
    api, ns = k8s.api_client(), k8s_namespace
    with ResourceWatcher(api, "pods", namespace=ns, label_selector="") as w:
        cache = WatchCache({"pods": w})
        made = api_request(api, "POST", f"/api/v1/namespaces/{ns}/pods", body=pod("e"))
        consume_until(w, lambda: cache.get(PODS, ns, "e") is not None, "the pod in the cache")
        hits, misses = cache.hits, cache.misses
        event = o.RecordEvent(job=f"{ns}/j", seq=1, time=T1, reason="Scheduled", message="assigned to n",
                              kind="Pod", name="e", api_version="v1", component="vc-scheduler")
        assert Actuator(api, cache).apply(event) == "applied"
        assert (cache.hits, cache.misses) == (hits + 1, misses)  # the pod named from the cache
        events = client.CoreV1Api(api).list_namespaced_event(ns, field_selector="involvedObject.name=e").items
        assert [(e.reason, e.involved_object.uid) for e in events] == [("Scheduled", made["metadata"]["uid"])]
        # a pod the cache has not seen is read from the API server, as before
        api_request(api, "POST", f"/api/v1/namespaces/{ns}/pods", body=pod("f"))
        unseen = o.RecordEvent(job=f"{ns}/j", seq=2, time=T1, reason="Scheduled", message="assigned to n",
                               kind="Pod", name="f", api_version="v1", component="vc-scheduler")
        assert Actuator(api, WatchCache({})).apply(unseen) == "applied"
