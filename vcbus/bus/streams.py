"""Creating the streams and KV buckets vcbus needs, idempotently, on any server.

Every service calls `ensure_streams` on start: missing streams and buckets are
created; existing ones are checked (a stream with other subjects is an error
that names both) and their duplicate window is brought to the setting where
one is given (`vcbus up` always gives its `--duplicate-window`; other
commands leave it). All
streams are file-backed; S2 compression is on for single-server streams
(watch records are large and repetitive: managed pods compress several times
over) and off for replicated ones (see `compression_for`).

The KV buckets allow per-message TTLs (`allow_msg_ttl`, nats-server 2.11+; an
older bucket is updated): the projector's delete markers expire
(`vcbus.bus.projector.Writer`).

Every stream allows atomic batch publish (`allow_atomic`, nats-server 2.12+;
`vcbus.bus.batching`): the decider stores a batch's outputs with one write.
VCBUS_K8S is created with `settings.partitions` partitions
(`vcbus.bus.partitions`: a subject transform and the count in its metadata);
an existing stream keeps its count (`vcbus bus repartition` changes it).
"""

from __future__ import annotations

from nats.js import JetStreamContext
from nats.js import api
from nats.js.errors import BucketNotFoundError, NotFoundError

from vcbus.bus import partitions as parts
from vcbus.bus import subjects as s
from vcbus.bus.errors import BusError
from vcbus.settings import DEFAULT_DUPLICATE_WINDOW, BusSettings

STREAMS = {
    s.K8S_STREAM: (f"{s.K8S_PREFIX}.>", "Kubernetes watch records as observed (the log the state machines fold)"),
    s.JOBS_STREAM: (f"{s.JOBS_PREFIX}.>", "vcbus domain events (CloudEvents 1.0, binary mode)"),
    s.CMDS_STREAM: (f"{s.CMDS_PREFIX}.>", "vcbus commands for the cluster side (CloudEvents 1.0)"),
}
BUCKETS = {
    s.STATUS_BUCKET: "vcjob status per job (key <namespace>.<name>), projected from VCBUS_JOBS",
    s.HISTORY_BUCKET: "per-job history (the vcbus replay report entry), projected from VCBUS_JOBS",
}


def compression_for(replicas: int) -> api.StoreCompression:
    """S2 on a single server; none on replicated streams: nats-server 2.15.1 cannot recover an
    S2-compressed replica after a crash (docs/operations.md "A NATS cluster")."""
    return api.StoreCompression.S2 if replicas <= 1 else api.StoreCompression.NONE


def stream_config(
    name: str, settings: BusSettings, *, replicas: int = 1, partitions: int | None = None
) -> api.StreamConfig:
    subject, description = STREAMS[name]
    cfg = api.StreamConfig(
        name=name,
        description=description,
        subjects=[subject],
        retention=api.RetentionPolicy.LIMITS,
        storage=api.StorageType.FILE,
        duplicate_window=settings.duplicate_window or DEFAULT_DUPLICATE_WINDOW,
        compression=compression_for(replicas),
        num_replicas=replicas,
        max_age=settings.max_age or None,  # retention (docs/operations.md "Retention"); None: forever
        max_bytes=settings.max_bytes or None,
        allow_atomic=True,  # atomic batch publish (vcbus.bus.batching)
    )
    count = partitions if partitions is not None else settings.partitions
    if name == s.K8S_STREAM and count > 1:  # vcbus.bus.partitions
        cfg.subject_transform = parts.transform(count)
        cfg.metadata = {parts.META_KEY: str(count)}
    return cfg


async def ensure_streams(
    js: JetStreamContext, settings: BusSettings, *, update: bool = True, replicas: int | None = None
) -> None:
    """Create what is missing at `replicas` (default `settings.replicas`, else 1; vcbus.bus.cluster
    derives it from the cluster's size); with `update`, also bring the duplicate window, the
    retention and the replicas, where the settings name them, to the setting."""
    replicas = replicas or settings.replicas or 1
    for name in STREAMS:
        want = stream_config(name, settings, replicas=replicas)
        try:
            info = await js.stream_info(name)
        except NotFoundError:
            await js.add_stream(want)
            continue
        have = info.config
        if list(have.subjects or ()) != list(want.subjects or ()):
            raise BusError(
                f"stream {name} exists with subjects {have.subjects}, vcbus needs {want.subjects}; "
                f"delete it or use another server"
            )
        if update and _apply_settings(have, settings):
            await js.update_stream(have)
        if update and not have.allow_atomic:
            have.allow_atomic = True
            try:
                await js.update_stream(have)
            except Exception:  # a server without atomic batches (< 2.12): the decider publishes per message
                pass
    for bucket, description in BUCKETS.items():
        try:
            await js.key_value(bucket)
        except (BucketNotFoundError, NotFoundError):
            await js.create_key_value(  # nats-py creates it with allow_msg_ttl (the projector's purge markers)
                api.KeyValueConfig(
                    bucket=bucket, description=description, history=1, storage=api.StorageType.FILE, replicas=replicas
                )
            )
            continue
        if update:
            await _allow_msg_ttl(js, f"KV_{bucket}")


async def _allow_msg_ttl(js: JetStreamContext, stream: str) -> None:
    """A bucket created before nats-py set `allow_msg_ttl` gets it: the projector's purge markers carry
    a TTL (vcbus.bus.projector.Writer). A server that cannot (before 2.11) keeps the bucket as it is."""
    info = await js.stream_info(stream)
    if info.config.allow_msg_ttl:
        return
    info.config.allow_msg_ttl = True
    try:
        await js.update_stream(info.config)
    except Exception:  # a server without per-message TTLs: the markers stay, as before
        pass


def _apply_settings(have: api.StreamConfig, settings: BusSettings) -> bool:
    """Bring an existing stream's duplicate window, retention and replicas, where the settings
    name them (None/0: leave as it is), to the settings; True if anything changed."""
    changed = False
    window = settings.duplicate_window
    if window is not None and abs((have.duplicate_window or 0) - window) > 1e-3:
        have.duplicate_window, changed = window, True
    if settings.max_age is not None and abs((have.max_age or 0) - settings.max_age) > 1e-3:
        have.max_age, changed = settings.max_age, True
    if settings.max_bytes is not None and (have.max_bytes or -1) != (settings.max_bytes or -1):
        have.max_bytes, changed = settings.max_bytes or -1, True
    if settings.replicas and (have.num_replicas or 1) != settings.replicas:
        have.num_replicas, changed = settings.replicas, True
        have.compression = compression_for(settings.replicas)
    return changed


async def last_seq(js: JetStreamContext, stream: str) -> int:
    info = await js.stream_info(stream)
    return int(info.state.last_seq or 0)


async def purge_bucket(js: JetStreamContext, bucket: str) -> None:
    await js.purge_stream(f"KV_{bucket}")
