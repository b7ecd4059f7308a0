"""Reading watch logs: records out of files, stdin and pipes, with their positions.

`kubectl get ... --watch --output-watch-events -o json` prints one JSON object
per event, pretty-printed over many lines and concatenated; other tools write
one object per line (JSON lines). `read_records` accepts both, streaming: a
record is either a whole line, or the lines from a `{` line up to the next
line that starts with `}` in column 0 (kubectl's layout). Each record comes with
its 1-based `seq`, the line it starts on and its byte offset, so errors can
name the place. Nothing is held beyond the current record.
"""

from __future__ import annotations

import sys
from typing import BinaryIO, Iterator

import msgspec

from statemachines.records import Decoded, RecordError, decode
from vcbus.errors import UserError


class RawRecord(msgspec.Struct):
    seq: int
    line: int
    offset: int
    data: bytes


class InvalidRecord(UserError):
    """A record that cannot be used, with its place in the input."""

    def __init__(self, source: str, rec: RawRecord, message: str) -> None:
        super().__init__(f"{source}:{rec.line}: record {rec.seq} (byte {rec.offset}): {message}")
        self.record = rec
        self.detail = message


def read_records(stream: BinaryIO) -> Iterator[RawRecord]:
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


def open_input(path: str) -> tuple[BinaryIO, str]:
    """The stream for FILE (`-` is stdin) and the name to use in messages."""
    if path == "-":
        return sys.stdin.buffer, "<stdin>"
    try:
        return open(path, "rb"), path  # noqa: SIM115 - closed by the caller
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
