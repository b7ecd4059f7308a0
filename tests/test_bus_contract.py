"""The bus's addressing and message contract, without a server: subjects, ids, headers, schemas."""

from __future__ import annotations

import hashlib
import json
import pathlib

import msgspec
import pytest

from statemachines import outputs as o
from statemachines.model.records import Ignored, decode
from statemachines.model.status import JobState, JobStatus
from tools import schemas
from vcbus.bus import subjects as s
from vcbus.bus.cloudevents import from_message, headers
from vcbus.bus.logs import Since, belongs
from vcbus.bus.publisher import compact_body, prepare
from vcbus.bus.server import server_config
from vcbus.errors import UserError

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_schemas_in_docs_are_generated_from_the_current_types():
    assert schemas.stale() == [], "run: .venv/bin/python -m tools.schemas"


def test_every_event_and_command_has_a_schema_naming_its_cloudevents_type():
    index = json.loads((ROOT / "docs" / "schemas" / "index.json").read_text())
    assert {e["class"] for e in index} == {c.__name__ for c in (*o.DOMAIN_EVENTS, *o.COMMANDS)}
    phase = next(e for e in index if e["class"] == "PhaseChanged")
    assert phase["type"] == "sh.volcano.job.phase.changed.v1"
    assert phase["subject"] == "vcbus.job.<namespace>.<name>.phase.changed.v1"
    schema = json.loads((ROOT / "docs" / "schemas" / phase["schema"]).read_text())
    props = schema["$defs"]["PhaseChanged"]["properties"]
    assert props["type"] == {"enum": ["job.phase.changed.v1"]}
    assert {"from", "to", "retryCount"} <= set(props)


@pytest.mark.parametrize(
    "name, tok",
    [("resnet", "resnet"), ("a.b", "a%2Eb"), ("x*y>z", "x%2Ay%3Ez"), ("50%", "50%25"), ("sp ace", "sp%20ace")],
)
def test_a_name_is_always_one_subject_token(name, tok):
    assert s.token(name) == tok
    assert s.untoken(tok) == name


def test_subjects_follow_the_documented_layout():
    assert s.k8s_subject("Pod", "default", "train-0.worker") == "vcbus.k8s.pod.default.train-0%2Eworker"
    assert s.k8s_subject("Queue", "", "default") == "vcbus.k8s.queue._.default"
    assert s.timer_subject("ns/job") == "vcbus.k8s.timer.ns.job"
    assert s.event_subject("ns/job", "job.phase.changed.v1") == "vcbus.job.ns.job.phase.changed.v1"
    assert s.command_subject("ns/a.b") == "vcbus.cmd.ns.a%2Eb"
    assert s.job_of_subject("vcbus.job.ns.a%2Eb.phase.changed.v1") == "ns/a.b"
    assert s.kv_key("ns/a.b") == "ns.a.b" and s.job_of_key("ns.a.b") == "ns/a.b"


def test_event_filters_accept_tags_cloudevent_types_and_prefixes():
    assert s.event_filter() == ["vcbus.job.*.*.>"]
    assert s.event_filter(namespace="ns") == ["vcbus.job.ns.*.>"]
    assert s.event_filter(namespace="ns", name="j", types=("phase.changed",)) == ["vcbus.job.ns.j.phase.changed.>"]
    assert s.event_filter(types=("sh.volcano.job.phase.changed.v1", "job.timer.fired.v1", "timer")) == [
        "vcbus.job.*.*.phase.changed.v1",
        "vcbus.job.*.*.timer.fired.v1",
        "vcbus.job.*.*.timer.>",
    ]
    with pytest.raises(ValueError):
        s.event_filter(types=("phase.*",))


def test_cloudevents_headers_are_binary_mode_with_a_position_derived_id():
    out = o.PhaseChanged(job="ns/j", seq=42, time="2026-11-30T08:00:00Z", from_phase="Pending", to_phase="Running")
    h = headers(out, ce_id="42:3", source="/vcbus")
    assert h == {
        "Nats-Msg-Id": "42:3",
        "ce-specversion": "1.0",
        "ce-id": "42:3",
        "ce-source": "/vcbus",
        "ce-type": "sh.volcano.job.phase.changed.v1",
        "ce-subject": "ns/j",
        "ce-causationid": "42",
        "ce-datacontenttype": "application/json",
        "ce-dataschema": "urn:vcbus:schema:job.phase.changed.v1",
        "content-type": "application/json",
        "ce-time": "2026-11-30T08:00:00Z",
    }
    ev = from_message(o.encoder.encode(out), h, 7)
    assert ev.data == out and ev.stream_seq == 7 and ev.causation == 42
    structured = ev.structured()
    assert structured["data"]["from"] == "Pending" and structured["type"] == "sh.volcano.job.phase.changed.v1"
    assert structured["dataschema"] == "urn:vcbus:schema:job.phase.changed.v1"
    assert structured["datacontenttype"] == "application/json"


