"""Reaching the API server before the cluster side starts: retried with jitter, given up after a while.

`vcbus up --kubeconfig/--cluster` asks the API server for `/version` before its
bridge and actuator start. While the server cannot be reached, each failed try
is one log line that says why and when the next one is, `/readyz` reports the
API server as not reached, and after `--connect-timeout` without ever reaching
it `vcbus up` stops with exit code 4 (the cluster is unreachable), as a
controller's pod should, so that its restarts show in `kubectl get pods`. A
server that answers, even with a refusal (401, 403), is reached: the bridge and
the actuator then say what it refuses, naming the resource.
Once reached, later outages are the watches' and the actuator's to ride out:
they retry for as long as it takes.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Callable

from vcbus import exitcodes, retries
from vcbus.errors import UserError
from vcbus.k8s import rawcalls
from vcbus.k8s.apierrors import status_of, transient

log = logging.getLogger("vcbus")


def _why(err: BaseException) -> str:
    """The root cause of a failed request in a few words (not urllib3's whole retry story)."""
    while err.__cause__ is not None or getattr(err, "reason", None) is not None:
        inner = err.__cause__ or getattr(err, "reason", None)
        if not isinstance(inner, BaseException):
            break
        err = inner
    text = str(err).split(": ", 1)[-1] if ": " in str(err) else str(err)
    return (text or type(err).__name__)[:300]


async def reach(api_client: Any, *, timeout: float, stop: asyncio.Event,
                clock: Callable[[], float] = time.monotonic) -> bool:
    """Wait until the API server answers `/version` (any answer but 5xx/429); False if `stop` came first.
    Raises `UserError` (exit 4) after `timeout` seconds without an answer (0: wait for ever)."""
    host = getattr(getattr(api_client, "configuration", None), "host", "?")
    began, streak = clock(), retries.Streak(retries.REACH)
    while not stop.is_set():
        try:
            await asyncio.to_thread(rawcalls.call, api_client, "GET", "/version")
        except Exception as err:  # sorted below
            if status_of(err) and not transient(err):
                break  # it answered (401, 403, 404...): reached; what it refuses, the components say themselves
            if not transient(err):
                raise UserError(f"the API server {host} cannot be asked for /version: {_why(err)}",
                                exit_code=exitcodes.CLUSTER) from None
            wait = streak.failed()
            spent = clock() - began
            if timeout and spent + wait > timeout:
                raise UserError(
                    f"the API server {host} was not reached in {spent:.0f}s ({_why(err)}); gave up after "
                    f"--connect-timeout {timeout:g}s", exit_code=exitcodes.CLUSTER,
                ) from None
            log.warning("vcbus up: the API server %s is not reachable (%s); try %d failed, next in %.1fs%s", host,
                        _why(err), streak.failures, wait, f", giving up {timeout - spent:.0f}s from now" if timeout else "")
            try:
                await asyncio.wait_for(stop.wait(), wait)
            except asyncio.TimeoutError:
                pass
            continue
        break
    if stop.is_set():
        return False
    if streak.failures:
        log.info("vcbus up: the API server %s is reachable after %d failed tries", host, streak.failures)
    return True
