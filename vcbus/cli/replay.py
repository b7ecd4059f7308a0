"""`vcbus replay`: a job's history, re-decided from a log of Kubernetes watch events."""

from __future__ import annotations

import sys

import click
import msgspec

from vcbus.errors import UserError
from vcbus.replaying import Until, replay_stream
from vcbus.watchlog import open_input

HELP = """Replay a log of Kubernetes watch events and show what vcbus decides, job by job.

\b
FILE is what
  kubectl get vcjob,pods,podgroups,queues,commands -A --watch \\
      --output-watch-events -o json
prints (pretty-printed or one JSON object per line), or a `vcbus log export`.
Use - to read standard input, e.g. to follow a live cluster:
  kubectl get vcjob,pods,podgroups,queues,commands -A -w --output-watch-events -o json \\
      | vcbus replay -

\b
Examples:
  vcbus replay examples/resnet-dist-train.jsonl
  vcbus replay watch.log --job default/resnet-dist-train --explain
  vcbus replay watch.log --until 2026-11-30T08:05:00Z     # the state at that time
  vcbus replay watch.log --until 42                        # the state after record 42
  vcbus replay watch.log --compare                         # where Volcano decided otherwise
  vcbus replay watch.log --json | jq '.jobs[].status.state.phase'
  vcbus replay --nats --job default/resnet-dist-train        # the bus's log (same output as its export)

Exit codes: 0 ok; 1 with --compare when a divergence was found; 2 bad input.
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


@click.command(help=HELP)
@click.argument("file", metavar="FILE", required=False)
@click.option(
    "--nats",
    "nats",
    metavar="URL",
    is_flag=False,
    flag_value="",
    default=None,
    help="Replay the bus's log (stream VCBUS_K8S) instead of FILE; --nats alone: VCBUS_NATS_URL or the embedded server.",
)
@click.option("--job", "job", metavar="NS/NAME", help="Only this job (NAME alone means namespace default).")
@click.option("--until", "until", metavar="SEQ|TIME", help="Stop after record SEQ, or at an RFC 3339 TIME.")
@click.option("--explain", is_flag=True, help="For each action, which policy matched and why the others did not.")
@click.option("--compare", is_flag=True, help="List where the recorded phase/retryCount differs from vcbus's.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document (a stable contract, docs/replay.md).")
@click.option("--skip-invalid", is_flag=True, help="Report bad records on stderr and go on, instead of stopping.")
@click.option(
    "--all-actions", is_flag=True, help="Show the default SyncJob resolutions in the timeline too."
)
def replay(
    file: str | None,
    nats: str | None,
    job: str | None,
    until: str | None,
    explain: bool,
    compare: bool,
    as_json: bool,
    skip_invalid: bool,
    all_actions: bool,
) -> int:
    job_key = _job_option(job)
    stop = Until(until)
    if nats is not None:
        if file is not None:
            raise UserError("give FILE or --nats, not both")
        from vcbus.bus.logs import open_bus_log

        stream, source = open_bus_log(nats or None)
    elif file is None:
        raise UserError("missing FILE (a watch log, - for stdin), or --nats to replay the bus's log")
    else:
        stream, source = open_input(file)

    def problem(msg: str) -> None:
        click.echo(f"warning: skipped {msg}", err=True)

    try:
        result = replay_stream(stream, source, explain=explain, until=stop, skip_invalid=skip_invalid, on_problem=problem)
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()
    report = result.report(job=job_key, explain=explain)
    if job_key is not None and not report["jobs"]:
        raise UserError(f"job {job_key} does not appear in {source}", exit_code=1)
    if as_json:
        sys.stdout.buffer.write(msgspec.json.format(msgspec.json.encode(report), indent=2) + b"\n")
    else:
        from vcbus.cli.timeline import print_report

        print_report(report, explain=explain, compare=compare, all_actions=all_actions)
    if compare and any(j["divergences"] for j in report["jobs"]):
        raise SystemExit(1)
    return 0
