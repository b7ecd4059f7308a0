"""Commands applied ahead of their store: the decider hands them to the actuator in the same process.

A command normally reaches the actuator through VCBUS_CMDS: the decider stores
it (one durable write, fsynced), the server delivers it, the actuator applies
it and acks it. On a light-load reaction that is 3-4 ms between the decision
and the first API call (`benchmarks/latency.py`: the decider stage's store and
the actuator's wait). When the decider and the actuator run in one process
(`vcbus up` with a cluster), the decider offers each flight's commands to the
actuator as it sends them (`offer`), and the actuator admits them into their
lanes at once (vcbus.k8s.lanes), while they are being stored. When a command's
stored copy arrives, the actuator matches it by its `Nats-Msg-Id` and acks it
with the result instead of applying it again.

Only behind everything stored before them. An offer is taken only when the
actuator holds every command stored before it (`after_seq`: the sequence of
the decider's last stored command, or at a start the last of VCBUS_CMDS): the
offered commands then enter their lanes after those, and a job's commands
happen in the order the decider decided them, as through the stream. The
decider offers nothing while it re-decides records an earlier run had
received (their commands may be stored and applied already; through the
stream JetStream drops them as duplicates). RecordEvents are left to the
stream. An offered command is applied as a stored one is, with its retries and
refusals.

The first call goes first. `offer` returns the first command's result (a
future), and the decider sends the flight once it is over, or after
`vcbus.bus.decider.AHEAD_HOLD`: the flight's durable writes, their deliveries
and the next records' decisions would otherwise share the machine with the
reaction's first API requests and slow them (`vcbus.bus.storing.Outbox.send`).

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
from typing import Any, Callable

import msgspec

from statemachines import outputs as o

log = logging.getLogger("vcbus.actuator")
HELD = 4096  # the most commands one offer may hold (more: left to the stream)


def index_of(msg_id: str) -> int:
    """The output index a command's `Nats-Msg-Id` ends with (`<seq>:<index>`); 0 without one."""
    _, _, index = msg_id.rpartition(":")
    return int(index) if index.isdigit() else 0


class Ahead:
    """The actuator's side of an offer: which commands of a flight it takes, and when."""

    def __init__(self, admit: Callable[[Any, int, str], asyncio.Future], caught_up: Callable[[int], bool],
                 started: Callable[[asyncio.Future], bool] = lambda fut: True) -> None:
        # one command into its lane (fenced first: raises when this replica must not write); its result's future
        self._admit = admit
        self._caught_up = caught_up  # whether every command stored up to this sequence is in the actuator's hands
        self._started = started  # whether an admitted command is being applied already (not waiting its turn)
        self.closed = False
        self.taken = 0  # commands applied ahead whose stored copies were acked with their result (the actuator counts)

    def offer(self, commands: list, after_seq: int) -> asyncio.Future | None:
        """Admit `commands` (a flight's, `vcbus.bus.publisher.Prepared`, in order) now, if every command the
        decider stored before them (up to `after_seq`) is in hand. If taken and the first one's apply has
        started, the future of its result (done when its apply is over, failed or not), for the decider to
        hold the flight by; else None (taken or not: a first command waiting its turn holds nothing up)."""
        if self.closed or not self._caught_up(after_seq):
            return None
        todo: list[tuple[str, Any]] = []
        for prepared in commands:
            msg_id = prepared.headers.get("Nats-Msg-Id", "")
            try:
                cmd = o.command_decoder.decode(prepared.body)
            except msgspec.DecodeError:
                break  # the stream path says what is wrong with it (and what comes after it waits for it there)
            if not msg_id:
                break
            if cmd.__class__ is o.RecordEvent:
                continue  # applied from the stream: it waits for nothing
            todo.append((msg_id, cmd))
        if not todo or len(todo) > HELD:
            return None
        first = None
        for msg_id, cmd in todo:
            try:
                fut = self._admit(cmd, index_of(msg_id), msg_id)
            except Exception as err:  # e.g. the Lease is lost: the stream path says so
                log.debug("actuator: offer of %s not taken (%s: %s)", msg_id, type(err).__name__, err)
                break
            first = first or fut
        return first if first is not None and self._started(first) else None

    def close(self) -> None:
        """Stop taking offers."""
        self.closed = True
