"""A vcjob, a CronJob, a JobFlow and a JobTemplate of one name: each kind's outputs under a key of its
own (`<ns>/<name>` for the vcjob, `<ns>/cronjob:<name>`, `<ns>/jobflow:<name>`,
`<ns>/jobtemplate:<name>`: statemachines.hosted.owner_key), so the projector keeps their histories
apart and `vcbus replay` reports the vcjob without the CronJob's timers and commands."""

from __future__ import annotations

import json

from statemachines import outputs as o
from statemachines.engine import Engine
from statemachines.hosted import owner_key, split_owner_key
from statemachines.model.records import decode
from tests.test_engine_cronjobs import cronjob_bytes, vcjob_bytes
from tests.test_jobflow_controller import jobflow, template
from tests.test_replay_owners import report_of, write

NAME = "tick"  # the CronJob's name in tests.test_engine_cronjobs


def same_named() -> list[bytes]:
    return [
        vcjob_bytes(NAME, seconds=0, uid="plain", owned=False),  # a vcjob of nobody, named as the others
        template(NAME, seconds=0),
        jobflow([{"name": NAME}], name=NAME, seconds=1),
        cronjob_bytes(seconds=1),
        vcjob_bytes(NAME, seconds=12, uid="plain", rv="11", phase="Running", rtype="MODIFIED", owned=False),
    ]


def test_each_kind_has_its_own_key():
    engine = Engine()
    out = []
    for seq, data in enumerate(same_named(), 1):
        out.extend(engine.apply(seq, decode(data)))
    by_key: dict[str, set[type]] = {}
    for x in out:
        by_key.setdefault(x.job, set()).add(type(x))
    cron, flow, tmpl = (owner_key(k, "default", NAME) for k in ("cronjob", "jobflow", "jobtemplate"))
    assert {o.CreateCronJobRun, o.TimerScheduled} <= by_key[cron]
    assert o.CreateJobFlowJob in by_key[flow] and o.UpdateJobTemplateStatus not in by_key[flow]
    assert all(not issubclass(t, (o.CreateCronJobRun, o.CreateJobFlowJob, o.TimerScheduled, o.RecordEvent))
               for t in by_key["default/tick"])
    assert split_owner_key(cron) == ("cronjob", "default", NAME) and split_owner_key("default/tick") is None
    assert split_owner_key("_/default") is None and split_owner_key("default/pod:x") is None


def test_the_replayed_vcjob_has_none_of_the_cronjobs_timers_or_commands(tmp_path):
    report = report_of(write(tmp_path, "same.jsonl", same_named()))
    (job,) = [j for j in report["jobs"] if j["name"] == NAME]
    text = json.dumps(job)
    assert "SyncCronJob" not in text and "cronjob" not in text.lower() and "jobflow" not in text.lower(), text
    (cron,) = report["cronjobs"]
    (flow,) = report["jobflows"]
    assert (cron["namespace"], cron["name"]) == (flow["namespace"], flow["name"]) == ("default", NAME)
    assert [r["to"] for r in cron["runs"]] == ["Created"]
    assert [j["name"] for j in flow["jobs"]] == [f"{NAME}-{NAME}"]
