"""`vcbus replay`: a job's history, re-decided from a log of Kubernetes watch events."""

from __future__ import annotations

import os
import pathlib
import signal
import stat
import sys

import click

from vcbus import exitcodes
from vcbus.cli.output import chosen, output_options, print_document
from vcbus.errors import UserError
from vcbus.settings import ENV_DATA_DIR, auth_options, default_data_dir
from vcbus.replaying import Until, replay_inputs
from vcbus.watchlog import open_input

HELP = """Replay a log of Kubernetes watch events and show what vcbus decides, job by job.

\b
Record the log with `vcbus record` (every kind vcbus reads, in one merged file):
  vcbus record -A -o watch.log              # Ctrl-C to stop, or --for 10m
  vcbus replay watch.log
kubectl watches one resource type at a time; give its per-kind logs together
(they are merged by resourceVersion), e.g. from
  kubectl get vcjobs -A --watch --output-watch-events -o json > vcjobs.log
  (the same for pods, podgroups, queues, commands)
  vcbus replay vcjobs.log pods.log podgroups.log queues.log commands.log
Also read: the same concatenated into one file, `-o yaml` watches, `v1 List`s
and plain objects (`kubectl get -o json|yaml`, `-w` without
--output-watch-events: snapshots), JSON arrays, `vcbus log export` output.

\b
Follow a live cluster: - reads standard input, --follow FILE a file that is
still being written (like tail -f); each timeline row is printed as soon as
its record arrives, Ctrl-C (or SIGTERM) prints the final statuses and exits 130:
  vcbus record -A | vcbus replay -
  vcbus replay --follow watch.log
A pipe found out of order across kinds is read to its end and the merged
report follows (the same as for the file); --follow cannot reorder: it warns
and exits 2 at the end. `- < FILE` is read as FILE.

\b
Examples:
  vcbus replay examples/resnet-dist-train.json
  vcbus replay watch.log --job default/resnet-dist-train --explain
  vcbus replay watch.log --until 2026-11-30T08:05:00Z     # the state at that time
  vcbus replay watch.log --until 42                        # the state after record 42
  vcbus replay watch.log --compare                         # where Volcano decided otherwise
  vcbus replay watch.log --html timeline.html              # a page to open in a browser
  vcbus replay watch.log --json | jq '.jobs[].status.state.phase'
  vcbus replay watch.log -o yaml                           # the same document as YAML
  vcbus replay --nats --job default/resnet-dist-train        # the bus's log (same output as its export)

Bad records (invalid JSON, a vcjob without namespace, a record the engine
fails on) are reported on stderr one line each and skipped; the summary
counts them and the exit code stays 0. --strict stops at the first (exit 2).
A timestamp that is not RFC 3339 is treated as absent, with a warning.
With stderr on a terminal, a replay that takes over a second shows there the
record it has reached and how much of FILE it has read (cleared before the report).

Exit codes: 0 ok; 1 with --compare when a divergence was found (one that Volcano's known
delayed-action race explains is shown as such and does not count); 2 bad input
(with --strict: any bad record; --follow of records out of order); 130 interrupted
(Ctrl-C or SIGTERM) while reading - or --follow, after the report of what was read.
"""


def register(group: click.Group) -> None:
    group.add_command(replay)


def _job_option(value: str | None) -> str | None:
    if value is None:
        return None
    if "/" not in value:
        return f"default/{value}"
    ns, _, name = value.partition("/")
    if not ns or not name or "/" in name:
        raise UserError(f"--job {value!r}: expected NAMESPACE/NAME (or NAME in namespace default)")
    return value


def _redirected() -> bool:
    """Standard input is a regular file (`vcbus replay - < FILE`): read as that file is, not followed."""
    try:
        return stat.S_ISREG(os.fstat(sys.stdin.fileno()).st_mode)
    except (OSError, ValueError):
        return False


