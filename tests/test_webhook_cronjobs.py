"""`vcbus webhook` at `/cronjobs/validate`: Volcano's CronJob webhook (validatecronjob.volcano.sh) over HTTPS,
with the time zones the CronJob names read by the server (the same rules as `vcbus validate`)."""

from __future__ import annotations

import copy

from tests.test_webhook import answer, review, server, tls  # noqa: F401 - the module's fixtures

CRONJOBS = ("batch.volcano.sh", "v1alpha1", "cronjobs")
CRONJOB = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "CronJob", "metadata": {"name": "nightly", "namespace": "ns"},
           "spec": {"schedule": "*/5 * * * *", "jobTemplate": {"spec": {"tasks": [{"name": "t", "replicas": 1}]}}}}


def cronjob(**spec):
    obj = copy.deepcopy(CRONJOB)
    obj["spec"].update(spec)
    return obj


def test_a_valid_cronjob_with_a_time_zone_is_admitted(server, tls):
    for operation in ("CREATE", "UPDATE"):
        got = answer(server, tls, "/cronjobs/validate", review(cronjob(timeZone="Asia/Tokyo"), operation=operation,
                                                               resource=CRONJOBS))
        assert got == {"uid": "u-1", "allowed": True}


def test_a_zone_the_server_cannot_load_is_denied_as_volcano_words_it(server, tls):
    got = answer(server, tls, "/cronjobs/validate", review(cronjob(timeZone="Mars/Olympus"), resource=CRONJOBS))
    assert got["allowed"] is False and got["status"]["message"] == "invalid timeZone"


def test_schedule_and_name_messages_are_joined(server, tls):
    obj = cronjob(schedule="TZ=UTC */5 * * * *")
    obj["metadata"]["name"] = "n" * 53
    got = answer(server, tls, "/cronjobs/validate", review(obj, resource=CRONJOBS, operation="UPDATE"))
    assert got["status"]["message"] == (
        "schedule should not contain TZ or CRON_TZ, TZ should only be set in the timeZone field; "
        "cronJob name must be no more than 52 characters to accommodate job name suffix (max 63 total)")


def test_other_operations_resources_and_types_are_refused(server, tls):
    got = answer(server, tls, "/cronjobs/validate", review(cronjob(), resource=CRONJOBS, operation="DELETE"))
    assert got["status"]["message"] == "expect operation to be 'CREATE' or 'UPDATE'"
    got = answer(server, tls, "/cronjobs/validate", review(cronjob()))  # a vcjob's resource
    assert got["status"]["message"] == "expect resource to be batch.volcano.sh/v1alpha1, Resource=cronjobs"
    got = answer(server, tls, "/cronjobs/validate", review(cronjob(suspend="yes"), resource=CRONJOBS))
    assert got["allowed"] is False and "spec.suspend" in got["status"]["message"]
