"""`vcbus poison list|retry`: the records the bus services set aside, and deciding one again.

A record the decider, projector or scheduler cannot decode or decide is set
aside with a `record.poison.v1` event on VCBUS_JOBS (`vcbus.bus.poison`).
`list` reads those events back; `retry SEQ` re-publishes the original
VCBUS_K8S record as a new record (same subject and body, a new msg id, header
`Vcbus-Retry-Of: SEQ`), which the decider decides like any other. The
original stays set aside, so a rebuild never folds the record twice.
"""

from __future__ import annotations

import asyncio
import json
import pathlib

import click

from statemachines import outputs as o
from vcbus.bus import poison as p
from vcbus.bus import subjects as s
from vcbus.bus.connecting import open_bus
from vcbus.cli.output import namespace_scope, nothing_on_bus, output_options, print_document, print_names, print_table
from vcbus.errors import UserError
from vcbus.settings import BusSettings, bus_options, from_flags

HELP = """Records the bus services set aside (record.poison events), and retrying them.

\b
Examples:
  vcbus poison list                 # SEQ SUBJECT COMPONENT TIME REASON
  vcbus poison list -o json
  vcbus poison retry 42             # re-publish VCBUS_K8S record 42 (after a fix)
  vcbus poison retry 42 -o name     # VCBUS_K8S/NEW, the new record (-o json: stream, sequence, retryOf)

Exit codes: 0 ok; 1 no such poisoned record; 3 the bus is unreachable.
"""


def register(group: click.Group) -> None:
    group.add_command(poison)


@click.group(help=HELP)
def poison() -> None:
    pass


@poison.command("list", help="List the records set aside (one line each; retried ones are marked).")
@output_options(("table", "wide", "json", "yaml", "name"), json_alias=False, default="table",
                default_help="table; wide: the same; json or yaml: a list; name: STREAM/SEQ lines")
@click.option("-n", "--namespace", help="Only records of jobs in this namespace (a record whose job is unknown is in none).")
@click.option("-A", "--all-namespaces", is_flag=True, help="Every namespace (the default: a bus has no current one).")
@bus_options
def list_cmd(fmt: str, namespace: str | None, all_namespaces: bool, nats_url: str | None,
             data_dir: pathlib.Path | None) -> None:
    namespace = namespace_scope(namespace, all_namespaces)
    events, retried, where = asyncio.run(_read(from_flags(nats_url, data_dir)))
    if namespace:
        events = [e for e in events if e.job.partition("/")[0] == namespace]
    if fmt in ("json", "yaml"):
        items = [
            {**json.loads(o.encoder.encode(e)), "retried": e.stream == s.K8S_STREAM and e.sequence in retried}
            for e in events
        ]
        print_document(items, fmt)
        return
    if fmt == "name":
        print_names(f"{e.stream}/{e.sequence}" for e in events)
        return
    if not events:
        nothing_on_bus("poisoned records", where, namespace)
        return
    header = ["STREAM", "SEQ", "SUBJECT", "JOB", "COMPONENT", "TIME", "RETRIED", "REASON"]
    print_table([header] + [
        [
            e.stream, str(e.sequence), e.subject or "-", e.job, e.component, e.time or "-",
            "yes" if e.stream == s.K8S_STREAM and e.sequence in retried else "no", e.reason,
        ]
        for e in events
    ])


@poison.command("retry", help="Re-publish poisoned VCBUS_K8S record SEQ as a new record for the decider.")
@click.argument("seq", type=int)
@click.option("--force", is_flag=True, help="Re-publish even if no record.poison event names SEQ.")
@output_options(("json", "yaml", "name"), json_alias=False,
                default_help="a line; json or yaml: the new record (stream, sequence, retryOf); name: STREAM/SEQ")
@bus_options
def retry_cmd(seq: int, force: bool, fmt: str | None, nats_url: str | None, data_dir: pathlib.Path | None) -> None:
    new = asyncio.run(_retry(from_flags(nats_url, data_dir), seq, force))
    if fmt == "name":  # as `vcbus poison list -o name`
        print_names([f"{s.K8S_STREAM}/{new}"])
    elif fmt is not None:
        print_document({"stream": s.K8S_STREAM, "sequence": new, "retryOf": seq}, fmt)
    else:
        click.echo(f"re-published {s.K8S_STREAM} seq {seq} as seq {new}")


async def _read(settings: BusSettings) -> tuple[list[o.RecordPoisoned], set[int], str]:
    async with open_bus(settings, name="vcbus-poison") as bus:
        events = [e for _, e in await p.poison_events(bus.js)]
        retried = await p.retried_sequences(bus.js)
        return events, retried, bus.describe()


async def _retry(settings: BusSettings, seq: int, force: bool) -> int:
    async with open_bus(settings, name="vcbus-poison") as bus:
        if not force and seq not in {
            e.sequence for _, e in await p.poison_events(bus.js) if e.stream == s.K8S_STREAM
        }:
            raise UserError(f"{s.K8S_STREAM} seq {seq} was not set aside (see `vcbus poison list`; --force)", exit_code=1)
        try:
            return await p.retry_record(bus.js, seq)
        except LookupError as err:
            raise UserError(str(err), exit_code=1) from None
