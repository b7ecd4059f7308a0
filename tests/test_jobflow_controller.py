"""The JobFlow machine (through `transitions` and the compiled graph) and the jobflow and jobtemplate
controllers inside the engine.

Cases after Volcano's unit tests (cited by name): `pkg/controllers/jobflow/state/running_test.go`
TestRunningStateExecute, `jobflow_controller_action_test.go` (TestSyncJobFlowFunc,
TestGetRunningHistoriesFunc, TestGetAllJobsCreatedByJobFlow, TestLoadJobTemplateAndSetJobFunc,
TestDeployJobFunc, TestDeleteAllJobsCreateByJobFlowFunc), `jobflow_controller_handler_test.go`
(TestUpdateJobFlowFunc, TestUpdateJobFunc) and `pkg/controllers/jobtemplate/` (syncJobTemplate),
played as logs of JobFlow, JobTemplate and vcjob records through `Engine.apply`.
"""

from __future__ import annotations

import itertools
import pathlib

import msgspec
import pytest

from statemachines import outputs as o
from statemachines.engine import Engine
from statemachines.jobflows import machine as m
from statemachines.model.jobflow import FlowRecord
from statemachines.model.records import RecordError, decode

NS = "default"
FLOW_UID = "jf-uid"
T0 = "2026-01-01T00:00:00Z"


def at(seconds: int) -> str:
    return f"2026-01-01T00:{seconds // 60:02d}:{seconds % 60:02d}Z"


def jobflow(flows, *, rtype="ADDED", rv="1", seconds=0, retain="retain", status=None, name="flow", uid=FLOW_UID) -> bytes:
    obj = {"apiVersion": "flow.volcano.sh/v1alpha1", "kind": "JobFlow",
           "metadata": {"name": name, "namespace": NS, "uid": uid, "resourceVersion": rv, "creationTimestamp": T0},
           "spec": {"flows": flows, "jobRetainPolicy": retain}, "status": status or {}}
    return msgspec.json.encode({"type": rtype, "object": obj, "time": at(seconds)})


def template(name, *, seconds=0, uid=None, rtype="ADDED") -> bytes:
    obj = {"apiVersion": "flow.volcano.sh/v1alpha1", "kind": "JobTemplate",
           "metadata": {"name": name, "namespace": NS, "uid": uid or f"jt-{name}", "resourceVersion": "1",
                        "creationTimestamp": T0},
           "spec": {"minAvailable": 1, "queue": "default", "tasks": [{"name": name, "replicas": 1}]}}
    return msgspec.json.encode({"type": rtype, "object": obj, "time": at(seconds)})


def vcjob(flow_name, *, seconds, rv, phase="", rtype="MODIFIED", jobflow_name="flow", retries=0, duration=None,
          owner_kind="JobFlow") -> bytes:
    name = f"{jobflow_name}-{flow_name}"
    marks = {"volcano.sh/createdByJobTemplate": f"{NS}.{flow_name}", "volcano.sh/createdByJobFlow": f"{NS}.{jobflow_name}"}
    status = {"state": {"phase": phase, "lastTransitionTime": at(seconds)}, "retryCount": retries}
    if duration:
        status["runningDuration"] = duration
    obj = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
           "metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}", "resourceVersion": rv,
                        "creationTimestamp": at(seconds if rtype == "ADDED" else 0), "labels": marks,
                        "annotations": marks,
                        "ownerReferences": [{"apiVersion": "flow.volcano.sh/v1alpha1", "kind": owner_kind,
                                             "name": jobflow_name, "uid": FLOW_UID, "controller": True,
                                             "blockOwnerDeletion": True}]},
           "spec": {"minAvailable": 1, "queue": "default", "tasks": [{"name": flow_name, "replicas": 1}]},
           "status": status if phase else {}}
    return msgspec.json.encode({"type": rtype, "object": obj, "time": at(seconds)})


