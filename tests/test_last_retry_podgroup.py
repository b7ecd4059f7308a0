"""The PodGroup on the failure that exhausts maxRetry, in the order Volcano's source gives.

Running + RestartJob is a KillJob: status Restarting (retryCount+1), then the PodGroup is deleted
(`killPods` in `pkg/controllers/job/job_controller_actions.go`). The phase change comes back as
one more request, handled in Restarting by SyncJob (`pkg/controllers/job/state/restarting.go`).
`syncJob` first runs `initOnJobUpdate`, whose `createOrUpdatePodGroup` creates the PodGroup when
it cannot find one, and only then applies the status function `restartingUpdateStatus`, where
the maxRetry check moves the job to Failed. Failed's KillJob (`state/finished.go`) then deletes
the PodGroup again. So the source recreates the PodGroup on the last retry too, exactly as on the
earlier ones; the recreation is not conditional on retries left. (In a cluster it happens when
the PodGroup lister has already seen the deletion; vcbus's cache reflects its own writes at once,
docs/fidelity.md.)
"""

from __future__ import annotations

from statemachines import outputs as o
from tests.builders import job, policy, running_job

PG_AND_PHASES = (o.DeletePodGroup, o.CreatePodGroup, o.PhaseChanged)


def trail(outs) -> list[str]:
    out = []
    for x in outs:
        if isinstance(x, o.PhaseChanged):
            out.append(f"{x.from_phase}->{x.to_phase}")
        elif isinstance(x, PG_AND_PHASES):
            out.append(type(x).__name__)
    return out


def test_every_restart_deletes_and_recreates_the_podgroup_before_the_restarting_check():
    h = running_job(job(max_retry=2, policies=[policy("RestartJob", "PodFailed")]))
    first = h.set_pod("j-t-0", phase="Failed", exit_code=1)
    assert trail(first) == ["Running->Restarting", "DeletePodGroup", "CreatePodGroup"]
    assert h.phase == "Restarting" and h.entry.pg is not None


def test_the_exhausting_failure_follows_syncjob_order_then_failed_kills_the_new_podgroup():
    h = running_job(job(max_retry=1, policies=[policy("RestartJob", "PodFailed")]))
    outs = h.set_pod("j-t-0", phase="Failed", exit_code=1)
    assert trail(outs) == [
        "Running->Restarting",  # KillJob writes Restarting, retryCount 1 ...
        "DeletePodGroup",  # ... and deletes the PodGroup
        "CreatePodGroup",  # Restarting's SyncJob: initOnJobUpdate before the status function
        "Restarting->Failed",  # restartingUpdateStatus: retryCount 1 >= maxRetry 1
        "DeletePodGroup",  # Failed: KillJob
    ]
    assert h.phase == "Failed" and h.status.retry_count == 1 and h.entry.pg is None
