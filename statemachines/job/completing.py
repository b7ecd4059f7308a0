"""Completing: CompleteJob is killing the unfinished pods; Completed once none is left.

Volcano: `pkg/controllers/job/state/completing.go`.
"""

from statemachines.job.handling import DEFAULT, Handling, PodOp, Retain
from statemachines.model.vocabulary import Phase

PHASE = Phase.COMPLETING

HANDLERS = {
    DEFAULT: Handling(PodOp.KILL_JOB, "completing_check", Retain.SOFT),
}

TRANSITIONS = [
    {"trigger": "completing_check", "source": PHASE, "dest": Phase.COMPLETED, "conditions": "no_live_pods"},
]
