"""backfill (reference §8.1), preempt (§8.2), reclaim (§8.3) and how victim votes combine (§8.4)."""

from __future__ import annotations

import pytest
import yaml

from statemachines import outputs as o
from statemachines.scheduler.config import DEFAULT_CONFIG_YAML, config_from_dict
from statemachines.scheduler.framework import PERMIT, _victims
from tests.sched_builders import Cluster, node, outs_of, pod, podgroup, priority_class, queue


def config_with(actions: str):
    data = yaml.safe_load(DEFAULT_CONFIG_YAML)
    data["actions"] = actions
    return config_from_dict(data)


ALL = config_with("enqueue, allocate, backfill, reclaim, preempt")


def evicted(result) -> list[tuple[str, str]]:
    return [(e.pod, e.action) for e in outs_of(result.outputs, o.PodEvicted)]


# ------------------------------------------------------------------ backfill


def test_backfill_places_best_effort_pods_and_binds_once_the_gang_is_ready():
    cluster = Cluster(queue(), node("n1", cpu="1"), node("n2", cpu="1"),
                      pod("hog", None, cpu="1", node="n1", phase="Running", memory=None),
                      podgroup("pg", 2, phase="Inqueue"),
                      *[pod(f"pg-w-{i}", "pg", cpu=None, memory=None) for i in range(2)])
    result = cluster.session()
    assert [(b.name, b.node) for b in result.binds] == [("pg-w-0", "n2"), ("pg-w-1", "n2")]
    assert {e.action for e in outs_of(result.outputs, o.PodAllocated)} == {"backfill"}


def test_backfill_still_checks_the_pod_count_and_node_filters():
    cluster = Cluster(queue(), node("n1", pods="1"), node("n2", unschedulable=True),
                      pod("other", None, node="n1", phase="Running"),
                      podgroup("pg", 1, phase="Inqueue"), pod("pg-w-0", "pg", cpu=None, memory=None))
    result = cluster.session()
    assert result.binds == []
    assert result.reports["default/pg"].tasks[0].fit_error == (
        "0/2 nodes are unavailable: 1 node(s) pod number exceeded, 1 node(s) were unschedulable.")


def test_backfill_is_not_run_for_pending_groups():
    cluster = Cluster(queue(), node("n1"), podgroup("pg", 1, phase="Pending", min_resources={"cpu": "100"}),
                      pod("pg-w-0", "pg", cpu=None, memory=None))
    assert cluster.session().binds == []


# ------------------------------------------------------------------ preempt


def preempt_scene(low_priority: int = 1, preemptable: str | None = None, policy: str = "") -> Cluster:
    annotations = {"volcano.sh/preemptable": preemptable} if preemptable else None
    return Cluster(queue(), node("n1", cpu="2"), priority_class("high", 100), priority_class("low", low_priority),
                   podgroup("low", 1, phase="Running", priority_class="low"),
                   *[pod(f"low-w-{i}", "low", node="n1", phase="Running", memory=None, annotations=annotations)
                     for i in range(2)],
                   podgroup("high", 1, phase="Inqueue", priority_class="high"),
                   pod("high-w-0", "high", cpu="2", memory=None, preemption_policy=policy), config=ALL)


def test_preempt_evicts_lower_priority_tasks_in_reverse_task_order_and_pipelines():
    result = preempt_scene().session()
    assert evicted(result) == [("low-w-1", "preempt"), ("low-w-0", "preempt")]
    assert [e.name for e in outs_of(result.outputs, o.EvictPod)] == ["low-w-1", "low-w-0"]
    assert {e.preemptor for e in outs_of(result.outputs, o.PodEvicted)} == {"default/high-w-0"}
    assert result.binds == []  # pipelined onto the releasing resources, bound in a later session
    [cond] = [c for c in outs_of(result.outputs, o.UpdatePodCondition) if c.name == "high-w-0"]
    assert cond.nominated_node == "n1"
    assert cond.message.endswith("can possibly be assigned to n1, once resource is released and minAvailable is satisfied")


@pytest.mark.parametrize(("low", "preemptable", "policy"), [(100, None, ""), (1, "false", ""), (1, None, "Never")])
def test_no_preemption_of_equal_priority_unpreemptable_pods_or_by_never_preemptors(low, preemptable, policy):
    assert evicted(preempt_scene(low, preemptable, policy).session()) == []


