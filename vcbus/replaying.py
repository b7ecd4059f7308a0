"""Driving a replay: read logs, fold them through the engine and the projections.

`replay_inputs` is the loop behind `vcbus replay` (`replay_stream` for one
input, as the benchmark and the bus tests use it). Records are read and decoded
one at a time (`vcbus.watchlog.iter_log`, any form kubectl prints), bad ones
raise `InvalidRecord` (or are counted and reported when `skip_invalid`; a last
record cut short is always skipped with a warning), outputs feed the history
and status projections at once and are then dropped. `until` stops before the
first record past a sequence number or a time ("time travel").

Order: several inputs are merged by resourceVersion (`vcbus.logmerge`). One
input streams; if it turns out to be out of order across kinds (per-kind
watches concatenated), the replay starts again from the top with the records
merged, when the input can be read again (a file; standard input is spooled to
a temporary file). A live replay of a pipe (`live`: `vcbus replay -`) cannot take
back the rows it printed: it warns, stops them (`on_record` sees no more) and
reads the pipe to its end, and the result is the merged one (`merged`), as for
the file. A file being followed cannot be read to an end: it warns and goes on
in input order (`unordered` says why). A marked initial list (`vcbus record`'s,
`vcbus.logmarks`) is folded whole first, in cache-sync order; a watch ERROR
record is warned about as a gap in the log.

Poison, never a halt (as on the bus, `vcbus.bus.poison`): with `skip_invalid`
a record the engine fails on (any exception) is reported like an invalid one
and skipped. The engine may have been half-way through it, so the replay
starts again from the top without that record when the input can be read
again (a file, a spooled pipe, merged inputs); a live replay cannot and goes
on with a warning. Timestamps that are not RFC 3339 are treated as absent
(`statemachines.model.records.checked_times`) and reported as warnings.

Warnings (merging, snapshots, skipped records, kinds a job needs that the log
lacks) go to `on_warning`; `on_record(seq, outputs)` sees each record's
outputs as they are decided (the live timeline). With `interruptible`, Ctrl-C
ends the fold and the result is what was replayed so far (`interrupted`).
"""

from __future__ import annotations

import contextlib
import gc
import re
from typing import BinaryIO, Callable, Iterable, Iterator

from projections.history import HistoryView, JobHistory
from projections.replay import InputCounts, build_report
from projections.status import StatusView
from statemachines import outputs as o
from statemachines.engine import Engine
from statemachines.model.objects import Command, Job, Pod, PodGroup
from statemachines.model.record_time import object_time
from statemachines.model.records import Ignored, Observed, TimerRecord
from statemachines.model.timefmt import fmt, normalize, parse
from vcbus.errors import UserError
from vcbus.logmarks import synced_first, watch_error
from vcbus.logmerge import OrderCheck, merge
from vcbus.watchlog import BATCH, InvalidRecord, Item, TruncatedRecord, iter_log


_RFC3339 = re.compile(r"\d{4}-\d\d-\d\d[Tt ]\d\d:\d\d:\d\d(\.\d+)?([Zz]|[+-]\d\d:\d\d)\Z")


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
            if not _RFC3339.match(text):
                raise ValueError(text)
            self.time = fmt(parse(text))  # parsed whole: 2026-13-45T99:00:00Z has the form, not the values
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
        self.kinds: dict[type, bool] = {}  # the object classes the log has records of
        self.interrupted = False
        self.merged = False
        self.unordered: str | None = None  # out of order across kinds, and replayed in input order (live)
        self.keep_history = True

    def report(self, *, job: str | None = None, explain: bool = False) -> dict:
        pending: dict[str, list] = {}
        for t in self.engine.pending_timers():
            pending.setdefault(t.job, []).append(t)
        return build_report(
            self.counts, self.history, self.statuses, job=job, explain=explain, pending_timers=pending
        )

    def missing_kinds(self, report: dict) -> list[str]:
        """What a job needs that the log has no record of at all, and what that distorts."""
        have = self.kinds.get
        out: list[str] = []
        if not have(Job) and (have(Pod) or have(PodGroup) or have(Command)):
            out.append(
                "the log has no vcjob records (batch.volcano.sh Job) but has pods, podgroups or commands: "
                "nothing can be decided without the jobs; record vcjobs too (`vcbus record` does)"
            )
        if not have(Job):
            return out
        if not have(PodGroup) and _decided(report, "CreatePodGroup"):
            out.append(
                "the log has no PodGroup records: vcbus never sees a job's podgroup leave Pending (the "
                "scheduler's Inqueue/Running), so jobs do not get to Running, vcbus creates no pods and a "
                "restart stays Restarting: phases and pod commands will be wrong; record podgroups too"
            )
        if not have(Pod) and _decided(report, "CreatePod"):
            out.append(
                "the log has no Pod records: vcbus asked for pods but never sees them pending, running, "
                "failing or completing, so jobs stay where pod events would have moved them (no PodFailed, "
                "TaskCompleted, restarts or completion); record pods too"
            )
        return out


