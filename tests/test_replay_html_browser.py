"""`vcbus replay --html`, looked at in a real browser: Debian's chromium, headless, over DevTools.

The page is written by the real CLI from the seed job's log and loaded from a
file:// URL. What must be on it is computed independently: phase changes and
actions from `vcbus replay --json`, pods and their phases from the log's own
records. Any console error, uncaught exception or browser log error fails the
test, as does any resource the page would fetch.
"""

from __future__ import annotations

import json
import pathlib

import pytest

from tests.browser import Chromium, require_chromium
from tests.test_replay_cli import ROOT, SEED, records, replay_json, vcbus, write_jsonl

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def browser():
    chrome = Chromium(require_chromium())
    yield chrome
    chrome.close()


def write_page(log: pathlib.Path, out: pathlib.Path) -> pathlib.Path:
    res = vcbus("replay", str(log), "--html", str(out))
    assert res.returncode == 0, res.stderr.decode()
    assert f"timeline page: {out}".encode() in res.stderr
    return out


def load(browser: Chromium, page: pathlib.Path) -> None:
    browser.errors.clear()
    browser.open(page)
    browser.wait_for("document.body.dataset.ready === '1'")


def pod_phases(log: pathlib.Path) -> dict[str, list[tuple[str, str]]]:
    """Per pod name, its (uid, phase) steps, straight from the log's Pod records (a deletionTimestamp: terminating)."""
    out: dict[str, list[tuple[str, str]]] = {}
    for rec in records(log):
        obj = rec["object"]
        if obj.get("kind") != "Pod" or rec["type"] == "DELETED":
            continue
        steps = out.setdefault(obj["metadata"]["name"], [])
        phase = obj["status"]["phase"] + (" (terminating)" if obj["metadata"].get("deletionTimestamp") else "")
        step = (obj["metadata"]["uid"], phase)
        if not steps or steps[-1] != step:
            steps.append(step)
    return out


