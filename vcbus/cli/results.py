"""What the bus's action commands did: one typed document each, printed by `-o json|yaml`.

`vcbus publish` and `vcbus log import` answer `Published`, `vcbus projections rebuild` `Rebuilt`,
`vcbus projections verify` `Verified`, `vcbus bus repartition` `Repartitioned`. Each document names
itself in `kind`; fields are camelCase, as the Kubernetes objects the other commands print. Without
`-o` the command prints the one line `line()` makes of the same document (docs/cli.md "Output").
"""

from __future__ import annotations

import msgspec

RESULT_FORMS = ("json", "yaml")  # their -o: one document, no name of its own, no table
RESULT_HELP = "a line on standard error; json or yaml: what was done, as one document"


class _Result(msgspec.Struct, kw_only=True, rename="camel", tag_field="kind", tag=True):
    def line(self) -> str:
        raise NotImplementedError


class Published(_Result):
    """A watch log stored into VCBUS_K8S (`vcbus publish`, `vcbus log import`)."""

    source: str  # the file (`<stdin>` for -)
    stream: str  # VCBUS_K8S
    published: int  # records stored by this run
    first_seq: int | None  # their stream sequences (None: nothing stored)
    last_seq: int | None
    duplicates: int  # records the stream already held (same uid, resourceVersion and watch type)
    skipped: int  # records of kinds vcbus does not read

    def line(self) -> str:
        text = f"published {self.published} records from {self.source} to {self.stream}"
        if self.published and self.first_seq:
            text += f" (seq {self.first_seq}..{self.last_seq})"
        extra = [f"{self.duplicates} already there"] if self.duplicates else []
        if self.skipped:
            extra.append(f"{self.skipped} skipped (kinds vcbus does not read)")
        return text + (f"; {', '.join(extra)}" if extra else "")


class Rebuilt(_Result):
    """The KV views wiped and refolded from VCBUS_JOBS sequence 1 (`vcbus projections rebuild`)."""

    buckets: list[str]  # vcbus_status, vcbus_history
    stream: str  # VCBUS_JOBS
    jobs: int  # jobs in the rebuilt views
    position: int  # the last sequence of the stream folded

    def line(self) -> str:
        return f"rebuilt {' and '.join(self.buckets)}: {self.jobs} jobs, {self.stream} up to seq {self.position}"


class Verified(_Result):
    """The KV views compared with a refold of VCBUS_JOBS (`vcbus projections verify`; exit 1 unless equal)."""

    buckets: list[str]
    stream: str
    equal: bool
    differences: list[str]  # one line each: the key and what differs

    def line(self) -> str:
        if self.equal:
            return f"the KV views equal a refold of {self.stream}"
        return f"{len(self.differences)} difference(s) between the KV views and {self.stream}"


class Repartitioned(_Result):
    """VCBUS_K8S replayed into `partitions` partitions (`vcbus bus repartition`)."""

    stream: str  # VCBUS_K8S
    partitions: int
    records: int  # records in the stream
    changed: bool  # False: it had that many partitions already, nothing was done

    def line(self) -> str:
        if not self.changed:
            return f"{self.stream} has {self.partitions} partition(s) already; nothing to do."
        return (f"{self.stream}: {self.records} records replayed into {self.partitions} partition(s); start one "
                "decider per partition (vcbus up, or vcbus up --service decider --partition K).")


def print_result(result: _Result, fmt: str | None, *, err: bool = True) -> None:
    """`-o json|yaml`: the document on standard output; else its line (on standard error when `err`)."""
    if fmt is not None:
        from vcbus.cli.output import print_document

        print_document(result, fmt)
        return
    import click

    click.echo(result.line(), err=err)
