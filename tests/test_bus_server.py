"""The embedded nats-server: started on demand, shared by commands, clear errors when it cannot run."""

from __future__ import annotations

import json
import socket

import pytest

from tests.fixtures_nats import vcbus_cli
from vcbus.bus.connecting import open_bus
from vcbus.bus.errors import ServerError
from vcbus.bus.server import STATE_FILE, EmbeddedServer, embedded
from vcbus.settings import BusSettings

pytestmark = pytest.mark.nats


def test_the_embedded_server_starts_with_jetstream_fsync_always_and_stops(tmp_path):
    server = EmbeddedServer(data_dir=tmp_path)
    url = server.start()
    try:
        assert url.startswith("nats://127.0.0.1:")
        assert "sync_interval: always" in (tmp_path / "nats-server.conf").read_text()
        assert "Server is ready" in (tmp_path / "nats-server.log").read_text()
    finally:
        server.stop()
    assert server.process is not None and server.process.poll() is not None


def test_a_taken_port_is_a_clear_error(tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        with pytest.raises(ServerError, match=f"port {port} on 127.0.0.1 is taken"):
            EmbeddedServer(data_dir=tmp_path, port=port).start()


def test_a_missing_binary_is_a_clear_error(tmp_path):
    res = vcbus_cli("status", "--data-dir", str(tmp_path), env={"VCBUS_NATS_SERVER": str(tmp_path / "nope")})
    assert res.returncode == 2  # docs/cli.md: a missing binary is bad input, not a bus that is down (3)
    assert b"error: nats-server binary" in res.stderr and b"not found" in res.stderr
    assert b"Traceback" not in res.stderr


def test_an_unreachable_server_is_a_clear_error():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    res = vcbus_cli("status", "--nats", f"nats://127.0.0.1:{port}")
    assert res.returncode == 3
    assert f"error: cannot connect to NATS at nats://127.0.0.1:{port}".encode() in res.stderr
    assert b"Traceback" not in res.stderr


async def test_commands_share_the_server_that_owns_the_data_dir(tmp_path):
    with embedded(data_dir=tmp_path, own=True) as (url, started):
        assert started
        state = json.loads((tmp_path / STATE_FILE).read_text())
        assert state["url"] == url
        with embedded(data_dir=tmp_path) as (url2, started2):
            assert (url2, started2) == (url, False)
        async with open_bus(BusSettings(data_dir=tmp_path)) as bus:
            assert bus.url == url and bus.embedded
            names = {i.config.name for i in await bus.js.streams_info()}
            assert {"VCBUS_K8S", "VCBUS_JOBS", "VCBUS_CMDS", "KV_vcbus_status", "KV_vcbus_history"} <= names
            info = await bus.js.stream_info("VCBUS_K8S")
            assert info.config.duplicate_window == 600  # DEFAULT_DUPLICATE_WINDOW
            assert info.config.compression == "s2"
    assert not (tmp_path / STATE_FILE).exists()


def test_the_store_outlives_the_server(tmp_path, seed_log):
    res = vcbus_cli("publish", str(seed_log), "--data-dir", str(tmp_path))
    assert res.returncode == 0, res.stderr.decode()
    assert b"published 64 records" in res.stderr
    res = vcbus_cli("publish", str(seed_log), "--data-dir", str(tmp_path))
    assert res.returncode == 0, res.stderr.decode()
    assert b"published 0 records" in res.stderr and b"64 already there" in res.stderr


@pytest.mark.slow
async def test_the_services_survive_a_server_restart(tmp_path, seed_log):
    import asyncio

    from tests.fixtures_nats import publish_file
    from vcbus.bus import subjects as s
    from vcbus.services import run_services

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = EmbeddedServer(data_dir=tmp_path, port=port)
    settings = BusSettings(nats_url=server.start())
    stop = asyncio.Event()
    try:
        async with open_bus(settings) as bus:
            services = asyncio.create_task(run_services(bus, ("decider", "projector"), stop=stop, once=False))
            await asyncio.sleep(0.5)
            server.stop()
            await asyncio.sleep(1.0)
            server = EmbeddedServer(data_dir=tmp_path, port=port)
            server.start()
            await publish_file(settings, seed_log)
            phase = None
            async with asyncio.timeout(30):
                while phase != "Completed":
                    await asyncio.sleep(0.2)
                    kv = await bus.js.key_value(s.STATUS_BUCKET)
                    try:
                        phase = json.loads((await kv.get("default.resnet-dist-train")).value)["state"]["phase"]
                    except Exception:
                        continue
            stop.set()
            await services
    finally:
        server.stop()
