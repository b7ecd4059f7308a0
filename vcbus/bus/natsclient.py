"""vcbus's NATS client: nats-py's `Client` with two costs of the services' hot paths taken out.

`vcbus.bus.connecting.connect` constructs a `Client` of this module for every
connection vcbus opens; nothing of nats-py is changed for any other client in
the process (a plain `nats.aio.client.Client` parses and publishes as nats-py
does). Both changes use nats-py's own machinery, each behind a check that it
is the nats-py it was written against (else the subclass is nats-py's client
as it is):

- **Received headers.** Every record the decider receives carries seven to
  ten headers (`Nats-Msg-Id`, `Vcbus-Job`, ...). nats-py 2.x parses them in
  the static `Client._parse_header_lines`, which checks every character of
  every header name with a generator (`any(c.isspace() for c in key)`): about
  9 us per record, 8% of what the decider spends on one.
  `parse_header_lines` returns exactly what nats-py's returns (the same
  splitting, stripping, decoding and skipping of malformed lines; a test
  compares the two on ordinary and random blocks) but checks a name for
  whitespace with one `str.split`; this class uses it in its place.
- **Publishing many messages at once.** `publish_many` puts a list of
  messages on the wire as one chunk of `HPUB` protocol lines, encoded here
  (vcbus's header names and values are known-safe) and handed to the
  client's outgoing buffer as one command, then flushed as `publish` flushes.
  nats-py's `publish` checks and encodes each message's headers on its own,
  which costs more than the decider spends deciding the message
  (vcbus.bus.batching sends every output this way). A message with a CR, LF
  or colon where the protocol forbids one, a space in a subject, a message
  over the server's max payload, or a client that is not connected (nats-py
  buffers while it reconnects) goes through `publish`, message by message.
"""

from __future__ import annotations

import inspect

from nats.aio import client as nats_client

_CRLF = b"\r\n"


def parse_header_lines(raw: bytes) -> dict[str, str]:
    """A NATS header block (`Name: Value\\r\\n` per line) as a dict, as nats-py parses it."""
    out: dict[str, str] = {}
    for line in raw.split(_CRLF):
        if not line:
            continue
        name, sep, value = line.partition(b":")
        if not sep:
            continue
        try:
            key = name.strip().decode("ascii")
        except UnicodeDecodeError:
            continue
        if key and key.split() != [key]:  # whitespace inside the name (str.isspace's, as nats-py checks)
            continue
        out[key] = value.strip().decode("utf-8", "replace")
    return out


def _static(name: str, params: list[str]) -> object | None:
    """nats-py's `Client.<name>` if it is a staticmethod taking `params`, else None."""
    found = inspect.getattr_static(nats_client.Client, name, None)
    if not isinstance(found, staticmethod):
        return None
    try:
        return found.__func__ if list(inspect.signature(found.__func__).parameters) == params else None
    except (TypeError, ValueError):
        return None


def _method(name: str, params: list[str]) -> bool:
    """Whether nats-py's `Client.<name>` is a coroutine function taking (self, *params)."""
    found = inspect.getattr_static(nats_client.Client, name, None)
    try:
        return inspect.iscoroutinefunction(found) and list(inspect.signature(found).parameters)[1:] == params
    except (TypeError, ValueError):
        return False


NATS_PARSER = _static("_parse_header_lines", ["raw"])  # nats-py's own (tests compare), None: not the one expected
FAST_HEADERS = NATS_PARSER is not None
FAST_PUBLISH = _method("_send_command", ["cmd", "priority"]) and _method("_flush_pending", ["force_flush"])


def hpub(subject: str, reply: str, headers: dict[str, str], body: bytes, max_payload: int) -> bytes | None:
    """The `HPUB` protocol line of one message, or None when nats-py's checks are needed."""
    hdr = ["NATS/1.0\r\n"]
    for key, value in headers.items():
        if "\r" in value or "\n" in value or "\r" in key or "\n" in key or ":" in key:
            return None
        hdr.append(f"{key}: {value}\r\n")
    hdr.append("\r\n")
    head = "".join(hdr).encode()
    total = len(head) + len(body)
    if total > max_payload or " " in subject or " " in reply:
        return None
    line = f"HPUB {subject} {reply} {len(head)} {total}\r\n" if reply else f"HPUB {subject} {len(head)} {total}\r\n"
    return line.encode() + head + body + b"\r\n"


class Client(nats_client.Client):
    """nats-py's client, parsing received headers and publishing lists of messages cheaper (see the module)."""

    if FAST_HEADERS:
        _parse_header_lines = staticmethod(parse_header_lines)

    async def publish_many(self, lines: list[tuple[str, str, dict[str, str], bytes]]) -> None:
        """Publish (subject, reply, headers, body) in order: one encoded write when it can be, else `publish` each."""
        blobs = [hpub(*line, self.max_payload) for line in lines] if FAST_PUBLISH and self.is_connected else [None]
        if any(b is None for b in blobs):
            for subject, reply, headers, body in lines:
                await self.publish(subject, body, reply=reply, headers=headers)
            return
        self.stats["out_msgs"] += len(lines)
        self.stats["out_bytes"] += sum(len(line[3]) for line in lines)
        await self._send_command(b"".join(blobs))  # type: ignore[arg-type]  # no None among them: tested above
        if self._flush_queue is not None and self._flush_queue.empty():
            await self._flush_pending()
