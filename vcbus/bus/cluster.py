"""The embedded NATS cluster: N local nats-server processes joined as one JetStream cluster.

`vcbus up --cluster-nats 3` (and the test fixture `nats_cluster`) runs three
servers on 127.0.0.1, each with its own store under `<data_dir>/n1 .. nN`,
its own client port and route port, and routes to all the others. JetStream
then replicates every stream and KV bucket over `replicas` of them
(vcbus.bus.streams: the cluster size, at most 3), so a write is acknowledged
once a quorum of servers has it and the bus survives the loss of one server.

The data dir remembers its layout (`<data_dir>/cluster.json`: the number of
servers); a single server's store (`<data_dir>/jetstream`) and a cluster's
cannot be mixed, and later commands over the same data dir start the same
cluster. Ports are chosen free at start (a restarted node keeps its ports;
the JetStream store names peers by server name, not port, so a new start on
other ports is the same cluster). Readiness is every server's "Server is
ready", then a JetStream meta leader (the first `$JS.API.INFO` that
answers; a fresh cluster elects one in a few seconds), then a leader for
every stream already stored (a restarted cluster re-elects them one by one).
"""

from __future__ import annotations

import json
import pathlib
import socket
import time

from vcbus import retries
from vcbus.bus.errors import ServerError
from vcbus.bus.server import EmbeddedServer

LAYOUT_FILE = "cluster.json"
CLUSTER_NAME = "vcbus"
MAX_SERVERS = 5  # NATS' limit on replicas; more local servers would only cost


def free_ports(count: int) -> list[int]:
    """`count` distinct free TCP ports on 127.0.0.1 (held open together, so they differ)."""
    socks = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            socks.append(sock)
        return [sock.getsockname()[1] for sock in socks]
    finally:
        for sock in socks:
            sock.close()


def cluster_block(*, route_port: int, route_ports: list[int]) -> str:
    routes = ", ".join(f"nats-route://127.0.0.1:{p}" for p in route_ports)
    return (
        "cluster {\n"
        f"  name: {CLUSTER_NAME}\n"
        f"  listen: 127.0.0.1:{route_port}\n"
        f"  routes: [{routes}]\n"
        "}\n"
    )


def recorded_size(data_dir: pathlib.Path) -> int:
    """The number of servers `data_dir` was created for: N for a cluster's, 1 otherwise."""
    try:
        return int(json.loads((pathlib.Path(data_dir) / LAYOUT_FILE).read_text())["servers"])
    except (OSError, ValueError, KeyError, TypeError):
        return 1


def check_layout(data_dir: pathlib.Path, servers: int) -> None:
    """Refuse (exit code 2) to start `servers` servers over a data dir laid out for another number."""
    data_dir = pathlib.Path(data_dir)
    have = recorded_size(data_dir)
    problem = ""
    if servers > 1 and have == 1 and (data_dir / "jetstream").exists():
        problem = f"{data_dir} holds a single server's store; a {servers}-server cluster needs another --data-dir"
    elif have > 1 and have != servers:
        problem = (
            f"{data_dir} holds a {have}-server cluster's stores; run it with --cluster-nats {have}, "
            "or use another --data-dir"
        )
    elif not 1 <= servers <= MAX_SERVERS:
        problem = f"--cluster-nats {servers}: expected 3 to {MAX_SERVERS} servers (or 1: no cluster)"
    if problem:
        err = ServerError(problem)
        err.exit_code = 2  # bad input, not an unavailable bus
        raise err


