"""The CronJob machines, declared for `transitions` and compiled: the CronJob's own, and each run's.

Volcano's cronjob controller (`pkg/controllers/cronjob/`) keeps no state field: each sync
reads the CronJob and its vcjobs and decides. vcbus names what a sync concludes:

**The CronJob** (`CRONJOB_*`): trigger `sync` after every sync, guarded by what it found,
in Volcano's order — `terminating` (a deletionTimestamp: not synced), `suspended`
(`spec.suspend`: finished jobs are still processed, no run starts), `invalid` (the time zone
cannot be loaded, the schedule does not parse, or two runs are less than a second apart:
Volcano's sync fails); otherwise `Scheduled` (a timer waits for the next run).
`delete` (the CronJob's DELETED record) ends in `Deleted` from any state.

**A run** (`RUN_*`), one per scheduled time, named as its vcjob (`<cronjob>-<minutes>`):
`Due` is a time the schedule reached; `create` sends the vcjob's creation (`Created`),
`skip` is Forbid with a job still active (`Skipped`: the time stays unmet, and a later
sync within the deadline and before the next time creates it after all: `create` from
`Skipped`), `miss` is a time that passed its `startingDeadlineSeconds` before it could
start (`Missed`). `observe` is the vcjob's first record (`Active`: in `status.active`);
`succeed`, `fail`, `terminate` its finished phase (Completed, Failed, Terminated); `replace`
is Replace deleting it for a newer run, `prune` the history limits deleting it, `vanish`
its vcjob gone otherwise (deleted by someone, or a stale reference).

As for the job and queue machines, the `transitions.Machine` is the source of truth
(docs/statemachines/cronjob.md is drawn from it), compiled at import into
`GRAPH[(state, trigger)] -> [(dest, guards)]`; a test fires every trigger through both.
"""

from __future__ import annotations

from collections.abc import Callable

from msgspec import Struct
from transitions import Machine, MachineError

from statemachines.machinegraph import compile_graph, declare, fire_through

# ------------------------------------------------------------------ the CronJob

NEW = "New"
SCHEDULED = "Scheduled"
SUSPENDED = "Suspended"
INVALID = "Invalid"
TERMINATING = "Terminating"
DELETED = "Deleted"
CRONJOB_STATES = (NEW, SCHEDULED, SUSPENDED, INVALID, TERMINATING, DELETED)
SYNC = "sync"
DELETE = "delete"
CRONJOB_TRIGGERS = (SYNC, DELETE)


class Check(Struct, frozen=True):
    """What a sync found, for the CronJob machine's guards."""

    terminating: bool = False
    suspended: bool = False
    invalid: bool = False


CRONJOB_GUARDS: dict[str, Callable[[Check], bool]] = {
    "terminating": lambda c: c.terminating,
    "suspended": lambda c: c.suspended,
    "invalid": lambda c: c.invalid,
}

_LIVE = [NEW, SCHEDULED, SUSPENDED, INVALID, TERMINATING]
CRONJOB_TRANSITIONS: list[dict] = [
    {"trigger": SYNC, "source": _LIVE, "dest": TERMINATING, "conditions": "terminating"},
    {"trigger": SYNC, "source": _LIVE, "dest": SUSPENDED, "conditions": "suspended"},
    {"trigger": SYNC, "source": _LIVE, "dest": INVALID, "conditions": "invalid"},
    {"trigger": SYNC, "source": _LIVE, "dest": SCHEDULED},
    {"trigger": DELETE, "source": [*_LIVE, DELETED], "dest": DELETED},
]

# ------------------------------------------------------------------ a run

DUE = "Due"
CREATED = "Created"
SKIPPED = "Skipped"
MISSED = "Missed"
ACTIVE = "Active"
SUCCEEDED = "Succeeded"
FAILED = "Failed"
TERMINATED = "Terminated"
REPLACED = "Replaced"
PRUNED = "Pruned"
GONE = "Gone"
RUN_STATES = (DUE, CREATED, SKIPPED, MISSED, ACTIVE, SUCCEEDED, FAILED, TERMINATED, REPLACED, PRUNED, GONE)
FINISHED_RUNS = (SUCCEEDED, FAILED, TERMINATED)
# a run whose vcjob is gone or never came: a later time of the same name is a new run, from Due (Volcano
# names a run by the minute, `<cronjob>-<minutes>`, so a schedule under a minute gives a name again)
ENDED_RUNS = (MISSED, REPLACED, PRUNED, GONE)

RUN_TRANSITIONS: list[dict] = [
    {"trigger": "create", "source": [DUE, SKIPPED], "dest": CREATED},
    {"trigger": "skip", "source": [DUE, SKIPPED], "dest": SKIPPED},
    {"trigger": "miss", "source": [DUE, SKIPPED], "dest": MISSED},
    {"trigger": "observe", "source": [DUE, CREATED], "dest": ACTIVE},
    {"trigger": "succeed", "source": [CREATED, ACTIVE], "dest": SUCCEEDED},
    {"trigger": "fail", "source": [CREATED, ACTIVE], "dest": FAILED},
    {"trigger": "terminate", "source": [CREATED, ACTIVE], "dest": TERMINATED},
    {"trigger": "replace", "source": [CREATED, ACTIVE], "dest": REPLACED},
    {"trigger": "prune", "source": list(FINISHED_RUNS), "dest": PRUNED},
    {"trigger": "vanish", "source": [CREATED, ACTIVE, *FINISHED_RUNS], "dest": GONE},
]
RUN_TRIGGERS = tuple(dict.fromkeys(t["trigger"] for t in RUN_TRANSITIONS))


class IllegalRunTransition(ValueError):
    """A run trigger its state does not allow (a bug in the controller, never the input's fault)."""


# ------------------------------------------------------------------ build and compile

def build_machine(which: str, model: object = None, *, initial: str | None = None, cls: type = Machine) -> Machine:
    """`which` is "cronjob" or "run". Pass a model only for debugging or diagrams."""
    states, transitions, first = (
        (CRONJOB_STATES, CRONJOB_TRANSITIONS, NEW) if which == "cronjob" else (RUN_STATES, RUN_TRANSITIONS, DUE)
    )
    return declare(list(states), transitions, initial or first, model, cls)


CRONJOB_GRAPH = compile_graph(build_machine("cronjob"), CRONJOB_GUARDS)
RUN_GRAPH = compile_graph(build_machine("run"), CRONJOB_GUARDS)


def fire_cronjob(state: str, trigger: str, check: Check) -> str:
    """The CronJob's state after `trigger`, the first transition whose guards hold."""
    for dest, guards in CRONJOB_GRAPH[(state, trigger)]:
        if all(fn(check) == want for fn, want in guards):
            return dest
    raise AssertionError(f"no transition {trigger!r} from {state!r}")  # each trigger ends unguarded


def fire_run(state: str, trigger: str) -> str:
    """A run's state after `trigger`; IllegalRunTransition if its state does not allow it."""
    options = RUN_GRAPH.get((state, trigger))
    if not options:
        raise IllegalRunTransition(f"run trigger {trigger!r} from {state!r}")
    return options[0][0]


_FOUND_NOTHING = Check()  # (frozen: one shared default)


def fire_with_transitions(which: str, state: str, trigger: str, check: Check = _FOUND_NOTHING) -> str:
    """`fire_cronjob` / `fire_run` through `transitions` itself (slow; for checking them)."""
    try:
        return fire_through(lambda model, at: build_machine(which, model, initial=at), CRONJOB_GUARDS, state,
                            trigger, check)
    except MachineError as err:
        raise IllegalRunTransition(f"run trigger {trigger!r} from {state!r}") from err