def status_record(out, *, rv, seconds) -> bytes:
    """The JobFlow's record after vcbus's last status write in `out` (what the API server would send)."""
    (write,) = of(out, o.UpdateJobFlowStatus)[-1:]
    flows = FLOWS_ABC
    return jobflow(flows, rtype="MODIFIED", rv=rv, seconds=seconds, status=msgspec.to_builtins(write.status))


def play(records, engine=None):
    engine = engine or Engine()
    out = []
    for seq, data in enumerate(records, 1):
        out.extend(engine.apply(seq, decode(data)))
    return engine, out


def of(out, cls):
    return [x for x in out if isinstance(x, cls)]


def flows_own(out):
    """The jobflow controller's outputs (the job controller decides the vcjobs of the same records too)."""
    return [x for x in out if x.job == f"{NS}/flow"]


def chain(*names):
    flows, before = [], None
    for n in names:
        flows.append({"name": n, **({"dependsOn": {"targets": [before]}} if before else {})})
        before = n
    return flows


FLOWS_ABC = chain("a", "b", "c")


# ------------------------------------------------------------------ the machine


COUNTS = [m.Counts(*bits) for bits in itertools.product((0, 1), (0, 1, 2), (0, 1), (0, 1), (0, 2))]


@pytest.mark.parametrize(("state", "trigger", "counts"), list(itertools.product(m.STATES, m.TRIGGERS, COUNTS)))
def test_jobflow_machine_compiled_graph_agrees_with_transitions(state, trigger, counts):
    try:
        want = m.fire_with_transitions(state, trigger, counts)
    except m.NoSync:
        with pytest.raises(m.NoSync):
            m.fire(state, trigger, counts)
        assert trigger == m.SYNC and state in (m.FAILED, m.TERMINATING, m.DELETED)
        return
    assert m.fire(state, trigger, counts) == want


@pytest.mark.parametrize(("name", "state", "counts", "want"), [
    # TestRunningStateExecute
    ("all jobs completed settles to Succeed", m.RUNNING, m.Counts(completed=1, flows=1), m.SUCCEED),
    ("a failed job settles to Failed", m.RUNNING, m.Counts(failed=1, flows=1), m.FAILED),
    ("a terminated job settles to Failed", m.RUNNING, m.Counts(terminated=1, flows=1), m.FAILED),
    ("not every job is done yet so it stays Running", m.RUNNING, m.Counts(completed=1, flows=2), m.RUNNING),
    ("no flows at all: nothing to wait for", m.RUNNING, m.Counts(flows=0), m.SUCCEED),
    # pending.go: running or completed, and no failed, comes first; a terminated job beside a running one is Running
    ("a running job starts the flow", m.PENDING, m.Counts(running=1, flows=3), m.RUNNING),
    ("a first sync with a completed job", m.NEW, m.Counts(completed=1, flows=1), m.RUNNING),
    ("a running and a failed job", m.PENDING, m.Counts(running=1, failed=1, flows=3), m.FAILED),
    ("a running and a terminated job", m.PENDING, m.Counts(running=1, terminated=1, flows=3), m.RUNNING),
    ("nothing started", m.NEW, m.Counts(flows=3), m.PENDING),
    ("succeed stays", m.SUCCEED, m.Counts(failed=1, flows=1), m.SUCCEED),
])
def test_the_status_functions_of_volcanos_states(name, state, counts, want):
    assert m.fire(state, m.SYNC, counts) == want, name


# ------------------------------------------------------------------ syncJobFlow


@pytest.mark.parametrize(("phase", "lists", "flow_phase"), [
    # TestSyncJobFlowFunc: one flow, its vcjob Running / Failed / Terminated
    ("Running", {"runningJobs": ["flow-a"]}, "Running"),
    ("Failed", {"failedJobs": ["flow-a"]}, "Failed"),
    ("Terminated", {"terminatedJobs": ["flow-a"]}, "Failed"),
])
def test_sync_writes_the_lists_conditions_histories_and_phase(phase, lists, flow_phase):
    _, out = play([template("a"), jobflow([{"name": "a"}]), vcjob("a", seconds=5, rv="10", rtype="ADDED"),
                   vcjob("a", seconds=9, rv="11", phase=phase)])
    status = msgspec.to_builtins(of(out, o.UpdateJobFlowStatus)[-1].status)
    assert status == {
        **lists,
        "jobStatusList": [{"name": "flow-a", "state": phase, "startTimestamp": at(0),
                           "runningHistories": [{"startTimestamp": at(9), "state": phase}]}],
        "conditions": {"flow-a": {"phase": phase, "createTime": at(0)}},
        "state": {"phase": flow_phase},
    }


