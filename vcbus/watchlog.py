"""Reading watch logs: records out of files, stdin and pipes, with their positions.

`kubectl get ... --watch --output-watch-events -o json` prints one JSON object
per event, pretty-printed over many lines and concatenated; other tools write
one object per line (JSON lines). `read_records` accepts both, streaming: a
record is either a whole line, or the lines from a `{` line up to the next
line that starts with `}` in column 0 (kubectl's layout). Each record comes with
its 1-based `seq`, the line it starts on and its byte offset, so errors can
name the place. Nothing is held beyond the current record.

`iter_log` is what `vcbus replay` reads through: it also takes every other
form kubectl prints (`vcbus.logforms`: `-o yaml` watches, `v1 List`s, JSON
arrays, plain objects without `--output-watch-events`), decodes each record and
yields `(record, decoded)` pairs, where `decoded` is an `InvalidRecord` for a
record that cannot be used. A last record cut short (the log was being written
when it was copied, or kubectl was killed) comes as a `TruncatedRecord`: the
caller skips it with a warning and the rest replays. `placed_records` reads the
same records with their places, for the commands that store a log on the bus
(`vcbus publish`, `vcbus demo`, `vcbus log import`): one reader of every form.
"""

from __future__ import annotations

import itertools
import sys
from typing import BinaryIO, Callable, Iterable, Iterator

import msgspec

from statemachines.model.records import Decoded, RecordError, decode
from statemachines.model.replay_decode import decode_replay
from vcbus import logforms
from vcbus.errors import UserError


class RawRecord(msgspec.Struct):
    seq: int
    line: int
    offset: int
    data: bytes


class InvalidRecord(UserError):
    """A record that cannot be used, with its place in the input."""

    def __init__(self, source: str, rec: RawRecord, message: str, *, cut: bool = False) -> None:
        super().__init__(f"{source}:{rec.line}: record {rec.seq} (byte {rec.offset}): {message}")
        self.record = rec
        self.detail = message
        self.cut = cut  # the error a record cut short gives (fatal unless it is the last record)


class TruncatedRecord(InvalidRecord):
    """The last record of an input, cut short: skipped with a warning, never fatal."""


def read_records(stream: Iterable[bytes]) -> Iterator[RawRecord]:
    seq = 0
    line_no = 0
    offset = 0
    block: list[bytes] = []
    block_line = block_offset = 0
    for line in stream:
        line_no += 1
        start = offset
        offset += len(line)
        if block:
            block.append(line)
            if line[:1] == b"}":
                seq += 1
                yield RawRecord(seq, block_line, block_offset, b"".join(block))
                block = []
            continue
        stripped = line.strip()
        if not stripped:
            continue
        if stripped[:1] == b"{" and stripped[-1:] != b"}":
            block = [line]
            block_line, block_offset = line_no, start
            continue
        seq += 1
        yield RawRecord(seq, line_no, start, stripped)
    if block:
        seq += 1
        yield RawRecord(seq, block_line, block_offset, b"".join(block))


READ_BUFFER = 1 << 20  # records are a few KB each: the default 8 KiB buffer reads the file in many syscalls
# Records decoded in a row before the fold takes them (`iter_log`'s `batch`, for a whole file):
# decoding and folding alternately, each evicts the other's code and data from the CPU caches;
# 64 at a time (about 256 KB of a typical log) made a replay of the benchmark's quick log ~6%
# faster (benchmarks/replay.py; 16 to 64 were alike, 256 and more lost it again).
BATCH = 64


def open_input(path: str) -> tuple[BinaryIO, str]:
    """The stream for FILE (`-` is stdin) and the name to use in messages."""
    if path == "-":
        return sys.stdin.buffer, "<stdin>"
    try:
        return open(path, "rb", buffering=READ_BUFFER), path  # closed by the caller
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise UserError(f"{path}: is a directory, expected a watch log file") from None
    except PermissionError:
        raise UserError(f"{path}: permission denied") from None


def decode_record(source: str, rec: RawRecord) -> Decoded:
    try:
        return decode(rec.data)
    except RecordError as err:
        raise InvalidRecord(source, rec, str(err)) from None


# ------------------------------------------------------------------ every form, decoded


Item = tuple[int, bytes, object]  # (seq, record bytes, Decoded | InvalidRecord)


