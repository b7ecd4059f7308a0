"""`vcbus publish` / `vcbus log import` when the server fails part-way (vcbus.bus.logstore), on a real nats-server.

Faults real parts produce: nats-server SIGKILLed in the middle of a large
publish, and a stream limit (`max_msgs`, discard new) that makes the server
refuse records part-way. A small input is one atomic batch: all or nothing. A
large one keeps a stored prefix in file order; the error says how many records
were stored and that running the command again is safe, and the re-run stores
the rest, in order, without duplicates.
"""

from __future__ import annotations

import json
import os
import signal
import time

import pytest
from nats.js import api

from statemachines.model.records import decode
from tests.fixtures_nats import stream_messages, vcbus_cli
from tests.poison_logs import seed_records
from vcbus.bus import subjects as s
from vcbus.bus.connecting import open_bus
from vcbus.bus.logstore import ATOMIC_RECORDS
from vcbus.bus.publisher import prepare
from vcbus.bus.server import EmbeddedServer
from vcbus.bus.streams import last_seq
from vcbus.settings import BusSettings

pytestmark = pytest.mark.nats


def many_records(n: int) -> list[bytes]:
    """`n` distinct records (a PodGroup's MODIFIED records, resourceVersion after resourceVersion)."""
    pg = [r for r in seed_records() if r["object"]["kind"] == "PodGroup"][1]
    out = []
    for i in range(n):
        pg["object"]["metadata"]["resourceVersion"] = str(5_000_000 + i)
        out.append(json.dumps(pg).encode())
    return out


def write(tmp_path, lines: list[bytes], name: str = "log.jsonl"):
    path = tmp_path / name
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def msg_ids(lines: list[bytes]) -> list[str]:
    return [prepare(line, decode(line)).headers["Nats-Msg-Id"] for line in lines]


async def stored_ids(settings: BusSettings) -> list[str]:
    return [headers["Nats-Msg-Id"] for _, _, headers, _ in await stream_messages(settings, s.K8S_STREAM)]


async def limit_stream(settings: BusSettings, max_msgs: int) -> None:
    """The server refuses records once the stream holds `max_msgs` (-1: no limit)."""
    async with open_bus(settings) as bus:
        cfg = (await bus.js.stream_info(s.K8S_STREAM)).config
        cfg.max_msgs, cfg.discard = max_msgs, api.DiscardPolicy.NEW
        await bus.js.update_stream(cfg)


@pytest.mark.parametrize("command", [("publish",), ("log", "import")])
async def test_a_small_log_refused_part_way_stores_nothing(bus_settings, tmp_path, command):
    lines = [json.dumps(r).encode() for r in seed_records()]
    assert len(lines) <= ATOMIC_RECORDS
    path = write(tmp_path, lines)
    await limit_stream(bus_settings, 5)  # the sixth record is refused by the server
    res = vcbus_cli(*command, str(path), "--nats", bus_settings.nats_url)
    err = res.stderr.decode()
    assert res.returncode == 3, err
    assert "Traceback" not in err and "one atomic batch" in err and "again" in err, err
    async with open_bus(bus_settings) as bus:
        assert await last_seq(bus.js, s.K8S_STREAM) == 0  # all or nothing: nothing
    await limit_stream(bus_settings, -1)
    res = vcbus_cli(*command, str(path), "--nats", bus_settings.nats_url)
    assert res.returncode == 0, res.stderr.decode()
    assert f"published {len(lines)} records" in res.stderr.decode() and "(seq 1..64)" in res.stderr.decode()
    assert await stored_ids(bus_settings) == msg_ids(lines)
    again = vcbus_cli("publish", str(path), "--nats", bus_settings.nats_url)  # a re-run stores nothing twice
    assert again.returncode == 0 and f"{len(lines)} already there" in again.stderr.decode(), again.stderr
    assert await stored_ids(bus_settings) == msg_ids(lines)


async def test_a_large_log_refused_part_way_keeps_a_prefix_and_a_rerun_completes_it(bus_settings, tmp_path):
    lines = many_records(ATOMIC_RECORDS + 500)
    path = write(tmp_path, lines)
    await limit_stream(bus_settings, 700)
    res = vcbus_cli("publish", str(path), "--nats", bus_settings.nats_url)
    err = res.stderr.decode()
    assert res.returncode == 3 and "Traceback" not in err, err
    assert f"after acknowledging 700 of {len(lines)} records (seq 1..700; " in err, err
    assert f"running `vcbus publish {path}` again stores the rest without duplicates" in err, err
    assert await stored_ids(bus_settings) == msg_ids(lines)[:700]  # a prefix, in file order
    await limit_stream(bus_settings, -1)
    res = vcbus_cli("publish", str(path), "--nats", bus_settings.nats_url)
    assert res.returncode == 0, res.stderr.decode()
    assert f"published {len(lines) - 700} records" in res.stderr.decode()
    assert "700 already there" in res.stderr.decode()
    assert await stored_ids(bus_settings) == msg_ids(lines)


def test_nats_server_killed_mid_publish_then_a_rerun_completes_the_log_exactly_once(tmp_path):
    import asyncio
    import subprocess
    import sys

    from tests.fixtures_nats import ROOT

    lines = many_records(30_000)
    path = write(tmp_path, lines)
    data_dir = tmp_path / "nats"
    server = EmbeddedServer(data_dir=data_dir, sync_interval="always")
    url = server.start(timeout=30)
    port = int(url.rsplit(":", 1)[1])
    settings = BusSettings(nats_url=url)
    try:
        async def count() -> int:
            async with open_bus(settings) as bus:
                return await last_seq(bus.js, s.K8S_STREAM)

        asyncio.run(count())  # the streams exist before the publisher starts
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        proc = subprocess.Popen([sys.executable, "-m", "vcbus.cli.main", "publish", str(path), "--nats", url],
                                cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 120
        while asyncio.run(count()) < 500:  # part of the log is stored: kill the server now
            assert proc.poll() is None, proc.communicate()[1].decode()
            assert time.monotonic() < deadline, "the publish never started"
        os.kill(server.process.pid, signal.SIGKILL)
        server.process.wait(10)
        _, err = proc.communicate(timeout=120)
        err = err.decode()
        assert proc.returncode == 3 and "Traceback" not in err, err
        assert "the server failed after acknowledging" in err and "again stores the rest without duplicates" in err
        server = EmbeddedServer(data_dir=data_dir, port=port, sync_interval="always")
        server.start(timeout=30)
        partial = asyncio.run(stored_ids(settings))
        assert 500 <= len(partial) < len(lines)
        assert partial == msg_ids(lines)[:len(partial)]  # what was stored is a prefix of the file
        res = vcbus_cli("publish", str(path), "--nats", url)
        assert res.returncode == 0, res.stderr.decode()
        assert f"{len(partial)} already there" in res.stderr.decode()
        assert asyncio.run(stored_ids(settings)) == msg_ids(lines)  # every record once, in file order
    finally:
        server.stop()