def test_a_new_flow_creates_its_first_job_as_volcano_makes_it_and_writes_pending():
    # TestLoadJobTemplateAndSetJobFunc, TestDeployJobFunc
    _, out = play([template("a"), template("b"), template("c"), jobflow(FLOWS_ABC)])
    (create,) = of(out, o.CreateJobFlowJob)
    marks = {"volcano.sh/createdByJobTemplate": "default.a", "volcano.sh/createdByJobFlow": "default.flow"}
    assert (create.name, create.jobflow, create.jobflow_uid, create.template) == ("flow-a", "flow", FLOW_UID, "a")
    assert create.labels == marks and create.annotations == marks
    assert create.spec == {"minAvailable": 1, "queue": "default", "tasks": [{"name": "a", "replicas": 1}]}
    assert [(e.reason, e.message, e.kind) for e in of(out, o.RecordEvent)] == [
        ("Created", "create a job named flow-a!", "JobFlow")]
    # the status lists none of its vcjobs yet (the cache has none), and the phase is Pending
    assert msgspec.to_builtins(of(out, o.UpdateJobFlowStatus)[-1].status) == {"state": {"phase": "Pending"}}
    assert [(c.from_state, c.to_state) for c in of(out, o.JobFlowStateChanged)] == [(m.NEW, m.PENDING)]


def test_running_histories_keep_the_phase_and_open_one_on_a_change():
    # TestGetRunningHistoriesFunc: the same phase leaves the history as it was
    records = [template("a"), jobflow([{"name": "a"}]), vcjob("a", seconds=5, rv="10", rtype="ADDED"),
               vcjob("a", seconds=6, rv="11", phase="Pending")]
    _, out = play(records)
    first = of(out, o.UpdateJobFlowStatus)[-1]
    fed = jobflow([{"name": "a"}], rtype="MODIFIED", rv="2", seconds=7, status=msgspec.to_builtins(first.status))
    engine, out = play([*records, fed, vcjob("a", seconds=8, rv="12", phase="Pending"),
                        vcjob("a", seconds=20, rv="13", phase="Running", retries=1, duration="12.5s")])
    last = of(out, o.UpdateJobFlowStatus)[-1].status
    (entry,) = last.job_status_list
    assert [(h.start_timestamp, h.end_timestamp, h.state) for h in entry.running_histories] == [
        (at(6), at(20), "Pending"), (at(20), None, "Running")]
    assert (entry.restart_count, entry.end_timestamp) == (1, at(12))  # creation + runningDuration
    assert last.conditions["flow-a"].running_duration == "12.5s"


def test_the_status_is_written_in_volcanos_field_names():
    # jobflow_types.go's json tags: a condition's createTime, runningDuration, taskStatusCount
    _, out = play([template("a"), jobflow([{"name": "a"}]), vcjob("a", seconds=5, rv="10", rtype="ADDED"),
                   vcjob("a", seconds=9, rv="11", phase="Running", duration="4s")])
    wire = msgspec.json.decode(o.encoder.encode(of(out, o.UpdateJobFlowStatus)[-1]))
    assert wire["status"]["conditions"]["flow-a"] == {"phase": "Running", "createTime": at(0), "runningDuration": "4s"}


def test_only_the_flows_own_vcjobs_are_listed():
    # TestGetAllJobsCreatedByJobFlow: the label createdByJobFlow picks them, not the name
    _, out = play([template("a"), jobflow([{"name": "a"}]), vcjob("a", seconds=5, rv="10", rtype="ADDED"),
                   vcjob("a", seconds=6, rv="20", rtype="ADDED", jobflow_name="other"),
                   vcjob("a", seconds=9, rv="11", phase="Running")])
    assert of(out, o.UpdateJobFlowStatus)[-1].status.running_jobs == ["flow-a"]