def test_commands_carry_their_causation_and_decode_typed():
    cmd = o.UpdateJobStatus(job="ns/j", seq=9, status=JobStatus(state=JobState(phase="Running")))
    ev = from_message(o.encoder.encode(cmd), headers(cmd, ce_id="9:0", source="/x"), 3)
    assert isinstance(ev.data, o.UpdateJobStatus) and ev.causation == 9 and ev.type == "sh.volcano.cmd.job.status.v1"


POD = {
    "type": "MODIFIED",
    "object": {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "j-worker-0",
            "namespace": "ns",
            "uid": "u-1",
            "resourceVersion": "77",
            "labels": {"volcano.sh/job-name": "j"},
            "managedFields": [{"manager": "kubelet", "fieldsV1": {"f:status": {}}}],
        },
        "status": {"phase": "Running"},
    },
}


def test_a_watch_record_is_published_compact_without_managed_fields_with_a_dedup_id():
    pretty = json.dumps(POD, indent=4).encode()
    msg = prepare(pretty, decode(pretty))
    assert msg is not None
    assert msg.subject == "vcbus.k8s.pod.ns.j-worker-0"
    assert msg.headers["Nats-Msg-Id"] == "u-1:77:MODIFIED"
    assert msg.headers["Vcbus-Job"] == "ns/j"
    assert (msg.headers["Vcbus-Kind"], msg.headers["Vcbus-Resource-Version"], msg.headers["Vcbus-Type"]) == (
        "Pod",
        "77",
        "MODIFIED",
    )
    body = json.loads(msg.body)
    assert b"\n" not in msg.body and "managedFields" not in body["object"]["metadata"]
    assert body["object"]["status"] == {"phase": "Running"}
    # the same record again (e.g. a re-list) has the same id: JetStream stores it once
    assert prepare(msg.body, decode(msg.body)).headers["Nats-Msg-Id"] == "u-1:77:MODIFIED"


def test_records_vcbus_does_not_read_are_not_published():
    for rec in (b'{"type":"ADDED","object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"n"}}}',
                b'{"type":"ADDED","object":{"apiVersion":"v2","kind":"Node","metadata":{"name":"n"}}}',
                b'{"type":"ADDED","object":{"apiVersion":"scheduling.k8s.io/v1","kind":"PriorityClass","metadata":{}}}'):
        assert prepare(rec, decode(rec)) is None


def test_bookmarks_and_watch_errors_are_stored_as_marks_of_the_log():
    """The bus holds what the file holds, record for record (tests/test_replay_bus_numbering.py)."""
    mark = b'{"type":"BOOKMARK","object":{"kind":"Pod","metadata":{"resourceVersion":"5"}}}'
    msg = prepare(mark, decode(mark))
    assert msg is not None and msg.subject == "vcbus.k8s.bookmark._.5" and msg.body == mark
    assert msg.headers == {"Nats-Msg-Id": "sha256:" + hashlib.sha256(mark).hexdigest(), "Vcbus-Kind": "Bookmark",
                           "Vcbus-Namespace": "", "Vcbus-Name": "5", "Vcbus-Resource-Version": "5",
                           "Vcbus-Type": "BOOKMARK"}
    first = b'{"type":"BOOKMARK","object":{"metadata":{"annotations":{"vcbus.volcano.sh/record-format":"2"}}}}'
    assert prepare(first, decode(first)).subject == "vcbus.k8s.bookmark._._"  # no resourceVersion
    gone = b'{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","code":410,"reason":"Expired"}}'
    msg = prepare(gone, decode(gone))
    assert msg is not None and msg.subject == "vcbus.k8s.error._._" and msg.headers["Vcbus-Type"] == "ERROR"
    assert belongs(msg.headers, "ns/j")  # of no job: part of every job's export, as queues and nodes


def test_managed_fields_keep_who_wrote_and_when():
    """A replay's clock reads the write times where a record has no time: the bus keeps them, the field sets go."""
    rec = {"type": "MODIFIED", "object": {"kind": "Pod", "metadata": {"name": "p", "managedFields": [
        {"manager": "kubelet", "operation": "Update", "time": "2026-11-30T08:01:00Z", "fieldsType": "FieldsV1",
         "fieldsV1": {"f:status": {}}}, {"manager": "x", "operation": "Apply", "fieldsV1": {}}]}}}
    body = json.loads(compact_body(json.dumps(rec, indent=2).encode()))
    assert body["object"]["metadata"]["managedFields"] == [
        {"manager": "kubelet", "operation": "Update", "time": "2026-11-30T08:01:00Z"}]
    del rec["object"]["metadata"]["managedFields"][0]  # no entry with a time: nothing kept
    assert "managedFields" not in json.loads(compact_body(json.dumps(rec, indent=2).encode()))["object"]["metadata"]


