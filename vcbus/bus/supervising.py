"""Keeping a service running through transient bus failures.

A server restart, a lost connection or a slow acknowledgement surfaces as a
nats error (or a `BusError` from a publish that ran out of retries) in the
middle of a service's loop. The services are restartable folds that keep
their state in memory up to a known position, so the fix is always the same:
log it, wait (`vcbus.retries.SESSION`: jittered exponential backoff from 0.5 s up to 10 s;
the log says how long), and start a new session that continues
from that position. A long-running service retries forever; one that runs
until idle (`vcbus up --once`, tests) gives up after `max_failures` failures
in a row without progress, so a dead server is an error, not a hang.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Awaitable, Callable

import nats.errors

from vcbus import retries
from vcbus.bus.errors import BusError

TRANSIENT = (nats.errors.Error, asyncio.TimeoutError, OSError, BusError)


async def supervise(
    name: str,
    session: Callable[[], Awaitable[None]],
    *,
    progress: Callable[[], int],
    stop: asyncio.Event,
    until_idle: bool,
    log: logging.Logger,
    policy: retries.Policy | None = None,
) -> None:
    """Run `session` until it returns; after a transient failure, wait and run it again. `policy`
    (default `retries.SESSION`, with `until_idle` `retries.SESSION_UNTIL_IDLE`) gives the waits and
    when failures in a row without progress end it (the last error raised)."""
    policy = policy or (retries.SESSION_UNTIL_IDLE if until_idle else retries.SESSION)
    streak = retries.Streak(policy)
    while True:
        before = progress()
        try:
            await session()
            return
        except TRANSIENT as err:
            if stop.is_set():
                return
            if progress() > before:
                streak.reset()
            delay = streak.failed()
            if streak.exhausted():
                raise
            log.warning("%s: %s; resuming at %d, next try in %.1fs", name, str(err) or type(err).__name__, progress(), delay)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), delay)
            if stop.is_set():
                return
