"""Every metric vcbus exports (Prometheus, `prometheus_client`); docs/operations.md lists them with alerts.

Two kinds:
- **counted where it happens**: one-line calls in the services (`decided`,
  `command_result`, `session_time`, `admission`) on module-level metrics of the
  process's default registry;
- **read at scrape time** from the services' own statistics (`ServiceStats`):
  decider records, poison, the scheduler's sessions. Nothing in the services
  has to know about Prometheus for those.

Bus lag (`vcbus_bus_consumer_pending`) is a gauge the probe loop
(`vcbus.observability.probes.BusWatch`) sets from JetStream consumer info.
Label values are bounded: output types, command results, consumer names,
webhook paths.
"""

from __future__ import annotations

from typing import Any, Iterator

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from statemachines.queues.podgroups import COUNTED

DECISIONS = Counter(
    "vcbus_decisions_total",
    "Outputs the decider decided, by kind (event|command) and action (the output type, e.g. CreatePod); "
    "with --observe-only the commands are counted but not stored.",
    ["kind", "action"],
)
COMMANDS = Counter(
    "vcbus_commands_total",
    "Commands the actuator finished, by result: applied, done (already so), dropped (stale), "
    "refused (the API server refused for good; recorded and skipped), superseded (a status write a later one "
    "of the same object replaced before it was sent).",
    ["command", "result"],
)
COMMANDS_AHEAD = Counter(
    "vcbus_commands_ahead_total",
    "Commands the actuator applied as the decider of its process decided them, before they were stored "
    "(vcbus.k8s.ahead); their stored copies are acked with the result and counted in vcbus_commands_total.",
)
COMMAND_RETRIES = Counter(
    "vcbus_command_retries_total",
    "Command attempts that failed transiently (API server away, conflict storm) and were retried.",
    ["command"],
)
BUS_PENDING = Gauge(
    "vcbus_bus_consumer_pending",
    "Messages of the stream the durable consumer has not been delivered yet (its lag).",
    ["stream", "consumer"],
)
BUS_ACK_PENDING = Gauge(
    "vcbus_bus_consumer_ack_pending",
    "Messages delivered to the durable consumer and not acknowledged yet.",
    ["stream", "consumer"],
)
ACTUATOR_IN_FLIGHT = Gauge(
    "vcbus_actuator_in_flight", "Commands the actuator is applying right now (at most --actuator-concurrency).")
ACTUATOR_IN_HAND = Gauge(
    "vcbus_actuator_in_hand", "Commands the actuator has taken and not finished: applying, or waiting their turn in "
    "their job's lane (docs/operations.md 'The actuator').")
