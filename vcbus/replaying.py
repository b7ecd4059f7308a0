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
from typing import Callable, Iterable, Iterator

from projections.history import HistoryView
from projections.replay import InputCounts, build_report
from projections.status import StatusView
from statemachines import outputs as o
from statemachines.engine import Engine
from statemachines.model.objects import Command, Job, Pod, PodGroup, controller_job_ref, is_vcjob_ref
from statemachines.model.record_time import object_time
from statemachines.model.cronjob import CronJobRecord
from statemachines.model.jobflow import FlowRecord
from statemachines.model.records import Ignored, Observed, RefusalRecord, TimerRecord
from statemachines.scheduler.objects import API_VERSIONS as SCHEDULER_READS  # the kinds the scheduler folds
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
            if not self.seq:
                raise UserError(f"--until {text}: records are numbered from 1; --until 1 stops after the first "
                                "record (--until 0 would replay nothing)")
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
        self.vcjob_parts = False  # a pod, PodGroup or Command of a vcjob is among them (`VCJOB_PARTS`)
        self.ignored_kinds: dict[str, int] = {}  # records the engine ignores, by kind (Ignored.kind)
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

    def foreign(self) -> str:
        """What the log holds when it holds no record of a kind vcbus reads (`2 Deployment, 1 apps/v1
        DaemonSet`), else "": nothing the job engine acts on, nothing only the scheduler reads."""
        if self.kinds or self.counts.invalid or not self.ignored_kinds:
            return ""
        if any(kind in SCHEDULER_READS or kind in ("BOOKMARK", "ERROR") for kind in self.ignored_kinds):
            return ""
        if self.counts.events > sum(self.ignored_kinds.values()):  # timers, CronJobs, JobFlows
            return ""
        return ", ".join(f"{n} {kind}" for kind, n in sorted(self.ignored_kinds.items(), key=lambda kv: -kv[1]))

    def missing_kinds(self, report: dict) -> list[str]:
        """What a job needs that the log has no record of at all, and what that distorts."""
        have = self.kinds.get
        out: list[str] = []
        if not have(Job) and self.vcjob_parts:  # a batch/v1 Job's pods and PodGroup are no vcjob's
            out.append(
                "the log has no vcjob records (batch.volcano.sh Job) but has pods, podgroups or commands of vcjobs: "
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


VCJOB_PARTS: dict[type, Callable[[object], bool]] = {  # whether a record of these kinds is a vcjob's
    Pod: lambda pod: controller_job_ref(pod.metadata) is not None,  # type: ignore[attr-defined]  # a Pod
    PodGroup: lambda pg: any(is_vcjob_ref(ref) for ref in pg.metadata.owner_references or ()),  # type: ignore[attr-defined]  # a PodGroup
    Command: lambda cmd: cmd.target is not None and cmd.target.kind == "Job",  # type: ignore[attr-defined]  # a Command
}


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
# position, which a replay never reads): not offered to it at all (`_Fold.project`), as most of a
# replay's outputs are these. tests/test_replay_dispatch.py checks that applying them changes
# neither view.
NOT_FOR_STATUS = frozenset({o.ActionResolved, o.UpdateJobStatus, o.CreatePod, o.DeletePod, o.PluginHook})
NOT_FOR_HISTORY = frozenset({o.UpdateJobStatus, o.StatusChanged})


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
    __slots__ = ("current", "previous", "dropped", "listed", "listed_before", "last_rv")

    def __init__(self) -> None:
        # "<uid>\n<resourceVersion>\n<type>", as the bus's msg id (one small string per record)
        self.current: set[str] = set()
        self.previous: set[str] = set()
        self.dropped = 0
        # A repeat has the same resourceVersion string as a record before it, so a record whose
        # resourceVersion comes after every one so far, by (length, text) (numbers without leading
        # zeros: by value, as etcd writes them), cannot be one. While a log is in that order (nearly
        # always) its records' identities are only listed, by generation as the sets would hold them;
        # the sets are made from the lists at the first record that is not (`_stop_listing`), and
        # from then on every record is looked up. Either way the same records are dropped.
        self.listed: list[tuple[str, str, str]] | None = []
        self.listed_before: list[tuple[str, str, str]] = []
        self.last_rv = (0, "")  # the last resourceVersion listed: (length, text)

    def seen(self, uid: str, rv: str, rtype: str) -> bool:
        """True for a repeat (counted); otherwise remember the record."""
        listed = self.listed
        if listed is not None:
            key = (len(rv), rv)
            if key > self.last_rv:
                self.last_rv = key
                listed.append((uid, rv, rtype))
                if len(listed) >= self.WINDOW:
                    self.listed_before, self.listed = listed, []
                return False
            self._stop_listing()
        ident = f"{uid}\n{rv}\n{rtype}"
        if ident in self.current or ident in self.previous:
            self.dropped += 1
            return True
        current = self.current
        current.add(ident)
        if len(current) >= self.WINDOW:
            self.previous, self.current = current, set()
        return False

    def _stop_listing(self) -> None:
        """The first record out of resourceVersion order: the listed generations become the sets."""
        self.previous = {f"{u}\n{r}\n{t}" for u, r, t in self.listed_before}
        self.current = {f"{u}\n{r}\n{t}" for u, r, t in self.listed or ()}
        self.listed, self.listed_before = None, []

    def __len__(self) -> int:
        """How many identities are remembered (at most 2 x `WINDOW`)."""
        return len(self.current) + len(self.previous) + len(self.listed or ()) + len(self.listed_before)

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
    replay = _Replay(
        source=", ".join(s for _, s in inputs), until=until or Until(None), engine=engine, explain=explain,
        keep_commands=keep_commands, keep_history=keep_history, skip_invalid=skip_invalid,
        on_problem=on_problem, on_warning=on_warning, on_record=on_record, interruptible=interruptible,
    )
    with fewer_gc_passes():
        if len(inputs) > 1:
            replay.warn(
                f"merging {len(inputs)} inputs ({replay.source}) by resourceVersion; "
                "record numbers (seq) count records in the merged order"
            )
            return _merged(inputs, replay)
        return _single(inputs[0][0], replay, live=live, reusable_engine=engine is not None)


class _Replay:
    """What every pass of one replay shares: its options, and the warnings and problems said so far
    (once each: a replay started again meets the same things again)."""

    def __init__(
        self, *, source: str, until: Until, engine: Engine | None, explain: bool, keep_commands: bool,
        keep_history: bool, skip_invalid: bool, on_problem: Callable[[str], None] | None,
        on_warning: Callable[[str], None] | None, on_record: Callable[[int, list], None] | None,
        interruptible: bool,
    ) -> None:
        self.source = source
        self.until = until
        self.engine = engine
        self.explain = explain
        self.keep_commands = keep_commands
        self.keep_history = keep_history
        self.skip_invalid = skip_invalid
        self.on_problem = on_problem
        self.on_warning = on_warning
        self.on_record = on_record
        self.interruptible = interruptible
        self.said: set[str] = set()
        self.reported: set[str] = set()

    def warn(self, message: str) -> None:
        if message not in self.said:
            self.said.add(message)
            if self.on_warning is not None:
                self.on_warning(message)

    def fresh(self) -> ReplayResult:
        result = ReplayResult(
            self.engine or Engine(explain=self.explain),
            HistoryView(keep_commands=self.keep_commands, enabled=self.keep_history), StatusView(), InputCounts(),
        )
        result.keep_history = self.keep_history
        return result

    def invalid(self, result: ReplayResult, err: UserError) -> None:
        """Count and report a record that cannot be used (raised unless `skip_invalid`; a record cut
        short at the end of the input never is)."""
        if not self.skip_invalid and not isinstance(err, TruncatedRecord):
            raise err
        result.counts.invalid += 1
        result.problems.append(str(err))
        if str(err) not in self.reported:
            self.reported.add(str(err))
            if self.on_problem is not None:
                self.on_problem(str(err))


def _single(lines: Iterable[bytes], replay: _Replay, *, live: bool, reusable_engine: bool) -> ReplayResult:
    """One input, streamed; started again merged when out of order, or without a record the engine failed on."""
    result = replay.fresh()
    how = None if reusable_engine else _rereadable(lines)
    spool = _Spool(lines) if how == "spool" else None
    skip: dict[int, UserError] = {}
    while True:
        order = OrderCheck(replay.source)
        items, list_end, cut_short = synced_first(
            iter_log(spool or lines, replay.source, warn=replay.warn, batch=BATCH if how == "seek" and not live else 1),
            interruptible=replay.interruptible)
        fold = _Fold(result, replay, skip, order=order, restart=how is not None, poison_restart=how is not None and not live,
                     list_end=list_end)
        try:
            fold.over(items, scan_rest=how == "seek")
        except _OutOfOrder:
            if live:  # what was printed stays printed: the report at the end is the merged one
                replay.warn((order.found or "").replace(
                    "replaying the records merged by resourceVersion",
                    "the live timeline stops here; the input is read to its end and replayed merged by "
                    "resourceVersion, and that report follows"))
                replay.on_record = None
            else:
                replay.warn(order.found or "")
            reread, cut_short = _reread(lines, spool, replay.interruptible)
            merged = _merged([(reread, replay.source)], replay)
            merged.interrupted = merged.interrupted or cut_short
            return merged
        except _Poisoned as bad:  # the engine failed mid-record: start again without it
            replay.invalid(result, bad.error)
            skip[bad.seq] = bad.error
            lines, spool, how = _reread(lines, spool)[0], None, "seek"
            result = replay.fresh()
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
        self.file = tempfile.TemporaryFile()  # closed with the replay's process

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
    lines.seek(0)  # type: ignore[attr-defined]  # a seekable binary input (the branch above spools the rest)
    return lines, False


def _merged(inputs: list[tuple[Iterable[bytes], str]], replay: _Replay) -> ReplayResult:
    """The inputs merged by resourceVersion (in memory), folded; started again without a record the
    engine failed on."""
    result = replay.fresh()
    bad: list[InvalidRecord] = []  # the merge's own invalid records, counted once per result

    def on_invalid(err: InvalidRecord) -> None:
        bad.append(err)
        replay.invalid(result, err)

    items, duplicates = merge(inputs, on_invalid=on_invalid, warn=replay.warn)
    if duplicates:
        replay.warn(f"dropped {duplicates} duplicate record(s): the same object, resourceVersion and event type twice")
    skip: dict[int, UserError] = {}
    while True:
        result.merged = True
        try:
            _Fold(result, replay, skip, poison_restart=True).over(synced_first(iter(items))[0], scan_rest=False)
        except _Poisoned as failure:
            replay.invalid(result, failure.error)
            skip[failure.seq] = failure.error
            result = replay.fresh()
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


class _Fold:
    """One pass over the records into `result`: each record checked, decided by the engine, and its
    outputs folded into the history and status projections with their own `apply`.

    Records out of order across kinds (`order`; None: not checked): raise `_OutOfOrder` when the
    caller can start again (`restart`), else warn once and go on in input order. A record the engine
    fails on: raise `_Poisoned` when the caller can start again without it (`poison_restart`), else
    warn and go on. `skip`: the records the engine failed on in an earlier pass. `list_end`: the
    record that ends a marked initial list (`vcbus.logmarks.synced_first`): the records before it are
    in cache-sync order, so not checked for order; checking starts there.
    """

    def __init__(
        self, result: ReplayResult, replay: _Replay, skip: dict[int, UserError], *, order: OrderCheck | None = None,
        restart: bool = False, poison_restart: bool, list_end: int = 0,
    ) -> None:
        self.result = result
        self.replay = replay
        self.skip = skip
        self.order = order
        self.restart = restart
        self.poison_restart = poison_restart
        self.list_end = list_end
        self.checking = order is not None and not list_end
        self.repeats = Repeats()
        self.events = 0  # records handed to the engine (`counts.events`, added when the pass ends)
        self.last_seq = 0  # with `--until SEQ`: the last record read

    def over(self, items: Iterator[Item], *, scan_rest: bool) -> None:
        """Fold `items` up to `until`; with `scan_rest`, check the order of the records after it too."""
        result, replay = self.result, self.replay
        engine, on_record, until = result.engine, replay.on_record, replay.until
        stop_seq, stop_time = until.seq, until.time
        cut = stop_seq is not None or stop_time is not None  # until the loop reads to the end
        try:
            for seq, data, decoded in items:
                if stop_seq is not None:
                    if seq > stop_seq:
                        break
                    self.last_seq = seq
                if not self.admit(seq, data, decoded):
                    continue
                if stop_time is not None and _later(decoded, stop_time):
                    if not self.events:
                        replay.warn(f"--until {stop_time} is before the log's first record (record {seq}, at "
                                    f"{_time_of(decoded)}): nothing is replayed, the state before the log starts")
                    break
                outs = self.decide(seq, data, decoded)
                if outs is None:
                    continue
                self.project(outs)
                if on_record is not None:
                    on_record(seq, outs)
            else:
                self.checking = cut = False  # read to the end: nothing left to check
                if stop_seq is not None and self.last_seq < stop_seq:
                    replay.warn(f"--until {stop_seq}: the log ends at record {self.last_seq}: all of it is replayed")
            if self.checking and scan_rest:  # stopped by --until: the rest of the file may still be out of order
                self.scan(items)
        except KeyboardInterrupt:
            if not replay.interruptible:
                raise
            result.interrupted = True
            result.counts.ignored += engine.ignored
            self.repeats.report(replay.warn)
            return
        finally:
            result.counts.events += self.events
        self.repeats.report(replay.warn)
        tail = engine.finish(stop_time) if stop_time is not None else []
        for out in tail + engine.final_divergences(cut=cut):
            result.history.apply(out)
            result.statuses.apply(out)
            if on_record is not None and out.seq:
                on_record(out.seq, [out])
        result.counts.ignored += engine.ignored

    def admit(self, seq: int, data: bytes, decoded: object) -> bool:
        """Whether the record goes to the engine: not an exact repeat, decodable, not skipped. Notes
        its kind, checks its order and warns about its notes and watch errors."""
        replay = self.replay
        cls = decoded.__class__
        if cls is Observed:
            obj = decoded.object  # type: ignore[attr-defined]  # an Observed: cls tested above (mypy narrows type(x), not a local)
            kind = obj.__class__
            result = self.result
            result.kinds[kind] = True
            if not result.vcjob_parts and kind in VCJOB_PARTS:  # until the first: one check a record
                result.vcjob_parts = VCJOB_PARTS[kind](obj)
            meta = obj.metadata
            rv = meta.resource_version
            if rv and meta.uid and self.repeats.seen(meta.uid, rv, decoded.type):  # type: ignore[attr-defined]  # the same
                return False  # an exact repeat, dropped as the bus drops it
            if self.checking and decoded.time is None and self.order.check(kind, rv, seq):  # type: ignore[attr-defined, union-attr]  # the same; checking: an order
                self.out_of_order()
        elif cls is Ignored:
            ignored = self.result.ignored_kinds
            ignored[decoded.kind] = ignored.get(decoded.kind, 0) + 1  # type: ignore[attr-defined]  # an Ignored: cls tested
            if decoded.kind == "ERROR":  # type: ignore[attr-defined]  # the same
                replay.warn(watch_error(replay.source, seq, data))
            elif seq == self.list_end:  # the initial list's end: from here on, etcd's order
                self.checking = self.order is not None
        elif cls is not TimerRecord and cls is not RefusalRecord and cls is not CronJobRecord and cls is not FlowRecord:
            replay.invalid(self.result, decoded)  # type: ignore[arg-type]  # no known record class: an invalid record
            return False
        if self.skip and seq in self.skip:  # the engine failed on it in an earlier pass
            replay.invalid(self.result, self.skip[seq])
            return False
        if cls is Observed and decoded.notes:  # type: ignore[attr-defined]  # an Observed: cls tested above (mypy narrows type(x), not a local)
            replay.warn(f"record {seq}: " + "; ".join(decoded.notes))  # type: ignore[attr-defined]  # the same
        return True

    def out_of_order(self) -> None:
        """A record out of order across kinds (`order.found` says which): start again merged
        (`restart`), else warn; check no more."""
        if self.restart:
            raise _OutOfOrder
        self.replay.warn((self.order.found or "").replace(  # type: ignore[union-attr]  # out of order: there is an order
            "replaying the records merged by resourceVersion",
            "this replay cannot start again and goes on in input order, so it may be wrong; "
            "give the saved per-kind files to `vcbus replay` together to merge them"))
        self.checking = False

    def decide(self, seq: int, data: bytes, decoded: object) -> list | None:
        """The engine's outputs for the record; None when it failed on it (poison, never a halt)."""
        raw = data if decoded.__class__ is Observed and decoded.object.__class__ is Job else None
        self.events += 1  # ignored ones are counted by the engine
        try:
            return self.result.engine.apply(seq, decoded, raw=raw)  # type: ignore[arg-type]  # admitted: a record the engine takes
        except Exception as err:  # RecursionError included
            bad = PoisonedRecord(f"record {seq}: the engine failed on it: {type(err).__name__}: {err}")
            if self.poison_restart:
                raise _Poisoned(seq, bad) from None
            self.replay.warn(
                f"record {seq}: the engine state after it may be incomplete (this replay cannot start again)")
            self.replay.invalid(self.result, bad)
            return None

    def project(self, outs: list) -> None:
        """Each output into the views that fold it (`NOT_FOR_HISTORY`, `NOT_FOR_STATUS`: those that do not)."""
        h_apply, s_apply = self.result.history.apply, self.result.statuses.apply
        for out in outs:
            cls = out.__class__
            if cls not in NOT_FOR_HISTORY:
                h_apply(out)
            if cls not in NOT_FOR_STATUS:
                s_apply(out)

    def scan(self, items: Iterator[Item]) -> None:
        """The order of the records after `until`, which are not folded."""
        for seq, _, decoded in items:
            if decoded.__class__ is Observed and decoded.time is None:
                rv = decoded.object.metadata.resource_version
                if self.order.check(decoded.object.__class__, rv, seq):  # type: ignore[union-attr]  # scanned only with an order
                    raise _OutOfOrder


def _later(decoded: object, stop_time: str) -> bool:
    """Whether the record is past `--until`'s time (an Ignored one never is)."""
    if decoded.__class__ is Ignored:
        return False
    when = _time_of(decoded)
    return bool(when) and normalize(when) > stop_time


def _time_of(decoded: object) -> str | None:
    """A record's time: its own `time`, else its object's (`object_time`)."""
    return decoded.time or (object_time(decoded.object) if decoded.__class__ is Observed else None)  # type: ignore[attr-defined]  # every record class has a time
