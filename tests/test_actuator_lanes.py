"""The actuator's order (vcbus.k8s.lanes): what may run at once, what waits, which status writes are superseded."""

from __future__ import annotations

from statemachines import outputs as o
from statemachines.model.status import JobStatus
from vcbus.k8s.lanes import DONE, READY, RUNNING, SUPERSEDED, WAITING, Item, Lanes, replaces

T = "2026-11-30T08:00:00Z"


def create(name: str, job: str = "ns/j") -> Item:
    return Item(o.CreatePod(job=job, seq=1, time=T, name=name, task="w", index=0), f"c:{name}", 0)


def kill(name: str, job: str = "ns/j") -> Item:
    return Item(o.DeletePod(job=job, seq=1, time=T, name=name, uid=f"u-{name}"), f"d:{name}", 0)


def bind(name: str, job: str = "ns/j") -> Item:
    return Item(o.BindPod(job=job, seq=1, time=T, name=name, uid=f"u-{name}", node="n1"), f"b:{name}", 0)


def podgroup_update(job: str = "ns/j") -> Item:
    return Item(o.UpdatePodGroup(job=job, seq=1, time=T, name="pg", min_member=2), "pgu", 0)


def status(version: int, job: str = "ns/j", seq: int = 1) -> Item:
    return Item(o.UpdateJobStatus(job=job, seq=seq, time=T, status=JobStatus(version=version)), f"s:{version}", 0)


def event(reason: str) -> Item:
    return Item(o.RecordEvent(job="ns/j", seq=1, time=T, reason=reason, message="m"), f"e:{reason}", 0)


def queue_status(**fields) -> Item:
    return Item(o.UpdateQueueStatus(job="_/q", seq=1, time=T, queue="q", **fields), f"q:{sorted(fields)}", 0)


def admit_all(lanes: Lanes, *items: Item) -> list[Item]:
    ready: list[Item] = []
    for item in items:
        now, _ = lanes.admit(item)
        ready += now
    return ready


def run(lanes: Lanes, item: Item) -> list[Item]:
    assert lanes.start(item)
    return lanes.finish(item)


def test_a_jobs_pods_go_side_by_side_and_its_status_write_after_them_all():
    lanes = Lanes()
    pods = [create(f"p{i}") for i in range(3)]
    write = status(1)
    ready = admit_all(lanes, *pods, write)
    assert ready == pods and write.state == WAITING  # the three creates at once; the status waits
    assert run(lanes, pods[0]) == [] and run(lanes, pods[2]) == []
    assert write.state == WAITING  # p1 is not done yet
    assert run(lanes, pods[1]) == [write]


def test_a_kill_goes_before_the_re_create_of_that_pod_and_nothing_passes_a_job_wide_command():
    lanes = Lanes()
    old, again, other = kill("p0"), create("p0"), create("p1")
    update = podgroup_update()
    after = create("p2")
    ready = admit_all(lanes, old, again, other, update, after)
    assert ready == [old, other]  # the re-create of p0 waits for its kill; p1 goes now
    assert run(lanes, old) == [again]
    run(lanes, other)
    assert update.state == WAITING and after.state == WAITING
    assert run(lanes, again) == [update]
    assert after.state == WAITING  # nothing after a job-wide command starts before it is over
    assert run(lanes, update) == [after]


def test_a_status_write_waits_for_what_it_reports_and_nothing_waits_for_it():
    lanes = Lanes()
    created = [create(f"p{i}") for i in range(2)]
    write = status(1)
    later = [bind("p0"), bind("p1"), create("p2")]
    ready = admit_all(lanes, *created, write, *later)
    # the binds of p0 and p1 wait for their creates only; p2's create goes at once, past the write
    assert ready == [*created, later[2]] and write.state == WAITING
    assert run(lanes, created[0]) == [later[0]]
    assert write.state == WAITING  # p1's create is not over
    assert run(lanes, created[1]) == [write, later[1]]
    assert lanes.start(write) and write.state == RUNNING
    second = status(2)
    assert admit_all(lanes, second) == []  # the next write of that status waits for the one under way
    after = bind("p2")
    assert admit_all(lanes, after) == []  # behind its own pod's create, not behind the writes
    assert run(lanes, later[2]) == [after]
    for item in (later[0], later[1], after):
        run(lanes, item)
    assert lanes.finish(write) == [second]


def test_lanes_of_different_jobs_never_wait_for_each_other():
    lanes = Lanes()
    a, b = podgroup_update(job="ns/a"), podgroup_update(job="ns/b")
    pod_a, pod_b = create("p", job="ns/a"), create("p", job="ns/b")
    assert admit_all(lanes, a, pod_a, b, pod_b) == [a, b]
    assert run(lanes, b) == [pod_b]
    assert pod_a.state == WAITING


def test_a_waiting_status_write_is_superseded_by_a_later_one_of_the_same_job():
    lanes = Lanes()
    pod = create("p0")
    first, second, third = status(1), status(2), status(3)
    admit_all(lanes, pod, first)
    _, gone = lanes.admit(second)
    assert gone == [first] and first.state == SUPERSEDED
    _, gone = lanes.admit(third)
    assert gone == [second]
    assert run(lanes, pod) == [third]
    assert lanes.superseded == 2


