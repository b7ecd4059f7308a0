"""vcbus.bus.reading.stream_seq: the stream sequence from a message's ack subject, as nats-py reads it."""

from __future__ import annotations

import pytest
from nats.aio.msg import Msg

from vcbus.bus.connecting import open_bus
from vcbus.bus.reading import stream_seq

pytestmark = pytest.mark.nats


async def test_it_agrees_with_nats_py_on_delivered_messages(bus_settings):
    async with open_bus(bus_settings) as bus:
        await bus.js.add_stream(name="SEQTEST", subjects=["seqtest.>"])
        for i in range(5):
            await bus.js.publish(f"seqtest.{i}", b"x")
        sub = await bus.js.pull_subscribe("seqtest.>", durable="seqtest")
        msgs = await sub.fetch(5, timeout=10)
        assert [stream_seq(m) for m in msgs] == [m.metadata.sequence.stream for m in msgs] == [1, 2, 3, 4, 5]


def test_the_domain_form_and_anything_else():
    v2 = Msg(None, subject="s", reply="$JS.ACK.hub.ACCHASH.STREAM.CONS.1.42.7.1700000000000000000.0.tok")
    assert stream_seq(v2) == 42 == v2.metadata.sequence.stream
    v1 = Msg(None, subject="s", reply="$JS.ACK.STREAM.CONS.1.9.3.1700000000000000000.0")
    assert stream_seq(v1) == 9 == v1.metadata.sequence.stream
    with pytest.raises(Exception):  # not a JetStream message: nats-py's own error, as before
        stream_seq(Msg(None, subject="s", reply="_INBOX.abc"))
