"""`vcbus.retries`: every retry loop's waits (exponential, equal jitter) and when it gives up."""

from __future__ import annotations

import pathlib
import re

import pytest

from vcbus import retries
from vcbus.retries import Policy, Streak


def bound(policy: Policy, n: int) -> float:
    return min(policy.initial * 2 ** (n - 1), policy.maximum)


@pytest.mark.parametrize("policy", [retries.STORE, retries.SESSION, retries.BRIDGE, retries.WATCH, retries.API,
                                    retries.REACH])
def test_each_wait_is_between_half_and_all_of_its_doubling_bound(policy):
    for n in range(1, 12):
        waits = [policy.delay(n) for _ in range(200)]
        assert all(bound(policy, n) / 2 <= w < bound(policy, n) for w in waits), (n, min(waits), max(waits))
        assert len(set(waits)) > 150, "jittered: processes that failed together do not retry in lockstep"


def test_a_streak_grows_then_starts_over_after_progress():
    policy = Policy(1.0, 4.0, attempts=3)
    streak = Streak(policy)
    waits = [streak.failed() for _ in range(3)]
    assert [0.5 <= waits[0] < 1, 1 <= waits[1] < 2, 2 <= waits[2] < 4] == [True] * 3
    assert streak.exhausted()
    streak.reset()
    assert not streak.exhausted() and streak.failed() < 1.0


async def test_retrying_stops_after_its_attempts_and_raises_the_last_error():
    calls = []
    with pytest.raises(TimeoutError, match="try 3"):
        async for attempt in Policy(0.001, 0.002, attempts=3).retrying(on=lambda e: isinstance(e, TimeoutError)):
            with attempt:
                calls.append(attempt.retry_state.attempt_number)
                raise TimeoutError(f"try {len(calls)}")
    assert calls == [1, 2, 3]


async def test_retrying_gives_other_errors_back_at_once():
    calls = 0
    with pytest.raises(ValueError):
        async for attempt in Policy(0.001, 0.002, attempts=5).retrying(on=lambda e: isinstance(e, TimeoutError)):
            with attempt:
                calls += 1
                raise ValueError("not transient")
    assert calls == 1


def test_a_policy_without_attempts_never_gives_up():
    streak = Streak(retries.SESSION)
    for _ in range(1000):
        streak.failed()
    assert not streak.exhausted() and retries.SESSION_UNTIL_IDLE.gives_up(5)


ROOT = pathlib.Path(__file__).resolve().parents[1]
# Waits with a fixed interval that are no retry loop: a process's start polled for its port or its
# exit (the embedded nats-server), and a yield to the client's flusher.
NOT_RETRIES = {
    ("vcbus/bus/server.py", "time.sleep(0.01)"),
    ("vcbus/bus/server.py", "time.sleep(0.05)"),
    ("vcbus/bus/storing.py", "asyncio.sleep(0)"),
}


def test_every_retry_loop_of_vcbus_waits_by_a_policy():
    """No loop of vcbus/ waits a fixed interval between tries (the readers' resubscribe and the embedded
    cluster's wait for its leaders did: 0.2 s); the known other fixed waits are listed, and still there."""
    fixed = set()
    for path in sorted((ROOT / "vcbus").rglob("*.py")):
        for call in re.findall(r"\b(?:time|asyncio)\.sleep\(\s*[0-9.]+\s*\)", path.read_text()):
            fixed.add((str(path.relative_to(ROOT)), call))
    assert fixed == NOT_RETRIES
