"""`vcbus status`: job statuses as the projector keeps them (KV `vcbus_status`), like `kubectl get`."""

from __future__ import annotations

import asyncio
import json
import pathlib
from typing import Any

import click
import msgspec

from vcbus.bus import subjects as s
from vcbus.bus.connecting import open_bus
from vcbus.bus.reading import read_bucket
from vcbus.errors import UserError
from vcbus.settings import BusSettings, bus_options, from_flags

HELP = """Show job statuses from the bus (the KV bucket vcbus_status), like kubectl get vcjob.

\b
Examples:
  vcbus status                                  # every job
  vcbus status default/resnet-dist-train        # one job (NAME alone: namespace default)
  vcbus status -n team-a -o wide
  vcbus status default/resnet-dist-train -o json | jq .status.retryCount
  vcbus status -o yaml

The statuses are those the projector has folded so far (`vcbus up` keeps them current).
Exit codes: 0 ok; 1 the job has no status; 3 the bus is unreachable.
"""


def register(group: click.Group) -> None:
    group.add_command(status)


def parse_job(value: str, *, what: str = "job") -> str:
    """NS/NAME (or NAME in namespace default) as a job key."""
    if "/" not in value:
        value = f"default/{value}"
    ns, _, name = value.partition("/")
    if not ns or not name or "/" in name:
        raise UserError(f"{what} {value!r}: expected NAMESPACE/NAME (or NAME in namespace default)")
    return value


def job_object(job: str, status: dict[str, Any]) -> dict[str, Any]:
    ns, name = s.split_job(job)
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"namespace": ns, "name": name},
        "status": status,
    }


@click.command(help=HELP)
@click.argument("job", metavar="[NS/NAME]", required=False)
@click.option("-n", "--namespace", help="Only jobs in this namespace.")
@click.option(
    "-o", "--output", "fmt", type=click.Choice(["table", "wide", "json", "yaml"]), default="table", show_default=True
)
@bus_options
def status(
    job: str | None, namespace: str | None, fmt: str, nats_url: str | None, data_dir: pathlib.Path | None
) -> None:
    key = parse_job(job) if job else None
    settings = from_flags(nats_url, data_dir)
    statuses = asyncio.run(_read(settings))
    if key is not None:
        if key not in statuses:
            raise UserError(f"job {key} has no status on the bus (not published, or not decided yet?)", exit_code=1)
        statuses = {key: statuses[key]}
    elif namespace:
        statuses = {k: v for k, v in statuses.items() if s.split_job(k)[0] == namespace}
    if fmt in ("json", "yaml"):
        items = [job_object(k, v) for k, v in sorted(statuses.items())]
        doc: dict[str, Any] = items[0] if key is not None else {"apiVersion": "v1", "kind": "List", "items": items}
        if fmt == "json":
            click.echo(json.dumps(doc, indent=2))
        else:
            import yaml

            click.echo(yaml.safe_dump(doc, sort_keys=False), nl=False)
        return
    print_table(statuses, wide=fmt == "wide")


async def _read(settings: BusSettings) -> dict[str, dict[str, Any]]:
    async with open_bus(settings, name="vcbus-status") as bus:
        raw = await read_bucket(bus.js, s.STATUS_BUCKET)
    out = {}
    for key, value in raw.items():
        if key.startswith("_"):
            continue
        out[s.job_of_key(key)] = msgspec.json.decode(value)
    return out


def _row(job: str, st: dict[str, Any], wide: bool) -> list[str]:
    ns, name = s.split_job(job)
    state = st.get("state") or {}
    row = [
        ns,
        name,
        state.get("phase", "") or "-",
        str(st.get("minAvailable", 0)),
        str(st.get("running", 0)),
        str(st.get("retryCount", 0)),
    ]
    if wide:
        row += [
            str(st.get("pending", 0)),
            str(st.get("succeeded", 0)),
            str(st.get("failed", 0)),
            str(st.get("version", 0)),
            st.get("runningDuration") or "-",
            state.get("lastTransitionTime") or "-",
            _poisoned(st),
        ]
    return row


def _poisoned(st: dict[str, Any]) -> str:
    """`True` when a record of the job was set aside (see `vcbus poison list`), else `-`."""
    for cond in st.get("conditions") or ():
        if isinstance(cond, dict) and cond.get("type") == "Poisoned" and cond.get("status") == "True":
            return "True"
    return "-"


def print_table(statuses: dict[str, dict[str, Any]], *, wide: bool) -> None:
    header = ["NAMESPACE", "NAME", "STATUS", "MINAVAILABLE", "RUNNINGS", "RETRIES"]
    if wide:
        header += ["PENDING", "SUCCEEDED", "FAILED", "VERSION", "RUNNING-DURATION", "LAST-TRANSITION", "POISONED"]
    if not statuses:
        click.echo("No jobs on the bus.", err=True)
        return
    rows = [header] + [_row(k, v, wide) for k, v in sorted(statuses.items())]
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    for r in rows:
        click.echo("   ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