def test_a_status_write_being_applied_is_never_superseded_and_the_next_waits_for_it():
    lanes = Lanes()
    first = status(1)
    assert admit_all(lanes, first) == [first]
    assert lanes.start(first) and first.state == RUNNING
    second = status(2)
    ready, gone = lanes.admit(second)
    assert (ready, gone) == ([], [])
    assert lanes.finish(first) == [second]


def test_a_ready_write_superseded_before_it_started_is_skipped():
    lanes = Lanes()
    first = status(1)
    assert admit_all(lanes, first) == [first] and first.state == READY
    ready, gone = lanes.admit(status(2))
    assert gone == [first] and not lanes.start(first)
    assert [i.state for i in ready] == [READY]


def test_a_waiting_status_write_never_holds_up_the_pods_behind_it():
    lanes = Lanes()
    running = create("p0")
    admit_all(lanes, running)
    lanes.start(running)
    first, behind, last = status(1), create("p1"), status(2)
    assert admit_all(lanes, first, behind) == [behind]
    ready, gone = lanes.admit(last)
    assert gone == [first] and ready == []
    assert lanes.finish(running) == []  # p1 is still before it
    assert run(lanes, behind) == [last]


def test_events_wait_for_nothing():
    lanes = Lanes()
    write = status(1)
    admit_all(lanes, write)
    lanes.start(write)
    e = event("Restarting")
    assert admit_all(lanes, e) == [e]
    assert lanes.finish(e) == [] and e.state == DONE
    assert len(lanes) == 1


def test_a_queue_status_write_supersedes_only_one_whose_fields_it_covers():
    alloc = queue_status(allocated={"cpu": "1"})
    counts = queue_status(counts={"running": 1})
    both = queue_status(allocated={"cpu": "2"}, counts={"running": 2, "pending": 0})
    assert not replaces(counts.cmd, alloc.cmd) and not replaces(alloc.cmd, counts.cmd)
    assert replaces(both.cmd, alloc.cmd) and replaces(both.cmd, counts.cmd)
    assert not replaces(counts.cmd, both.cmd)
    assert not replaces(status(2).cmd, create("p").cmd)
    assert not replaces(status(2, job="ns/a").cmd, status(1, job="ns/b").cmd)


def condition(name: str, message: str = "pod group is not ready", uid: str = "") -> Item:
    return Item(o.UpdatePodCondition(job="ns/j", seq=1, time=T, name=name, uid=uid or f"u-{name}", reason="Unschedulable",
                                     message=message), f"pc:{name}:{message}", 0)


def test_a_waiting_pod_condition_is_dropped_by_the_pods_later_bind_condition_eviction_or_delete():
    lanes = Lanes()
    busy = [create(f"x{i}") for i in range(2)]
    update = podgroup_update()
    written = [condition(f"p{i}") for i in range(4)]
    admit_all(lanes, *busy, update, *written)  # all four wait behind the PodGroup update
    assert all(c.state == WAITING for c in written)
    _, gone = lanes.admit(bind("p0"))
    assert gone == [written[0]] and written[0].state == SUPERSEDED  # the bind makes it scheduled
    _, gone = lanes.admit(condition("p1", "3/4 tasks in gang unschedulable"))
    assert gone == [written[1]]  # a later condition replaces it whole
    _, gone = lanes.admit(Item(o.EvictPod(job="ns/j", seq=1, time=T, name="p2", uid="u-p2", reason="preempt"), "ev", 0))
    assert gone == [written[2]]
    _, gone = lanes.admit(kill("p3"))
    assert gone == [written[3]]
    assert lanes.superseded == 4


def test_a_pod_condition_under_way_or_of_another_incarnation_is_never_dropped():
    lanes = Lanes()
    started = condition("p0")
    assert admit_all(lanes, started) == [started]
    assert lanes.start(started)
    after = bind("p0")
    ready, gone = lanes.admit(after)
    assert (ready, gone) == ([], [])  # the bind waits for the write under way
    assert lanes.finish(started) == [after]
    lanes = Lanes()
    busy = podgroup_update()
    old = condition("p1", uid="old-uid")
    admit_all(lanes, busy, old)
    _, gone = lanes.admit(bind("p1"))  # another pod of the same name
    assert gone == [] and old.state == WAITING


def test_a_pod_command_of_another_incarnation_leaves_the_condition_to_its_own_bind():
    lanes = Lanes()
    busy = podgroup_update()
    old = condition("p1", uid="old-uid")
    admit_all(lanes, busy, old)
    lanes.admit(bind("p1"))  # uid u-p1: another pod of the same name
    mine = Item(o.BindPod(job="ns/j", seq=1, time=T, name="p1", uid="old-uid", node="n1"), "b:old", 0)
    _, gone = lanes.admit(mine)
    assert gone == [old] and old.state == SUPERSEDED