def test_nodes_and_priority_classes_are_published_cluster_scoped_for_the_scheduler():
    node = b'{"type":"MODIFIED","object":{"apiVersion":"v1","kind":"Node","metadata":{"name":"n-1.zone","uid":"u-9","resourceVersion":"12","managedFields":[{}]},"status":{"allocatable":{"cpu":"4"}}}}'
    pc = b'{"type":"ADDED","object":{"kind":"PriorityClass","metadata":{"name":"high"},"value":1000}}'
    assert isinstance(decode(node), Ignored) and isinstance(decode(pc), Ignored)  # the job controller skips them
    msg = prepare(node, decode(node))
    assert msg is not None and msg.subject == "vcbus.k8s.node._.n-1%2Ezone"
    assert msg.headers == {"Nats-Msg-Id": "u-9:12:MODIFIED", "Vcbus-Kind": "Node", "Vcbus-Namespace": "",
                           "Vcbus-Name": "n-1.zone", "Vcbus-Resource-Version": "12", "Vcbus-Type": "MODIFIED"}
    assert "managedFields" not in json.loads(msg.body)["object"]["metadata"]
    msg = prepare(pc, decode(pc))
    assert msg is not None and msg.subject == "vcbus.k8s.priorityclass._.high"
    assert msg.headers["Nats-Msg-Id"].startswith("sha256:") and "Vcbus-Job" not in msg.headers
    assert belongs(msg.headers, "ns/j")  # cluster-scoped: part of every job's export


def test_namespaces_the_volume_objects_and_the_selecting_objects_are_published_for_the_scheduler():
    def rec(kind: str, api: str, meta: str, rest: str = "") -> bytes:
        return (f'{{"type":"ADDED","object":{{"apiVersion":"{api}","kind":"{kind}","metadata":{{{meta},'
                f'"uid":"u","resourceVersion":"3"}}{rest}}}}}').encode()

    cases = [
        (rec("Namespace", "v1", '"name":"team-a","labels":{"team":"a"}'), "vcbus.k8s.namespace._.team-a", ""),
        (rec("PersistentVolume", "v1", '"name":"pv-1"'), "vcbus.k8s.persistentvolume._.pv-1", ""),
        (rec("StorageClass", "storage.k8s.io/v1", '"name":"fast"', ',"volumeBindingMode":"Immediate"'),
         "vcbus.k8s.storageclass._.fast", ""),
        (rec("PersistentVolumeClaim", "v1", '"name":"data","namespace":"ns"'),
         "vcbus.k8s.persistentvolumeclaim.ns.data", "ns"),
        (rec("Service", "v1", '"name":"web","namespace":"ns"', ',"spec":{"selector":{"app":"web"}}'),
         "vcbus.k8s.service.ns.web", "ns"),
        (rec("ReplicationController", "v1", '"name":"old","namespace":"ns"'),
         "vcbus.k8s.replicationcontroller.ns.old", "ns"),
    ]
    for data, subject, namespace in cases:
        assert isinstance(decode(data), Ignored)  # the job controller skips them
        msg = prepare(data, decode(data))
        assert msg is not None and msg.subject == subject
        assert msg.headers["Vcbus-Namespace"] == namespace and "Vcbus-Job" not in msg.headers
    wrong = rec("StorageClass", "storage.k8s.io/v2", '"name":"fast"')
    assert prepare(wrong, decode(wrong)) is None


def test_a_compact_record_is_kept_byte_for_byte():
    line = msgspec.json.encode({"type": "ADDED", "object": {"kind": "Queue", "metadata": {"name": "q"}}, "time": "x"})
    assert compact_body(line + b"\n") == line


def test_timer_records_go_to_the_timer_subject_with_the_timer_id():
    rec = b'{"type":"TIMER","time":"2026-11-30T08:05:00Z","timer":{"job":"ns/j","id":"7.1","due":"2026-11-30T08:05:00Z"}}'
    msg = prepare(rec, decode(rec))
    assert msg is not None and msg.subject == "vcbus.k8s.timer.ns.j"
    assert msg.headers["Nats-Msg-Id"] == "timer:7.1" and msg.headers["Vcbus-Job"] == "ns/j"


def test_a_job_export_keeps_its_own_records_and_cluster_scoped_ones():
    assert belongs({"Vcbus-Job": "ns/j", "Vcbus-Namespace": "ns"}, "ns/j")
    assert not belongs({"Vcbus-Job": "ns/k", "Vcbus-Namespace": "ns"}, "ns/j")
    assert belongs({"Vcbus-Kind": "Queue", "Vcbus-Namespace": ""}, "ns/j")


def test_since_accepts_a_sequence_a_time_or_a_duration_ago():
    assert Since("42").seq == 42 and Since("42").time is None
    assert Since("2026-11-30T08:00:00Z").time is not None
    assert Since("10m").time is not None
    with pytest.raises(UserError, match="expected a stream sequence"):
        Since("yesterday")


def test_the_embedded_server_fsyncs_every_write_by_default():
    conf = server_config(data_dir=pathlib.Path("/tmp/x"), port=0, sync_interval="always", max_payload=1 << 23)
    assert "sync_interval: always" in conf and "listen: 127.0.0.1:-1" in conf
    assert 'store_dir: "/tmp/x"' in conf
