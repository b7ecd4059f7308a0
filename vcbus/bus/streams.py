"""Creating the streams and KV buckets vcbus needs, idempotently, on any server.

Every service calls `ensure_streams` on start: missing streams and buckets are
created; existing ones are checked (a stream with other subjects is an error
that names both) and their duplicate window is brought to the setting. All
streams are file-backed; S2 compression is on (watch records are large and
repetitive: managed pods compress several times over).
"""

from __future__ import annotations

from nats.js import JetStreamContext
from nats.js import api
from nats.js.errors import BucketNotFoundError, NotFoundError

from vcbus.bus import subjects as s
from vcbus.bus.errors import BusError
from vcbus.settings import BusSettings

STREAMS = {
    s.K8S_STREAM: (f"{s.K8S_PREFIX}.>", "Kubernetes watch records as observed (the log the state machines fold)"),
    s.JOBS_STREAM: (f"{s.JOBS_PREFIX}.>", "vcbus domain events (CloudEvents 1.0, binary mode)"),
    s.CMDS_STREAM: (f"{s.CMDS_PREFIX}.>", "vcbus commands for the cluster side (CloudEvents 1.0)"),
}
BUCKETS = {
    s.STATUS_BUCKET: "vcjob status per job (key <namespace>.<name>), projected from VCBUS_JOBS",
    s.HISTORY_BUCKET: "per-job history (the vcbus replay report entry), projected from VCBUS_JOBS",
}


def stream_config(name: str, settings: BusSettings) -> api.StreamConfig:
    subject, description = STREAMS[name]
    return api.StreamConfig(
        name=name,
        description=description,
        subjects=[subject],
        retention=api.RetentionPolicy.LIMITS,
        storage=api.StorageType.FILE,
        duplicate_window=settings.duplicate_window,
        compression=api.StoreCompression.S2,
        num_replicas=1,
    )


async def ensure_streams(js: JetStreamContext, settings: BusSettings, *, update: bool = True) -> None:
    """Create what is missing; with `update`, also bring the duplicate window to the setting."""
    for name in STREAMS:
        want = stream_config(name, settings)
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
        if update and abs((have.duplicate_window or 0) - settings.duplicate_window) > 1e-3:
            have.duplicate_window = settings.duplicate_window
            await js.update_stream(have)
    for bucket, description in BUCKETS.items():
        try:
            await js.key_value(bucket)
        except (BucketNotFoundError, NotFoundError):
            await js.create_key_value(
                api.KeyValueConfig(bucket=bucket, description=description, history=1, storage=api.StorageType.FILE)
            )


async def last_seq(js: JetStreamContext, stream: str) -> int:
    info = await js.stream_info(stream)
    return int(info.state.last_seq or 0)


async def purge_bucket(js: JetStreamContext, bucket: str) -> None:
    await js.purge_stream(f"KV_{bucket}")
