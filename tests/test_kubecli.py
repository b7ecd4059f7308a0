"""The pure parts of the kubectl-like commands (vcbus/cli/kubecli.py, job_view.py): ages, names, Commands, tables."""

from __future__ import annotations

import datetime as dt

import pytest

from vcbus.cli.job_view import describe
from vcbus.cli.kubecli import age, command_object, human_duration, parse_name
from vcbus.errors import UserError


@pytest.mark.parametrize("seconds, text", [
    (-5, "<invalid>"), (-1, "0s"), (0, "0s"), (119, "119s"), (120, "2m"), (185, "3m5s"), (600, "10m"),
    (3 * 3600 - 1, "179m"), (3 * 3600, "3h"), (3 * 3600 + 60 * 7, "3h7m"), (8 * 3600, "8h"), (47 * 3600, "47h"),
    (48 * 3600, "2d"), (50 * 3600, "2d2h"), (8 * 86400, "8d"), (2 * 365 * 86400, "2y0d"), (9 * 365 * 86400, "9y"),
])
def test_human_duration_is_kubectls(seconds, text):
    # k8s.io/apimachinery/pkg/util/duration.HumanDuration (vcctl's util.HumanDuration is the same)
    assert human_duration(seconds) == text


def test_age_of_a_timestamp():
    now = dt.datetime(2026, 11, 30, 12, 0, 0, tzinfo=dt.UTC)
    assert age("2026-11-30T11:59:00Z", now) == "60s"
    assert age("2026-11-29T12:00:00Z", now) == "24h"
    assert age(None, now) == age("not a time", now) == "<unknown>"


def test_names_take_the_namespace_from_the_name_then_n_then_the_context():
    assert parse_name("team-a/train", None, "default", what="job") == ("team-a", "train")
    assert parse_name("train", "team-b", "default", what="job") == ("team-b", "train")
    assert parse_name("train", None, "ctx-ns", what="job") == ("ctx-ns", "train")
    assert parse_name("team-a/train", "team-a", "default", what="job") == ("team-a", "train")
    with pytest.raises(UserError, match="names namespace team-a but -n says team-b"):
        parse_name("team-a/train", "team-b", "default", what="job")
    for bad in ("a/b/c", "/x", "x/"):
        with pytest.raises(UserError, match="expected NAMESPACE/NAME or NAME"):
            parse_name(bad, None, "default", what="job")


def test_a_command_is_owned_by_its_target_as_vcctl_makes_it():
    job = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "train", "uid": "u1"}}
    cmd = command_object(job, "AbortJob", "team-a")
    ref = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "train", "uid": "u1",
           "controller": True, "blockOwnerDeletion": True}
    assert cmd == {"apiVersion": "bus.volcano.sh/v1alpha1", "kind": "Command",
                   "metadata": {"generateName": "train-abortjob-", "namespace": "team-a", "ownerReferences": [ref]},
                   "target": ref, "action": "AbortJob"}


def test_describe_lists_spec_status_and_events():
    job = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
           "metadata": {"name": "train", "namespace": "team-a", "uid": "u1", "labels": {"app": "x"}},
           "spec": {"minAvailable": 2, "queue": "q1", "policies": [{"event": "PodEvicted", "action": "RestartJob"}],
                    "tasks": [{"name": "worker", "replicas": 2, "template": {"spec": {"containers": [
                        {"name": "main", "image": "busybox", "command": ["sleep", "1"],
                         "resources": {"requests": {"cpu": "1"}}}], "restartPolicy": "Never"}}}]},
           "status": {"state": {"phase": "Running"}, "running": 2, "retryCount": 1}}
    text = describe(job, [])
    lines = text.splitlines()
    assert lines[0] == "Name:                 train" and lines[1] == "Namespace:            team-a"
    assert 'Labels:               {"app": "x"}' in lines
    assert "  Queue:                q1" in lines and "  Policy:               PodEvicted -> RestartJob" in lines
    assert "      Container:            main busybox" in lines and "        Resources:            requests cpu=1" in lines
    assert "  Phase:                Running" in lines and "  Retry Count:          1" in lines
    assert "  Pending:" not in text  # zero counts are left out, as vcctl does
    assert lines[-1] == "Events:               <none>"
    event = {"type": "Normal", "reason": "CommandIssued", "message": "Start to execute command AbortJob ",
             "source": {"component": "vc-controller-manager"}, "count": 1, "lastTimestamp": "2026-11-30T08:00:00Z"}
    with_event = describe(job, [event]).splitlines()
    assert with_event[-3].split() == ["Type", "Reason", "Age", "From", "Message"]
    assert with_event[-1].split()[:2] == ["Normal", "CommandIssued"]
    assert with_event[-1].endswith("vc-controller-manager  Start to execute command AbortJob")
