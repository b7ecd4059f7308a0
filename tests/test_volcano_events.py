"""Volcano's events that vcbus used to leave out (issue 32, item 4), decided without a cluster.

- the job controller's Warning `PodGroupPending` on the vcjob (`recordPodGroupEvent`,
  pkg/controllers/job/job_controller_actions.go): at a sync that finds the PodGroup whose latest
  True condition is not Scheduled, "PodGroup <ns>:<job> <type>, reason: <message>"; vcbus says it
  again only when the text changes (or after a Scheduled in between);
- the scheduler's Normal `Scheduled` "Successfully assigned <ns>/<pod> to <node>" on a pod once its
  bind went through (`SchedulerCache.Bind`, pkg/scheduler/cache/cache.go).

The same events on a real API server: tests/test_e2e_queue_shares.py.
"""

from __future__ import annotations

from statemachines import outputs as o
from tests import builders as b
from tests import sched_builders as sb

T_EARLY, T_LATE = "2026-01-01T00:00:05Z", "2026-01-01T00:00:09Z"


def _pending_events(outs) -> list[str]:
    return [e.message for e in outs.of(o.RecordEvent) if e.reason == "PodGroupPending"]


def _with_conditions(h: b.Harness, phase: str, conditions: list[dict]) -> b.Outs:
    h.pg(phase)
    meta = h.job_obj["metadata"]
    obj = h.get("PodGroup", f"{meta['name']}-{meta['uid']}")
    obj["status"] = {"phase": phase, "conditions": conditions}
    return h.feed("MODIFIED", obj)


def _cond(kind: str, message: str, time: str) -> dict:
    return {"type": kind, "status": "True", "transitionID": "s", "lastTransitionTime": time, "reason": "r", "message": message}


def test_podgroup_pending_is_recorded_on_the_vcjob_while_the_latest_condition_is_not_scheduled():
    h = b.Harness(b.job(tasks=[b.task("t", 2)]))
    unschedulable = "2/2 tasks in gang unschedulable: pod group is not ready, 2 Pending, 2 minAvailable"
    _with_conditions(h, "Inqueue", [_cond("Scheduled", "", T_EARLY), _cond("Unschedulable", unschedulable, T_LATE)])
    h.add_pods("t", 2)  # pod records: syncs that find the PodGroup
    assert _pending_events(h.outputs) == [f"PodGroup default:j unschedulable, reason: {unschedulable}"]
    [event] = [e for e in h.outputs.of(o.RecordEvent) if e.reason == "PodGroupPending"]
    assert (event.event_type, event.kind, event.job) == ("Warning", "", "default/j")  # on the vcjob

    # the same text at the next syncs: not said again
    h.set_pod("j-t-0", phase="Running")
    assert len(_pending_events(h.outputs)) == 1
    # the latest condition is Scheduled: nothing; Unschedulable again later: said again
    _with_conditions(h, "Running", [_cond("Scheduled", "", T_LATE), _cond("Unschedulable", unschedulable, T_EARLY)])
    h.set_pod("j-t-1", phase="Running")
    assert len(_pending_events(h.outputs)) == 1
    _with_conditions(h, "Unknown", [_cond("Scheduled", "", T_EARLY), _cond("Unschedulable", "other", T_LATE)])
    h.set_pod("j-t-1", phase="Pending")
    assert _pending_events(h.outputs)[1:] == ["PodGroup default:j unschedulable, reason: other"]


def test_a_podgroup_without_conditions_or_only_false_ones_records_nothing():
    h = b.Harness(b.job(tasks=[b.task("t", 2)]))
    h.pg("Inqueue")
    _with_conditions(h, "Inqueue", [{**_cond("Unschedulable", "x", T_LATE), "status": "False"}])
    h.add_pods("t", 2)
    assert _pending_events(h.outputs) == []


def test_scheduled_is_recorded_on_a_pod_once_its_bind_shows_in_the_log():
    cluster = sb.Cluster(sb.node("n1"), sb.queue("default"), sb.podgroup("pg", 1, phase="Inqueue", owner="j"),
                         sb.pod("p-0", "pg"))
    first = cluster.session()
    assert [x.name for x in sb.outs_of(first.outputs, o.BindPod)] == ["p-0"]
    assert [x for x in sb.outs_of(first.outputs, o.RecordEvent) if x.reason == "Scheduled" and x.kind == "Pod"] == []
    cluster.land_binds(first)  # the API server's pod record shows spec.nodeName
    second = cluster.session()
    events = [x for x in sb.outs_of(second.outputs, o.RecordEvent) if x.kind == "Pod"]
    assert [(e.event_type, e.reason, e.message, e.name, e.job, e.component) for e in events] == [
        ("Normal", "Scheduled", f"Successfully assigned {sb.NS}/p-0 to n1", "p-0", f"{sb.NS}/j", "vc-scheduler")]
    third = cluster.session()
    assert [x for x in sb.outs_of(third.outputs, o.RecordEvent) if x.kind == "Pod"] == []