def test_dependencies_release_each_job_once_its_targets_are_completed():
    engine, out = play([template("a"), template("b"), template("c"), jobflow(FLOWS_ABC),
                        vcjob("a", seconds=5, rv="10", rtype="ADDED"),
                        vcjob("a", seconds=6, rv="11", phase="Running")])
    assert [c.name for c in of(out, o.CreateJobFlowJob)] == ["flow-a"]
    _, more = play([vcjob("a", seconds=30, rv="12", phase="Completed")], engine)
    assert [c.name for c in of(more, o.CreateJobFlowJob)] == ["flow-b"]  # c waits for b
    assert of(more, o.UpdateJobFlowStatus)[-1].status.completed_jobs == ["flow-a"]


# Volcano's handleJobFlowErr: AddRateLimited (client-go's 5 ms doubled per failure) while NumRequeues < 15
# (--max-requeue-num), then a Warning event and Forget. The log's seconds round each delay up to a whole one.
RETRY_TIMES = [1, 2, 3, 4, 5, 6, 7, 8, 10, 13, 19, 30, 51, 92, 174]


def test_a_missing_template_is_retried_with_backoff_and_its_record_does_not_sync():
    engine, out = play([jobflow([{"name": "a"}])])
    assert of(out, o.CreateJobFlowJob) == [] and of(out, o.UpdateJobFlowStatus) == []
    (failed,) = of(out, o.JobFlowSyncFailed)
    assert 'jobtemplates.flow.volcano.sh "a" not found' in failed.message
    (timer,) = of(out, o.TimerScheduled)
    assert (timer.job, timer.action, timer.policy, timer.due) == (f"{NS}/jobflow:flow", "SyncJobFlow", "backoff", at(1))
    # the template at 2.5 s (the record's time in whole seconds: 3): the retries at 1, 2 and 3 s fail first
    _, out = play([template("a", seconds=3)], engine)
    assert len(of(out, o.JobFlowSyncFailed)) == 3 and of(out, o.CreateJobFlowJob) == []
    out = engine.finish(at(4))  # the next retry, 40 ms after the one at 3 s: rounded up to 4 s
    (create,) = of(out, o.CreateJobFlowJob)
    assert (create.name, create.time) == ("flow-a", at(4))
    assert [x.action for x in of(out, o.TimerFired)] == ["SyncJobFlow"]


def test_a_sync_that_keeps_failing_is_dropped_after_15_requeues_with_volcanos_event():
    engine, out = play([jobflow([{"name": "a"}])])
    out += engine.finish(at(1000))
    assert [x.time for x in of(out, o.JobFlowSyncFailed)] == [at(0)] + [at(t) for t in RETRY_TIMES]
    assert [x.due for x in of(out, o.TimerScheduled)] == [at(t) for t in RETRY_TIMES]
    (event,) = of(out, o.RecordEvent)
    assert (event.time, event.event_type, event.reason, event.kind) == (at(174), "Warning", "SyncJobFlow", "JobFlow")
    assert event.message == ('SyncJobFlow JobFlow failed for sync jobflow flow failed for jobtemplates.flow.volcano.sh '
                             '"a" not found, event is OutOfSync, action is SyncJobFlow')
    assert engine.pending_timers() == []  # dropped: only a vcjob's update or a JobFlow's would sync it again


def test_a_failed_flow_does_nothing_more():
    engine, out = play([template("a"), template("b"), jobflow(chain("a", "b")),
                        vcjob("a", seconds=5, rv="10", rtype="ADDED"),
                        vcjob("a", seconds=9, rv="11", phase="Failed")])
    assert of(out, o.JobFlowStateChanged)[-1].to_state == m.FAILED
    _, more = play([vcjob("a", seconds=20, rv="12", phase="Completed")], engine)
    assert flows_own(more) == []  # failedState: Execute does nothing, the status stays


