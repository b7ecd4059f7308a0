"""`vcbus replay` of a log with Volcano's CronJobs and JobFlows: the report's `cronjobs` and `jobflows`
(each one's moves, its runs or the vcjobs it made, its last status), in the JSON contract (the schema),
the text report, and the HTML page (in headless chromium, tests/browser.py)."""

from __future__ import annotations

import json

import pytest

from tests.test_engine_cronjobs import NAME, cronjob_bytes, vcjob_bytes
from tests.test_jobflow_controller import failing_middle
from tests.test_replay_cli import SEED, vcbus
from tests.test_replay_why import _validate
from tools.replay_schema import SCHEMA_PATH


def write(tmp_path, name, records) -> str:
    path = tmp_path / name
    path.write_bytes(b"\n".join(records) + b"\n")
    return str(path)


def report_of(path: str) -> dict:
    res = vcbus("replay", "--json", path)
    assert res.returncode == 0, res.stderr.decode()
    report = json.loads(res.stdout)
    assert _validate(report, json.loads(SCHEMA_PATH.read_text()), json.loads(SCHEMA_PATH.read_text())) == []
    return report


def test_a_jobflows_phases_and_vcjobs_are_in_the_json_report(tmp_path):
    (flow,) = report_of(write(tmp_path, "flow.jsonl", failing_middle()))["jobflows"]
    assert (flow["namespace"], flow["name"]) == ("default", "flow")
    assert [(s["from"], s["to"]) for s in flow["states"]] == [("New", "Pending"), ("Pending", "Running"),
                                                               ("Running", "Failed")]
    assert flow["states"][-1]["cause"] == "vcjob flow-b Failed"
    assert [(j["name"], j["template"], j["op"]) for j in flow["jobs"]] == [("flow-a", "a", "create"),
                                                                          ("flow-b", "b", "create")]
    assert (flow["status"]["completedJobs"], flow["status"]["failedJobs"]) == (["flow-a"], ["flow-b"])


def test_a_cronjobs_runs_are_in_the_json_report(tmp_path):
    run = f"{NAME}-29453760"
    log = write(tmp_path, "cron.jsonl", [cronjob_bytes(successfulJobsHistoryLimit=0), vcjob_bytes(run, seconds=6),
                                         vcjob_bytes(run, seconds=9, rv="11", phase="Completed", rtype="MODIFIED")])
    (cron,) = report_of(log)["cronjobs"]
    assert [(r["run"], r["to"]) for r in cron["runs"]][:4] == [(run, "Created"), (run, "Active"), (run, "Succeeded"),
                                                               (run, "Pruned")]
    assert cron["runs"][-1]["cause"].startswith("history limit 0")
    assert cron["status"]["lastSuccessfulTime"]


def test_a_log_without_them_has_no_such_keys():
    report = json.loads(vcbus("replay", "--json", str(SEED)).stdout)
    assert "cronjobs" not in report and "jobflows" not in report


def test_the_text_report_shows_the_jobflow_after_its_jobs(tmp_path):
    res = vcbus("replay", write(tmp_path, "flow.jsonl", failing_middle()))
    out = res.stdout.decode()
    assert res.returncode == 0, res.stderr.decode()
    section = out[out.index("JobFlow default/flow"):]
    assert out.index("default/flow-b\n") < out.index("JobFlow default/flow")
    lines = [line.split() for line in section.splitlines()]
    assert ["4", "2026-01-01T00:00:00Z", "create", "vcjob", "flow-a", "from", "JobTemplate", "a"] in lines
    assert ["11", "2026-01-01T00:00:50Z", "Running", "->", "Failed:", "vcjob", "flow-b", "Failed", "Failed"] in lines
    assert ["failedJobs", "flow-b"] in lines


@pytest.mark.browser
def test_the_html_page_shows_the_jobflows_rows_and_links_its_vcjobs(tmp_path):
    from tests.browser import Chromium, require_chromium

    log = write(tmp_path, "flow.jsonl", failing_middle())
    page = tmp_path / "flow.html"
    res = vcbus("replay", log, "--html", str(page))
    assert res.returncode == 0, res.stderr.decode()
    browser = Chromium(require_chromium())
    try:
        browser.open(page)
        browser.wait_for("document.body.dataset.ready === '1'")
        assert browser.js("document.querySelector('section.owner h2').textContent") == "JobFlow default/flow \u2014 Failed"
        links = browser.js("[...document.querySelectorAll('section.owner a')].map(a => [a.textContent,"
                           " a.getAttribute('href'), a.className])")
        assert links == [["flow-a", "#job-default/flow-a", "completed"], ["flow-b", "#job-default/flow-b", "failed"]]
        for _, href, _ in links:  # each a job's section of the page
            assert browser.js(f"document.getElementById({json.dumps(href[1:])}) !== null")
        rows = browser.js("[...document.querySelectorAll('section.owner tr')].map(tr => tr.cells[2].textContent)")
        assert rows[-1] == "Running -> Failed: vcjob flow-b Failed" and len(rows) == 5
        assert browser.errors == []
    finally:
        browser.close()