BUS_CONNECTED = Gauge("vcbus_bus_connected", "1 while the NATS connection is up.")
SESSION_SECONDS = Histogram(
    "vcbus_scheduler_session_seconds",
    "Wall time of one scheduling session (run_session, outside the bus writes).",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
)
WEBHOOK_SECONDS = Histogram(
    "vcbus_webhook_request_seconds",
    "Admission request handling time, by path.",
    ["path"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
)
WEBHOOK_REVIEWS = Counter(
    "vcbus_webhook_reviews_total", "Admission reviews answered, by path and allowed (true|false).", ["path", "allowed"]
)
LEADER = Gauge("vcbus_leader", "1 while this replica holds the leader Lease (or runs without leader election).")
LEADER_TRANSITIONS = Counter("vcbus_leader_transitions_total", "Times this replica became or stopped being leader.")
API_RETRY_WAIT = Counter(
    "vcbus_api_unreachable_retries_total", "Retries of an unreachable API server or bus, by component.", ["component"]
)


_children: dict[tuple, Any] = {}  # (metric, *label values) -> its child: `labels()` costs a lock and checks each call


def _child(metric: Any, *values: str) -> Any:
    """`metric.labels(*values)`, looked up once (the values here are output type names and results: few)."""
    key = (id(metric), *values)
    child = _children.get(key)
    if child is None:
        child = _children[key] = metric.labels(*values)
    return child


def decided(out: Any, *, command: bool) -> None:
    """One stored output of the decider (called once per output of a decided record)."""
    _child(DECISIONS, "command" if command else "event", type(out).__name__).inc()


def command_result(command: Any, result: str) -> None:
    _child(COMMANDS, type(command).__name__, result).inc()


def admission(path: str, allowed: bool, seconds: float) -> None:
    WEBHOOK_SECONDS.labels(path).observe(seconds)
    WEBHOOK_REVIEWS.labels(path, "true" if allowed else "false").inc()


class ServiceStats(Collector):
    """Reads the running services' statistics at scrape time (attach them with `watch`)."""

    def __init__(self) -> None:
        self.decider: Any = None
        self.scheduler: Any = None
        self.projector: Any = None
        self.queues: Any = None  # the decider whose engine runs the queue controller

    def watch(self, *, decider: Any = None, scheduler: Any = None, projector: Any = None,
              queues: Any = None) -> None:
        self.decider = decider or self.decider
        self.scheduler = scheduler or self.scheduler
        self.projector = projector or self.projector
        self.queues = queues or self.queues

    def collect(self) -> Iterator[Any]:
        d = self.decider
        if d is not None:
            st = d.stats
            yield _counter("vcbus_records_decided", "VCBUS_K8S records decided (outputs stored, record acked).", st.decided)
            yield _counter("vcbus_decider_poison_records", "Records set aside as poison (record.poison.v1).", st.poison)
            yield _counter("vcbus_decider_timers_fired", "TIMER records appended for due policy timeouts.", st.timers)
            yield _counter("vcbus_decider_duplicate_outputs", "Outputs JetStream already had (re-decided).", st.duplicates)
            yield _gauge("vcbus_decider_position", "Last VCBUS_K8S sequence the decider folded.", d.applied)
        sched = self.scheduler
        if sched is not None:
            st = sched.stats
            yield _counter("vcbus_scheduler_sessions", "Scheduling sessions stored.", st.sessions)
            yield _counter("vcbus_scheduler_failed_sessions", "Sessions that raised (nothing published).", st.failed)
            yield _counter("vcbus_scheduler_binds", "BindPod decisions stored.", st.binds)
            yield _counter("vcbus_scheduler_evictions", "EvictPod decisions stored.", st.evictions)
            unevaluated = GaugeMetricFamily(
                "vcbus_scheduler_unevaluated_pods",
                "Pending pods the scheduler leaves unscheduled because they ask for a field it does not evaluate.",
                labels=["field"],
            )
            for field, n in sorted(sched.unevaluated().items()):
                unevaluated.add_metric([field], n)
            yield unevaluated
        p = self.projector
        if p is not None:
            yield _counter("vcbus_projector_events", "Events folded into the KV views.", p.written)
        if self.queues is not None:
            yield from _queue_podgroups(self.queues.engine.queue_controller.podgroup_counts())


def _queue_podgroups(counts: dict[str, dict[str, int]]) -> Iterator[GaugeMetricFamily]:
    """Volcano's queue metrics (`pkg/controllers/metrics/queue.go`), by its names: a queue's PodGroups by
    phase, which its queue controller no longer writes into the Queue's status (nor does vcbus's)."""
    for phase in COUNTED:
        family = GaugeMetricFamily(f"volcano_queue_pod_group_{phase.lower()}_count",
                                   f"The number of {phase} PodGroup in this queue", labels=["queue_name"])
        for queue, by_phase in counts.items():
            family.add_metric([queue], by_phase[phase])
        yield family


def _counter(name: str, doc: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(name, doc, value=value)


def _gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, value=value)


SERVICES = ServiceStats()
REGISTRY.register(SERVICES)

__all__ = ["REGISTRY", "CollectorRegistry", "SERVICES", "decided", "command_result", "admission"]
