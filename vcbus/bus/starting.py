"""Volcano's cronjob and jobflow controllers started late on a bus whose log never had them.

The queue role of a bus with N > 1 partitions ran only the queue controller before 4 December 2026
(its consumer `vcbus-queues` filtered PodGroups, Queues, Commands and TIMER records); no role ran the
cronjob or jobflow controller, so the CronJobs and JobFlows of such a bus got no runs, no vcjobs and
no status. Since, the role runs both (`vcbus.bus.queueing`). Folded from sequence 1 as if they had
always run, they would decide the past silently (a refold stores nothing): a CronJob's runs and a
JobFlow's first vcjob taken as created though none was, so the CronJob, its active runs and its
history stay empty, and a flow waits for ever.

So the role, finding its consumer of that layout on start, **starts** the controllers there, as
Volcano's controller manager started with them enabled would: it appends one TIMER record per
controller, `start:cronjob` and `start:jobflow` (`start_message`; its time the role's clock, no
`Vcbus-Job`, so five tokens, shared by every partition and never rerouted by a repartition), and
logs it. Every engine that runs those controllers on this bus (the role; with one partition the
decider) looks them up before it folds (`started`) and holds the controllers until they fire
(`statemachines.hosted.HostedController.hold`): before, nothing is decided and the objects are
kept; at the start, each CronJob, JobTemplate and JobFlow is synced once, at the log's time then
(a CronJob's most recent missed run is created if its deadline allows, as Volcano's
`mostRecentScheduleTime` does after a downtime). A rebuild makes the same start at the same record,
so the stored outputs are the refold's.
"""

from __future__ import annotations

import logging

import msgspec
from nats.js import JetStreamContext
from nats.js.errors import NotFoundError

from statemachines.engine import Engine
from statemachines.hosted import owner_key, start_timer_id
from statemachines.model.records import TimerRecord, decode
from vcbus.bus import subjects as s
from vcbus.bus.cloudevents import MSG_ID
from vcbus.bus.publisher import Prepared

log = logging.getLogger("vcbus.decider")

KINDS = ("cronjob", "jobflow")  # the controllers started (`HostedController.KIND_KEY`)


def start_message(kind: str, due: str) -> Prepared:
    """The TIMER record that starts the controller of `kind` at `due`."""
    job, timer_id = owner_key(kind, s.CLUSTER_SCOPE, "start"), start_timer_id(kind)
    body = msgspec.json.encode({"type": "TIMER", "time": due, "timer": {"job": job, "id": timer_id, "due": due}})
    headers = {MSG_ID: f"timer:{timer_id}", "Vcbus-Kind": "Timer", "Vcbus-Namespace": s.CLUSTER_SCOPE,
               "Vcbus-Name": s.header_value(job.split("/", 1)[1]), "Vcbus-Type": "TIMER"}
    return Prepared(s.timer_subject(job), body, headers)


async def started(js: JetStreamContext) -> dict[str, str]:
    """kind -> the due time of its start TIMER record, for each controller the log starts late."""
    out: dict[str, str] = {}
    for kind in KINDS:
        subject = s.timer_subject(owner_key(kind, s.CLUSTER_SCOPE, "start"))
        try:
            msg = await js.get_msg(s.K8S_STREAM, seq=1, subject=subject, next=True)
        except NotFoundError:
            continue
        record = decode(msg.data or b"")
        if isinstance(record, TimerRecord) and record.timer.id == start_timer_id(kind):
            out[kind] = record.timer.due
    return out


def hold(engine: Engine, starts: dict[str, str]) -> None:
    """A fresh engine's controllers that the log starts late, held until their start."""
    for controller in (engine.cronjob_controller, engine.jobflow_controller):
        if controller is not None and controller.KIND_KEY in starts:
            controller.hold(starts[controller.KIND_KEY])


def older_layout(filters: list[str]) -> bool:
    """Whether the queue role's consumer filters are those of the layout without the two controllers."""
    return f"{s.K8S_PREFIX}.cronjob.>" not in filters


def starts_message(floor: int) -> str:
    return (f"queue role: consumer vcbus-queues is of the layout before 4 December 2026 (no CronJob or "
            f"JobFlow controller ran on this bus; decided up to seq {floor}): starting them now, as Volcano's "
            f"controllers starting would (TIMER records {', '.join(start_timer_id(k) for k in KINDS)}); "
            "every CronJob, JobTemplate and JobFlow is synced once then")
