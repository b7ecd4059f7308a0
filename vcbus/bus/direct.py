"""Direct stores: a list of messages published in order, every acknowledgement waited for, the lot retried.

The one way the services store what is not a pipelined flight (vcbus.bus.flights):
the decider's poison events and TIMER records, the scheduler's session outputs
and poison events. `store` cuts the messages into runs of one stream each
(commands, then events, as they come), sends each through the service's
`BatchWriter` (an atomic batch when large: one durable write), all on the
wire before the first is waited for, and waits for every acknowledgement.

On a transient failure (no acknowledgement in time, a lost connection, a
refused publish) the whole list is sent again with the same `Nats-Msg-Id`s,
so what was stored the first time is dropped as a duplicate: a retry goes
message by message, since an atomic batch holding a stored id would be
refused whole. The waits and the number of tries are `vcbus.retries.STORE`'s;
each failed try is logged with the wait before the next. When the tries are
used up a `BusError` names the service and what it was storing, and the
service's session ends (vcbus.bus.supervising starts a new one).
"""

from __future__ import annotations

import logging

import nats.errors
import tenacity

from vcbus import retries
from vcbus.bus.batching import BatchWriter, Stored
from vcbus.bus.errors import BusError
from vcbus.bus.publisher import Prepared

ERRORS = (TimeoutError, nats.errors.Error, BusError)  # transient: the lot is sent again


def by_stream(messages: list[Prepared]) -> list[list[Prepared]]:
    """`messages` cut into runs of one stream each (by the subject's prefix: vcbus.cmd, vcbus.job ...), in order."""
    runs: list[list[Prepared]] = []
    last = None
    for m in messages:
        prefix = m.subject.split(".", 2)[:2]
        if prefix != last:
            runs.append([])
            last = prefix
        runs[-1].append(m)
    return runs


def _reason(err: BaseException | None) -> str:
    return (str(err) or type(err).__name__) if err is not None else "error"


async def store(
    writer: BatchWriter,
    messages: list[Prepared],
    *,
    who: str,
    what: str,
    timeout: float,
    log: logging.Logger,
    policy: retries.Policy = retries.STORE,
) -> Stored:
    """Store `messages` in order, waiting for every acknowledgement; retried as the module says.
    Raises `BusError` ("<who>: cannot store the <what>: ...") once `policy`'s tries are used up."""
    if not messages:
        return Stored(0, 0)
    tries = policy.attempts

    def before_sleep(state: tenacity.RetryCallState) -> None:
        err = state.outcome.exception() if state.outcome is not None else None
        wait = state.next_action.sleep if state.next_action is not None else 0.0
        log.warning("%s: storing the %s failed (%s); try %d of %s, next in %.1fs",
                    who, what, _reason(err), state.attempt_number, tries or "unlimited", wait)

    results: list[Stored] = []
    try:
        async for attempt in policy.retrying(on=lambda err: isinstance(err, ERRORS), before_sleep=before_sleep):
            with attempt:
                atomic = attempt.retry_state.attempt_number == 1  # a retry: some may be stored already
                sent = []
                for run in by_stream(messages):
                    sent += await writer.send(run, atomic=atomic)
                results = [await one.wait(timeout) for one in sent]
    except ERRORS as err:
        raise BusError(f"{who}: cannot store the {what}: {_reason(err)}") from err
    return Stored(sum(r.stored for r in results), sum(r.duplicates for r in results),
                  max((r.last_seq for r in results), default=0))
