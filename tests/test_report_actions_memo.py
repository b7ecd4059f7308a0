"""The report's action entries are rendered once each (projections.replay.action_entries) and stay
equal to a fresh rendering as a job's history grows, restarts and is asked with --explain."""

from __future__ import annotations

from projections.history import HistoryView
from projections.replay import action_entry, job_report
from statemachines import outputs as o


def _action(seq: int, **kw) -> o.ActionResolved:
    return o.ActionResolved(job="default/j", seq=seq, time="2026-12-03T08:00:00Z", **kw)


def _fresh(view: HistoryView, explain: bool = False) -> list[dict]:
    return [action_entry(a, explain=explain) for a in view.jobs["default/j"].actions]


def test_entries_follow_a_growing_history() -> None:
    view = HistoryView()
    for seq in range(1, 4):
        view.apply(_action(seq, event="PodRunning", pod=f"p{seq}"))
    h = view.jobs["default/j"]
    first = job_report(h, None)["actions"]
    assert first == _fresh(view) and len(first) == 3
    view.apply(_action(4, event="PodFailed", exit_code=1, action="RestartJob", policy_text="PodFailed -> RestartJob"))
    second = job_report(h, None)["actions"]
    assert second == _fresh(view) and len(second) == 4
    assert len(first) == 3  # an earlier report's list is its own: not extended behind its back
    second.append({"seq": 99})  # nor does a caller's change reach the next report
    assert job_report(h, None)["actions"] == _fresh(view)


def test_a_restarted_history_starts_again() -> None:
    view = HistoryView()
    for seq in range(1, 6):
        view.apply(_action(seq, pod=f"p{seq}"))
    h = view.jobs["default/j"]
    assert len(job_report(h, None)["actions"]) == 5
    view.restart("default/j")
    view.apply(_action(6, pod="after"))
    assert job_report(h, None)["actions"] == _fresh(view) == [action_entry(_action(6, pod="after"))]


def test_explain_is_rendered_with_its_reasons() -> None:
    view = HistoryView()
    view.apply(_action(1, explain=["job policy 1: event PodEvicted, not PodFailed"]))
    h = view.jobs["default/j"]
    assert "explain" not in job_report(h, None)["actions"][0]
    assert job_report(h, None, explain=True)["actions"] == _fresh(view, explain=True)
    assert job_report(h, None, explain=True)["actions"][0]["explain"] == ["job policy 1: event PodEvicted, not PodFailed"]
