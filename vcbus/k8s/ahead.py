"""Commands applied ahead of their store: the decider hands them to the actuator in the same process.

A command normally reaches the actuator through VCBUS_CMDS: the decider stores
it (one durable write, fsynced), the server delivers it, the actuator applies
it and acks it. On a light-load reaction that is 3-4 ms between the decision
and the first API call (`benchmarks/latency.py`: the decider stage's store and
the actuator's wait). When the decider and the actuator run in one process
(`vcbus up` with a cluster), the decider offers each flight's commands to the
actuator as it sends them (`offer`), and the actuator applies them at once, in
order, while they are being stored. When a command's stored copy arrives, the
actuator acks it with the result it already has (`take`) instead of applying
it again.

Only when nothing is before them. An offer is taken only when the actuator
has dealt with every command stored before it (`after_seq`: the sequence of
the decider's last stored command, or at a start the last of VCBUS_CMDS),
holds no command of its own, and runs no earlier offer: a job's commands
happen in the order the decider decided them, as through the stream. The
decider offers nothing while it re-decides records an earlier run had
received (their commands may be stored and applied already; through the
stream JetStream drops them as duplicates). RecordEvents are left to the
stream (the actuator applies them in the background anyway). Any error (the
API server away, a refusal, a lost lease) ends the run: that command and the
ones after it are applied from the stream as usual, with its retries and
refusals.

The first call goes first. `offer` returns the first command's apply (a
future), and the decider sends the flight once it is over, or after
`vcbus.bus.decider.AHEAD_HOLD`: the flight's durable writes, their deliveries
and the next records' decisions would otherwise share the machine with the
reaction's first API requests and slow them (`Storing._send`).

What it changes in guarantees: a write to Kubernetes can now happen before
the command that explains it is stored. It is stored a moment later; if the
process dies first, the record that caused it is not acked, so after the
restart the decider decides it again from the same log into the same command
with the same id (the state machines are deterministic), stores it, and the
actuator applies it again, idempotently, as it applies every command
redelivered after a crash between apply and ack. The log still explains every
write, possibly a few milliseconds after it. `vcbus up --stored-commands-only`
turns this off.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from typing import Any, Awaitable, Callable

import msgspec

from statemachines import outputs as o
from vcbus.observability import metrics

log = logging.getLogger("vcbus.actuator")
HELD = 4096  # results kept for stored copies still to come (more: the oldest are forgotten, then applied again)

Applied = tuple[str, float]  # (the apply's result, its milliseconds)


def index_of(msg_id: str) -> int:
    """The output index a command's `Nats-Msg-Id` ends with (`<seq>:<index>`); 0 without one."""
    _, _, index = msg_id.rpartition(":")
    return int(index) if index.isdigit() else 0


class Ahead:
    """The actuator's side: offers taken, run in order, and their results for the stored copies."""

    def __init__(self, start: Callable[[Any, int, str], Awaitable[str]], idle: Callable[[int], bool]) -> None:
        # one command: fenced, then started at once in a worker thread (the actuator's own apply, no
        # retries); returns what to await for its result
        self._start = start
        self._idle = idle  # whether the actuator finished every command up to this sequence and holds none
        self._results: OrderedDict[str, asyncio.Future] = OrderedDict()
        self._task: asyncio.Task | None = None
        self.closed = False
        self.taken = 0  # commands applied ahead (the stored copies acked with their result)

    def offer(self, commands: list, after_seq: int) -> asyncio.Future | None:
        """Apply `commands` (a flight's, `vcbus.bus.publisher.Prepared`, in order) now, if every command
        the decider stored before them (up to `after_seq`) is done and nothing else runs. If taken, the
        future of the first one's apply (done when it is over, failed or not); else None."""
        if self.closed or not self._idle(after_seq) or (self._task is not None and not self._task.done()):
            return None
        todo: list[tuple[str, Any]] = []
        for prepared in commands:
            msg_id = prepared.headers.get("Nats-Msg-Id", "")
            try:
                cmd = o.command_decoder.decode(prepared.body)
            except msgspec.DecodeError:
                break  # the stream path says what is wrong with it
            if not msg_id:
                break
            if cmd.__class__ is o.RecordEvent:
                continue  # applied in the background from the stream (vcbus.k8s.actuating)
            todo.append((msg_id, cmd))
        if not todo or len(todo) > HELD:
            return None
        loop = asyncio.get_running_loop()
        futures = []
        for msg_id, _ in todo:
            fut = loop.create_future()
            self._results[msg_id] = fut
            futures.append(fut)
        while len(self._results) > HELD:  # stored copies that never came (a store that failed for good)
            _, old = self._results.popitem(last=False)
            if not old.done():
                old.set_result(None)
        began = time.perf_counter()
        try:  # the first one starts now, not on the task's first turn of the loop
            first = self._start(todo[0][1], index_of(todo[0][0]), todo[0][0])
        except Exception:  # noqa: BLE001 - e.g. the Lease is lost: the stream path says so
            for fut in futures:
                fut.set_result(None)
            return None
        self._task = asyncio.create_task(self._run(todo, futures, first, began), name="actuator-ahead")
        return futures[0]

    async def _run(self, todo: list[tuple[str, Any]], futures: list[asyncio.Future], first: Awaitable[str],
                   began: float) -> None:
        k = 0
        try:
            for k, (msg_id, cmd) in enumerate(todo):
                if k:
                    if self.closed:
                        break
                    began = time.perf_counter()
                    first = self._start(cmd, index_of(msg_id), msg_id)
                result = await first
                took = (time.perf_counter() - began) * 1e3
                if not futures[k].done():
                    futures[k].set_result((result, took))
                self.taken += 1
                metrics.COMMANDS_AHEAD.inc()
                if log.isEnabledFor(logging.DEBUG):
                    log.debug("actuator: %s %s for %s: %s in %.1f ms (ahead of its store)", msg_id,
                              type(cmd).__name__, cmd.job, result, took)
            else:
                k = len(todo)
        except Exception as err:  # noqa: BLE001 - any error: the stream path applies it, with retries and refusals
            log.debug("actuator: %s applied ahead failed (%s: %s); applied from the stream", todo[k][0],
                      type(err).__name__, err)
        finally:
            for fut in futures[k:]:
                if not fut.done():
                    fut.set_result(None)

    async def take(self, msg_id: str) -> Applied | None:
        """The result of a command applied ahead, once its apply is over; None: apply it (not taken,
        or it failed)."""
        fut = self._results.pop(msg_id, None)
        if fut is None:
            return None
        return await fut

    async def close(self) -> None:
        """Stop taking offers; wait for the command being applied (its thread cannot be cancelled)."""
        self.closed = True
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)
        for fut in self._results.values():
            if not fut.done():
                fut.set_result(None)
        self._results.clear()