def _refuse_foreign(result, source: str, *, whole: bool) -> None:
    """An input with no record at all (`whole`: read to its end), or none of a kind vcbus reads (a file of
    Deployments), is bad input: say what it holds and how to record a log (exit 2)."""
    from vcbus.logforms import RECORD_HINT

    counts = result.counts
    if whole and not counts.events and not counts.invalid:
        raise UserError(f"{source}: no watch records in it (empty, or only blank lines and comments): {RECORD_HINT}")
    held = result.foreign()
    if held:
        raise UserError(f"{source}: holds {held} record(s), none of a kind vcbus replays (vcjobs, pods, podgroups, "
                        f"queues, commands, or what the scheduler reads: nodes, priorityclasses...): {RECORD_HINT}")


def _interrupt(*_: object) -> None:
    """SIGTERM (`kill`, `timeout`, a pod's stop) ends a live replay as Ctrl-C does: the report, then 130."""
    raise KeyboardInterrupt


def warn(message: str) -> None:
    """One `warning:` line on stderr (also the bus commands' warnings about a log: publish, demo)."""
    click.echo(f"warning: {message}", err=True)


@click.command(help=HELP)
@click.argument("files", metavar="[FILE]...", nargs=-1)
@auth_options  # for --nats: credentials and TLS, as every bus command
@click.option(
    "--nats",
    "nats",
    metavar="URL",
    is_flag=False,
    flag_value="",
    default=None,
    help="Replay the bus's log (stream VCBUS_K8S) instead of FILE; --nats alone: VCBUS_NATS_URL or the embedded server.",
)
@click.option("--data-dir", "data_dir", metavar="DIR",
              type=click.Path(file_okay=False, path_type=pathlib.Path),
              help=f"With --nats alone: the store of the embedded NATS server [env {ENV_DATA_DIR}; default "
                   f"{default_data_dir()}].")
@click.option("--follow", "-f", "follow", is_flag=True, help="Keep reading FILE as it grows (like tail -f); Ctrl-C to stop.")
@click.option("--job", "job", metavar="NS/NAME", help="Only this job (NAME alone means namespace default).")
@click.option("--until", "until", metavar="SEQ|TIME", help="Stop after record SEQ, or at an RFC 3339 TIME.")
@click.option("--explain", is_flag=True, help="For each action, which policy matched and why the others did not.")
@click.option("--compare", is_flag=True, help="List where the recorded phase/retryCount differs from vcbus's.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document (a stable contract, docs/replay.md).")
@output_options(("json", "yaml"), json_alias=False, default_help="the text report; json: the same as --json, "
                "yaml: that document as YAML")
