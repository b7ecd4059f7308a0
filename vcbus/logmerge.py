"""Putting watch records of several watches back in the order etcd wrote them.

kubectl watches one resource type at a time, so a log of vcjobs, pods and
podgroups is often several files (one per kind), or those files concatenated.
Replayed in that order, a job would see all of its own changes before any of
its pods exist: a wrong result. Every object of one etcd carries a
`metadata.resourceVersion` from one revision counter, so the records can be
merged back into the order they happened in:

- `OrderCheck` spots a single input that is out of order across kinds: a
  record older (lower resourceVersion) than a record of *another* kind read
  before it. A kubectl watch of one kind lists its objects by name first (not
  by resourceVersion), so records of the same kind never count; records that
  carry the time they were observed (`vcbus log export`: the bus's order is
  the order the decider saw) are not checked at all.
- `merge` reads every record of the inputs, sorts them by resourceVersion
  (ties, and records without one, keep their place after the record before
  them in their own input) and drops duplicates (same uid, resourceVersion and
  event type, e.g. two overlapping recordings).

Merging holds the whole log in memory (each record's bytes are kept only for
vcjobs, whose raw spec is rendered); a log already in order streams.
"""

from __future__ import annotations

import tempfile
from typing import BinaryIO, Callable, Iterable

from statemachines.model.objects import Job
from statemachines.model.records import Ignored, Observed
from vcbus.errors import UserError
from vcbus.watchlog import InvalidRecord, Item, TruncatedRecord, iter_log


class OrderCheck:
    """Incremental: `check(kind, rv)` returns a message the first time a record is older than another kind's."""

    __slots__ = ("top_rv", "top_kind", "second_rv", "source", "found")

    def __init__(self, source: str) -> None:
        self.top_rv = -1  # highest resourceVersion seen
        self.top_kind: type | None = None  # its kind
        self.second_rv = -1  # highest resourceVersion among the other kinds
        self.source = source
        self.found: str | None = None

    def check(self, kind: type, resource_version: str, seq: int) -> str | None:
        """The message if this record is older than a record of another kind before it (also kept in `found`).

        `resource_version` is the text the record carries; one that is not a number etcd writes (none,
        not an integer, negative) is not checked."""
        try:
            rv = int(resource_version)
        except ValueError:
            return None
        if rv < 0:
            return None
        if kind is self.top_kind:
            if rv > self.top_rv:
                self.top_rv = rv
            elif rv < self.second_rv:
                return self.found_at(kind, rv, seq, self.second_rv, None)
            return None
        if rv < self.top_rv:
            return self.found_at(kind, rv, seq, self.top_rv, self.top_kind)
        self.second_rv, self.top_rv, self.top_kind = self.top_rv, rv, kind
        return None

    def found_at(self, kind: type, rv: int, seq: int, other_rv: int, other_kind: type | None) -> str:
        other = "record of another kind" if other_kind is None else f"{_name(other_kind)} record"
        self.found = (
            f"{self.source}: record {seq}, a {_name(kind)} at resourceVersion {rv}, comes after a {other} at "
            f"{other_rv}: records of different kinds are out of resourceVersion order, as when one watch per kind "
            "is concatenated; replaying the records merged by resourceVersion (`vcbus record` writes one merged log)"
        )
        return self.found


def _name(kind: type | None) -> str:
    if kind is None:
        return "record"
    return "vcjob" if kind is Job else kind.__name__


def resource_version(decoded: object) -> tuple[int, str, str] | None:
    """(resourceVersion, uid, type) of an Observed record with a numeric resourceVersion."""
    if decoded.__class__ is not Observed:
        return None
    meta = decoded.object.metadata
    rv = meta.resource_version
    if not rv.isdigit():
        return None
    return int(rv), meta.uid, decoded.type


def merge(
    inputs: Iterable[tuple[Iterable[bytes], str]],
    *,
    on_invalid: Callable[[InvalidRecord], None],
    warn: Callable[[str], None] | None = None,
    keep_bytes: bool = False,
) -> tuple[list[Item], int]:
    """Every record of `inputs`, in resourceVersion order, renumbered from 1; and how many duplicates were dropped.

    `on_invalid` gets each unusable record (it may raise to stop). `keep_bytes`: to write
    the merged log out (for the bus, which drops repeats by their message id itself):
    every record is kept, repeats too, with its bytes (else only a vcjob's).
    """
    entries: list[tuple[int, int, int, bytes, object]] = []
    seen: set[tuple[int, str, str]] = set()
    duplicates = 0
    for index, (lines, source) in enumerate(inputs):
        carry = 0
        for seq, data, decoded in iter_log(lines, source, warn=warn):
            if isinstance(decoded, InvalidRecord):
                on_invalid(decoded)
                continue
            ident = resource_version(decoded)
            if ident is not None:
                if ident[1] and not keep_bytes:
                    if ident in seen:
                        duplicates += 1
                        continue
                    seen.add(ident)
                carry = ident[0]
            if not keep_bytes and not (
                decoded.__class__ is Observed and decoded.object.__class__ is Job
            ) and decoded.__class__ is not Ignored:
                data = b""  # only a vcjob's bytes are used again (its spec is rendered), and marks' (vcbus.logmarks)
            entries.append((carry, index, seq, data, decoded))
    entries.sort(key=lambda e: (e[0], e[1], e[2]))
    items = [(seq, data, decoded) for seq, (_, _, _, data, decoded) in enumerate(entries, 1)]
    return items, duplicates


def in_etcd_order(stream: BinaryIO, source: str, *, warn: Callable[[str], None]) -> BinaryIO:
    """A seekable log for the bus: `stream` itself (at its start) when its records are in etcd's order,
    else a temporary file of JSON lines with them merged by resourceVersion, and a marked initial list
    in cache-sync order (`vcbus.logmarks`): what `vcbus replay` folds, in the order it folds it.

    An input with a record that cannot be used is handed back as it is, for the caller's own
    check to report; a last record cut short is left out, as replay leaves it out (the check warned)."""
    from vcbus.logmarks import synced_first

    order = OrderCheck(source)
    marked = unordered = False
    try:
        items, list_end, _ = synced_first(iter_log(stream, source))
        marked = list_end > 0
        for seq, _, decoded in items:
            if seq < list_end:
                continue
            if decoded.__class__ is TruncatedRecord:
                continue
            if isinstance(decoded, InvalidRecord):
                return _rewound(stream)
            if not unordered and decoded.__class__ is Observed and decoded.time is None:
                rv = decoded.object.metadata.resource_version
                unordered = rv.isdigit() and order.check(decoded.object.__class__, rv, seq) is not None
    except UserError:  # not a watch log at all: the caller says so
        return _rewound(stream)
    if not (marked or unordered):
        return _rewound(stream)
    stream.seek(0)
    if unordered:
        warn((order.found or "").replace("replaying the records", "publishing the records"))

        def stop(err: InvalidRecord) -> None:
            if not isinstance(err, TruncatedRecord):
                raise err

        merged, _ = merge([(stream, source)], on_invalid=stop, keep_bytes=True)
        items = synced_first(iter(merged))[0]
    else:
        items = synced_first(iter_log(stream, source))[0]
    out = tempfile.TemporaryFile()  # the caller closes it
    for _, data, decoded in items:
        if decoded.__class__ is not TruncatedRecord:
            out.write(data if data.endswith(b"\n") else data + b"\n")
    out.seek(0)
    return out


def _rewound(stream: BinaryIO) -> BinaryIO:
    stream.seek(0)
    return stream
