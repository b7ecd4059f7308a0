"""Queue weights when jobs arrive together (issue 32, item 2), offline with the session engine.

Volcano's case: queues `q1` (weight 1) and `q3` (weight 3), 16 cpu, four vcjobs per queue of
4 x 1 cpu pods with minAvailable 1 (PodGroup minMember 1, minResources 1 cpu, minTaskMember
{worker: 4}: Volcano's `getMinTaskMember` is the replicas when the task sets no minAvailable), all
created at once. Volcano runs 4 pods of q1 and 12 of q3, every run: its controller creates all the
pods of every admitted job in one parallel burst, so the session after the enqueue sees every
pod, and proportion's water-filling over the queues' requests gives q1 4 and q3 12.

vcbus's actuator creates pods a command at a time, in whatever order the lanes carry them out,
so a session may see one queue's pods and not yet the other's. That must not change the split:
the pods an admitted PodGroup's `minTaskMember` promises and that do not exist yet count in its
queue's request (docs/scheduler.md, "Queue shares"). Each test here lets the pods appear in a
different order, between sessions, and the split is 4/12 whatever the order.
"""

from __future__ import annotations

import itertools

import pytest

from statemachines import outputs as o
from tests.sched_builders import Cluster, node, outs_of, pod, podgroup, queue

JOBS_PER_QUEUE, REPLICAS = 4, 4
QUEUES = {"q1": 1, "q3": 3}


def _jobs() -> list[tuple[str, str]]:
    return [(f"{q}-job-{j}", q) for q in QUEUES for j in range(JOBS_PER_QUEUE)]


def _cluster() -> Cluster:
    objects = [node(f"n{i}", cpu="4", memory="64Gi") for i in range(4)]
    objects += [queue("default"), queue("root")] + [queue(name, weight) for name, weight in QUEUES.items()]
    objects += [podgroup(name, 1, queue=q, min_resources={"cpu": "1", "memory": "1Gi"},
                         min_task_member={"worker": REPLICAS}, owner=name) for name, q in _jobs()]
    return Cluster(*objects)


def _running(cluster: Cluster) -> dict[str, int]:
    """Pods bound per queue."""
    out = dict.fromkeys(QUEUES, 0)
    for (kind, _), obj in cluster.objects.items():
        if kind == "Pod" and obj["spec"].get("nodeName"):
            group = obj["metadata"]["annotations"]["scheduling.k8s.io/group-name"]
            out[group.split("-job-")[0]] += 1
    return out


def _session(cluster: Cluster) -> None:
    result = cluster.session()
    cluster.land_binds(result, "Running")
    cluster.write_statuses(result)


def _settles_at_volcanos_split(cluster: Cluster) -> None:
    for _ in range(3):
        _session(cluster)
    assert _running(cluster) == {"q1": 4, "q3": 12}


def _add_pods(cluster: Cluster, jobs: list[tuple[str, str]]) -> None:
    for name, _ in jobs:
        for i in range(REPLICAS):
            cluster.add(pod(f"{name}-worker-{i}", name, role="worker"))


ORDERS = {
    "q1-first": ["q1", "q3"],
    "q3-first": ["q3", "q1"],
}


@pytest.mark.parametrize("order", list(ORDERS), ids=list(ORDERS))
def test_a_queue_whose_pods_come_first_does_not_take_the_other_queues_share(order):
    cluster = _cluster()
    first = cluster.session()  # every PodGroup is admitted at once; no pod exists yet
    assert len(outs_of(first.outputs, o.JobEnqueued)) == len(_jobs())
    cluster.write_statuses(first)
    for q in ORDERS[order]:  # one queue's pods, a session, then the other's
        _add_pods(cluster, [job for job in _jobs() if job[1] == q])
        _session(cluster)
    _settles_at_volcanos_split(cluster)


def test_pods_appearing_job_by_job_between_sessions_give_the_same_split():
    cluster = _cluster()
    first = cluster.session()
    cluster.write_statuses(first)
    for name, q in itertools.chain(*zip(*[[j for j in _jobs() if j[1] == q] for q in QUEUES])):
        _add_pods(cluster, [(name, q)])
        _session(cluster)
    _settles_at_volcanos_split(cluster)


def test_all_pods_seen_at_once_is_volcanos_split():
    cluster = _cluster()
    first = cluster.session()
    cluster.write_statuses(first)
    _add_pods(cluster, _jobs())
    _settles_at_volcanos_split(cluster)


def test_a_queue_whose_podgroups_are_admitted_a_session_later_still_gets_its_share():
    # the PodGroups are created one by one too: a session admits q1's, q1's pods appear, and the
    # next session admits q3's before it allocates
    cluster = _cluster()
    for name, q in _jobs():
        if q == "q3":
            cluster.add(cluster.get("PodGroup", name), "DELETED")
    first = cluster.session()
    assert {e.queue for e in outs_of(first.outputs, o.JobEnqueued)} == {"q1"}
    cluster.write_statuses(first)
    _add_pods(cluster, [job for job in _jobs() if job[1] == "q1"])
    for name, q in _jobs():
        if q == "q3":
            cluster.add(podgroup(name, 1, queue=q, min_resources={"cpu": "1", "memory": "1Gi"},
                                 min_task_member={"worker": REPLICAS}, owner=name))
    _session(cluster)  # admits q3's PodGroups, then allocates
    _add_pods(cluster, [job for job in _jobs() if job[1] == "q3"])
    _settles_at_volcanos_split(cluster)
