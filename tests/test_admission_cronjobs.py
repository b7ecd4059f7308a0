"""Volcano's CronJob webhook rules (statemachines/admission/cronjobs.py) and `vcbus validate` on a CronJob.

Cases from Volcano's `pkg/webhooks/admission/cronjobs/validate/admit_cronjob_test.go`
(TestValidateCronjobSpec, TestValidateCronJobName; names cited). Zones are resolved by the
adapter (vcbus/cronjobs/zonedata.py), as `vcbus validate` does.
"""

from __future__ import annotations

import pytest
import yaml

from statemachines.admission.cronjobs import validate_cronjob, validate_name, validate_spec
from vcbus.cli.main import main
from vcbus.cronjobs.zonedata import zones_for


def spec_message(schedule, zone=None):
    spec = {"schedule": schedule} if zone is None else {"schedule": schedule, "timeZone": zone}
    return validate_spec(spec, zones_for(zone))


@pytest.mark.parametrize(("name", "schedule", "zone", "message"), [
    ("validate valid-cronjob", "* * * * *", None, ""),
    ("validate non-standard scheduled", "@every 1m", None, ""),
    ("validate correct timeZone", "*/5 * * * *", "Pacific/Honolulu", ""),
    ("validate contain TZ schedule", "TZ=UTC 0 20 * * *", "Pacific/Honolulu",
     " schedule should not contain TZ or CRON_TZ, TZ should only be set in the timeZone field"),
    ("validate error schedule", "error schedule", "Pacific/Honolulu", "schedule is not a valid cron expression"),
    ("validate empty schedule", "", "Pacific/Honolulu", " schedule is required, but got empty"),
    ("validate unknown _ timezone", "*/5 * * * *", "America/-NewYork", " unknown timeZone"),
    ("validate unknown space timezone", "*/5 * * * *", "New York", " unknown timeZone"),
    ("validate unknown ! timezone", "*/5 * * * *", "UTC!", " unknown timeZone"),
    ("validate Local timezone", "*/5 * * * *", "Local",
     " timeZone can't be Local, and must be defined in https://www.iana.org/time-zones"),
    ("validate empty timezone", "", "", " timeZone must be nil or non-empty string, got empty string"),
    ("validate error timezone", "", "Amerrica/New_York", " invalid timeZone"),
])
def test_validate_cronjob_spec(name, schedule, zone, message):
    got = spec_message(schedule, zone)
    assert (message in got) if message else got == ""


def test_validate_cronjob_spec_unknown_dot_timezone():
    assert " unknown timeZone" in spec_message("*/5 * * * *", "Asia/./Shanghai")


@pytest.mark.parametrize(("name", "value", "message"), [
    ("valid name", "my-cronjob", ""),
    ("exactly max length", "a" * 52, ""),
    ("too long name", "a" * 65, "must be no more than 52 characters"),
    ("invalid chars", "-UPPERCASE", "invalid cronJob name"),
])
def test_validate_cronjob_name(name, value, message):
    got = validate_name(value)
    assert (message in got) if message else got == ""


def test_spec_and_name_messages_are_joined_with_a_semicolon():
    cj = {"metadata": {"name": "a" * 60}, "spec": {"schedule": ""}}
    assert validate_cronjob(cj, {}) == ("schedule is required, but got empty; cronJob name must be no more than "
                                        "52 characters to accommodate job name suffix (max 63 total)")


def cronjob(schedule, zone=None):
    spec = {"schedule": schedule, "jobTemplate": {"spec": {"tasks": []}}}
    if zone is not None:
        spec["timeZone"] = zone
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "CronJob", "metadata": {"name": "nightly"},
            "spec": spec}


def test_vcbus_validate_checks_a_cronjob_with_volcanos_webhook(tmp_path, capsys):
    good, bad = tmp_path / "good.yaml", tmp_path / "bad.yaml"
    good.write_text(yaml.safe_dump(cronjob("@every 5s", "Europe/Rome")))
    bad.write_text(yaml.safe_dump(cronjob("TZ=UTC 0 * * * *")))
    assert main(["validate", str(good)]) == 0
    assert ": ok" in capsys.readouterr().out
    assert main(["validate", str(bad)]) == 1
    out = capsys.readouterr().out
    assert 'admission webhook "validatecronjob.volcano.sh" denied the request: schedule should not contain TZ' in out