class EmbeddedCluster:
    """`size` nats-server processes on 127.0.0.1 as one JetStream cluster over `data_dir`."""

    def __init__(
        self,
        *,
        data_dir: pathlib.Path,
        size: int = 3,
        sync_interval: str = "always",
        binary: str | None = None,
        max_payload: int = 8 * 1024 * 1024,
    ) -> None:
        self.data_dir = pathlib.Path(data_dir)
        self.size = size
        self.sync_interval = sync_interval
        self.binary = binary
        self.max_payload = max_payload
        self.nodes: list[EmbeddedServer] = []

    @property
    def urls(self) -> list[str]:
        return [node.url for node in self.nodes]

    @property
    def url(self) -> str:
        """Every server's URL, comma-separated: what `--nats` takes."""
        return ",".join(self.urls)

    def start(self, *, timeout: float = 60.0) -> str:
        """Start every server, wait for the cluster's JetStream, and return the URL list."""
        check_layout(self.data_dir, self.size)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        (self.data_dir / LAYOUT_FILE).write_text(json.dumps({"servers": self.size}) + "\n")
        ports = free_ports(2 * self.size)
        client_ports, route_ports = ports[: self.size], ports[self.size :]
        self.nodes = [
            EmbeddedServer(
                data_dir=self.data_dir / f"n{i + 1}",
                port=client_ports[i],
                sync_interval=self.sync_interval,
                binary=self.binary,
                max_payload=self.max_payload,
                server_name=f"{CLUSTER_NAME}-{i + 1}",
                extra_config=cluster_block(route_port=route_ports[i], route_ports=route_ports),
            )
            for i in range(self.size)
        ]
        deadline = time.monotonic() + timeout
        try:
            for node in self.nodes:
                node.start(timeout=max(1.0, deadline - time.monotonic()))
            wait_for_jetstream(self.urls, deadline - time.monotonic())
        except BaseException:
            self.stop()
            raise
        return self.url

    def kill(self, index: int) -> None:
        """SIGKILL server `index` (0-based): a crash, no shutdown."""
        proc = self.nodes[index].process
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()

    def restart(self, index: int, *, timeout: float = 30.0) -> None:
        """Start server `index` again on its ports and store (after `kill` or `stop`)."""
        node = self.nodes[index]
        node.stop()
        node.start(timeout=timeout)

    def running(self, index: int) -> bool:
        proc = self.nodes[index].process
        return proc is not None and proc.poll() is None

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()

    def __enter__(self) -> "EmbeddedCluster":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def wait_for_jetstream(urls: list[str], timeout: float) -> None:
    """Block until JetStream answers through the cluster and every stored stream has a leader."""
    import asyncio

    from nats.aio.client import Client

    async def probe() -> str:
        nc = Client()
        last = "no answer"
        try:
            await nc.connect(servers=urls, connect_timeout=2, max_reconnect_attempts=2, allow_reconnect=True)
            deadline = time.monotonic() + timeout
            waits = retries.Streak(retries.LEADERS)
            while time.monotonic() < deadline:
                try:
                    js = nc.jetstream(timeout=2)
                    await js.account_info()
                    waiting = [str(i.config.name) for i in await js.streams_info() if not (i.cluster and i.cluster.leader)]
                    if not waiting:
                        return ""
                    last = f"no leader yet for {', '.join(waiting)}"
                except Exception as err:  # no meta leader yet: timeout or 503
                    last = str(err) or type(err).__name__
                await asyncio.sleep(min(waits.failed(), max(0.0, deadline - time.monotonic())))
            return last
        finally:
            await nc.close()

    problem = asyncio.run(probe()) if not _in_loop() else _run_in_thread(probe)
    if problem:
        raise ServerError(f"the NATS cluster at {','.join(urls)} has no JetStream leader after {timeout:g}s: {problem}")


def _in_loop() -> bool:
    import asyncio

    try:
        asyncio.get_running_loop()
        return True
    except RuntimeError:
        return False


def _run_in_thread(coro_fn) -> str:
    """Run `coro_fn()` on a fresh event loop in a thread (the caller is inside a running loop)."""
    import asyncio
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(lambda: asyncio.run(coro_fn())).result()


def default_replicas(nc, settings, url: str) -> int:
    """Replicas for new streams and buckets: `settings.replicas` when set, else the size of the
    cluster the server announces (its INFO's `connect_urls`, or the URLs given), at most 3; 1 on a
    server that is not in a cluster."""
    if settings.replicas:
        return int(settings.replicas)
    info = getattr(nc, "_server_info", None) or {}
    if not info.get("cluster"):
        return 1
    size = max(len(info.get("connect_urls") or ()), len([u for u in url.split(",") if u.strip()]))
    return max(1, min(3, size))