@click.option(
    "--strict", is_flag=True, help="Stop with exit 2 at the first bad record (default: report each on stderr, go on)."
)
@click.option("--skip-invalid", is_flag=True, hidden=True, help="The default now; kept as an accepted alias.")
@click.option(
    "--all-actions", is_flag=True, help="Show the default SyncJob resolutions in the timeline too."
)
@click.option("--html", "html", metavar="OUT", help="Also write the timeline as one self-contained HTML page to OUT.")
def replay(
    files: tuple[str, ...],
    nats: str | None,
    data_dir: pathlib.Path | None,
    follow: bool,
    job: str | None,
    until: str | None,
    explain: bool,
    compare: bool,
    as_json: bool,
    fmt: str | None,
    skip_invalid: bool,
    all_actions: bool,
    strict: bool = False,
    html: str | None = None,
) -> int:
    job_key = _job_option(job)
    form = chosen(fmt, as_json)  # json or yaml: one document (the report), never the live rows
    if strict and skip_invalid:
        raise UserError("give --strict (stop at the first bad record) or --skip-invalid (the default), not both")
    if html is not None and (nats is not None or follow or "-" in files):
        raise UserError("--html reads the log twice: give FILE (not -, --follow or --nats)")
    stop = Until(until)
    streams = []
    if nats is not None:
        if files:
            raise UserError("give FILE or --nats, not both")
        if follow:
            raise UserError("--follow reads a file; the bus's log is read with --nats alone")
        from vcbus.bus.logs import open_bus_log

        streams.append(open_bus_log(nats or None, data_dir))
    elif data_dir is not None:
        raise UserError("--data-dir is the store of the bus --nats reads: add --nats (FILE is read as it is)")
    elif not files:
        raise UserError(
            "missing FILE (a watch log, - for stdin; `vcbus record -A -o watch.log` records one), "
            "or --nats to replay the bus's log"
        )
    elif follow:
        if len(files) != 1 or files[0] == "-":
            raise UserError("--follow takes one FILE (standard input, -, is always followed)")
        from vcbus.tailing import follow_lines

        path = files[0]
        open_input(path)[0].close()  # the same clear errors as without --follow
        streams.append((follow_lines(path, on_reset=warn), path))
    else:
        if files.count("-") > 1:
            raise UserError("- (standard input) can be given once")
        streams.extend(open_input(f) for f in files)

    reading_stdin = len(files) == 1 and files[0] == "-" and not _redirected()
    live = (follow or reading_stdin) and form is None
    timeline = None
    if live:
        from vcbus.cli.live import LiveTimeline

        timeline = LiveTimeline(job=job_key, explain=explain, all_actions=all_actions)

    problems: list[str] = []  # held back unless live: an input with no usable record is one error

    def problem(msg: str) -> None:
        if live:
            click.echo(f"warning: skipped {msg}", err=True)
        else:
            problems.append(msg)

    interruptible = follow or reading_stdin
    progress = None
    if not live:  # a line on a terminal's stderr while a long replay runs (vcbus/cli/progress.py)
        from vcbus.cli.progress import ReplayProgress

        progress = ReplayProgress.on_terminal(streams)
    on_record = timeline.on_record if timeline else progress.on_record if progress else None
    previous = signal.signal(signal.SIGTERM, _interrupt) if interruptible else None  # SIGTERM as Ctrl-C
    try:
        result = replay_inputs(
            streams, explain=explain, until=stop, skip_invalid=not strict, on_problem=problem,
            on_warning=progress.interjecting(warn) if progress else warn, on_record=on_record,
            live=live, interruptible=interruptible,
        )
    finally:
        if progress is not None:
            progress.stop()
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        for stream, _ in streams:
            if stream is not sys.stdin.buffer and hasattr(stream, "close"):
                stream.close()
    counts = result.counts
    if problems and not counts.events and not counts.ignored and not result.interrupted:
        raise UserError(problems[0])  # nothing usable at all: not a watch log, say why once
    for msg in problems:
        click.echo(f"warning: skipped {msg}", err=True)
    source = ", ".join(s for _, s in streams)
    if nats is None and not result.interrupted:
        _refuse_foreign(result, source, whole=stop.seq is None and stop.time is None)
    report = result.report(job=job_key, explain=explain)
    if not result.interrupted:
        for message in result.missing_kinds(report):
            warn(f"{source}: {message}")
    if job_key is not None and not report["jobs"] and not live:
        known = [f"{j['namespace']}/{j['name']}" for j in result.report()["jobs"]]
        more = f" and {len(known) - 20} more" if len(known) > 20 else ""
        listing = f"the jobs in it: {', '.join(known[:20])}{more}" if known else "it has no jobs"
        raise UserError(f"job {job_key} does not appear in {source}; {listing}", exit_code=1)
    if html is not None:
        from vcbus.replay_html import write_html

        click.echo(f"timeline page: {write_html(html, files, result, report, until=stop)}", err=True)
    if form in ("json", "yaml"):
        print_document(report, form)
    else:
        from vcbus.cli.timeline import print_report

        if live:
            click.echo()
        note = "; interrupted" if result.interrupted else ""
        print_report(report, explain=explain, compare=compare, all_actions=all_actions,
                     timeline=not live or result.merged, note=note)  # merged: the live rows stopped
    if result.unordered:
        raise UserError(
            f"the replay above is in input order, which is not the order etcd wrote the records in (records of "
            f"different kinds are out of resourceVersion order) and cannot be reordered while following; "
            f"run `vcbus replay {source}` once the file is complete: it merges them by resourceVersion"
        )
    if result.interrupted:
        raise SystemExit(exitcodes.INTERRUPTED)
    if compare and any(not d.get("known") for j in report["jobs"] for d in j["divergences"]):
        raise SystemExit(exitcodes.NEGATIVE)  # a divergence Volcano's known race explains is no vcbus error
    return 0