def iter_log(
    lines: Iterable[bytes], source: str, *, warn: Callable[[str], None] | None = None, batch: int = 1
) -> Iterator[Item]:
    """The records of one input, decoded, numbered from 1, whatever form kubectl printed them in.

    Raises `UserError` at once when the input is no form of watch log at all
    (e.g. kubectl's table output); the message names a command that records one.

    `batch`: JSON records are decoded that many at a time before they are handed
    on. A fold that reads a whole file is faster so (`BATCH`); a pipe or a file
    being followed takes 1, so each record is handed on as soon as it arrives.
    The records come out of a C iterator (`itertools.chain`) over those batches:
    no Python frame is resumed per record.
    """
    return itertools.chain.from_iterable(_batches(lines, source, warn, batch))


def _batches(
    lines: Iterable[bytes], source: str, warn: Callable[[str], None] | None, batch: int
) -> Iterator[Iterable[Item]]:
    """`iter_log`'s records, in lists (or one iterator of them all, for the YAML and array forms).
    The input's first lines are read, and its form told, when the first record is asked for."""
    opened = _opened(lines, source, warn)
    if opened is None:
        return
    form, lines, snapshots = opened
    if form == "json":
        yield from _json_batches(lines, source, snapshots, batch)
        return
    values = logforms.array_values(lines, source) if form == "array" else logforms.yaml_values(lines, source)
    yield ((rec.seq, rec.data, decoded) for rec, decoded in _last_cut_short(_expanded(values, source, snapshots), source))


def _opened(
    lines: Iterable[bytes], source: str, warn: Callable[[str], None] | None
) -> tuple[str, Iterable[bytes], logforms.Snapshots] | None:
    """The input's form (`logforms.sniff` of its first line that is no blank or comment), its lines from
    the top, and its snapshot types; None for an input of no such line. Raises `UserError` for an input
    that is no form of watch log at all."""
    it = iter(lines)
    head: list[bytes] = []
    first = b""
    for line in it:
        head.append(line)
        first = line.strip()
        if first and not first.startswith(b"#"):
            break
    if not first:
        return None
    form = logforms.sniff(first)
    if form is None:
        raise UserError(logforms.unusable_message(source, first))
    return form, itertools.chain(head, it), logforms.Snapshots(source, warn)


Placed = tuple[RawRecord, object]  # (the record with its place, Decoded | InvalidRecord)


def placed_records(
    lines: Iterable[bytes], source: str, *, warn: Callable[[str], None] | None = None
) -> Iterator[Placed]:
    """The records `iter_log` reads, in every form, each with its place in the input (line, byte offset):
    for the commands that check a log record by record before they store it (`vcbus publish`, `vcbus
    demo`, `vcbus log import`), whose errors name the place of a record `iter_log` decoded fine (too big
    for the server, no job key). A last record cut short is a `TruncatedRecord`, as there.

    (JSON records come through `read_records`, which finds the same boundaries as `iter_log`'s fast
    path, and `decode`, which gives the same results as its `decode_replay`.)"""
    opened = _opened(lines, source, warn)
    if opened is None:
        return iter(())
    form, lines, snapshots = opened
    if form == "json":
        return _last_cut_short(_json_placed(lines, source, snapshots), source)
    values = logforms.array_values(lines, source) if form == "array" else logforms.yaml_values(lines, source)
    return _last_cut_short(_expanded(values, source, snapshots), source)


def decoded_records(
    lines: Iterable[bytes], source: str, *, warn: Callable[[str], None] | None = None
) -> Iterator[tuple[RawRecord, Decoded]]:
    """`placed_records`, raising the first record that cannot be used (an `InvalidRecord` naming its
    place), as `vcbus replay --strict` does; a last record cut short is skipped with replay's warning."""
    for rec, decoded in placed_records(lines, source, warn=warn):
        if decoded.__class__ is TruncatedRecord:
            if warn is not None:
                warn(f"skipped {decoded}")
            continue
        if decoded.__class__ is InvalidRecord:
            raise decoded
        yield rec, decoded  # type: ignore[misc]  # neither truncated nor invalid: a Decoded (tested above)


def _json_placed(lines: Iterable[bytes], source: str, snapshots: logforms.Snapshots) -> Iterator[Placed]:
    n = 0
    for raw in read_records(lines):
        try:
            decoded = decode(raw.data)
        except RecordError as err:
            for placed in _rescued(raw.data, err, n, raw.line, raw.offset, source, snapshots):
                n += 1
                yield placed
        else:
            n += 1
            if raw.seq != n:
                raw = RawRecord(n, raw.line, raw.offset, raw.data)
            yield raw, decoded


