"""Restarting: old pods are going away; back to Pending, or Failed when retries ran out.

Volcano: `pkg/controllers/job/state/restarting.go`. Every action uses the same
status function; Abort, Terminate and Complete only kill pods again here.
"""

from statemachines.job.handling import DEFAULT, Handling, PodOp, Retain
from statemachines.model.vocabulary import Action, Phase

PHASE = Phase.RESTARTING

HANDLERS = {
    Action.SYNC_JOB: Handling(PodOp.SYNC, "restarting_check"),
    Action.RESTART_TASK: Handling(PodOp.KILL_TARGET, "restarting_check"),
    Action.RESTART_POD: Handling(PodOp.KILL_TARGET, "restarting_check"),
    Action.RESTART_PARTITION: Handling(PodOp.KILL_TARGET, "restarting_check"),
    DEFAULT: Handling(PodOp.KILL_JOB, "restarting_check", Retain.NONE),
}

TRANSITIONS = [
    {"trigger": "restarting_check", "source": PHASE, "dest": Phase.FAILED, "conditions": "retries_exhausted"},
    {"trigger": "restarting_check", "source": PHASE, "dest": Phase.PENDING, "conditions": "enough_pods_left"},
]
