"""Completed, Terminated, Failed: terminal. Every request still kills (Soft), bumps the version
and rewrites the status, but the phase never changes.

Volcano: `pkg/controllers/job/state/finished.go`.
"""

from statemachines.job.handling import DEFAULT, Handling, PodOp, Retain
from statemachines.model.vocabulary import Phase

PHASES = (Phase.COMPLETED, Phase.TERMINATED, Phase.FAILED)

HANDLERS = {
    DEFAULT: Handling(PodOp.KILL_JOB, None, Retain.SOFT),
}

TRANSITIONS: list[dict] = []
