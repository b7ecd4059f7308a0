"""Driving a replay: read a log, fold it through the engine and the projections.

`replay_stream` is the loop behind `vcbus replay` (and the benchmark): records
are read and decoded one at a time, bad ones raise `InvalidRecord` (or are
counted and reported when `skip_invalid`), outputs feed the history and status
projections at once and are then dropped. `until` stops before the first
record past a sequence number or a time ("time travel").
"""

from __future__ import annotations

import contextlib
import gc
from typing import BinaryIO, Callable, Iterator

from projections.history import HistoryView
from projections.replay import InputCounts, build_report
from projections.status import StatusView
from statemachines.engine import Engine
from statemachines.objects import Job
from statemachines.records import Ignored, Observed, TimerRecord
from statemachines.timefmt import normalize
from vcbus.errors import UserError
from vcbus.watchlog import InvalidRecord, decode_record, read_records


class Until:
    """Where to stop: after record `seq`, or before the first record later than `time`."""

    def __init__(self, text: str | None) -> None:
        self.seq: int | None = None
        self.time: str | None = None
        if text is None:
            return
        if text.isdigit():
            self.seq = int(text)
            return
        try:
            self.time = normalize(text)
        except ValueError:
            raise UserError(
                f"--until {text!r}: expected a record number (e.g. 42) or an RFC 3339 time "
                "(e.g. 2026-11-30T08:05:00Z)"
            ) from None


class ReplayResult:
    def __init__(self, engine: Engine, history: HistoryView, statuses: StatusView, counts: InputCounts) -> None:
        self.engine = engine
        self.history = history
        self.statuses = statuses
        self.counts = counts
        self.problems: list[str] = []

    def report(self, *, job: str | None = None, explain: bool = False) -> dict:
        pending: dict[str, list] = {}
        for t in self.engine.pending_timers():
            pending.setdefault(t.job, []).append(t)
        return build_report(
            self.counts, self.history, self.statuses, job=job, explain=explain, pending_timers=pending
        )


@contextlib.contextmanager
def fewer_gc_passes() -> Iterator[None]:
    """Replay allocates millions of short-lived, acyclic objects: collect less often.

    Everything already alive is frozen out of the collector's generations and the
    gen-0 threshold is raised; the old settings come back afterwards.
    """
    old = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(50_000, 50, 1000)
    try:
        yield
    finally:
        gc.set_threshold(*old)
        gc.unfreeze()


def replay_stream(
    stream: BinaryIO,
    source: str,
    *,
    explain: bool = False,
    until: Until | None = None,
    skip_invalid: bool = False,
    keep_commands: bool = True,
    keep_history: bool = True,
    on_problem: Callable[[str], None] | None = None,
    engine: Engine | None = None,
) -> ReplayResult:
    engine = engine or Engine(explain=explain)
    history = HistoryView(keep_commands=keep_commands, enabled=keep_history)
    statuses = StatusView()
    counts = InputCounts()
    result = ReplayResult(engine, history, statuses, counts)
    until = until or Until(None)
    with fewer_gc_passes():
        _fold(stream, source, engine, history, statuses, counts, result, until, skip_invalid, on_problem)
    return result


def _fold(stream, source, engine, history, statuses, counts, result, until, skip_invalid, on_problem) -> None:
    h_apply = history.apply
    s_apply = statuses.apply
    for rec in read_records(stream):
        if until.seq is not None and rec.seq > until.seq:
            break
        try:
            decoded = decode_record(source, rec)
        except InvalidRecord as err:
            if not skip_invalid:
                raise
            counts.invalid += 1
            result.problems.append(str(err))
            if on_problem is not None:
                on_problem(str(err))
            continue
        if until.time is not None and isinstance(decoded, (Observed, TimerRecord)):
            when = decoded.time if decoded.time else (
                engine._object_time(decoded.object) if isinstance(decoded, Observed) else None
            )
            if when and normalize(when) > until.time:
                break
        counts.events += 1
        if isinstance(decoded, Ignored):
            counts.ignored += 1
        raw = rec.data if isinstance(decoded, Observed) and isinstance(decoded.object, Job) else None
        for out in engine.apply(rec.seq, decoded, raw=raw):
            h_apply(out)
            s_apply(out)
    tail = engine.finish(until.time) if until.time is not None else []
    for out in tail + engine.final_divergences():
        h_apply(out)
        s_apply(out)
    counts.ignored += engine.ignored