def test_retain_policy_delete_deletes_the_jobs_once_the_succeed_status_is_seen():
    # TestDeleteAllJobsCreateByJobFlowFunc; TestUpdateJobFlowFunc: the update of a Succeed flow syncs it
    flows = [{"name": "a"}]
    engine, out = play([template("a"), jobflow(flows, retain="delete"), vcjob("a", seconds=5, rv="10", rtype="ADDED"),
                        vcjob("a", seconds=6, rv="11", phase="Running"),
                        vcjob("a", seconds=9, rv="12", phase="Completed")])
    assert [c.to_state for c in of(out, o.JobFlowStateChanged)] == [m.PENDING, m.RUNNING, m.SUCCEED]
    assert of(out, o.DeleteJobFlowJob) == []
    succeed = of(out, o.UpdateJobFlowStatus)[-1].status
    _, more = play([jobflow(flows, rtype="MODIFIED", rv="5", seconds=10, retain="delete",
                            status=msgspec.to_builtins(succeed))], engine)
    assert [(d.name, d.uid) for d in of(more, o.DeleteJobFlowJob)] == [("flow-a", "uid-flow-a")]
    assert of(more, o.UpdateJobFlowStatus) == []


def test_the_handlers_sync_only_on_what_volcano_watches():
    # TestUpdateJobFunc: a vcjob update of the same resourceVersion, or one not controlled by a JobFlow, syncs nothing;
    # TestUpdateJobFlowFunc: a JobFlow update that is not a Succeed flow to delete syncs nothing
    engine, _ = play([template("a"), template("b"), jobflow(chain("a", "b")), vcjob("a", seconds=5, rv="10", rtype="ADDED")])
    _, out = play([vcjob("a", seconds=6, rv="10", phase="Completed")], engine)
    assert flows_own(out) == []
    _, out = play([vcjob("a", seconds=7, rv="11", phase="Completed", owner_kind="CronJob")], engine)
    assert flows_own(out) == []
    _, out = play([jobflow(chain("a", "b"), rtype="MODIFIED", rv="9", seconds=8)], engine)
    assert flows_own(out) == []


def test_an_unknown_phase_is_refused_with_volcanos_words():
    engine, out = play([template("a"), jobflow([{"name": "a"}], status={"state": {"phase": "Sideways"}})])
    assert [f.message for f in of(out, o.JobFlowSyncFailed)] == ["jobflow flow state {Sideways} is invalid"]
    assert of(out, o.RecordEvent) == []  # requeued first (handleJobFlowErr)
    out = engine.finish(at(1000))
    assert len(of(out, o.JobFlowSyncFailed)) == 15
    assert [(e.reason, e.message, e.time) for e in of(out, o.RecordEvent)] == [
        ("SyncJobFlow", "SyncJobFlow JobFlow failed for jobflow flow state {Sideways} is invalid", at(174))]


def test_jobtemplate_status_lists_the_jobs_made_from_it():
    engine, out = play([template("a"), jobflow([{"name": "a"}])])
    assert of(out, o.UpdateJobTemplateStatus) == []  # no vcjob yet: Volcano writes nothing
    _, out = play([vcjob("a", seconds=5, rv="10", rtype="ADDED")], engine)
    (write,) = of(out, o.UpdateJobTemplateStatus)
    assert (write.job, write.status.job_depends_on_list) == (f"{NS}/jobtemplate:a", ["flow-a"])


def test_a_deleted_flow_ends_deleted():
    engine, _ = play([template("a"), jobflow([{"name": "a"}])])
    _, out = play([jobflow([{"name": "a"}], rtype="DELETED", rv="3", seconds=4)], engine)
    assert [(c.from_state, c.to_state) for c in of(out, o.JobFlowStateChanged)] == [(m.PENDING, m.DELETED)]


