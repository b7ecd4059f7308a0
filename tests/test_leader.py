"""Leader election on a real API server: one holder of the Lease at a time, take-over, the fence.

Two electors in one process stand for two `vcbus up` replicas (each has its
own API client, identity and clock readings); "killing" the leader means it
stops renewing, as a SIGKILLed process does. The property checked at every
step is the safety one: whenever a contender wins the Lease, the previous
holder's fence (`check()`) already refuses.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from kubernetes import client

from vcbus.k8s.leader import LeaderElector, NotLeader

pytestmark = pytest.mark.k8s
DEADLINE = 60.0


def elector(k8s, ns: str, identity: str, duration: float = 2.0) -> LeaderElector:
    return LeaderElector(k8s.api_client(), namespace=ns, name="vcbus-test", identity=identity,
                         lease_duration=duration)


def take_over(candidate: LeaderElector, previous: LeaderElector) -> int:
    """Try until `candidate` holds the Lease; assert `previous` stopped holding first. Returns the tries."""
    deadline = time.monotonic() + DEADLINE
    tries = 0
    while True:
        tries += 1
        if candidate.try_acquire_or_renew():
            assert not previous.holds(), "two holders at once"
            return tries
        assert time.monotonic() < deadline, "no take-over"
        time.sleep(candidate.retry_period)


def test_one_holder_a_standby_takes_over_a_silent_leader_and_the_old_one_is_fenced(k8s, k8s_namespace):
    a, b = elector(k8s, k8s_namespace, "a"), elector(k8s, k8s_namespace, "b")
    assert a.try_acquire_or_renew() is True
    assert b.try_acquire_or_renew() is False  # held, renewed just now
    a.check()
    with pytest.raises(NotLeader, match="b does not hold the Lease"):
        b.check()
    assert a.try_acquire_or_renew() is True  # a renewal
    tries = take_over(b, a)  # a is "killed": it renews no more
    assert tries > 1  # b had to wait for the lease to expire
    b.check()
    with pytest.raises(NotLeader):
        a.check()  # a late write of the deposed leader is refused before it leaves
    assert a.try_acquire_or_renew() is False  # and it cannot take the Lease back while b renews
    lease = client.CoordinationV1Api(k8s.api_client()).read_namespaced_lease("vcbus-test", k8s_namespace)
    assert (lease.spec.holder_identity, lease.spec.lease_transitions) == ("b", 1)


def test_a_released_lease_is_taken_at_once(k8s, k8s_namespace):
    a, b = elector(k8s, k8s_namespace, "a", duration=30.0), elector(k8s, k8s_namespace, "b", duration=30.0)
    assert a.try_acquire_or_renew() and not b.try_acquire_or_renew()
    a.release()
    assert not a.holds()
    assert b.try_acquire_or_renew() is True  # no 30 s wait


def test_writes_carry_the_leaders_identity_as_field_manager(k8s, k8s_namespace):
    a = elector(k8s, k8s_namespace, "replica-1_abc")
    api = a.api.api_client
    assert a.try_acquire_or_renew()
    cm = client.CoreV1Api(api).create_namespaced_config_map(
        k8s_namespace, {"metadata": {"name": "written-by-leader"}, "data": {"k": "v"}})
    assert [f.manager for f in cm.metadata.managed_fields] == ["vcbus-replica-1_abc"]


async def test_keep_renews_until_stopped_and_reports_a_lost_lease(k8s, k8s_namespace):
    a, b = elector(k8s, k8s_namespace, "a"), elector(k8s, k8s_namespace, "b")
    stop = asyncio.Event()
    assert await a.acquire(stop)
    keeping = asyncio.create_task(a.keep(stop))
    # While a renews, b never gets it: try for longer than the lease duration.
    deadline = time.monotonic() + 2 * a.lease_duration
    while time.monotonic() < deadline:
        assert not await asyncio.to_thread(b.try_acquire_or_renew)
        await asyncio.sleep(b.retry_period)
    # Someone else overwrites the Lease (a split brain a real API server would not cause by itself):
    # a's renewals now fail their compare-and-swap, and keep() reports the loss within the renew deadline.
    api = client.CoordinationV1Api(k8s.api_client())
    lease = api.read_namespaced_lease("vcbus-test", k8s_namespace)
    lease.spec.holder_identity = "intruder"
    api.replace_namespaced_lease("vcbus-test", k8s_namespace, lease)
    assert await asyncio.wait_for(keeping, DEADLINE) is False
    with pytest.raises(NotLeader):
        a.check()
