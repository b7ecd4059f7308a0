"""`vcbus divergences`: where the status a controller wrote differs from vcbus's decision."""

from __future__ import annotations

import asyncio
import pathlib

import click

from projections.replay import race_explains
from statemachines import outputs as o
from vcbus.bus import subjects as s
from vcbus.bus.connecting import open_bus
from vcbus.bus.reading import read_stream
from vcbus.cli.output import namespace_scope, nothing_on_bus, output_options, print_document
from vcbus.errors import UserError
from vcbus.settings import bus_options, from_flags

HELP = """List every divergence between the status recorded on a vcjob and vcbus's decision.

\b
Run vcbus beside a real Volcano installation without acting on the cluster:
  vcbus up --kubeconfig ~/.kube/config --observe-only
then ask where Volcano and vcbus disagree:
  vcbus divergences
  vcbus divergences --job default/resnet-dist-train -o json

A divergence names the job, the field (phase or retryCount), what the log
recorded and what vcbus decided, and the record that showed it. One that
Volcano's own delayed-action race explains is marked "known Volcano race"
(docs/fidelity.md). Exit code 1 when there is at least one other (handy in CI);
0 when none.
"""


def register(group: click.Group) -> None:
    group.add_command(divergences)


@click.command(help=HELP)
@bus_options
@click.option("--job", metavar="NS/NAME", help="Only this job.")
@click.option("-n", "--namespace", "only_namespace", help="Only jobs in this namespace.")
@click.option("-A", "--all-namespaces", is_flag=True, help="Every namespace (the default: a bus has no current one).")
@output_options(("table", "wide", "json", "yaml"), json_alias=False, default="table", dest="output",
                default_help="table; wide: + the record's time; json or yaml: a list of divergences")
def divergences(nats_url: str | None, data_dir: pathlib.Path | None, job: str | None, only_namespace: str | None,
                all_namespaces: bool, output: str) -> None:
    namespace = namespace_scope(only_namespace, all_namespaces)
    name = None
    if job:
        job_ns, _, name = job.partition("/")
        if not job_ns or not name:
            raise UserError(f"--job {job!r}: expected NAMESPACE/NAME")
        if namespace and job_ns != namespace:
            raise UserError("--job and --namespace name different namespaces")
        namespace = job_ns
    rows, where = asyncio.run(_collect(from_flags(nats_url, data_dir), namespace, name))
    if output in ("json", "yaml"):
        print_document(rows, output)
    else:
        if not rows:
            nothing_on_bus("divergences", where, namespace)
        for r in rows:
            when = f"{r['time'] or '-':<21} " if output == "wide" else ""
            click.echo(
                f"{r['job']:<40} seq {r['seq']:<8} {when}{r['field']:<24} recorded {r['recorded']:<12} "
                f"vcbus {r['decided']}" + ("  (known Volcano race)" if r.get("known") else "")
            )
    if any(not r.get("known") for r in rows):
        raise SystemExit(1)


async def _collect(settings, namespace: str | None, name: str | None) -> tuple[list[dict], str]:
    filters = s.event_filter(namespace=namespace, name=name, types=("divergence", "timer.fired"))
    found: list[o.Divergence] = []
    fired: dict[str, int] = {}  # job -> seq of its first fired delayed action
    async with open_bus(settings, name="vcbus-divergences") as bus:
        where = bus.describe()
        async for batch in read_stream(bus.js, s.JOBS_STREAM, start_seq=1, filters=filters):
            for msg in batch:
                ev = o.event_decoder.decode(msg.data)
                if isinstance(ev, o.Divergence):
                    found.append(ev)
                elif isinstance(ev, o.TimerFired):
                    fired[ev.job] = min(ev.seq, fired.get(ev.job, ev.seq))
    rows = []
    for ev in found:
        row = {"job": ev.job, "seq": ev.seq, "time": ev.time, "field": ev.field, "recorded": ev.recorded,
               "decided": ev.decided}
        known = race_explains(ev, fired.get(ev.job))
        if known is not None:
            row["known"] = known
        rows.append(row)
    return rows, where