def _json_batches(
    lines: Iterable[bytes], source: str, snapshots: logforms.Snapshots, batch: int = 1
) -> Iterator[list[Item]]:
    """JSON records, pretty or one per line (`read_records`' boundaries): the fast path of every replay.

    A record the fast decode refuses is rescued (`logforms.rescue`: Lists, plain
    objects) or becomes an `InvalidRecord`, held back until the next record so
    that a last record cut short can be told apart. Records are handed on in lists
    of `batch` (`iter_log`).
    """
    n = 0
    line_no = offset = 0
    block: list[bytes] = []
    block_line = block_offset = 0
    held: Item | None = None
    ready: list[Item] = []  # decoded, not yet handed on
    for line in lines:
        line_no += 1
        start = offset
        offset += len(line)
        if block:
            block.append(line)
            if line[:1] != b"}":
                continue
            data = b"".join(block)
            block = []
            at, at_offset = block_line, block_offset
        else:
            data = line.strip()
            if not data:
                continue
            if data[0] == 123 and data[-1] != 125:  # "{" ... not "}": a pretty-printed record starts
                block = [line]
                block_line, block_offset = line_no, start
                continue
            at, at_offset = line_no, start
        try:
            decoded = decode_replay(data)
        except RecordError as err:
            for rec, rescued in _rescued(data, err, n, at, at_offset, source, snapshots):
                n += 1
                if held is not None:
                    ready.append(held)
                    held = None
                if rescued.__class__ is InvalidRecord:
                    held = (n, rec.data, rescued)
                else:
                    ready.append((n, rec.data, rescued))
        else:
            n += 1
            if held is not None:
                ready.append(held)
                held = None
            ready.append((n, data, decoded))
        if len(ready) >= batch:
            yield ready
            ready = []
    if block:
        data = b"".join(block)
        try:
            items: list[Item] = [(n + 1, data, decode(data))]
        except RecordError as err:
            items = [(rec.seq, rec.data, d) for rec, d in _rescued(data, err, n, block_line, block_offset, source,
                                                                    snapshots)]
        for item in items:
            if held is not None:
                ready.append(held)
            held = item
    if held is not None:
        ready.append((held[0], held[1], _cut_short(held[2], source)))
    if ready:
        yield ready


def _rescued(data, err, n, line, offset, source, snapshots) -> Iterator[Placed]:
    for entry in logforms.rescue(data, err, snapshots):
        n += 1
        yield _item(RawRecord(n, line, offset, entry.data), source, entry)


def _expanded(values: Iterable[logforms.Value], source: str, snapshots: logforms.Snapshots) -> Iterator[Placed]:
    """Records of the YAML and JSON-array forms: each value becomes zero or more watch records."""
    n = 0
    for value in values:
        for entry in logforms.records_of(value, snapshots):
            n += 1
            yield _item(RawRecord(n, value.line, value.offset, entry.data), source, entry)


def _item(rec: RawRecord, source: str, entry: logforms.Entry) -> Placed:
    error = entry.error
    if error is None:
        try:
            return rec, decode(rec.data)
        except RecordError as err:
            error = str(err)
    message = entry.prefix + error
    if rec.seq == 1 and not entry.prefix and not entry.cut:  # the very first record: maybe not a watch log at all
        message += f" (is this a watch log? {logforms.RECORD_HINT})"
    return rec, InvalidRecord(source, rec, message, cut=entry.cut)


def _last_cut_short(placed: Iterator[Placed], source: str) -> Iterator[Placed]:
    """Hold an invalid record back until the next one: if none follows and it was cut short, say so."""
    held: Placed | None = None
    for pair in placed:
        if held is not None:
            yield held
            held = None
        if pair[1].__class__ is InvalidRecord:
            held = pair
        else:
            yield pair
    if held is not None:
        yield held[0], _cut_short(held[1], source)


def _cut_short(decoded: object, source: str) -> object:
    """What the last record of an input is: a `TruncatedRecord` if it is an invalid record that was cut short."""
    if decoded.__class__ is InvalidRecord and decoded.cut:
        message = f"the last record is incomplete (the log was cut off while being written): {decoded.detail}"
        return TruncatedRecord(source, decoded.record, message)
    return decoded
