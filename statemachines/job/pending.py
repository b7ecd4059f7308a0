"""Pending (also `""` and any unknown phase): waiting for minAvailable pods to run.

Volcano: `pkg/controllers/job/state/pending.go`.
"""

from statemachines.job.handling import DEFAULT, Handling, PodOp, Retain
from statemachines.model.vocabulary import Action, Phase

PHASE = Phase.PENDING

HANDLERS = {
    Action.RESTART_JOB: Handling(PodOp.KILL_JOB, "restart", Retain.NONE, retry=True),
    Action.RESTART_TASK: Handling(PodOp.KILL_TARGET, "restart", retry=True),
    Action.RESTART_POD: Handling(PodOp.KILL_TARGET, "restart", retry=True),
    Action.RESTART_PARTITION: Handling(PodOp.KILL_TARGET, "restart", retry=True),
    Action.ABORT_JOB: Handling(PodOp.KILL_JOB, "abort", Retain.SOFT),
    Action.COMPLETE_JOB: Handling(PodOp.KILL_JOB, "complete", Retain.SOFT),
    Action.TERMINATE_JOB: Handling(PodOp.KILL_JOB, "terminate", Retain.SOFT),
    DEFAULT: Handling(PodOp.SYNC, "pending_check"),  # SyncJob, EnqueueJob, ResumeJob, unknown
}

TRANSITIONS = [
    {"trigger": "restart", "source": PHASE, "dest": Phase.RESTARTING},
    {"trigger": "abort", "source": PHASE, "dest": Phase.ABORTING},
    {"trigger": "complete", "source": PHASE, "dest": Phase.COMPLETING},
    {"trigger": "terminate", "source": PHASE, "dest": Phase.TERMINATING},
    {"trigger": "pending_check", "source": PHASE, "dest": Phase.RUNNING, "conditions": "min_available_reached"},
]