def test_evicted_pods_are_releasing_until_gone_and_the_preemptor_lands_after():
    cluster = preempt_scene()
    result = cluster.session()
    state = cluster.cache.state()["pods"]
    assert state["default/low-w-0"]["status"] == "Releasing"  # our EvictPod, assumed
    again = cluster.session()
    assert evicted(again) == [] and again.binds == []  # still releasing: pipelined again, nothing new
    for name in ("low-w-0", "low-w-1"):
        cluster.add(cluster.get("Pod", name), "DELETED")
    assert [(b.name, b.node) for b in cluster.session().binds] == [("high-w-0", "n1")]
    assert result.evictions and result.evictions[0].name == "low-w-1"


# ------------------------------------------------------------------ reclaim


def reclaim_scene(min_member: int) -> Cluster:
    return Cluster(queue("q1"), queue("q2"), node("n1", cpu="3"), node("n2", cpu="1"),
                   podgroup("a", min_member, queue="q1", phase="Running"),
                   *[pod(f"a-w-{i}", "a", node="n1", phase="Running", memory=None) for i in range(3)],
                   podgroup("b", 1, queue="q2", phase="Inqueue"), pod("b-w-0", "b", cpu="2", memory=None),
                   config=ALL)


def test_reclaim_takes_back_from_an_overdrawn_queue():
    # gang offers the node's tasks (walked by uid) while a keeps > minAvailable ready: a-w-0, a-w-1;
    # they are evicted in reverse task order until b fits
    result = reclaim_scene(1).session()
    assert evicted(result) == [("a-w-1", "reclaim"), ("a-w-0", "reclaim")]


def test_gang_keeps_the_victims_job_at_min_available():
    # a has 3 ready with minAvailable 2: gang offers one victim, which frees too little
    assert evicted(reclaim_scene(2).session()) == []


def test_reclaim_skips_queues_that_are_not_reclaimable():
    cluster = reclaim_scene(1)
    cluster.update(queue("q1", reclaimable=False))
    assert evicted(cluster.session()) == []


# ------------------------------------------------------------------ §8.4 vote combination


def voter(chosen: list[str] | None):
    def vote(preemptor, candidates):
        if chosen is None:
            return [], 0  # abstain
        return [c for c in candidates if c.uid in chosen], PERMIT
    return vote


class T:
    def __init__(self, uid: str) -> None:
        self.uid = uid


CANDIDATES = [T("a"), T("b"), T("c")]


@pytest.mark.parametrize(
    ("tiers", "expected"),
    [
        ([[voter(["a", "b"]), voter(["b", "c"])]], ["b"]),  # intersection within a tier
        ([[voter(["a", "b"]), voter([])], [voter(["c"])]], ["c"]),  # an empty answer ends the tier
        ([[voter(["a"]), voter(["b"])], [voter(["c"])]], ["c"]),  # empty intersection: not decided
        ([[voter(["a"]), voter(["b"]), voter(["c", "b"])]], ["b", "c"]),  # ... and the next plugin starts over
        ([[voter(None)], [voter(["a"])]], ["a"]),  # abstentions are skipped
        ([[voter(["a"])], [voter(["b"])]], ["a"]),  # the first deciding tier wins
        ([[voter([])], [voter([])]], []),
    ],
)
def test_victim_votes_combine_per_tier(tiers, expected):
    assert [t.uid for t in _victims(tiers, T("p"), CANDIDATES)] == expected


# Cases of pkg/scheduler/actions/preempt/preempt_test.go (TestPreempt). The upstream harness opens the
# session with the tiers as written, so a flag left out there is off: spell every flag out here.
def only(name: str, *flags: str) -> dict:
    from statemachines.scheduler.config import FLAGS

    return {"name": name, **{key: key in flags for key in FLAGS}}


PREEMPT_TEST_CONFIG = {"actions": "preempt", "tiers": [{"plugins": [
    only("conformance", "enablePreemptable"),
    only("gang", "enablePreemptable", "enableJobPipelined", "enableJobStarving"),
    only("priority", "enableTaskOrder", "enableJobOrder", "enablePreemptable", "enableJobPipelined", "enableJobStarving"),
    only("proportion", "enabledOverused", "enabledAllocatable", "enableQueueOrder"),
]}]}
YES, NO = {"volcano.sh/preemptable": "true"}, {"volcano.sh/preemptable": "false"}


def ppg(name: str, min_member: int, prio: str = "", min_task: dict | None = None, q: str = "q1") -> dict:
    return podgroup(name, min_member, namespace="c1", queue=q, phase="Inqueue", priority_class=prio, min_task_member=min_task)


def ppod(name: str, group: str, cpu: str | None, node: str = "", labels: dict | None = None, **kw) -> dict:
    memory = f"{cpu}G" if cpu else None
    return pod(name, group, namespace="c1", cpu=cpu, memory=memory, node=node, phase="Running" if node else "Pending",
               labels=labels, **kw)


