"""Aborting: unfinished pods are being killed; Aborted once none is left. Resumable.

Volcano: `pkg/controllers/job/state/aborting.go`.
"""

from statemachines.job.handling import DEFAULT, Handling, PodOp, Retain
from statemachines.model.vocabulary import Action, Phase

PHASE = Phase.ABORTING

HANDLERS = {
    Action.RESUME_JOB: Handling(PodOp.KILL_JOB, "resume", Retain.SOFT, retry=True),
    DEFAULT: Handling(PodOp.KILL_JOB, "aborting_check", Retain.SOFT),
}

TRANSITIONS = [
    {"trigger": "resume", "source": PHASE, "dest": Phase.RESTARTING},
    {"trigger": "aborting_check", "source": PHASE, "dest": Phase.ABORTED, "conditions": "no_live_pods"},
]
