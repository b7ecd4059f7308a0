"""The replay loop offers a projection only the outputs it folds (`vcbus.replaying.NOT_FOR_STATUS/HISTORY`).

Most of a replay's outputs (ActionResolved, UpdateJobStatus, StatusChanged...)
mean nothing to one of the two views; the loop skips the call. This checks the
skip lists against the views themselves: applying a real output of each
skipped class changes nothing in that view but its position, so a view that
starts folding one of them makes this test fail (and the list must shrink); and
the views a replay ends with must equal those that `apply` of every output builds.
"""

from __future__ import annotations

import copy
import io

import pytest

from projections.history import HistoryView
from projections.status import StatusView
from tests.test_replay_cli import SEED
from vcbus.replaying import NOT_FOR_HISTORY, NOT_FOR_STATUS, replay_stream


@pytest.fixture(scope="module")
def seed_outputs() -> list:
    outs: list = []
    replay_stream(io.BytesIO(SEED.read_bytes()), "seed", on_record=lambda seq, got: outs.extend(got))
    return outs


def plain(value):
    """A comparable copy: objects with __slots__ (JobHistory) as dicts of their slots."""
    if hasattr(value, "__slots__") and not hasattr(value, "__struct_fields__"):
        return {k: plain(getattr(value, k)) for k in value.__slots__}
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return type(value)(plain(v) for v in value) if not isinstance(value, set) else set(value)
    return copy.deepcopy(value)


def state(view) -> dict:
    return plain({k: v for k, v in vars(view).items() if k != "position"})


@pytest.mark.parametrize(
    "make, skipped", [(StatusView, NOT_FOR_STATUS), (lambda: HistoryView(keep_commands=True), NOT_FOR_HISTORY)],
    ids=["status", "history"],
)
def test_a_skipped_output_changes_nothing_in_the_view(seed_outputs, make, skipped):
    samples = {}
    for out in seed_outputs:
        samples.setdefault(out.__class__, out)
    assert skipped <= samples.keys()  # every skipped class is a real output of the seed job
    view = make()
    for out in seed_outputs:  # a view with every job and status in it
        view.apply(out)
    for cls in skipped:
        before = state(view)
        view.apply(samples[cls], position=10**9)
        assert state(view) == before, cls.__name__


def test_the_skips_leave_the_report_as_applying_everything_gives(seed_outputs):
    everything = (HistoryView(keep_commands=True), StatusView())
    for out in seed_outputs:
        for view in everything:
            view.apply(out)
    result = replay_stream(io.BytesIO(SEED.read_bytes()), "seed")
    assert state(result.statuses) == state(everything[1])
    assert state(result.history) == state(everything[0])