def pnode(name: str, cpu: str, pods: str = "10") -> dict:
    return node(name, cpu=cpu, memory=f"{cpu}G", pods=pods)


def pqueue(name: str, cap: str | None = None) -> dict:
    return queue(name, 1, capability={"cpu": cap, "memory": f"{cap}G"} if cap else None)


PRIOS = [priority_class("high-priority", 100000), priority_class("low-priority", 10)]
PREEMPT_UPSTREAM = [
    ("do not preempt if there are enough idle resources",
     [ppg("pg1", 3, min_task={"": 3}), ppod("preemptee1", "pg1", "1", "n1"), ppod("preemptee2", "pg1", "1", "n1"),
      ppod("preemptor1", "pg1", "1"), pnode("n1", "10"), pqueue("q1")], []),
    ("do not preempt if job is pipelined",
     [ppg("pg1", 1, min_task={"": 2}), ppg("pg2", 1, min_task={"": 2}), ppod("preemptee1", "pg1", "1", "n1"),
      ppod("preemptee2", "pg1", "1", "n1"), ppod("preemptee3", "pg2", "1", "n1"), ppod("preemptor2", "pg2", "1"),
      pnode("n1", "3"), pqueue("q1")], []),
    ("preempt one task of different job to fit both jobs on one node",
     [ppg("pg1", 1, "low-priority", {"": 2}), ppg("pg2", 1, "high-priority", {"": 2}),
      ppod("preemptee1", "pg1", "1", "n1", YES), ppod("preemptee2", "pg1", "1", "n1", NO),
      ppod("preemptor1", "pg2", "1"), ppod("preemptor2", "pg2", "1"), pnode("n1", "2"), pqueue("q1")], ["preemptee1"]),
    ("preempt enough tasks to fit large task of different job",
     [ppg("pg1", 1, "low-priority", {"": 3}), ppg("pg2", 1, "high-priority", {"": 1}),
      ppod("preemptee1", "pg1", "1", "n1", YES), ppod("preemptee2", "pg1", "1", "n1", YES),
      ppod("preemptee3", "pg1", "1", "n1", NO), ppod("preemptor1", "pg2", "5"), pnode("n1", "6"), pqueue("q1")],
     ["preemptee2", "preemptee1"]),
    ("preempt low priority job in same queue",
     [ppg("pg1", 0, "low-priority", {}), ppg("pg2", 1, "high-priority", {"": 1}),
      ppod("preemptee1", "pg1", "3", "n1", YES), ppod("preemptor1", "pg2", "3"), pnode("n1", "12"), pqueue("q1", "4")],
     ["preemptee1"]),
    ("allocatable and has enough resource, don't preempt",
     [ppg("pg1", 1, "low-priority", {}), ppg("pg2", 1, "high-priority", {"": 1}),
      ppod("preemptee1", "pg1", "3", "n1", YES), ppod("preemptor1", "pg2", "3"), pnode("n1", "12"), pqueue("q1", "6")],
     []),
    ("not pod with preemptable=false or higher priority",
     [ppg("pg1", 1, "low-priority", {}), ppg("pg2", 1, "high-priority", {"": 1}),
      ppod("preemptee1", "pg1", "1", "n1", NO), ppod("preemptee2", "pg1", "1", "n1", YES),
      ppod("preemptee3", "pg1", "1", "n1", YES, priority=100000), ppod("preemptor1", "pg2", "1"), pnode("n1", "12"),
      pqueue("q1", "3")], ["preemptee2"]),
    ("unBestEffort high-priority pod preempt BestEffort low-priority pod in same queue",
     [ppg("pg1", 0, "low-priority", {}), ppg("pg2", 1, "high-priority", {"": 1}),
      ppod("preemptee1", "pg1", None, "n1", YES), ppod("preemptor1", "pg2", "3"), pnode("n1", "12", pods="1"),
      pqueue("q1", "6")], ["preemptee1"]),
    ("BestEffort high-priority pod preempt BestEffort low-priority pod in same queue",
     [ppg("pg1", 0, "low-priority", {}), ppg("pg2", 1, "high-priority", {"": 1}),
      ppod("preemptee1", "pg1", None, "n1", YES), ppod("preemptor1", "pg2", None), pnode("n1", "12", pods="1"),
      pqueue("q1", "6")], ["preemptee1"]),
    ("can not preempt resources when task preemption policy is never",
     [ppg("pg1", 0, "low-priority"), ppg("pg2", 1, "high-priority"), ppod("preemptee1", "pg1", "1", "n1", YES),
      ppod("preemptor1", "pg2", "1", preemption_policy="Never"), pnode("n1", "1", pods="1"), pqueue("q1")], []),
    ("rollback evictions when preemptor exceeds queue capacity after evicting victims",
     [ppg("pg1", 1, "low-priority", {"": 2}), ppg("pg2", 1, "high-priority", {"": 1}),
      ppod("preemptee1", "pg1", "1", "n1", YES), ppod("preemptee2", "pg1", "1", "n1", YES),
      ppod("preemptor1", "pg2", "4"), pnode("n1", "10"), pqueue("q1", "3")], []),
    ("only commit evictions on the node where preemption succeeds",
     [ppg("pg1", 0, "low-priority", {}), ppg("pg2", 1, "high-priority", {"": 1}), ppg("pg3", 0, "low-priority", {}),
      ppod("preemptee1", "pg1", "1", "n1", YES), ppod("preemptee2", "pg3", "4", "n2", YES),
      ppod("preemptor1", "pg2", "3"), pnode("n1", "3"), pnode("n2", "4"), pqueue("q1", "6")], ["preemptee2"]),
    ("multi-queue: preemptorTasks must not be overwritten by intra-job preemption of another queue",
     [ppg("pg1", 1, min_task={"": 1}), ppg("pg2", 0, "low-priority", {}, q="q2"),
      ppg("pg3", 1, "high-priority", {"": 1}, q="q2"), ppod("q1-runner1", "pg1", "1", "n1"),
      ppod("q2-preemptee1", "pg2", "1", "n1", YES), ppod("q2-preemptor1", "pg3", "1"), pnode("n1", "2"),
      pqueue("q1"), pqueue("q2", "4")], ["q2-preemptee1"]),
]


