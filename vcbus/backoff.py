"""Jittered exponential backoff for every retry loop of vcbus (tenacity's, not a hand-written one).

"Equal jitter": the n-th wait in a row is half of `initial * 2**(n-1)` (capped
at `maximum`) plus a random part up to the other half. The random half
spreads the retries of many processes that lost the same server at the same
moment, so they do not come back in lockstep; the fixed half keeps a lower
bound, so a loop that gives up after a few failures (`vcbus up --once`) still
waits out a short server restart. `delay(n, ...)` is the wait after the n-th
failure in a row, for the loops that are more than a retried call (a watch,
a service session); `strategy()` is the same as a tenacity `wait=`
(`vcbus.k8s.apierrors.unreachable_retry`).
"""

from __future__ import annotations

import tenacity


def strategy(initial: float, maximum: float) -> tenacity.wait.wait_base:
    half, top = initial / 2, maximum / 2
    return tenacity.wait_exponential(multiplier=half, max=top) + tenacity.wait_random_exponential(
        multiplier=half, max=top)


def delay(failures: int, initial: float, maximum: float) -> float:
    """The wait after the `failures`-th failure in a row."""
    state = tenacity.RetryCallState(None, None, (), {})
    state.attempt_number = max(1, failures)
    return float(strategy(initial, maximum)(state))
