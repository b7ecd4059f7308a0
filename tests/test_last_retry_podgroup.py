"""The PodGroup on the failure that exhausts maxRetry: deleted once, never recreated.

Running + RestartJob is a KillJob: status Restarting (retryCount+1), then the PodGroup is deleted
(`killPods` in `pkg/controllers/job/job_controller_actions.go`). The phase change comes back as
one more request, handled in Restarting by SyncJob (`pkg/controllers/job/state/restarting.go`).
On an earlier retry that sync recreates the PodGroup (`createOrUpdatePodGroup` in
`initOnJobUpdate`). On the retry that exhausts maxRetry, Volcano's source would also reach
`createOrUpdatePodGroup` before `restartingUpdateStatus` moves the job to Failed, but in a cluster
the PodGroup lister still holds the PodGroup just deleted, so nothing is recreated: a real cluster
showed the PodGroup deleted and the job Failed, with no new PodGroup. vcbus's cache reflects its
own deletion at once, so it decides the recreation only after the maxRetry check
(docs/fidelity.md): no PodGroup exists for a moment for a failed job, and no scheduler can act
on one.
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


def test_the_exhausting_failure_deletes_the_podgroup_and_fails_without_recreating_it():
    h = running_job(job(max_retry=1, policies=[policy("RestartJob", "PodFailed")]))
    outs = h.set_pod("j-t-0", phase="Failed", exit_code=1)
    assert trail(outs) == [
        "Running->Restarting",  # KillJob writes Restarting, retryCount 1 ...
        "DeletePodGroup",  # ... and deletes the PodGroup
        "Restarting->Failed",  # Restarting's SyncJob: retryCount 1 >= maxRetry 1, no PodGroup first
    ]
    assert h.phase == "Failed" and h.status.retry_count == 1 and h.entry.pg is None
    assert outs.of(o.CreatePodGroup) == [] and len(outs.of(o.DeletePodGroup)) == 1


def test_with_max_retry_two_only_the_last_failure_leaves_no_podgroup():
    h = running_job(job(max_retry=2, policies=[policy("RestartJob", "PodFailed")]))
    first = h.set_pod("j-t-0", phase="Failed", exit_code=1)
    assert trail(first) == ["Running->Restarting", "DeletePodGroup", "CreatePodGroup"]
    h.delete_pod("j-t-0")
    h.delete_pod("j-t-1")
    h.pg("Inqueue", new=True)
    h.add_pods("t", 2, version=h.status.version)
    h.set_pod("j-t-0", phase="Running")
    h.set_pod("j-t-1", phase="Running")
    assert h.phase == "Running" and h.status.retry_count == 1
    last = h.set_pod("j-t-0", phase="Failed", exit_code=1)
    assert trail(last) == ["Running->Restarting", "DeletePodGroup", "Restarting->Failed"]
    assert h.phase == "Failed" and h.status.retry_count == 2 and h.entry.pg is None
