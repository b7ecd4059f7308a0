"""`vcbus.bus.direct.store` on a real nats-server that goes away: the lot is sent again with the same ids
once the server is back (stored once), each failed try logged with a jittered wait (`vcbus.retries`),
and with the server gone for good a `BusError` naming the service and what it stored, after its tries."""

from __future__ import annotations

import asyncio
import logging
import socket

import pytest

from tests.fixtures_nats import stream_messages
from vcbus import retries
from vcbus.bus import direct
from vcbus.bus import subjects as s
from vcbus.bus.batching import BatchWriter, Stored
from vcbus.bus.connecting import open_bus
from vcbus.bus.errors import BusError
from vcbus.bus.publisher import Prepared
from vcbus.bus.server import EmbeddedServer
from vcbus.settings import BusSettings

pytestmark = pytest.mark.nats
log = logging.getLogger("test.direct")
POLICY = retries.Policy(0.2, 0.8, attempts=4)


def message(i: int) -> Prepared:
    return Prepared(f"{s.JOBS_PREFIX}.test.direct.probe.v1", f'{{"i": {i}}}'.encode(), {"Nats-Msg-Id": f"probe:{i}"})


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def tries(caplog) -> list[tuple[int, float]]:  # noqa: ANN001
    """(try, wait) of each failed try `store` logged."""
    return [(r.args[3], r.args[5]) for r in caplog.records if r.name == "test.direct" and "failed" in r.msg]


async def wait_for(condition, timeout: float = 30.0) -> None:  # noqa: ANN001
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.02)


async def test_a_store_while_the_server_is_away_lands_once_when_it_is_back(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="test.direct")
    port = free_port()
    server = EmbeddedServer(data_dir=tmp_path, port=port)
    settings = BusSettings(nats_url=server.start())
    try:
        async with open_bus(settings) as bus:
            writer = BatchWriter(bus.nc, min_atomic=2)
            assert await direct.store(writer, [message(0)], who="test", what="probe", timeout=2, log=log) == \
                Stored(1, 0, 1)
            server.stop()
            task = asyncio.create_task(direct.store(writer, [message(i) for i in range(5)], who="test",
                                                    what="probes", timeout=0.5, log=log, policy=POLICY))
            await wait_for(lambda: tries(caplog))  # the first try failed: the server is away
            server = EmbeddedServer(data_dir=tmp_path, port=port)
            server.start()
            res = await asyncio.wait_for(task, 60)
            await writer.close()
        assert res.stored + res.duplicates == 5 and res.duplicates <= 1  # probe:0 was stored before
        stored = await stream_messages(settings, s.JOBS_STREAM)
        assert [h["Nats-Msg-Id"] for _, _, h, _ in stored] == [f"probe:{i}" for i in range(5)]  # once each
        for n, wait in tries(caplog):
            assert min(0.2 * 2 ** (n - 1), 0.8) / 2 <= wait < min(0.2 * 2 ** (n - 1), 0.8), (n, wait)
    finally:
        server.stop()


async def test_with_the_server_gone_it_gives_up_after_its_tries_naming_what(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="test.direct")
    server = EmbeddedServer(data_dir=tmp_path, port=free_port())
    settings = BusSettings(nats_url=server.start())
    try:
        async with open_bus(settings) as bus:
            writer = BatchWriter(bus.nc)
            await writer.start()
            server.stop()
            with pytest.raises(BusError, match=r"^scheduler: cannot store the outputs of session 7: ") as err:
                await direct.store(writer, [message(1), message(2)], who="scheduler", what="outputs of session 7",
                                   timeout=0.3, log=log, policy=POLICY)
            await writer.close()
    finally:
        server.stop()
    assert err.value.exit_code == 3  # the bus is down (vcbus.exitcodes.BUS)
    assert [n for n, _ in tries(caplog)] == [1, 2, 3]  # 4 tries: a wait after each but the last
    for n, wait in tries(caplog):
        assert min(0.2 * 2 ** (n - 1), 0.8) / 2 <= wait < min(0.2 * 2 ** (n - 1), 0.8), (n, wait)