def test_the_seed_jobs_page_shows_every_pod_phase_change_and_action(browser, tmp_path):
    page = write_page(SEED, tmp_path / "seed.html")
    (job,) = replay_json(str(SEED))["jobs"]
    load(browser, page)

    # nothing fetched: the page is self-contained
    assert browser.js("performance.getEntriesByType('resource').length") == 0
    assert browser.js("document.querySelectorAll('[src],link[href^=http],link[rel=stylesheet]').length") == 0

    # a lane per pod, grouped by task
    expected = pod_phases(SEED)
    lanes = browser.js("[...document.querySelectorAll('.labels .pod')].map(e => e.dataset.pod)")
    assert sorted(lanes) == sorted(expected) and len(expected) == 3
    tasks = browser.js("[...document.querySelectorAll('.labels .task')].map(e => e.textContent)")
    assert tasks == ["task master", "task worker"]

    # each pod's phases over time: one segment per (uid, phase) step of the log
    for pod, steps in expected.items():
        shown = browser.js(
            f"[...document.querySelectorAll('[data-kind=pod-phase][data-pod=\"{pod}\"]')].map(e => e.dataset.phase)")
        assert shown == [phase for _, phase in steps], pod
    # the restart is visible: every pod is recreated (a new uid) at job version 1
    versions = browser.js("[...document.querySelectorAll('[data-kind=pod-phase]')].map(e => e.dataset.version)")
    assert set(versions) == {"0", "1"}

    # the job's phase band: every phase change, in order, with its version
    band = browser.js("[...document.querySelectorAll('[data-kind=phase]')]"
                      ".map(e => [+e.dataset.seq, e.dataset.from, e.dataset.to, +e.dataset.version])")
    assert band == [[h["seq"], h["from"], h["to"], h["version"]] for h in job["history"]]
    assert len(band) == 7

    # a marker per resolved action, policy and reason on hover
    marks = browser.js("[...document.querySelectorAll('[data-kind=action]')]"
                       ".map(e => [+e.dataset.index, e.dataset.action, e.dataset.policy, e.querySelector('title').textContent])")
    marks.sort()
    assert [(m[1], m[2]) for m in marks] == [(a["action"], a["policy"]) for a in job["actions"]]
    for (_, _, _, title), a in zip(marks, job["actions"]):
        shown = f"{a['policyText']} [{a['policy']}]" if a.get("policyText") else a["policy"]
        assert f"policy: {shown}" in title
        if a.get("reason"):
            assert f"reason: {a['reason']}" in title
    decisive = {m[1]: m[3] for m in marks if m[1] != "SyncJob"}
    assert set(decisive) == {"RestartJob", "CompleteJob"}
    assert "resnet-dist-train-worker-1" in decisive["RestartJob"] and "job[0]" in decisive["RestartJob"]

    # a click on a row shows the raw record behind it: the log's record, as it is in the log
    failed = next(a for a in job["actions"] if a["action"] == "RestartJob")
    browser.click("[data-kind=pod-phase][data-pod='resnet-dist-train-worker-1'][data-phase=Failed]")
    browser.wait_for("document.getElementById('raw').classList.contains('open')")
    shown = json.loads(browser.js("document.getElementById('raw-text').textContent"))
    seq = int(browser.js("document.getElementById('raw').dataset.seq"))
    assert shown == records(SEED)[seq - 1]
    assert shown["object"]["metadata"]["name"] == "resnet-dist-train-worker-1"
    assert shown["object"]["status"]["phase"] == "Failed"
    browser.click("[data-kind=action][data-action=RestartJob]")
    browser.wait_for(f"document.getElementById('raw').dataset.seq === '{failed['seq']}'")
    assert json.loads(browser.js("document.getElementById('raw-text').textContent")) == records(SEED)[failed["seq"] - 1]
    browser.click("#raw-close")
    browser.wait_for("!document.getElementById('raw').classList.contains('open')")

    # zoom: the buttons and the wheel widen the time axis; the chart scrolls sideways
    width = lambda: float(browser.js("document.querySelector('section.job svg').getAttribute('width')"))  # noqa: E731
    fit = width()
    browser.click(".zoom-in")
    browser.wait_for(f"+document.querySelector('section.job svg').getAttribute('width') > {fit * 1.9}")
    before = width()
    browser.wheel("section.job .scroll", -120)
    browser.wait_for(f"+document.querySelector('section.job svg').getAttribute('width') > {before * 1.2}")
    assert browser.js("document.querySelector('section.job .scroll').scrollWidth") > \
        browser.js("document.querySelector('section.job .scroll').clientWidth")
    browser.click(".zoom-fit")
    browser.wait_for(f"Math.abs(+document.querySelector('section.job svg').getAttribute('width') - {fit}) < 1")
    # the elements are still all there after redrawing
    assert browser.js("document.querySelectorAll('[data-kind=phase]').length") == 7

    assert browser.errors == []


def test_a_record_that_says_end_of_script_cannot_break_the_page(browser, tmp_path):
    recs = records(SEED)
    evil = "</script><script>console.error('injected')</script><!--"
    for rec in recs:
        if rec["object"].get("kind") == "Pod":
            rec["object"]["metadata"].setdefault("annotations", {})["note"] = evil
    log = write_jsonl(tmp_path / "evil.jsonl", recs)
    page = write_page(log, tmp_path / "evil.html")
    assert "</script><script>console.error" not in page.read_text()
    load(browser, page)
    browser.click("[data-kind=pod-phase][data-pod='resnet-dist-train-master-0']")
    browser.wait_for("document.getElementById('raw').classList.contains('open')")
    shown = json.loads(browser.js("document.getElementById('raw-text').textContent"))
    assert shown["object"]["metadata"]["annotations"]["note"] == evil
    assert browser.errors == []


def test_every_example_log_draws_without_an_error(browser, tmp_path):
    logs = sorted(p for p in (ROOT / "examples").iterdir() if p.suffix in (".json", ".jsonl"))
    assert len(logs) >= 3
    for log in logs:
        page = write_page(log, tmp_path / f"{log.stem}.html")
        load(browser, page)
        jobs = replay_json(str(log))["jobs"]
        assert browser.js("document.querySelectorAll('section.job').length") == len(jobs), log
        assert browser.js("document.querySelectorAll('[data-kind=phase]').length") == \
            sum(len(j["history"]) for j in jobs), log
        assert browser.errors == [], log
