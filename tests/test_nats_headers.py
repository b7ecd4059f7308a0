"""`vcbus.bus.natsheaders`: nats-py's header parsing, the same result faster, installed in its place."""

from __future__ import annotations

import random

import pytest

from vcbus.bus import natsheaders as nh

ALPHABET = [b"a", b"B", b"-", b"_", b"1", b" ", b"\t", b"\x0b", b"\x0c", b"\x1c", b"\x1f", b":", b": ", b"\r",
            b"\n", b"\r\n", b"\xc3\xa9", b"\xff", b"\x00", b"Nats-Msg-Id", b"Vcbus-Job: default/j"]


def test_it_parses_exactly_as_nats_py_does():
    assert nh.ORIGINAL is not None
    ordinary = b"Nats-Msg-Id: 1:0\r\nVcbus-Job: default/j\r\nce-id:  2:1 \r\nbad line\r\nA B: c\r\n:empty\r\n\r\n"
    assert nh.parse_header_lines(ordinary) == nh.ORIGINAL(ordinary) == {
        "Nats-Msg-Id": "1:0", "Vcbus-Job": "default/j", "ce-id": "2:1", "": "empty"}
    rng = random.Random(20261130)
    for _ in range(50_000):
        blob = b"".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 24)))
        assert nh.parse_header_lines(blob) == nh.ORIGINAL(blob), blob


@pytest.mark.nats
async def test_installed_it_parses_what_a_real_server_delivers(bus_settings):
    from nats.aio.client import Client

    from vcbus.bus.connecting import open_bus

    async with open_bus(bus_settings) as bus:  # connecting installs it
        assert nh.install() and Client._parse_header_lines is nh.parse_header_lines
        sub = await bus.nc.subscribe("test.headers")
        headers = {"Nats-Msg-Id": "7:3", "Vcbus-Job": "ns/j%2Ex", "ce-source": "vcbus", "Value": "é ü"}
        await bus.nc.publish("test.headers", b"x", headers=headers)
        msg = await sub.next_msg(timeout=5)
        assert msg.headers == headers and msg.data == b"x"