def test_records_decode_and_bad_ones_are_named():
    assert isinstance(decode(jobflow(FLOWS_ABC)), FlowRecord)
    assert isinstance(decode(template("a")), FlowRecord)
    bad = msgspec.json.encode({"type": "ADDED", "object": {"apiVersion": "flow.volcano.sh/v1alpha1", "kind": "JobFlow",
                                                           "metadata": {"name": "x", "namespace": NS},
                                                           "spec": {"flows": [{"name": 3}]}}})
    with pytest.raises(RecordError, match=r"JobFlow \$\.spec\.flows\[0\]\.name"):
        decode(bad)
    no_ns = msgspec.json.encode({"type": "ADDED", "object": {"apiVersion": "flow.volcano.sh/v1alpha1",
                                                             "kind": "JobTemplate", "metadata": {"name": "x"}}})
    with pytest.raises(RecordError, match="JobTemplate 'x' without metadata.namespace"):
        decode(no_ns)


def test_outputs_are_in_the_bus_contract():
    _, out = play([template("a"), jobflow([{"name": "a"}]), vcjob("a", seconds=5, rv="10", rtype="ADDED")])
    assert {o.CreateJobFlowJob, o.UpdateJobFlowStatus, o.UpdateJobTemplateStatus, o.JobFlowStateChanged} <= {
        type(x) for x in out}
    for x in out:
        assert o.output_decoder.decode(o.encoder.encode(x)) == x


def test_without_the_jobflow_controller_the_records_are_ignored():
    engine, out = play([template("a"), jobflow([{"name": "a"}])], Engine(jobflows=False))
    assert out == [] and engine.ignored == 2


# ------------------------------------------------------------------ a flow with a failing middle job


def failing_middle() -> list[bytes]:
    """a -> b -> c: a completes, b fails, c is never created; the flow is Failed."""
    return [
        template("a"), template("b"), template("c"), jobflow(FLOWS_ABC),
        vcjob("a", seconds=5, rv="10", rtype="ADDED"),
        vcjob("a", seconds=6, rv="11", phase="Pending"),
        vcjob("a", seconds=8, rv="12", phase="Running"),
        vcjob("a", seconds=30, rv="13", phase="Completed", duration="22s"),
        vcjob("b", seconds=31, rv="14", rtype="ADDED"),
        vcjob("b", seconds=32, rv="15", phase="Running"),
        vcjob("b", seconds=50, rv="16", phase="Failed", retries=3),
    ]


def test_a_flow_with_a_failing_middle_job_replays_twice_byte_for_byte():
    records = failing_middle()
    _, out = play(records)
    assert [c.name for c in of(out, o.CreateJobFlowJob)] == ["flow-a", "flow-b"]
    assert [(c.from_state, c.to_state) for c in of(out, o.JobFlowStateChanged)] == [
        (m.NEW, m.PENDING), (m.PENDING, m.RUNNING), (m.RUNNING, m.FAILED)]
    final = of(out, o.UpdateJobFlowStatus)[-1].status
    assert (final.completed_jobs, final.failed_jobs, final.state.phase) == (["flow-a"], ["flow-b"], "Failed")
    assert o.encoder.encode(out) == o.encoder.encode(play(records)[1])


def test_jobflow_diagram_doc_is_current():
    from statemachines.jobflows.diagram import document

    checked_in = (pathlib.Path(__file__).parent.parent / "docs" / "statemachines" / "jobflow.md").read_text()
    assert checked_in == document(), "run: make docs"


def test_vcbus_replay_of_the_failing_middle_job_is_the_same_twice_byte_for_byte(tmp_path):
    from tests.test_replay_cli import vcbus

    log = tmp_path / "flow.jsonl"
    log.write_bytes(b"\n".join(failing_middle()) + b"\n")
    first, second = (vcbus("replay", "--json", str(log)) for _ in range(2))
    assert first.returncode == 0, first.stderr.decode()
    assert first.stdout == second.stdout and first.stderr == second.stderr
    report = msgspec.json.decode(first.stdout)
    assert [j["name"] for j in report["jobs"]] == ["flow-a", "flow-b"]  # c never made
