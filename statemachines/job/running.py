"""Running: minAvailable pods are running; completion and failure are decided here.

Volcano: `pkg/controllers/job/state/running.go`. The order of the
`running_check` transitions is the order Volcano evaluates its conditions in;
the first that holds wins.
"""

from statemachines.job.handling import DEFAULT, Handling, PodOp, Retain
from statemachines.model.vocabulary import Action, Phase

PHASE = Phase.RUNNING

HANDLERS = {
    Action.RESTART_JOB: Handling(PodOp.KILL_JOB, "restart", Retain.NONE, retry=True),
    Action.RESTART_TASK: Handling(PodOp.KILL_TARGET, "restart", retry=True),
    Action.RESTART_POD: Handling(PodOp.KILL_TARGET, "restart", retry=True),
    Action.RESTART_PARTITION: Handling(PodOp.KILL_TARGET, "restart", retry=True),
    Action.ABORT_JOB: Handling(PodOp.KILL_JOB, "abort", Retain.SOFT),
    Action.TERMINATE_JOB: Handling(PodOp.KILL_JOB, "terminate", Retain.SOFT),
    Action.COMPLETE_JOB: Handling(PodOp.KILL_JOB, "complete", Retain.SOFT),
    DEFAULT: Handling(PodOp.SYNC, "running_check"),
}

TRANSITIONS = [
    {"trigger": "restart", "source": PHASE, "dest": Phase.RESTARTING},
    {"trigger": "abort", "source": PHASE, "dest": Phase.ABORTING},
    {"trigger": "complete", "source": PHASE, "dest": Phase.COMPLETING},
    {"trigger": "terminate", "source": PHASE, "dest": Phase.TERMINATING},
    # running_check, in Volcano's order:
    {"trigger": "running_check", "source": PHASE, "dest": None, "conditions": "scaled_to_zero"},
    {"trigger": "running_check", "source": PHASE, "dest": Phase.COMPLETED, "conditions": "min_success_reached"},
    {"trigger": "running_check", "source": PHASE, "dest": Phase.FAILED, "conditions": "task_min_not_met"},
    {"trigger": "running_check", "source": PHASE, "dest": Phase.FAILED, "conditions": "min_success_not_met"},
    {
        "trigger": "running_check",
        "source": PHASE,
        "dest": Phase.COMPLETED,
        "conditions": "succeeded_reach_min_available",
    },
    {"trigger": "running_check", "source": PHASE, "dest": Phase.FAILED, "conditions": "all_pods_finished"},
    {"trigger": "running_check", "source": PHASE, "dest": Phase.PENDING, "conditions": "too_many_pending"},
]