@pytest.mark.parametrize(("objects", "expected"), [c[1:] for c in PREEMPT_UPSTREAM], ids=[c[0] for c in PREEMPT_UPSTREAM])
def test_upstream_preempt_cases(objects, expected):
    result = Cluster(*PRIOS, *objects, config=PREEMPT_TEST_CONFIG).session()
    assert [e.name for e in result.evictions] == expected


# Cases of pkg/scheduler/actions/reclaim/reclaim_test.go (TestReclaim); each case registers some plugins.
RECLAIM_FLAGS = {
    "conformance": ("enableReclaimable",),
    "gang": ("enableReclaimable", "enableJobStarving"),
    "proportion": ("enableReclaimable", "enableQueueOrder", "enablePreemptive"),
    "priority": ("enableReclaimable", "enableJobOrder", "enableTaskOrder"),
}


def reclaim_config(*plugins: str) -> dict:
    order = ["conformance", "gang", "proportion", "priority"]
    return {"actions": "reclaim", "tiers": [{"plugins": [only(p, *RECLAIM_FLAGS[p]) for p in order if p in plugins]}]}


def rpg(name: str, min_member: int, q: str, prio: str, phase: str = "Inqueue") -> dict:
    return podgroup(name, min_member, namespace="c1", queue=q, phase=phase, priority_class=prio)


def rqueue(name: str, weight: int = 1, priority: int = 0, state: str = "Open") -> dict:
    return queue(name, weight, priority=priority, state=state)


