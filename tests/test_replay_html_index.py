"""The timeline page of a log with several jobs (issue 29): an index, a filter, the divergences drawn, a
legend whose colours differ. Looked at in headless chromium (tests/browser.py), the page written by the real
CLI; what must be on it comes from `vcbus replay --json` of the same log.

The log is the seed job three times over, in namespaces default, team-a and team-b (records interleaved, so
time and resourceVersions only go forward); in default the recorded controller wrote Failed where vcbus
decides Completing, so that job, and only it, diverges.
"""

from __future__ import annotations

import copy
import json
import pathlib

import pytest

from tests.browser import Chromium, require_chromium
from tests.test_replay_cli import SEED, records, replay_json, vcbus, write_jsonl

pytestmark = pytest.mark.browser
NAMESPACES = ("default", "team-a", "team-b")
UID = "00000002-3dde-4002-803e-000000033232"


@pytest.fixture(scope="module")
def browser():
    chrome = Chromium(require_chromium())
    yield chrome
    chrome.close()


def three_jobs(tmp_path: pathlib.Path) -> pathlib.Path:
    seed = records(SEED)
    diverged = False
    out = []
    for rec in seed:
        for k, ns in enumerate(NAMESPACES):
            meta = rec["object"]["metadata"]
            if "namespace" not in meta and k:  # the cluster-scoped Queue: once
                continue
            text = json.dumps(rec).replace(UID, UID[:-1] + str(k))
            r = json.loads(text)
            if "namespace" in meta:
                r["object"]["metadata"]["namespace"] = ns
            r["object"]["metadata"]["resourceVersion"] = str(int(meta["resourceVersion"]) * 10 + k)
            st = r["object"].get("status") or {}
            if ns == "default" and not diverged and r["object"]["kind"] == "Job" and \
                    st.get("state", {}).get("phase") == "Completing":
                st["state"]["phase"] = "Failed"  # the recording controller's word differs from vcbus's
                diverged = True
            out.append(copy.deepcopy(r))
    assert diverged
    return write_jsonl(tmp_path / "three-jobs.jsonl", out)


def visible(browser: Chromium, selector: str) -> list[str]:
    return browser.js(f"[...document.querySelectorAll({json.dumps(selector)})]"
                      ".filter(e => e.offsetParent !== null).map(e => e.dataset.job)")


def test_index_filter_divergences_and_legend(browser, tmp_path):
    log = three_jobs(tmp_path)
    report = {f"{j['namespace']}/{j['name']}": j for j in replay_json(str(log))["jobs"]}
    assert sorted(report) == [f"{ns}/resnet-dist-train" for ns in NAMESPACES]
    diverged = report["default/resnet-dist-train"]["divergences"]
    assert diverged and all(not report[k]["divergences"] for k in report if not k.startswith("default/"))
    page = tmp_path / "three.html"
    res = vcbus("replay", str(log), "--html", str(page))
    assert res.returncode == 0, res.stderr.decode()
    browser.errors.clear()
    browser.open(page)
    browser.wait_for("document.body.dataset.ready === '1'")

    # the index: a row per job with its phase and divergences, linking to the job's section
    rows = browser.js("[...document.querySelectorAll('#index-rows tr')].map(tr => [tr.dataset.job,"
                      " ...[...tr.cells].map(c => c.textContent)])")
    assert [r[0] for r in rows] == list(report)
    for key, _, phase, retries, _, divergences in rows:
        status = report[key]["status"]
        assert (phase, int(retries), int(divergences)) == (status["state"]["phase"], status["retryCount"],
                                                           len(report[key]["divergences"]))
    links = browser.js("[...document.querySelectorAll('#index-rows a')].map(a => a.getAttribute('href'))")
    for href in links:
        assert browser.js(f"document.getElementById({json.dumps(href[1:])}).dataset.job") == href[len("#job-"):]

    # the divergences, drawn on their job's lane: each one of the report, in order, and nowhere else
    marks = browser.js("[...document.querySelectorAll('[data-kind=divergence]')].map(e =>"
                       " [e.closest('section').dataset.job, +e.dataset.seq, e.dataset.field, e.dataset.recorded,"
                       " e.dataset.decided])")
    assert marks == [["default/resnet-dist-train", d["seq"], d["field"], d["recorded"], d["decided"]]
                     for d in diverged]
    browser.click("[data-kind=divergence][data-field=phase]")
    first = next(d for d in diverged if d["field"] == "phase")
    browser.wait_for(f"document.getElementById('raw').dataset.seq === '{first['seq']}'")
    assert json.loads(browser.js("document.getElementById('raw-text').textContent")) == records(log)[first["seq"] - 1]
    browser.click("#raw-close")

    # the filter: words of the job's name or phase; and only the jobs that diverge
    browser.type_text("#filter", "team-a")
    browser.wait_for("document.getElementById('shown').textContent === '1 of 3 job(s) shown'")
    assert visible(browser, "section.job") == visible(browser, "#index-rows tr") == ["team-a/resnet-dist-train"]
    assert float(browser.js("document.querySelector('section.job:not(.hidden) svg').getAttribute('width')")) > 400
    browser.type_text("#filter", "")
    browser.wait_for("document.getElementById('shown').textContent === '3 of 3 job(s) shown'")
    browser.click("#only-diverged")
    browser.wait_for("document.getElementById('shown').textContent === '1 of 3 job(s) shown'")
    assert visible(browser, "section.job") == ["default/resnet-dist-train"]
    browser.click("#only-diverged")
    browser.wait_for("document.getElementById('shown').textContent === '3 of 3 job(s) shown'")

    # the legend: a colour per entry, no two alike, and every colour drawn for a phase is in it under that name
    for key in report:
        legend = browser.js(f"[...document.querySelector('section[data-job=\"{key}\"] .legend').children]"
                            ".map(s => [s.textContent, s.style.getPropertyValue('--c')])")
        colours = [c for _, c in legend]
        assert len(set(colours)) == len(colours), (key, legend)
        named = dict(legend)
        drawn = browser.js(f"[...document.querySelectorAll('section[data-job=\"{key}\"] rect.seg')]"
                           ".map(r => [r.dataset.to || r.dataset.phase.split(' ')[0], r.getAttribute('fill')])")
        assert drawn and all(named.get(phase) == fill for phase, fill in drawn), (key, drawn, legend)
        assert ("divergence (recorded \u2260 vcbus)" in named) == bool(report[key]["divergences"])
    assert browser.errors == []


def test_one_job_needs_no_index(browser, tmp_path):
    page = tmp_path / "seed.html"
    assert vcbus("replay", str(SEED), "--html", str(page)).returncode == 0
    browser.errors.clear()
    browser.open(page)
    browser.wait_for("document.body.dataset.ready === '1'")
    assert browser.js("document.getElementById('index').offsetParent") is None
    assert browser.js("document.querySelectorAll('[data-kind=divergence]').length") == 0
    assert browser.errors == []
