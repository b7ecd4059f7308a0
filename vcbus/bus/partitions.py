"""Partitions of VCBUS_K8S by job: NATS's deterministic subject partitioning, one decider each.

One partition (the default) is the layout vcbus always had: records on
`vcbus.k8s.<kind>.<namespace>.<name>`, one decider, consumer `vcbus-decider`.

With N > 1 partitions (set when VCBUS_K8S is created, `vcbus up
--partitions N`; changed by `vcbus bus repartition N`), a record that belongs
to a vcjob (the job itself, its pods, PodGroup, Commands, TIMER records) is
published with the job's name as a sixth token,
`vcbus.k8s.<kind>.<namespace>.<name>.<job name>`, and the stream's subject
transform (not Python: the server's `partition()` mapping function, a
deterministic hash of the namespace and job tokens) stores it as

    vcbus.k8s.<kind>.<namespace>.<name>.<job name>.<partition>

so every record of a job is in the same partition. Records of no job (queues,
nodes, PriorityClasses, a pod no job owns) keep their five tokens and are
shared: every partition's decider reads them. Decider K's durable consumer
`vcbus-decider-K` filters its own records, `vcbus.k8s.*.*.*.*.K` (one filter
subject: a consumer with two costs the server about four times the CPU per
record), and it reads the shared ones, `vcbus.k8s.*.*.*`, through a consumer of
its own, merged by stream sequence (`vcbus.bus.merging`). The partition count
is kept in the stream's metadata (`vcbus.partitions`).

Everything that reads the whole log (the scheduler, `vcbus replay --nats`,
log export) reads VCBUS_K8S as before: it is still one stream with one order.
VCBUS_JOBS and VCBUS_CMDS are not partitioned: every decider writes its
outputs there (ids `<K8S seq>:<index>` stay unique) and the projector and the
actuator read them as before.
"""

from __future__ import annotations

from dataclasses import dataclass

from nats.js import JetStreamContext
from nats.js import api
from nats.js.errors import NotFoundError

from vcbus.bus import subjects as s

META_KEY = "vcbus.partitions"
DURABLE = "vcbus-decider"
MAX_PARTITIONS = 64
SHARED_FILTER = f"{s.K8S_PREFIX}.*.*.*"  # records of no job: every partition folds them


@dataclass(frozen=True)
class Partition:
    """Partition `index` of `count` (0-based)."""

    index: int = 0
    count: int = 1

    def __post_init__(self) -> None:
        if not 1 <= self.count <= MAX_PARTITIONS:
            raise ValueError(f"partition count {self.count}: expected 1..{MAX_PARTITIONS}")
        if not 0 <= self.index < self.count:
            raise ValueError(f"partition {self.index}: the stream has partitions 0..{self.count - 1}")

    @property
    def consumer(self) -> str:
        return DURABLE if self.count == 1 else f"{DURABLE}-{self.index}"

    @property
    def filters(self) -> list[str] | None:
        """Every record this partition folds: its own and the shared ones (None: the whole stream)."""
        if self.count == 1:
            return None
        return [self.own_filter, SHARED_FILTER]

    @property
    def own_filter(self) -> str:
        """The durable consumer's one filter subject: the partition's own records (all, with one)."""
        return f"{s.K8S_PREFIX}.>" if self.count == 1 else f"{s.K8S_PREFIX}.*.*.*.*.{self.index}"

    @property
    def consumer_filters(self) -> list[str]:
        """The durable consumer's filter subjects."""
        return [self.own_filter]

    @property
    def whole(self) -> bool:
        """Whether the consumer delivers every record of the stream (a gap is a record to fetch)."""
        return self.count == 1

    @property
    def merged(self) -> bool:
        """Whether the shared records come through a consumer of their own (`vcbus.bus.merging`)."""
        return self.count > 1

    @property
    def queue_outputs(self) -> bool:
        """Whether this decider publishes the queue-scoped outputs (with N > 1: the queue role does)."""
        return self.count == 1

    def shared(self, subject: str) -> bool:
        """Whether a stored K8S record is one every partition folds (with N > 1: five tokens)."""
        return self.count > 1 and subject.count(".") == 4

    def mine(self, subject: str) -> bool:
        """Whether a stored K8S record is this partition's to decide (its own or a shared one)."""
        if self.count == 1:
            return True
        tokens = subject.split(".")
        return len(tokens) != 7 or tokens[6] == str(self.index)

    @property
    def name(self) -> str:
        return str(self.index) if self.count > 1 else "0 (of 1)"


def transform(count: int) -> api.SubjectTransform | None:
    """VCBUS_K8S's subject transform for `count` partitions (None for one)."""
    if count <= 1:
        return None
    return api.SubjectTransform(
        src=f"{s.K8S_PREFIX}.*.*.*.*",
        dest=f"{s.K8S_PREFIX}.{{{{wildcard(1)}}}}.{{{{wildcard(2)}}}}.{{{{wildcard(3)}}}}.{{{{wildcard(4)}}}}"
        f".{{{{partition({count},2,4)}}}}",
    )


def route(subject: str, job: str | None, count: int) -> str:
    """The subject to publish a K8S record on: with partitions, a job's records get its name."""
    if count <= 1 or not job or subject.count(".") != 4 or not subject.startswith(s.K8S_PREFIX + "."):
        return subject
    try:
        _, name = s.split_job(job)
    except ValueError:
        return subject
    return f"{subject}.{s.token(name)}"


def count_of(config: api.StreamConfig) -> int:
    value = (config.metadata or {}).get(META_KEY, "1")
    return int(value) if value.isdigit() and int(value) >= 1 else 1


async def partitions(js: JetStreamContext) -> int:
    """VCBUS_K8S's partition count (1 when the stream does not exist yet)."""
    try:
        info = await js.stream_info(s.K8S_STREAM)
    except NotFoundError:
        return 1
    return count_of(info.config)


def unrouted(subject: str) -> str:
    """A stored K8S subject without the job and partition tokens (the one-partition layout)."""
    parts = subject.split(".")
    return ".".join(parts[:5]) if len(parts) > 5 and subject.startswith(s.K8S_PREFIX + ".") else subject