BASE3 = ("conformance", "gang", "proportion")
PRIO3 = [priority_class("low-priority", 100), priority_class("mid-priority", 500), priority_class("high-priority", 1000)]
RECLAIM_UPSTREAM = [
    ("Two Queue with one Queue overusing resource, should reclaim", BASE3,
     [rpg("pg1", 1, "q1", "low-priority"), rpg("pg2", 1, "q2", "high-priority"),
      ppod("preemptee1", "pg1", "1", "n1", NO), ppod("preemptee2", "pg1", "1", "n1", YES),
      ppod("preemptee3", "pg1", "1", "n1", NO), ppod("preemptor1", "pg2", "1"),
      node("n1", cpu="3", memory="3Gi", pods="10"), rqueue("q1"), rqueue("q2")], ["preemptee2"]),
    ("sort reclaimees when reclaiming from overusing queue", BASE3 + ("priority",),
     [*PRIO3, rpg("pg1", 1, "q1", "mid-priority"), rpg("pg2", 1, "q2", "low-priority"),
      rpg("pg3", 1, "q3", "high-priority"),
      ppod("preemptee1-1", "pg1", "1", "n1", YES), ppod("preemptee1-2", "pg1", "1", "n1", YES),
      ppod("preemptee2-1", "pg2", "1", "n1", YES), ppod("preemptee2-2", "pg2", "1", "n1", NO),
      ppod("preemptor1", "pg3", "1"), node("n1", cpu="4", memory="4Gi", pods="10"),
      rqueue("q1"), rqueue("q2"), rqueue("q3")], ["preemptee2-1"]),
    ("sort reclaimees when reclaiming from overusing queues with different queue priority", BASE3,
     [rpg("pg1", 1, "q1", "mid-priority"), rpg("pg2", 1, "q2", "mid-priority"), rpg("pg3", 1, "q3", "mid-priority"),
      ppod("preemptee1-1", "pg1", "1", "n1", YES), ppod("preemptee1-2", "pg1", "1", "n1", NO),
      ppod("preemptee2-1", "pg2", "1", "n1", YES), ppod("preemptee2-2", "pg2", "1", "n1", NO),
      ppod("preemptor1", "pg3", "1"), node("n1", cpu="4", memory="4Gi", pods="10"),
      rqueue("q1", priority=5), rqueue("q2", priority=10), rqueue("q3", priority=1)], ["preemptee1-1"]),
    ("can not reclaim resources when task preemption policy is never", BASE3,
     [rpg("pg1", 0, "q1", "low-priority"), rpg("pg2", 0, "q2", "high-priority"),
      ppod("preemptee1", "pg1", "1", "n1", YES), ppod("preemptor1", "pg2", "1", preemption_policy="Never"),
      node("n1", cpu="1", memory="1Gi", pods="1"), rqueue("q1", 5), rqueue("q2", 10)], []),
    ("can not reclaim resources when queue is not open(proportion plugin)", BASE3,
     [rpg("pg1", 1, "q1", "low-priority", "Running"), rpg("pg2", 1, "q2", "high-priority"),
      ppod("preemptee1", "pg1", "1", "n1", NO), ppod("preemptee2", "pg1", "1", "n1", YES),
      ppod("preemptee3", "pg1", "1", "n1", NO), ppod("preemptor1", "pg2", "1"),
      node("n1", cpu="3", memory="3Gi", pods="10"), rqueue("q1"), rqueue("q2", state="Closed")], []),
    ("Node available resources should be included in reclaimed resources", BASE3 + ("priority",),
     [*PRIO3, rpg("pg1", 0, "q1", "mid-priority", "Running"), rpg("pg2", 0, "q2", "mid-priority", "Running"),
      rpg("pg3", 1, "q3", "mid-priority"), ppod("preemptee1-1", "pg1", "1", "n1", YES),
      ppod("preemptee2-1", "pg2", "1", "n1", YES), pod("preemptor1", "pg3", namespace="c1", cpu="2", memory="1G"),
      node("n1", cpu="10", memory="2Gi", pods="10"), rqueue("q1", priority=1), rqueue("q2", priority=2),
      rqueue("q3", 3)], ["preemptee1-1"]),
    ("Reclaim succeeds for second task when first task has PreemptionPolicy=Never", BASE3 + ("priority",),
     [priority_class("low-priority", 100), priority_class("high-priority-no-preempt", 1000),
      rpg("pg-victim", 1, "q1", "low-priority", "Running"), rpg("pg-preemptor", 2, "q2", "high-priority-no-preempt"),
      ppod("victim-pod-no", "pg-victim", "1", "n1", NO), ppod("victim-pod", "pg-victim", "1", "n1", YES),
      ppod("preemptor-task1-non-preemptable", "pg-preemptor", "1", preemption_policy="Never"),
      ppod("preemptor-task2-preemptable", "pg-preemptor", "1"), node("n1", cpu="2", memory="2G", pods="10"),
      rqueue("q1"), rqueue("q2")], ["victim-pod"]),
    ("only commit evictions on the node where reclaim succeeds", BASE3,
     [rpg("pg-victim", 0, "q1", "low-priority", "Running"), rpg("pg-preemptor", 1, "q2", "low-priority"),
      ppod("victim-n1", "pg-victim", "2", "n1", YES), ppod("preemptor1", "pg-preemptor", "3"),
      node("n1", cpu="10", memory="10G", pods="10"), rqueue("q1"), rqueue("q2", 9)], []),
]


@pytest.mark.parametrize(("plugins", "objects", "expected"), [c[1:] for c in RECLAIM_UPSTREAM],
                         ids=[c[0] for c in RECLAIM_UPSTREAM])
def test_upstream_reclaim_cases(plugins, objects, expected):
    result = Cluster(*objects, config=reclaim_config(*plugins)).session()
    assert [e.name for e in result.evictions] == expected
