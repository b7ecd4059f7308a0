"""What the job controller (`sync.py`, `kill.py`, `writes.py`) needs from the engine that runs it.

syncJob, killJob and killTarget read the cache entry they are given and ask
the engine only for what is not the job's own: the current record's time,
how to emit an output, whether a queue exists, how to render pods and
PodGroups, and the cause of a phase change in words.
Declaring that as a Protocol here keeps the imports one way: the engine
imports the job machine and its controller, never the reverse
(import-linter's acyclic contract on `statemachines`).
"""

from __future__ import annotations

from typing import Any, Protocol

from statemachines.cache import JobEntry
from statemachines.model.status import JobStatus


class JobContext(Protocol):
    now: str  # the time of the record being handled (RFC 3339)
    seq: int  # the record's position, stamped on every output
    out: list  # the record's outputs so far (`emit` appends to it; hot paths append themselves, see `emit`)
    spec_changed: bool  # the request being handled comes from a change of the job spec
    queues: dict  # the queues the log has shown, by name (a queue among them always exists)

    def emit(self, cls: type, entry: JobEntry, /, **fields: Any) -> None:
        """Append an output (`statemachines.outputs`) for `entry`'s job, stamped with the record.

        The outputs most records make are built by their keywords instead, stamp included:
        `ctx.out.append(o.X(job=entry.key, seq=ctx.seq, time=ctx.now, ...))`, which mypy checks
        against the output's fields. `emit`'s keyword dict, packed and unpacked again, costs about
        five times the construction (some 8,000 instructions against 1,700)."""

    def queue_exists(self, name: str) -> bool: ...

    def render_pod(self, entry: JobEntry, task: str, index: int, status: JobStatus) -> dict | None: ...

    def render_podgroup(self, entry: JobEntry) -> dict | None: ...

    def cause(self, entry: JobEntry, guard: str) -> str:
        """`PhaseChanged.cause`: the guard that held and the request being executed, in words."""
