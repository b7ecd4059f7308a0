"""Terminating: TerminateJob is killing the unfinished pods; Terminated once none is left.

Volcano: `pkg/controllers/job/state/terminating.go`.
"""

from statemachines.job.handling import DEFAULT, Handling, PodOp, Retain
from statemachines.model.vocabulary import Phase

PHASE = Phase.TERMINATING

HANDLERS = {
    DEFAULT: Handling(PodOp.KILL_JOB, "terminating_check", Retain.SOFT),
}

TRANSITIONS = [
    {"trigger": "terminating_check", "source": PHASE, "dest": Phase.TERMINATED, "conditions": "no_live_pods"},
]
