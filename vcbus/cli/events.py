"""`vcbus events tail`: the domain events (or commands) on the bus, as an outside system sees them."""

from __future__ import annotations

import asyncio
import datetime as dt
import pathlib
import signal
import sys

import click

from statemachines import outputs as o
from statemachines.model.timefmt import normalize, parse
from vcbus import exitcodes
from vcbus.bus import subjects as s
from vcbus.bus.cloudevents import CloudEvent, from_message
from vcbus.bus.connecting import open_bus
from vcbus.bus.logs import Since
from vcbus.bus.reading import read_stream
from vcbus.bus.streams import last_seq
from vcbus.cli.status import parse_job
from vcbus.cli.output import chosen, document_text, namespace_scope, nothing_on_bus, output_options
from vcbus.errors import UserError
from vcbus.settings import BusSettings, bus_options, from_flags

HELP = """Print vcbus's domain events (VCBUS_JOBS) as they are published; Ctrl-C to stop (exit 130).

\b
Each line: stream seq, event time, job, type, what happened (-o wide adds the
CloudEvent's id and source). -o json (or --json) prints one CloudEvent per line
(structured mode: id, source, type, subject, time, data), -o yaml one YAML
document per event, -o name `<type>/<id>` per event.
Types match by tag or prefix: phase.changed, status.changed, action.resolved,
timer (all timer events), observed, deleted, divergence, sync.failed; or a full
CloudEvents type such as sh.volcano.job.phase.changed.v1. A type that matches
no event is an error.

Without --since it follows new events only; on a bus that holds some already
(a settled job's), a line on stderr says how many and how to print them.

--since TIME (or a duration ago) keeps the events whose time (the time of
the cluster record that caused them) is at or after it, also for a log
published or imported long after it happened; --since SEQ starts at that
stream sequence.

\b
Examples:
  vcbus events tail                                       # new events from now on
  vcbus events tail --since 1 --no-follow                 # everything stored, then exit
  vcbus events tail --job default/resnet-dist-train --type phase.changed --since 1
  vcbus events tail -n team-a --since 2026-11-30T08:00:00Z -o json | jq .data
  vcbus events tail --since 10m --commands                # the commands for the cluster side
"""


def register(group: click.Group) -> None:
    @group.group(help="Domain events on the bus.")
    def events() -> None:
        pass

    events.add_command(tail)


@click.command(help=HELP)
@click.option("--job", metavar="NS/NAME", help="Only this job (NAME alone: namespace default).")
@click.option("-n", "--namespace", help="Only jobs in this namespace.")
@click.option("-A", "--all-namespaces", is_flag=True, help="Every namespace (the default: a bus has no current one).")
@click.option("--type", "types", multiple=True, metavar="TYPE", help="Only these event types (repeatable).")
@click.option("--since", metavar="SEQ|TIME", help="Start at a stream seq, an RFC 3339 time, or a duration ago (10m).")
@click.option("--commands", is_flag=True, help="Tail the commands (VCBUS_CMDS) instead of the events.")
@output_options(default_help="one line per event")
@click.option("--no-follow", is_flag=True, help="Stop at the end of what is stored (default start: the beginning).")
@bus_options
def tail(
    job: str | None,
    namespace: str | None,
    all_namespaces: bool,
    types: tuple[str, ...],
    since: str | None,
    commands: bool,
    fmt: str | None,
    as_json: bool,
    no_follow: bool,
    nats_url: str | None,
    data_dir: pathlib.Path | None,
) -> None:
    key = parse_job(job, what="--job") if job else None
    namespace = namespace_scope(namespace, all_namespaces)
    if key is not None and namespace and s.split_job(key)[0] != namespace:
        raise UserError("--job and --namespace name different namespaces")
    ns, name = s.split_job(key) if key else (namespace, None)
    try:
        if commands:
            if types:
                raise UserError("--type selects events; commands have one subject per job")
            filters = s.command_filter(namespace=ns, name=name)
        else:
            for t in types:
                check_type(t)
            filters = s.event_filter(namespace=ns, name=name, types=types)
    except ValueError as err:
        raise UserError(f"--type: {err}") from None
    start = Since(since) if since is not None else None
    settings = from_flags(nats_url, data_dir)
    form = chosen(fmt, as_json)
    interrupted: list[int] = []
    printed, where = asyncio.run(_tail(settings, filters, commands=commands, start=start, follow=not no_follow,
                                       form=form, interrupted=interrupted))
    if interrupted:  # Ctrl-C or SIGTERM: what was read is printed; the table's code for an interrupted run
        raise SystemExit(exitcodes.INTERRUPTED)
    if not printed and no_follow:
        nothing_on_bus("commands" if commands else "events", where, ns)


