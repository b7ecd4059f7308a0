"""The scheduler's past sessions, as the bus stores them: ids, messages, and finding them again.

Every output of a scheduling session is stored with `Nats-Msg-Id` (and
CloudEvents id) `sched:<seq>:<number>:<index>`: the session's cut (the last
VCBUS_K8S record folded into the projection it ran on), its 1-based number and
the output's index in the session's decision order. Events go to VCBUS_JOBS
(`event_subject(out.job, tag)`), commands to VCBUS_CMDS (`command_subject`).

The session's own event (`sched.session.v1`) is stored **last**, after every
other output of the session was acknowledged: it marks the session as
complete. A session whose outputs are on the bus without that marker was cut
short by a crash; the scheduler re-runs it on restart (`vcbus.bus.scheduling`).

`past_sessions` reads both streams and groups the scheduler's messages by
session; `session_messages` prepares one session's messages in publishing
order (commands, then events, then the marker).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable

import msgspec

from statemachines import outputs as o
from vcbus.bus import subjects as s
from vcbus.bus.cloudevents import MSG_ID
from vcbus.bus.cloudevents import headers as ce_headers
from vcbus.bus.connecting import Bus
from vcbus.bus.publisher import Prepared
from vcbus.bus.reading import read_stream

PREFIX = "sched:"
_ID = re.compile(r"^sched:(\d+):(\d+):(\d+)$")


def session_id(seq: int, number: int, index: int) -> str:
    return f"{PREFIX}{seq}:{number}:{index}"


def parse_id(msg_id: str) -> tuple[int, int, int] | None:
    """(seq, number, index) of a scheduler output id; None for any other id."""
    m = _ID.match(msg_id)
    return (int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else None


def is_marker(out: o.Output) -> bool:
    return isinstance(out, o.SchedulingSession)


@dataclass
class PastSession:
    """One session found on the bus: its cut, its number and the outputs stored, by index."""

    seq: int
    number: int
    outputs: dict[int, bytes] = field(default_factory=dict)  # index -> body as stored
    complete: bool = False  # its sched.session.v1 marker is stored
    unreadable: int = 0  # bodies that did not decode (skipped)

    def decoded(self) -> list[o.Output]:
        """The stored outputs in decision order (undecodable bodies left out)."""
        out = []
        for index in sorted(self.outputs):
            try:
                out.append(o.output_decoder.decode(self.outputs[index]))
            except msgspec.DecodeError:
                self.unreadable += 1
        return out


async def past_sessions(bus: Bus) -> list[PastSession]:
    """Every session with at least one output on VCBUS_JOBS or VCBUS_CMDS, in number order."""
    found: dict[tuple[int, int], PastSession] = {}
    for stream in (s.CMDS_STREAM, s.JOBS_STREAM):
        async for batch in read_stream(bus.js, stream, batch=1024):
            for msg in batch:
                parsed = parse_id((msg.headers or {}).get(MSG_ID, ""))
                if parsed is None:
                    continue
                seq, number, index = parsed
                entry = found.setdefault((number, seq), PastSession(seq, number))
                entry.outputs.setdefault(index, msg.data)
                if stream == s.JOBS_STREAM and b'"sched.session.v1"' in msg.data:
                    try:
                        entry.complete = entry.complete or is_marker(o.output_decoder.decode(msg.data))
                    except msgspec.DecodeError:
                        pass
    return [found[k] for k in sorted(found)]


def session_messages(
    outputs: Iterable[o.Output], *, seq: int, number: int, source: str
) -> tuple[list[tuple[int, Prepared]], list[tuple[int, Prepared]]]:
    """(first, last) messages of a session, each with its index: `last` holds only the marker.

    `first` is the commands (the cluster side is waiting for them) then the other events,
    each group in decision order; ids keep the decision index.
    """
    commands: list[tuple[int, Prepared]] = []
    events: list[tuple[int, Prepared]] = []
    last: list[tuple[int, Prepared]] = []
    for index, out in enumerate(outputs):
        msg_id = session_id(seq, number, index)
        headers = ce_headers(out, ce_id=msg_id, source=source)
        body = o.encoder.encode(out)
        if o.is_command(out):
            commands.append((index, Prepared(s.command_subject(out.job), body, headers)))
        elif is_marker(out):
            last.append((index, Prepared(s.event_subject(out.job, o.tag_of(type(out))), body, headers)))
        else:
            events.append((index, Prepared(s.event_subject(out.job, o.tag_of(type(out))), body, headers)))
    return commands + events, last
