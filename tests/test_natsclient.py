"""`vcbus.bus.natsclient.Client`: vcbus's connections parse received headers and publish lists of messages
as nats-py does, only cheaper; a plain nats-py client in the same process is left as nats-py made it."""

from __future__ import annotations

import random

import pytest
from nats.aio.client import Client as NatsClient

from vcbus.bus import natsclient as nc_mod

ALPHABET = [b"a", b"B", b"-", b"_", b"1", b" ", b"\t", b"\x0b", b"\x0c", b"\x1c", b"\x1f", b":", b": ", b"\r",
            b"\n", b"\r\n", b"\xc3\xa9", b"\xff", b"\x00", b"Nats-Msg-Id", b"Vcbus-Job: default/j"]


def test_it_parses_exactly_as_nats_py_does():
    assert nc_mod.FAST_HEADERS and nc_mod.FAST_PUBLISH, "the nats-py these were written against"
    ordinary = b"Nats-Msg-Id: 1:0\r\nVcbus-Job: default/j\r\nce-id:  2:1 \r\nbad line\r\nA B: c\r\n:empty\r\n\r\n"
    assert nc_mod.parse_header_lines(ordinary) == nc_mod.NATS_PARSER(ordinary) == {
        "Nats-Msg-Id": "1:0", "Vcbus-Job": "default/j", "ce-id": "2:1", "": "empty"}
    rng = random.Random(20261130)
    for _ in range(50_000):
        blob = b"".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 24)))
        assert nc_mod.parse_header_lines(blob) == nc_mod.NATS_PARSER(blob), blob


MESSAGES = [
    ("t.many.a", "", {"Nats-Msg-Id": "1:0", "Vcbus-Job": "ns/j%2Ex", "Value": "é ü"}, b"one"),
    ("t.many.b", "t.reply.1", {"Nats-Msg-Id": "1:1"}, b""),
    ("t.many.c", "", {}, b"x" * 5000),
]
ODD = ("t.many.d", "", {"Nats-Msg-Id": "1:2", "Bad": "line\r\nbreak"}, b"odd")  # publish's way: CR LF in a value


@pytest.mark.nats
@pytest.mark.parametrize("lines", [MESSAGES, [*MESSAGES, ODD]], ids=["encoded", "with-a-value-publish-must-clean"])
async def test_publish_many_delivers_what_publish_delivers(bus_settings, lines):
    from vcbus.bus.connecting import open_bus

    async with open_bus(bus_settings, ensure=False) as bus:
        assert isinstance(bus.nc, nc_mod.Client) and bus.nc._parse_header_lines is nc_mod.parse_header_lines
        assert NatsClient._parse_header_lines is nc_mod.NATS_PARSER  # nats-py itself is left as it is
        sub = await bus.nc.subscribe("t.many.*")
        plain = NatsClient()
        await plain.connect(bus.url, allow_reconnect=False)
        try:
            for subject, reply, headers, body in lines:  # nats-py's own publish, message by message
                await plain.publish(subject, body, reply=reply, headers=headers)
            await plain.flush()
            want = [await sub.next_msg(timeout=5) for _ in lines]
        finally:
            await plain.close()
        before = bus.nc.stats["out_msgs"]
        await bus.nc.publish_many(lines)
        got = [await sub.next_msg(timeout=5) for _ in lines]
        assert bus.nc.stats["out_msgs"] - before == len(lines)
    assert [(m.subject, m.reply, m.headers, m.data) for m in got] == [
        (m.subject, m.reply, m.headers, m.data) for m in want]
    assert got[0].headers == MESSAGES[0][2]
