"""Volcano's vocabulary, copied exactly: job phases, bus events and bus actions.

The wire values are those of `volcano.sh/apis` (`pkg/apis/batch/v1alpha1/job.go`,
`pkg/apis/bus/v1alpha1/events.go`, `actions.go`). They appear in user manifests,
in `status.state.phase` and on our own bus, so they never change spelling.

Speed note: a StrEnum member is slow on a hot path (CPython 3.11: reading
`Phase.PENDING` off the class, hashing a member and comparing it with a str each
go through Python-level hooks, 130-200 ns instead of ~10-50 ns), so the code
that runs per record compares and hashes plain str (`Event.POD_PENDING.value`,
kept in module constants). One exception: `Resolution.action` stays the
`Action.SYNC_JOB` member, because msgspec's `omit_defaults` leaves out a field
only when it is its default str, and `ActionResolved.action` has always been
written out for the member (the bus's bytes depend on it).
"""

from __future__ import annotations

import enum


class Phase(enum.StrEnum):
    """`status.state.phase` of a vcjob."""

    PENDING = "Pending"  # accepted; waiting for minAvailable pods to run
    RUNNING = "Running"  # minAvailable pods are running (or finished)
    RESTARTING = "Restarting"  # pods being killed for a restart; retryCount already +1
    COMPLETING = "Completing"  # CompleteJob: killing the remaining pods
    COMPLETED = "Completed"  # finished successfully (terminal)
    ABORTING = "Aborting"  # AbortJob: killing pods; can be resumed
    ABORTED = "Aborted"  # all pods gone after an abort; can be resumed
    TERMINATING = "Terminating"  # TerminateJob: killing pods; cannot be resumed
    TERMINATED = "Terminated"  # terminal
    FAILED = "Failed"  # terminal: retries exhausted or completion criteria not met


FINISHED_PHASES = frozenset({Phase.COMPLETED, Phase.TERMINATED, Phase.FAILED})


class Event(enum.StrEnum):
    """Bus events: what happened to a job, its pods or its PodGroup."""

    ANY = "*"  # wildcard in policies; never raised
    POD_FAILED = "PodFailed"  # pod phase changed to Failed; carries the exit code
    POD_EVICTED = "PodEvicted"  # a cached pod not marked out-of-sync was deleted
    POD_PENDING = "PodPending"  # pod added, or phase changed to Pending
    POD_RUNNING = "PodRunning"  # internal: pod phase changed to Running
    JOB_UNKNOWN = "Unknown"  # PodGroup phase changed to Unknown (version 0 only)
    TASK_COMPLETED = "TaskCompleted"  # a task's succeeded pods reached its replicas
    TASK_FAILED = "TaskFailed"  # a task's container restarts reached its maxRetry
    OUT_OF_SYNC = "OutOfSync"  # internal: anything else that calls for a sync
    COMMAND_ISSUED = "CommandIssued"  # internal: a bus Command targeted the job
    JOB_UPDATED = "JobUpdated"  # allowed in policies, never raised by Volcano


# Events that never match a policy (step 3 of applyPolicies).
INTERNAL_EVENTS = frozenset({Event.OUT_OF_SYNC, Event.COMMAND_ISSUED, Event.POD_RUNNING})

# Events a user policy may name (admission rule).
POLICY_EVENTS = frozenset(
    {
        Event.ANY,
        Event.POD_FAILED,
        Event.POD_EVICTED,
        Event.POD_PENDING,
        Event.JOB_UNKNOWN,
        Event.TASK_COMPLETED,
        Event.TASK_FAILED,
        Event.JOB_UPDATED,
    }
)


class Action(enum.StrEnum):
    """Bus actions: what the controller does about an event."""

    ABORT_JOB = "AbortJob"  # kill unfinished pods -> Aborting -> Aborted
    RESTART_JOB = "RestartJob"  # kill all pods, retryCount+1 -> Restarting
    RESTART_TASK = "RestartTask"  # kill the event's task pods, retryCount+1
    RESTART_POD = "RestartPod"  # kill the event's pod, retryCount+1
    RESTART_PARTITION = "RestartPartition"  # kill the event's partition, retryCount+1
    TERMINATE_JOB = "TerminateJob"  # kill unfinished pods -> Terminating -> Terminated
    COMPLETE_JOB = "CompleteJob"  # kill unfinished pods -> Completing -> Completed
    RESUME_JOB = "ResumeJob"  # Aborting/Aborted -> Restarting (retryCount+1)
    SYNC_JOB = "SyncJob"  # internal default: reconcile pods and status
    ENQUEUE_JOB = "EnqueueJob"  # internal; behaves like SyncJob
    SYNC_QUEUE = "SyncQueue"  # queue controller
    OPEN_QUEUE = "OpenQueue"  # queue controller (Command)
    CLOSE_QUEUE = "CloseQueue"  # queue controller (Command)


# Actions that never cancel delayed actions (rule B).
INTERNAL_ACTIONS = frozenset(
    {Action.SYNC_JOB, Action.ENQUEUE_JOB, Action.SYNC_QUEUE, Action.OPEN_QUEUE, Action.CLOSE_QUEUE}
)

# Actions a user policy may name (admission rule).
POLICY_ACTIONS = frozenset(
    {
        Action.ABORT_JOB,
        Action.RESTART_JOB,
        Action.RESTART_TASK,
        Action.RESTART_POD,
        Action.RESTART_PARTITION,
        Action.TERMINATE_JOB,
        Action.COMPLETE_JOB,
        Action.RESUME_JOB,
    }
)
