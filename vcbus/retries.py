"""How every retry loop of vcbus waits and when it gives up: one policy, tenacity's waits.

A `Policy` is a loop's numbers: the first wait, the largest, and how many
tries before it gives up (None: never). Its waits are exponential with
**equal jitter**: the n-th wait in a row is half of `initial * 2**(n-1)`
(capped at `maximum`) plus a random part up to the other half. The random
half spreads the retries of many processes that lost the same server at the
same moment, so they do not come back in lockstep; the fixed half keeps a
lower bound, so a loop that gives up after a few failures (`vcbus up
--once`) still waits out a short server restart. Every wait lies in
`[bound / 2, bound]` for `bound = min(initial * 2**(n-1), maximum)`.

Two ways to use one:

- a retried call: `async for attempt in policy.retrying(on=ERRORS, before_sleep=...)`
  (a `tenacity.AsyncRetrying`; the direct stores of vcbus.bus.direct, the
  actuator's API calls through vcbus.k8s.apierrors.unreachable_retry);
- a loop that is more than one call (a watch, a service session, a bridged
  resource): a `Streak` counts its failures in a row, `failed()` gives the
  wait before the next try, `reset()` starts over once it made progress.

The loops and their policies are named here, so the numbers are in one place.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import tenacity


@dataclass(frozen=True)
class Policy:
    initial: float  # the first wait's bound, seconds
    maximum: float  # no wait's bound is larger
    attempts: int | None = None  # tries in all before giving up (None: retry for ever)

    def wait(self) -> tenacity.wait.wait_base:
        """The waits as a tenacity `wait=`."""
        half, top = self.initial / 2, self.maximum / 2
        return tenacity.wait_exponential(multiplier=half, max=top) + tenacity.wait_random_exponential(
            multiplier=half, max=top)

    def delay(self, failures: int) -> float:
        """The wait after the `failures`-th failure in a row."""
        state = tenacity.RetryCallState(None, None, (), {})  # type: ignore[arg-type]  # the waits read only attempt_number
        state.attempt_number = max(1, failures)
        return float(self.wait()(state))

    def gives_up(self, failures: int) -> bool:
        """Whether `failures` failures in a row use up the tries."""
        return self.attempts is not None and failures >= self.attempts

    def retrying(
        self,
        *,
        on: Callable[[BaseException], bool],
        before_sleep: Callable[[tenacity.RetryCallState], None] | None = None,
    ) -> tenacity.AsyncRetrying:
        """A tenacity loop retrying what `on` accepts; the last error is raised when the tries are used up."""
        return tenacity.AsyncRetrying(
            retry=tenacity.retry_if_exception(on),
            wait=self.wait(),
            stop=tenacity.stop_after_attempt(self.attempts) if self.attempts else tenacity.stop_never,
            before_sleep=before_sleep,
            reraise=True,
        )


class Streak:
    """Failures in a row of a long-running loop, and the wait each one earns (its policy's)."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.failures = 0

    def failed(self) -> float:
        """Count one more failure; the wait before the next try."""
        self.failures += 1
        return self.policy.delay(self.failures)

    def exhausted(self) -> bool:
        return self.policy.gives_up(self.failures)

    def reset(self) -> None:
        """The loop made progress: the next failure waits the shortest again."""
        self.failures = 0


# ---------------------------------------------------------------------- every loop's policy

# A direct store of messages to the bus (poison events, TIMER records, the scheduler's sessions;
# vcbus.bus.direct): 5 tries over about 1.5-3 s, then the service's session fails and is resumed.
STORE = Policy(0.2, 1.6, attempts=5)
# A service's session after a transient bus failure (vcbus.bus.supervising): for ever; with `--once`
# (until idle) 5 failures in a row without progress end it.
SESSION = Policy(0.5, 10.0)
SESSION_UNTIL_IDLE = Policy(0.5, 10.0, attempts=5)
# A bridged resource started again from its stored position after a failure (vcbus.k8s.bridge).
BRIDGE = Policy(0.5, 10.0)
# A watch's list or watch request that failed (vcbus.k8s.watching; each watcher may be given its own).
WATCH = Policy(0.1, 5.0)
# An API call to an unreachable API server (vcbus.k8s.apierrors.unreachable_retry, the actuator).
API = Policy(0.2, 30.0)
# `vcbus up` waiting for the API server to answer /version (vcbus.k8s.reach).
REACH = Policy(0.5, 30.0)
# A stream reader whose consumer went with its server, subscribing again (vcbus.bus.reading), for as
# long as its outage allowance (reading.UNAVAILABLE_FOR) lasts.
RESUBSCRIBE = Policy(0.1, 2.0)
# The embedded cluster's start, waiting for JetStream's meta leader and a leader for every stored
# stream (vcbus.bus.cluster.wait_for_jetstream), until its timeout.
LEADERS = Policy(0.05, 1.0)