async def _tail(
    settings: BusSettings, filters: list[str], *, commands: bool, start: Since | None, follow: bool, form: str | None,
    interrupted: list[int] | None = None,
) -> tuple[int, str]:
    """Print the events (or commands); how many were printed, and the bus they were read from.

    A signal (SIGINT, SIGTERM) ends the reading and is appended to `interrupted`."""
    printed = 0
    stream = s.CMDS_STREAM if commands else s.JOBS_STREAM
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def on_signal(sig: int) -> None:
        if interrupted is not None:
            interrupted.append(sig)
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal, sig)
    out = sys.stdout
    async with open_bus(settings, name="vcbus-events") as bus:
        if start is None and follow:  # from now on: a settled bus prints nothing, so say where its history is
            held = await last_seq(bus.js, stream)
            if held:
                what = "commands" if commands else "events"
                flag = " --commands" if commands else ""
                click.echo(f"following new {what} on {stream} at {bus.describe()}; it holds {held:,} already: "
                           f"`vcbus events tail --since 1{flag}` prints them first (add --no-follow to stop "
                           "at the end, or --since TIME)", err=True)
            start = Since(str(held + 1))
        elif start is None:
            start = Since(None)
        since_time = start.time
        begin = since_time - CLOCK_SKEW if since_time is not None else None
        reader = read_stream(
            bus.js, stream, start_seq=start.seq, start_time=begin, filters=filters, follow=follow, idle=0.25
        )
        async for batch in reader:
            for msg in batch:
                try:
                    ev = from_message(msg.data, msg.headers, msg.metadata.sequence.stream)
                except Exception as err:  # a body this version cannot read: say so, go on
                    out.write(f"{msg.metadata.sequence.stream:>7}  (unreadable {msg.subject}: {err})\n")
                    continue
                if since_time is not None:
                    when = event_time(ev, msg.metadata.timestamp)
                    if when is not None and when < since_time:
                        continue
                out.write(render(ev, form))
                printed += 1
            out.flush()
            if stop.is_set():
                break
        return printed, bus.describe()


KNOWN_TYPES = tuple(s.event_subtype(o.tag_of(c)) for c in o.DOMAIN_EVENTS)
"""The subject tails of every domain event: `phase.changed.v1`, `timer.fired.v1`, ..."""
CLOCK_SKEW = dt.timedelta(minutes=5)
"""How much earlier than --since TIME reading starts in the stream: an event is stored after its record's
time, but the cluster's clock and the NATS server's may differ by this much."""


def check_type(text: str) -> None:
    """Refuse a --type that selects no domain event (a typo would otherwise print nothing, forever)."""
    tail = s.type_tail(text)
    if not any(k == tail or k.startswith(tail + ".") for k in KNOWN_TYPES):
        known = sorted({k.rsplit(".", 1)[0] for k in KNOWN_TYPES})
        raise ValueError(f"{text!r} matches no event type; known types: {', '.join(known)}")


def event_time(ev: CloudEvent, stored: dt.datetime | None) -> dt.datetime | None:
    """The event's time (its record's), else when the bus stored it."""
    if ev.time:
        try:
            return dt.datetime.fromtimestamp(parse(normalize(ev.time)), dt.timezone.utc)
        except ValueError:
            pass
    return stored


def render(ev: CloudEvent, form: str | None) -> str:
    """One event in the `-o` form (None: the line)."""
    if form in ("json", "yaml"):
        return document_text(ev.structured(), form, one_line=True)
    if form == "name":
        return f"{ev.type}/{ev.id}\n"
    if form == "wide":
        return f"{line(ev)}  id={ev.id} source={ev.source}\n"
    return line(ev) + "\n"


def line(ev: CloudEvent) -> str:
    d = ev.data
    kind = o.tag_of(type(d)).rsplit(".", 1)[0]
    return f"{ev.stream_seq:>7}  {ev.time or '-':<20}  {ev.subject}  {kind:<22}  {summary(d)}".rstrip()


def summary(d: o.Output) -> str:
    if isinstance(d, o.PhaseChanged):
        before = d.from_phase or '""'
        return f"{before} -> {d.to_phase} ({d.action}, retryCount {d.retry_count}, version {d.version})"
    if isinstance(d, o.ActionResolved):
        what = d.event or "PodGroup phase change"
        if d.pod:
            what += f" pod {d.pod}"
        elif d.task:
            what += f" task {d.task}"
        text = f"{what} -> {d.action} [{d.policy}] in {d.phase}"
        return text + (f" after {d.delay}" if d.delay else "")
    if isinstance(d, o.TaskPhaseChanged):
        return f"task {d.task}: {d.from_phase} -> {d.to_phase} ({d.cause})"
    if isinstance(d, (o.StatusChanged, o.UpdateJobStatus)):
        st = d.status
        return (
            f"phase {st.state.phase}, running {st.running}, pending {st.pending}, succeeded {st.succeeded}, "
            f"failed {st.failed}, retryCount {st.retry_count}"
        )
    if isinstance(d, o.JobObserved):
        return f"uid {d.uid}" + (f", adopted {d.adopted_phase}" if d.adopted_phase else "")
    if isinstance(d, o.TimerScheduled):
        return f"timer {d.timer}: {d.action} due {d.due} ({d.event} {d.pod})".rstrip()
    if isinstance(d, o.TimerFired):
        return f"timer {d.timer}: {d.action}"
    if isinstance(d, o.TimerCancelled):
        return f"timer {d.timer}: {d.reason}"
    if isinstance(d, o.Divergence):
        return f"{d.field}: log says {d.recorded}, vcbus {d.decided}"
    if isinstance(d, o.SyncFailed):
        return d.message
    if isinstance(d, o.RecordEvent):
        return f"{d.reason}: {d.message}"
    if isinstance(d, o.DeletePod):
        return f"{d.name} ({d.reason})"
    if isinstance(d, o.PluginHook):
        return f"{d.hook} {', '.join(d.plugins)}"
    name = getattr(d, "name", "")
    return str(name)
