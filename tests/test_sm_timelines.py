"""Reference §12: the worked timelines, end to end on the simulated cluster.

`tools.simulate.SimCluster` plays API server, scheduler and kubelets: the
engine's commands are applied, every change (the engine's status writes
included) is a watch record fed back to the engine. Each step below is one
row of the reference's tables.
"""

from __future__ import annotations

from statemachines import outputs as o
from statemachines.model.timefmt import go_duration, parse
from tests.builders import Outs, scenario
from tools.simulate import SimCluster

NS = "default"


def timeline_job(policies=None, max_retry=3) -> dict:
    return {
        "metadata": {"name": "j"},
        "spec": {
            "maxRetry": max_retry,
            "policies": policies or [],
            "tasks": [{
                "name": "t",
                "replicas": 2,
                "minAvailable": 2,
                "template": {"spec": {"containers": [{"name": "main", "image": "busybox"}],
                                      "restartPolicy": "Never"}},
            }],
        },
    }


class Steps:
    """A SimCluster, with the outputs of each step."""

    def __init__(self) -> None:
        self.c = SimCluster()
        self.c.add_queue("default")
        self.c.settle()
        self.mark = len(self.c.outputs)

    def step(self, *actions) -> Outs:
        for act in actions:
            act()
            self.c.settle()
            self.c.tick(1)
        outs = Outs(self.c.outputs[self.mark:])
        self.mark = len(self.c.outputs)
        return outs

    def pod(self, name: str) -> dict:
        p = self.c.get("Pod", NS, name)
        assert p is not None, name
        return p

    def pods(self) -> list[dict]:
        return self.c.pods_of(NS, "j")

    @property
    def status(self):
        return self.c.engine.jobs["default/j"].status

    @property
    def job(self) -> dict:
        j = self.c.get("Job", NS, "j")
        assert j is not None
        return j


# ---------------------------------------------------------------- 12.1 happy path


def happy_path(s: Steps) -> list[Outs]:
    c = s.c
    return [
        s.step(lambda: c.create_job(timeline_job())),  # 1, 2
        s.step(lambda: c.schedule(NS, "j")),  # 3, 4
        s.step(*[lambda p=p: c.run(p) for p in s.pods()]),  # 5, 6
        s.step(lambda: c.succeed(s.pod("j-t-0"))),  # 7
        s.step(lambda: c.succeed(s.pod("j-t-1"))),  # 8, 9
    ]


@scenario
def happy_path_log() -> list[bytes]:
    s = Steps()
    happy_path(s)
    return s.c.lines


def test_12_1_happy_path():
    s = Steps()
    created, scheduled, running, first, second = happy_path(s)

    # 1. Job created -> OutOfSync -> SyncJob in the pending handler: Pending, PodGroup "" created, no pods.
    # 2. The job update of that write -> OutOfSync -> SyncJob: no change.
    assert created.events() == ["OutOfSync", "OutOfSync"]
    [init] = created.writes()
    assert (init.state.phase, init.min_available, [c.status for c in init.conditions]) == ("Pending", 2, ["Pending"])
    assert [p.name for p in created.of(o.CreatePodGroup)] == [f"j-{s.job['metadata']['uid']}"]
    assert not created.created()

    # 3. PodGroup "" -> Pending -> Inqueue: empty-event SyncJob each time; on Inqueue the pods are created.
    # 4. Pod adds: PodPending -> SyncJob, counts unchanged, no write.
    assert scheduled.events()[:2] == ["", ""]
    assert scheduled.created() == ["j-t-0", "j-t-1"]
    assert scheduled.events().count("PodPending") == 2
    [pending] = scheduled.writes()
    assert (pending.state.phase, pending.pending) == ("Pending", 2)
    assert [c.status for c in pending.conditions] == ["Pending"]  # the condition re-appended, not duplicated

    # 5. Pods Running: PodRunning (internal) -> SyncJob; running=2 >= minAvailable -> Running.
    # 6. The job update (phase changed) -> SyncJob in Running: nothing to do.
    assert running.events().count("PodRunning") == 2
    assert running.phases() == [("Pending", "Running")]
    assert running.writes()[-1].running == 2
    assert running.resolved()[-1].phase == "Running"

    # 7. First pod Succeeded: the task is not complete -> OutOfSync -> only counts written.
    assert [r.event for r in first.resolved() if r.pod == "j-t-0"][-1] == "OutOfSync"
    [counts] = first.writes()
    assert (counts.state.phase, counts.running, counts.succeeded) == ("Running", 1, 1)

    # 8. Second pod Succeeded: TaskCompleted -> no policy -> SyncJob -> Completed.
    done = [r for r in second.resolved() if r.pod == "j-t-1"][-1]
    assert (done.event, done.action) == ("TaskCompleted", "SyncJob")
    assert second.phases() == [("Running", "Completed")]
    completed = second.writes()[0]
    assert (completed.state.phase, completed.succeeded) == ("Completed", 2)

    # 9. The job update -> finished handler -> KillJob Soft: version 1, Succeeded pods kept and not
    #    counted, LTT unchanged, runningDuration = LTT - creation, PodGroup deleted.
    kill = second.writes()[1]
    assert (kill.state.phase, kill.version) == ("Completed", 1)
    assert (kill.succeeded, kill.running, kill.terminating, kill.task_status_count) == (0, 0, 0, None)
    assert kill.state.last_transition_time == completed.state.last_transition_time
    created_at = s.job["metadata"]["creationTimestamp"]
    ltt = kill.state.last_transition_time
    assert kill.running_duration == go_duration(parse(ltt) - parse(created_at))
    assert not second.of(o.DeletePod)
    assert second.of(o.DeletePodGroup)
    assert [p["status"]["phase"] for p in s.pods()] == ["Succeeded", "Succeeded"]
    assert s.job["status"]["state"]["phase"] == "Completed"