def _decided(report: dict, command: str) -> bool:
    return any(c["command"] == command for j in report["jobs"] for c in j["commands"])


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


# The most frequent outputs that a projection does nothing with (but note their seq as its
# position, which a replay never reads): not offered to it at all, as most of a replay's outputs
# are these. tests/test_replay_dispatch.py checks that applying them changes neither view.
NOT_FOR_STATUS = frozenset({o.ActionResolved, o.UpdateJobStatus, o.CreatePod, o.DeletePod, o.PluginHook})
NOT_FOR_HISTORY = frozenset({o.UpdateJobStatus, o.StatusChanged})
_ACTION = o.ActionResolved  # for history, not for status (checked first in `_fold`)
_UPDATE = o.UpdateJobStatus  # for neither (checked next)
_CHANGED = o.StatusChanged  # for status, not for history (and next)
assert _ACTION in NOT_FOR_STATUS and _ACTION not in NOT_FOR_HISTORY
assert _UPDATE in NOT_FOR_STATUS and _UPDATE in NOT_FOR_HISTORY
assert _CHANGED not in NOT_FOR_STATUS and _CHANGED in NOT_FOR_HISTORY


class _OutOfOrder(Exception):
    pass


class Repeats:
    """Exact repeats of a record (same uid, resourceVersion and event type), dropped as the bus drops them.

    The bus stores a record once per `Nats-Msg-Id` `<uid>:<resourceVersion>:<type>`
    within JetStream's duplicate window (`vcbus.bus.publisher`), so a log
    published twice folds once; a file replay does the same. The window here is
    the last `WINDOW` to 2 x `WINDOW` records (two generations of identities), so
    memory stays bounded whatever the log's length; a merged replay
    (`vcbus.logmerge`) holds every record anyway and drops every repeat.
    """

    WINDOW = 8192
    __slots__ = ("current", "previous", "dropped")

    def __init__(self) -> None:
        # "<uid>\n<resourceVersion>\n<type>", as the bus's msg id (one small string per record: the
        # record's own uid and resourceVersion strings are not kept alive)
        self.current: set[str] = set()
        self.previous: set[str] = set()
        self.dropped = 0

    def seen(self, uid: str, rv: str, rtype: str) -> bool:
        """True for a repeat (counted); otherwise remember the record."""
        ident = f"{uid}\n{rv}\n{rtype}"
        if ident in self.current or ident in self.previous:
            self.dropped += 1
            return True
        current = self.current
        current.add(ident)
        if len(current) >= self.WINDOW:
            self.previous, self.current = current, set()
        return False

    def report(self, warn: Callable[[str], None]) -> None:
        if self.dropped:
            warn(
                f"dropped {self.dropped} duplicate record(s): the same object, resourceVersion and event type twice"
            )


def replay_stream(stream: Iterable[bytes], source: str, **options) -> ReplayResult:
    """Replay one input (a binary stream or any iterable of lines); see `replay_inputs`."""
    return replay_inputs([(stream, source)], **options)


