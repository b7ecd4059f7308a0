"""Aborted: nothing runs; only ResumeJob leads out (to Restarting, retryCount+1).

Volcano: `pkg/controllers/job/state/aborted.go`. Other actions still kill
(Soft) and rewrite the status, without a status function.
"""

from statemachines.job.handling import DEFAULT, Handling, PodOp, Retain
from statemachines.model.vocabulary import Action, Phase

PHASE = Phase.ABORTED

HANDLERS = {
    Action.RESUME_JOB: Handling(PodOp.KILL_JOB, "resume", Retain.SOFT, retry=True),
    DEFAULT: Handling(PodOp.KILL_JOB, None, Retain.SOFT),
}

TRANSITIONS = [
    {"trigger": "resume", "source": PHASE, "dest": Phase.RESTARTING},
]