# ---------------------------------------------------------------- 12.2 restart on failure


def start_running(s: Steps, job: dict) -> None:
    c = s.c
    s.step(lambda: c.create_job(job))
    s.step(lambda: c.schedule(NS, "j"))
    s.step(*[lambda p=p: c.run(p) for p in s.pods()])
    assert s.status.state.phase == "Running"


def rerun(s: Steps) -> tuple[Outs, Outs]:
    """The scheduler takes the new PodGroup; the new pods run."""
    c = s.c
    scheduled = s.step(lambda: c.schedule(NS, "j"))
    ran = s.step(*[lambda p=p: c.run(p) for p in s.pods()])
    return scheduled, ran


def restart_timeline(s: Steps) -> list[Outs]:
    c = s.c
    start_running(s, timeline_job(policies=[{"event": "PodFailed", "action": "RestartJob"}]))
    steps = [s.step(lambda: c.fail(s.pod("j-t-1")))]  # 1, 2
    steps.extend(rerun(s))  # 3, 4
    steps.append(s.step(lambda: c.fail(s.pod("j-t-0"))))
    rerun(s)
    steps.append(s.step(lambda: c.fail(s.pod("j-t-1"), 137)))  # 5
    return steps


@scenario
def restart_timeline_log() -> list[bytes]:
    s = Steps()
    restart_timeline(s)
    return s.c.lines


def test_12_2_restart_on_failure_until_max_retry():
    s = Steps()
    failed, scheduled, ran, second, third = restart_timeline(s)
    uid = s.job["metadata"]["uid"]

    # 1. j-t-1 Running -> Failed (version 0): PodFailed matches -> RestartJob -> KillJob None.
    res = [r for r in failed.resolved() if r.event == "PodFailed"][0]
    assert (res.action, res.policy, res.phase) == ("RestartJob", "job[0]", "Running")
    assert "Start to execute action RestartJob " in failed.messages()
    kill = failed.writes()[0]
    assert (kill.state.phase, kill.retry_count, kill.version, kill.terminating) == ("Restarting", 1, 1, 2)
    assert failed.deleted() == ["j-t-0", "j-t-1"]
    assert all(d.mark_out_of_sync for d in failed.of(o.DeletePod))
    assert [p.name for p in failed.of(o.DeletePodGroup)] == [f"j-{uid}"]

    # 2. Pod deletions (out-of-sync) -> OutOfSync -> SyncJob in Restarting. The PodGroup is recreated
    #    with phase "": no pod work; 1 < 3 but R - terminating = 0 < 2 -> no change (stale counts).
    assert failed.of(o.CreatePodGroup)
    deletions = [r for r in failed.resolved() if r.pod and r.event == "OutOfSync"]
    assert deletions and all(r.phase == "Restarting" for r in deletions)
    assert failed.phases() == [("Running", "Restarting")]
    assert all(w.state.phase == "Restarting" for w in failed.writes())

    # 3. The new PodGroup is scheduled: new pods with job-version 1 and retry-count 1; terminating 0 -> Pending.
    assert scheduled.created() == ["j-t-0", "j-t-1"]
    assert [(p.job_version, p.retry_count) for p in scheduled.of(o.CreatePod)] == [(1, 1), (1, 1)]
    annotations = scheduled.of(o.CreatePod)[0].pod["metadata"]["annotations"]  # the manifest sent
    assert (annotations["volcano.sh/job-version"], annotations["volcano.sh/job-retry-count"]) == ("1", "1")
    assert scheduled.phases() == [("Restarting", "Pending")]

    # 4. The pods run -> Running.
    assert ran.phases() == [("Pending", "Running")]

    # 5. Two more failures: retryCount 2, then 3. The third KillJob keeps the Failed pod (retryCount 2 >=
    #    maxRetry - 1) and the next Restarting evaluation sets Failed.
    assert s.status.retry_count == 3
    assert second.writes()[0].retry_count == 2 and second.deleted() == ["j-t-0", "j-t-1"]
    assert third.deleted() == ["j-t-0"]
    assert third.phases() == [("Running", "Restarting"), ("Restarting", "Failed")]
    assert s.status.state.phase == "Failed"
    assert s.c.get("Pod", NS, "j-t-1")["status"]["phase"] == "Failed"  # kept for its logs
    assert s.job["status"]["state"]["phase"] == "Failed"