def replay_inputs(
    inputs: list[tuple[Iterable[bytes], str]],
    *,
    explain: bool = False,
    until: Until | None = None,
    skip_invalid: bool = False,
    keep_commands: bool = True,
    keep_history: bool = True,
    on_problem: Callable[[str], None] | None = None,
    on_warning: Callable[[str], None] | None = None,
    on_record: Callable[[int, list], None] | None = None,
    engine: Engine | None = None,
    live: bool = False,
    interruptible: bool = False,
) -> ReplayResult:
    until = until or Until(None)
    said: set[str] = set()
    reported: set[str] = set()

    def warn(message: str) -> None:  # once each: a restarted replay meets the same things again
        if message not in said:
            said.add(message)
            if on_warning is not None:
                on_warning(message)

    def fresh() -> ReplayResult:
        result = ReplayResult(
            engine or Engine(explain=explain), HistoryView(keep_commands=keep_commands, enabled=keep_history),
            StatusView(), InputCounts(),
        )
        result.keep_history = keep_history
        return result

    def invalid(result: ReplayResult, err: UserError) -> None:
        if not skip_invalid and not isinstance(err, TruncatedRecord):
            raise err
        result.counts.invalid += 1
        result.problems.append(str(err))
        if str(err) not in reported:
            reported.add(str(err))
            if on_problem is not None:
                on_problem(str(err))

    result = fresh()
    with fewer_gc_passes():
        if len(inputs) > 1:
            warn(
                f"merging {len(inputs)} inputs ({', '.join(s for _, s in inputs)}) by resourceVersion; "
                "record numbers (seq) count records in the merged order"
            )
            return _merged(inputs, result, until, invalid, warn, on_record, interruptible, fresh)
        lines, source = inputs[0]
        how = None if engine is not None else _rereadable(lines)
        spool = _Spool(lines) if how == "spool" else None
        skip: dict[int, UserError] = {}
        while True:
            order = OrderCheck(source)
            items, list_end, cut_short = synced_first(
                iter_log(spool or lines, source, warn=warn, batch=BATCH if how == "seek" and not live else 1),
                interruptible=interruptible)
            try:
                _fold(items, result, until, invalid, on_record, order, warn,
                      interruptible, restart=how is not None, scan_rest=how == "seek", skip=skip,
                      poison_restart=False if live else None, source=source, list_end=list_end)
            except _OutOfOrder:
                if live:  # what was printed stays printed: the report at the end is the merged one
                    warn((order.found or "").replace(
                        "replaying the records merged by resourceVersion",
                        "the live timeline stops here; the input is read to its end and replayed merged by "
                        "resourceVersion, and that report follows"))
                else:
                    warn(order.found or "")
                again = fresh()
                reread, cut_short = _reread(lines, spool, interruptible)
                merged = _merged([(reread, source)], again, until, invalid, warn,
                                 None if live else on_record, interruptible, fresh)
                merged.interrupted = merged.interrupted or cut_short
                return merged
            except _Poisoned as bad:  # the engine failed mid-record: start again without it
                invalid(result, bad.error)
                skip[bad.seq] = bad.error
                lines, spool, how = _reread(lines, spool)[0], None, "seek"
                result = fresh()
                continue
            result.unordered = order.found  # out of order and not merged: only when it cannot start again
            result.interrupted = result.interrupted or cut_short
            return result


def _rereadable(lines: Iterable[bytes]) -> str | None:
    """How the input can be read again from the top: "seek" (a file), "spool" (a pipe), or not at all."""
    seekable = getattr(lines, "seekable", None)
    if seekable is not None and seekable():
        return "seek"
    if hasattr(lines, "read"):
        return "spool"
    return None


class _Spool:
    """Lines of a pipe, copied to a temporary file as they are read, so the replay can start again."""

    def __init__(self, lines: Iterable[bytes]) -> None:
        import tempfile  # only for a pipe that may have to be read again

        self.lines = lines
        self.file = tempfile.TemporaryFile()  # noqa: SIM115 - closed with the replay's process

    def __iter__(self) -> Iterator[bytes]:
        write = self.file.write
        for line in self.lines:
            write(line)
            yield line


def _reread(lines: Iterable[bytes], spool: _Spool | None, interruptible: bool = False) -> tuple[Iterable[bytes], bool]:
    """The input from its top again, and whether reading the rest of a pipe was cut short by Ctrl-C
    (`interruptible`: then what was read is what there is)."""
    if spool is not None:
        cut_short = False
        try:
            for _ in spool:  # the rest of the pipe, into the spool
                pass
        except KeyboardInterrupt:
            if not interruptible:
                raise
            cut_short = True
        spool.file.seek(0)
        return spool.file, cut_short
    lines.seek(0)  # type: ignore[attr-defined]
    return lines, False


def _merged(inputs, result, until, invalid, warn, on_record, interruptible, fresh) -> ReplayResult:
    source = ", ".join(s for _, s in inputs)
    bad: list[InvalidRecord] = []  # the merge's own invalid records, counted once per result

    def on_invalid(err: InvalidRecord) -> None:
        bad.append(err)
        invalid(result, err)

    items, duplicates = merge(inputs, on_invalid=on_invalid, warn=warn)
    if duplicates:
        warn(f"dropped {duplicates} duplicate record(s): the same object, resourceVersion and event type twice")
    skip: dict[int, UserError] = {}
    while True:
        result.merged = True
        try:
            _fold(synced_first(iter(items))[0], result, until, invalid, on_record, None, warn, interruptible,
                  restart=False, scan_rest=False, skip=skip, poison_restart=True, source=source)
        except _Poisoned as failure:
            invalid(result, failure.error)
            skip[failure.seq] = failure.error
            result = fresh()
            result.counts.invalid = len(bad)
            result.problems.extend(str(err) for err in bad)
            continue
        return result


