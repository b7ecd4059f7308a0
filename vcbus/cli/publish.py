"""`vcbus publish FILE`: a recorded kubectl watch log into VCBUS_K8S (debug a production log locally)."""

from __future__ import annotations

import asyncio
import pathlib
import sys
from typing import BinaryIO

import click

from vcbus.bus import subjects as s
from vcbus.bus.connecting import open_bus
from vcbus.bus.logstore import store_log
from vcbus.bus.publisher import LogCheck, Publisher, check_log, spooled_input
from vcbus.bus.streams import last_seq
from vcbus.cli.output import output_options
from vcbus.cli.replay import warn
from vcbus.cli.results import RESULT_FORMS, RESULT_HELP, Published, print_result
from vcbus.errors import UserError
from vcbus.logmerge import in_etcd_order
from vcbus.settings import BusSettings, bus_options, from_flags
from vcbus.watchlog import open_input
from vcbus import logforms

HELP = """Publish a recorded watch log into the bus (stream VCBUS_K8S), for the decider to decide.

\b
FILE is what `vcbus record -A` writes (every kind, in etcd's order), what
  kubectl get <kind> -A --watch --output-watch-events -o json|yaml
prints for one kind, a `vcbus log export`, or any other form `vcbus replay`
reads (Lists, plain objects, JSON arrays); - reads stdin. Per-kind kubectl
logs concatenated are merged by resourceVersion first, and the initial list of
a `vcbus record` log is stored in the order `vcbus replay` folds it
(docs/replay.md), so the decider decides what replay does.

\b
The whole file is checked first: a bad record (undecodable, a TIMER without a
job key, a name no subject can hold, a record over the server's max payload)
stops with the same message as `vcbus replay --strict` (file, line, record, byte
offset; exit 2) and nothing is published; a last record cut short (a log copied
while it was written) is skipped with replay's warning.
Records are stored once: a record already in the stream (same uid,
resourceVersion and watch type) is not stored again, so publishing a file
twice is harmless. Kinds vcbus does not read are skipped; bookmarks and watch
ERRORs are kept, so `vcbus replay --nats` numbers rows as `vcbus replay FILE`.

\b
If the server fails part-way: an input of up to 1,000 records (and 64 MiB) is
one atomic batch, stored whole or not at all; a larger one is stored in file
order, and the error says how many records were stored. Run the same command
again (within the stream's duplicate window, 10 minutes by default) to store the
rest: nothing is stored twice (exit 3 until then).

\b
Examples:
  vcbus publish examples/resnet-dist-train.json
  vcbus publish watch.log --nats nats://127.0.0.1:4222
  vcbus record -A --for 10m | vcbus publish -
  vcbus publish watch.log -o json    # {"kind": "Published", "published": N, "firstSeq": ...}
"""


def register(group: click.Group) -> None:
    group.add_command(publish)


@click.command(help=HELP)
@click.argument("file", metavar="FILE")
@output_options(RESULT_FORMS, json_alias=False, default_help=RESULT_HELP)
@bus_options
def publish(file: str, fmt: str | None, nats_url: str | None, data_dir: pathlib.Path | None) -> None:
    settings = from_flags(nats_url, data_dir)
    stream, source = open_input(file)
    try:
        data = spooled_input(stream)
        checked_input(data, source)  # no log at all, or undecodable records: fail before any connection
        pub, checked = asyncio.run(_publish(settings, data, source, require_empty=False,
                                            command=f"vcbus publish {file}", reorder=True))
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()
    print_result(published(pub, checked, source), fmt)


def checked_input(data: BinaryIO, source: str, *, stdin: bool = True) -> LogCheck:
    """`check_log` of a seekable input (left at its start), after refusing what is no watch log at all:
    compressed or binary data, kubectl's table output, an empty input, records of no kind vcbus reads
    (a file of Deployments). One `error:` line saying what the input is and how to record a log (exit 2)."""
    head = data.read(64 * 1024)
    data.seek(0)
    first = next((line.strip() for line in head.splitlines() if line.strip()), b"")
    if first and logforms.sniff(first) is None:
        raise UserError(logforms.unusable_message(source, first, stdin=stdin))
    checked = check_log(data, source, warn=warn)  # what replay warns of while reading, said once
    data.seek(0)
    if not checked.records:
        raise UserError(f"{source}: no watch records in it (empty, or only blank lines): {logforms.RECORD_HINT}")
    if not checked.publishable:
        raise UserError(f"{source}: holds {checked.records} record(s), none of a kind vcbus reads (vcjobs, pods, "
                        f"podgroups, queues, commands, nodes...): {logforms.RECORD_HINT}")
    return checked


async def _publish(
    settings: BusSettings, data: BinaryIO, source: str, *, require_empty: bool, command: str = "vcbus publish",
    reorder: bool = False,
) -> tuple[Publisher, LogCheck]:
    """Check the whole input against the server (max payload) and only then store it (vcbus.bus.logstore):
    all or nothing when it fits one atomic batch, else in order, completed by a re-run if the server fails.
    `reorder`: once checked (errors name the input's places), store the records in the order `vcbus
    replay` folds them (`in_etcd_order`)."""
    async with open_bus(settings, name="vcbus-publish") as bus:
        if require_empty:
            n = await last_seq(bus.js, s.K8S_STREAM)
            if n:
                raise UserError(
                    f"{s.K8S_STREAM} already holds records (up to seq {n}); an import into a non-empty stream "
                    "changes their sequence numbers. Use --append to add them anyway, or `vcbus publish`."
                )
        checked = check_log(data, source, max_payload=bus.nc.max_payload)
        data.seek(0)
        if reorder:
            data = in_etcd_order(data, source, warn=warn)
        return await store_log(bus, data, source, checked, command=command), checked


def published(pub: Publisher, checked: LogCheck, source: str) -> Published:
    """What a publish or an import stored, as its `-o json|yaml` document."""
    return Published(source=source, stream=s.K8S_STREAM, published=pub.published,
                     first_seq=pub.first_seq if pub.published else None,
                     last_seq=pub.last_seq if pub.published else None,
                     duplicates=pub.duplicates, skipped=checked.ignored)
