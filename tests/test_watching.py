"""vcbus.k8s.watching: list-then-watch with resume, bookmarks, restarts and 410 Gone."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from tests.podsim import PodSimulator
from vcbus.k8s.watching import ResourceWatcher, api_request, resource_kind

pytestmark = pytest.mark.k8s

JOBS = "/apis/batch.volcano.sh/v1alpha1/namespaces/{ns}/jobs"
CMDS = "/apis/bus.volcano.sh/v1alpha1/namespaces/{ns}/commands"


def vcjob(name):
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": name},
        "spec": {"minAvailable": 1, "tasks": [{"name": "t", "replicas": 1, "template": {
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}]},
    }


def command(name, action="AbortJob"):
    return {
        "apiVersion": "bus.volcano.sh/v1alpha1", "kind": "Command", "metadata": {"name": name},
        "action": action,
        "target": {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "j", "uid": "u-1"},
    }


def take(w, n, timeout=10.0):
    return [w.next_event(timeout) for _ in range(n)]


def summary(events):
    return [(e["type"], e["object"]["metadata"]["name"]) for e in events]


def assert_quiet(w, seconds=1.0):
    with pytest.raises(TimeoutError):
        ev = w.next_event(seconds)
        pytest.fail(f"unexpected event {summary([ev])}")


def test_resource_table():
    assert resource_kind("vcjob").path("ns") == "/apis/batch.volcano.sh/v1alpha1/namespaces/ns/jobs"
    assert resource_kind("pods").default_label_selector == "volcano.sh/job-name"
    assert resource_kind("queues").path("ignored") == "/apis/scheduling.volcano.sh/v1beta1/queues"
    assert resource_kind("nodes").path() == "/api/v1/nodes"
    pc = resource_kind("pc")
    assert pc.path("ignored") == "/apis/scheduling.k8s.io/v1/priorityclasses" and not pc.namespaced
    assert (pc.api_version, pc.kind) == ("scheduling.k8s.io/v1", "PriorityClass")
    with pytest.raises(ValueError):
        resource_kind("deployments")


def test_added_modified_deleted_in_order_kubectl_shape(k8s, k8s_namespace):
    api = k8s.api_client()
    ns = k8s_namespace
    api_request(api, "POST", JOBS.format(ns=ns), body=vcjob("pre"))
    with ResourceWatcher(api, "vcjobs", namespace=ns) as w:
        (first,) = take(w, 1)
        assert summary([first]) == [("ADDED", "pre")]
        api_request(api, "POST", JOBS.format(ns=ns), body=vcjob("live"))
        api_request(api, "PATCH", JOBS.format(ns=ns) + "/live/status",
                    content_type="application/merge-patch+json",
                    body={"status": {"state": {"phase": "Pending"}}})
        api_request(api, "DELETE", JOBS.format(ns=ns) + "/live")
        evs = take(w, 3)
        assert summary(evs) == [("ADDED", "live"), ("MODIFIED", "live"), ("DELETED", "live")]
        assert evs[1]["object"]["status"]["state"]["phase"] == "Pending"
        for ev in [first, *evs]:
            assert set(ev) == {"type", "object"}
            obj = ev["object"]
            assert list(obj)[:2] == ["apiVersion", "kind"]
            assert obj["apiVersion"] == "batch.volcano.sh/v1alpha1" and obj["kind"] == "Job"
            assert "managedFields" not in obj["metadata"]
            json.dumps(ev)  # plain JSON data
        rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in evs]
        assert rvs == sorted(rvs)
        assert w.resource_version == evs[-1]["object"]["metadata"]["resourceVersion"]
        assert_quiet(w, 0.5)


def test_pods_are_filtered_by_job_label_and_carry_kind(k8s, k8s_namespace):
    api = k8s.api_client()
    ns = k8s_namespace
    base = {"apiVersion": "v1", "kind": "Pod", "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    api_request(api, "POST", f"/api/v1/namespaces/{ns}/pods",
                body={**base, "metadata": {"name": "mine", "labels": {"volcano.sh/job-name": "j"}}})
    api_request(api, "POST", f"/api/v1/namespaces/{ns}/pods", body={**base, "metadata": {"name": "other"}})
    with ResourceWatcher(api, "pods", namespace=ns) as w:
        (ev,) = take(w, 1)
        assert summary([ev]) == [("ADDED", "mine")]
        assert ev["object"]["apiVersion"] == "v1" and ev["object"]["kind"] == "Pod"
        assert_quiet(w, 0.5)


def test_bookmarks_move_the_position(k8s, k8s_namespace):
    api = k8s.api_client()
    ns = k8s_namespace
    api_request(api, "POST", CMDS.format(ns=ns), body=command("c0"))
    # The apiserver sends a bookmark shortly before a watch's timeoutSeconds.
    with ResourceWatcher(api, "commands", namespace=ns, watch_timeout_seconds=3) as w:
        take(w, 1)
        # Unrelated writes elsewhere advance the global revision.
        api_request(api, "POST", CMDS.format(ns="default"), body=command(f"elsewhere-{ns}"))
        rv0 = int(w.resource_version)
        deadline = time.monotonic() + 10
        while w.bookmarks == 0 and time.monotonic() < deadline:
            assert_quiet(w, 0.3)
        assert w.bookmarks >= 1
        assert_quiet(w, 0.3)  # consumes the queued position update
        assert int(w.resource_version) > rv0


def test_resume_from_stored_resource_version_without_repeating(k8s, k8s_namespace):
    api = k8s.api_client()
    ns = k8s_namespace
    for n in ("a", "b"):
        api_request(api, "POST", CMDS.format(ns=ns), body=command(n))
    with ResourceWatcher(api, "commands", namespace=ns) as w1:
        assert sorted(summary(take(w1, 2))) == [("ADDED", "a"), ("ADDED", "b")]
        saved = json.loads(json.dumps(w1.snapshot()))  # survives persistence
        # with a transform (the bridge keeps each object's metadata): the same position, each object
        # transformed, and the watcher's own objects untouched
        slim = w1.snapshot(transform=lambda obj: {"metadata": dict(obj["metadata"])})
        assert slim["resourceVersion"] == saved["resourceVersion"]
        assert slim["known"] == {uid: {"metadata": obj["metadata"]} for uid, obj in saved["known"].items()}
        slim["known"].popitem()[1]["metadata"]["name"] = "changed"
        assert json.loads(json.dumps(w1.snapshot())) == saved
    assert saved["resourceVersion"] and len(saved["known"]) == 2

    api_request(api, "POST", CMDS.format(ns=ns), body=command("c"))
    api_request(api, "DELETE", CMDS.format(ns=ns) + "/a")

    # Only the resourceVersion: a plain resumed watch.
    with ResourceWatcher(api, "commands", namespace=ns, resource_version=saved["resourceVersion"]) as w2:
        assert summary(take(w2, 2)) == [("ADDED", "c"), ("DELETED", "a")]
        assert_quiet(w2, 1.0)
        assert w2.relists == 0
    # The full snapshot: the same, and its known set follows.
    with ResourceWatcher.from_snapshot(api, "commands", saved, namespace=ns) as w3:
        assert summary(take(w3, 2)) == [("ADDED", "c"), ("DELETED", "a")]
        assert_quiet(w3, 0.5)
        assert sorted(o["metadata"]["name"] for o in w3.known.values()) == ["b", "c"]


def test_async_iteration(k8s, k8s_namespace):
    api = k8s.api_client()
    ns = k8s_namespace
    api_request(api, "POST", CMDS.format(ns=ns), body=command("x"))

    async def main():
        got = []
        with ResourceWatcher(api, "commands", namespace=ns) as w:
            async for ev in w:
                got.append(ev)
                if len(got) == 1:
                    await asyncio.to_thread(api_request, api, "DELETE", CMDS.format(ns=ns) + "/x")
                else:
                    break
        return got

    assert summary(asyncio.run(asyncio.wait_for(main(), 20))) == [("ADDED", "x"), ("DELETED", "x")]

    async def until_stopped():
        w = ResourceWatcher(api, "commands", namespace=ns).start()
        asyncio.get_running_loop().call_later(0.5, w.stop)
        return [ev async for ev in w]  # ends when the watcher is stopped

    assert asyncio.run(asyncio.wait_for(until_stopped(), 20)) == []


def test_survives_apiserver_stop_and_start(k8s, k8s_namespace):
    api = k8s.api_client()
    ns = k8s_namespace
    sim = PodSimulator(api)
    api_request(api, "POST", JOBS.format(ns=ns), body=vcjob("before"))
    with ResourceWatcher(api, "vcjobs", namespace=ns, backoff_initial=0.05, backoff_max=0.5) as w:
        assert summary(take(w, 1)) == [("ADDED", "before")]
        assert w.connected.wait(5)
        k8s.stop_apiserver()
        time.sleep(1.0)  # the watcher is now failing and backing off
        k8s.start_apiserver()
        api_request(api, "POST", JOBS.format(ns=ns), body=vcjob("after"))
        assert sim.list_pods(ns) == []  # the shared client works again too
        assert summary(take(w, 1, timeout=30)) == [("ADDED", "after")]
        assert_quiet(w, 1.0)  # "before" is not repeated
        assert w.reconnects >= 1 and w.last_error is not None


def test_relist_after_410_yields_deleted_for_vanished_objects(k8s, k8s_namespace):
    api = k8s.api_client()
    ns = k8s_namespace
    for n in ("keep", "gone", "changed"):
        api_request(api, "POST", CMDS.format(ns=ns), body=command(n))
    with ResourceWatcher(api, "commands", namespace=ns) as w1:
        assert sorted(summary(take(w1, 3))) == [("ADDED", "changed"), ("ADDED", "gone"), ("ADDED", "keep")]
        saved = w1.snapshot()
    old_rv = saved["resourceVersion"]

    # While the watcher is away: delete one, change one, add one.
    api_request(api, "DELETE", CMDS.format(ns=ns) + "/gone")
    api_request(api, "PATCH", CMDS.format(ns=ns) + "/changed",
                content_type="application/merge-patch+json", body={"action": "ResumeJob"})
    api_request(api, "POST", CMDS.format(ns=ns), body=command("new"))
    # Make the old resourceVersion unavailable: compact etcd past it and restart
    # the apiserver so its watch cache starts after it too.
    assert k8s.compact_etcd() > int(old_rv)
    k8s.stop_apiserver()
    k8s.start_apiserver()

    with ResourceWatcher.from_snapshot(api, "commands", saved, namespace=ns) as w2:
        evs = take(w2, 3, timeout=30)
        assert summary(evs) == [("DELETED", "gone"), ("ADDED", "new"), ("MODIFIED", "changed")] or \
            summary(evs) == [("DELETED", "gone"), ("MODIFIED", "changed"), ("ADDED", "new")]
        assert w2.relists == 1
        deleted = evs[0]["object"]
        assert deleted["kind"] == "Command" and deleted["action"] == "AbortJob"  # the last known state
        changed = next(e["object"] for e in evs if e["type"] == "MODIFIED")
        assert changed["action"] == "ResumeJob"
        assert_quiet(w2, 1.0)  # "keep" is unchanged and not repeated
        assert int(w2.resource_version) > int(old_rv)
        assert sorted(o["metadata"]["name"] for o in w2.known.values()) == ["changed", "keep", "new"]
        # And it keeps watching from the relist.
        api_request(api, "DELETE", CMDS.format(ns=ns) + "/keep")
        assert summary(take(w2, 1)) == [("DELETED", "keep")]


def test_synced_once_the_first_list_is_consumed(k8s, k8s_namespace):
    """`synced` (an informer's HasSynced): the caller has taken the whole first list; at once when resuming."""
    api = k8s.api_client()
    ns = k8s_namespace
    for n in ("a", "b"):
        api_request(api, "POST", CMDS.format(ns=ns), body=command(n))
    with ResourceWatcher(api, "commands", namespace=ns) as w:
        assert w.connected.wait(20)  # listed (both ADDED buffered) and watching
        assert not w.synced.is_set(), "synced before the caller took anything"
        take(w, 1)
        assert not w.synced.is_set(), "synced with half the list still buffered"
        take(w, 1)
        assert w.synced.is_set()
        position = w.resource_version
    with ResourceWatcher(api, "vcjobs", namespace=ns) as empty:
        assert empty.connected.wait(20)
        assert not empty.synced.is_set()
        assert_quiet(empty, 0.2)  # takes the empty list's position
        assert empty.synced.is_set()
    resumed = ResourceWatcher(api, "commands", namespace=ns, resource_version=position)
    assert resumed.synced.is_set(), "a resumed watcher has no list to wait for"