class PoisonedRecord(UserError):
    """A decodable record the engine failed on (any exception): reported like an invalid record."""


class _Poisoned(Exception):
    def __init__(self, seq: int, error: PoisonedRecord) -> None:
        self.seq = seq
        self.error = error


def _out_of_order(order, kind, rv, seq, other_rv, other_kind, restart, warn) -> bool:
    """Records out of order across kinds: start again merged (`restart`), else warn; check no more."""
    found = order.found_at(kind, rv, seq, other_rv, other_kind)
    if restart:
        raise _OutOfOrder
    warn(found.replace(
        "replaying the records merged by resourceVersion",
        "this replay cannot start again and goes on in input order, so it may be wrong; "
        "give the saved per-kind files to `vcbus replay` together to merge them"))
    return False


def _fold(
    items: Iterator[Item],
    result: ReplayResult,
    until: Until,
    invalid: Callable[[ReplayResult, InvalidRecord], None],
    on_record: Callable[[int, list], None] | None,
    order: OrderCheck | None,
    warn: Callable[[str], None],
    interruptible: bool,
    *,
    restart: bool,
    scan_rest: bool,
    skip: dict[int, UserError] | None = None,
    poison_restart: bool | None = None,
    source: str = "",
    list_end: int = 0,
) -> None:
    """Fold records into the result. On records out of order across kinds: raise `_OutOfOrder` when
    the caller can start again (`restart`), else warn once and go on in input order. `list_end`: the
    record that ends a marked initial list (`vcbus.logmarks.synced_first`): the records before it are
    in cache-sync order, so not checked for order; checking starts there."""
    engine = result.engine
    history = result.keep_history  # off: the history projection's apply would only say no
    # the views' `apply`, and what the loop folds itself (ActionResolved, StatusChanged: most outputs;
    # tests/test_replay_dispatch.py checks that both views end as `apply` leaves them)
    hview, sview = result.history, result.statuses
    h_apply, s_apply = hview.apply, sview.apply
    h_jobs, s_statuses, s_deleted = hview.jobs, sview.statuses, sview.deleted
    counts = result.counts
    kinds = result.kinds
    apply = engine.apply
    stop_seq, stop_time = until.seq, until.time
    cut = stop_seq is not None or stop_time is not None  # until the loop reads to the end
    check = order is not None and not list_end
    repeats = Repeats()
    # Repeats.seen, inlined (it runs for every record). A repeat has the same resourceVersion string
    # as a record before it, so a record whose resourceVersion comes after every one listed so far, by
    # (length, text) (numbers without leading zeros: by value, as etcd writes them), cannot be one:
    # while the log is in that order the records' identities are only listed, as (uid,
    # resourceVersion, type), and the window's sets are made from the two lists at the first record
    # that is not; from then on every record is looked up. The generations turn over at the same
    # records either way (no two listed identities are equal).
    seen_now, seen_before, window = repeats.current, repeats.previous, Repeats.WINDOW
    listed_now: list[tuple[str, str, str]] | None = []
    listed_before: list[tuple[str, str, str]] = []
    last_size, last_rv = 0, ""  # the last resourceVersion listed, and its length
    last_kind = None
    # OrderCheck.check, inlined (it runs for every record): the highest resourceVersion, its kind,
    # and the highest among the other kinds
    top_rv, top_kind, other_rv = -1, None, -1
    events = 0
    try:
        for seq, data, decoded in items:
            if stop_seq is not None and seq > stop_seq:
                break
            cls = decoded.__class__
            raw = None
            if cls is Observed:
                obj = decoded.object  # type: ignore[attr-defined]
                kind = obj.__class__
                if kind is not last_kind:
                    last_kind = kind
                    kinds[kind] = True
                if kind is Job:
                    raw = data
                meta = obj.metadata
                rv = meta.resource_version
                uid = meta.uid
                if rv and uid:
                    size = len(rv)
                    if listed_now is not None and (size > last_size or (size == last_size and rv > last_rv)):
                        last_size, last_rv = size, rv
                        listed_now.append((uid, rv, decoded.type))  # type: ignore[attr-defined]
                        if len(listed_now) >= window:
                            listed_before, listed_now = listed_now, []
                    else:
                        if listed_now is not None:  # the first record out of that order: sets from now on
                            seen_before = repeats.previous = {f"{u}\n{r}\n{t}" for u, r, t in listed_before}
                            seen_now = repeats.current = {f"{u}\n{r}\n{t}" for u, r, t in listed_now}
                            listed_now = listed_before = None  # type: ignore[assignment]
                        ident = f"{uid}\n{rv}\n{decoded.type}"  # type: ignore[attr-defined]
                        if ident in seen_now or ident in seen_before:
                            repeats.dropped += 1
                            continue  # an exact repeat, dropped as the bus drops it
                        seen_now.add(ident)
                        if len(seen_now) >= window:
                            seen_before = repeats.previous = seen_now
                            seen_now = repeats.current = set()
                if check and decoded.time is None:  # type: ignore[attr-defined]
                    if rv:
                        try:
                            n = int(rv)
                        except ValueError:
                            n = -1
                        if n < 0:
                            pass
                        elif kind is top_kind:
                            if n > top_rv:
                                top_rv = n
                            elif n < other_rv:
                                check = _out_of_order(order, kind, n, seq, other_rv, None, restart, warn)
                        elif n >= top_rv:
                            other_rv, top_rv, top_kind = top_rv, n, kind
                        else:
                            check = _out_of_order(order, kind, n, seq, top_rv, top_kind, restart, warn)
            elif cls is Ignored:
                what = decoded.kind  # type: ignore[attr-defined]
                if what == "ERROR":
                    warn(watch_error(source, seq, data))
                elif seq == list_end:  # the initial list's end: from here on, etcd's order
                    check = order is not None
            elif cls is not TimerRecord:
                invalid(result, decoded)  # type: ignore[arg-type]
                continue
            if skip and seq in skip:  # the engine failed on it in an earlier pass
                invalid(result, skip[seq])
                continue
            if cls is Observed and decoded.notes:  # type: ignore[attr-defined]
                warn(f"record {seq}: " + "; ".join(decoded.notes))  # type: ignore[attr-defined]
            if stop_time is not None and cls is not Ignored:
                when = decoded.time or (  # type: ignore[attr-defined]
                    object_time(decoded.object) if cls is Observed else None  # type: ignore[attr-defined]
                )
                if when and normalize(when) > stop_time:
                    break
            events += 1  # (`counts.events`, added when the loop ends) ignored ones are counted by the engine
            try:
                outs = apply(seq, decoded, raw=raw)  # type: ignore[arg-type]
            except Exception as err:  # poison, never a halt (RecursionError included)
                bad = PoisonedRecord(f"record {seq}: the engine failed on it: {type(err).__name__}: {err}")
                if restart if poison_restart is None else poison_restart:
                    raise _Poisoned(seq, bad) from None
                warn(f"record {seq}: the engine state after it may be incomplete (this replay cannot start again)")
                invalid(result, bad)
                continue
            for out in outs:
                cls = out.__class__
                if cls is _ACTION:  # most outputs, one per request: history only
                    if history:  # `HistoryView.apply` of an ActionResolved, inlined
                        pos = out.seq
                        if pos >= hview.position:
                            hview.position = pos
                            h = h_jobs.get(out.job)
                            if h is None:
                                h = h_jobs[out.job] = JobHistory(out.job)
                            h.actions.append(out)
                    continue
                if cls is _UPDATE:  # neither view's (one per status write)
                    continue
                if cls is _CHANGED:  # status only: `StatusView.apply` of a StatusChanged, inlined
                    pos = out.seq
                    if pos >= sview.position:
                        sview.position = pos
                        s_statuses[out.job] = out.status
                        s_deleted.discard(out.job)
                    continue
                if history and cls not in NOT_FOR_HISTORY:
                    h_apply(out)
                if cls not in NOT_FOR_STATUS:
                    s_apply(out)
            if on_record is not None:
                on_record(seq, outs)
        else:
            check = False  # read to the end: nothing left to check
            cut = False
        if check and scan_rest:  # stopped by --until: the rest of the file may still be out of order
            order.top_rv, order.top_kind, order.second_rv = top_rv, top_kind, other_rv  # type: ignore[union-attr]
            for seq, _, decoded in items:
                if decoded.__class__ is Observed and decoded.time is None:  # type: ignore[attr-defined]
                    rv = decoded.object.metadata.resource_version  # type: ignore[attr-defined]
                    if rv.isdigit() and order.check(decoded.object.__class__, int(rv), seq):  # type: ignore
                        raise _OutOfOrder
    except KeyboardInterrupt:
        if not interruptible:
            raise
        result.interrupted = True
        counts.ignored += engine.ignored
        repeats.report(warn)
        return
    finally:
        counts.events += events
    repeats.report(warn)
    tail = engine.finish(stop_time) if stop_time is not None else []
    for out in tail + engine.final_divergences(cut=cut):
        h_apply(out)
        s_apply(out)
        if on_record is not None and out.seq:
            on_record(out.seq, [out])
    counts.ignored += engine.ignored
