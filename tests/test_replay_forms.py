"""Every form kubectl prints replays, or says what to do: real files built from the seed log.

The seed log (examples/resnet-dist-train.json) is a kubectl watch of every kind
with one etcd's resourceVersions. Each test writes it in another form kubectl
(or a user) produces and checks that `vcbus replay` gives the same report as the
seed (or, for forms that lose information, what that loss means), with the
warning the form calls for. The same forms from a real API server and a real
kubectl are in tests/test_record.py.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest
import yaml

from tests.test_replay_cli import SEED, records, replay_json, vcbus

KIND_ORDER = ("Job", "Pod", "PodGroup", "Queue")


@pytest.fixture(scope="module")
def seed_report() -> dict:
    return replay_json(str(SEED))


@pytest.fixture
def recs() -> list[dict]:
    return records(SEED)


def pretty(recs: list[dict]) -> str:
    """kubectl's -o json layout: each record indented by 4, one after the other."""
    return "".join(json.dumps(r, indent=4) + "\n" for r in recs)


def kubectl_yaml(recs: list[dict]) -> str:
    """kubectl's -o yaml watch layout: sorted keys (`object:` first, `type:` last), `---` between records."""
    return "---\n".join(yaml.safe_dump(r, sort_keys=True) for r in recs)


def per_kind(recs: list[dict]) -> dict[str, list[dict]]:
    """What one kubectl watch per kind prints: its records, the initial list by name (not resourceVersion)."""
    out: dict[str, list[dict]] = {}
    for r in recs:
        out.setdefault(r["object"]["kind"], []).append(r)
    for kind, rs in out.items():
        first_watch = next((i for i, r in enumerate(rs) if r["type"] != "ADDED"), len(rs))
        rs[:first_watch] = sorted(rs[:first_watch], key=lambda r: r["object"]["metadata"]["name"])
    return out


def run(*args: str, stdin: bytes | None = None) -> tuple[dict, str]:
    res = vcbus("replay", "--json", *args, stdin=stdin)
    assert res.returncode == 0, res.stderr.decode()
    return json.loads(res.stdout), res.stderr.decode()


def test_kubectl_yaml_watch_output_replays_like_json(tmp_path, recs, seed_report):
    log = tmp_path / "watch.yaml"
    log.write_text(kubectl_yaml(recs))
    report, err = run(str(log))
    assert report == seed_report
    assert "warning" not in err


@pytest.mark.parametrize("layout", ["pretty", "one-line"])
def test_a_json_array_of_watch_events_replays(tmp_path, recs, seed_report, layout):
    log = tmp_path / "watch.json"
    log.write_text(json.dumps(recs, indent=2 if layout == "pretty" else None))
    assert run(str(log))[0] == seed_report


@pytest.mark.parametrize("layout", ["pretty", "jsonl", "yaml"])
def test_crlf_line_endings_replay(tmp_path, recs, seed_report, layout):
    text = {"pretty": pretty(recs), "jsonl": "".join(json.dumps(r) + "\n" for r in recs),
            "yaml": kubectl_yaml(recs)}[layout]
    log = tmp_path / "watch.log"
    log.write_bytes(text.replace("\n", "\r\n").encode())
    assert run(str(log))[0] == seed_report


def test_per_kind_watches_concatenated_are_merged_with_a_warning(tmp_path, recs, seed_report):
    kinds = per_kind(recs)
    log = tmp_path / "all.log"
    log.write_text("".join(pretty(kinds[k]) for k in KIND_ORDER))
    report, err = run(str(log))
    assert report == seed_report
    assert "out of resourceVersion order" in err and "merged by resourceVersion" in err
    # standard input is spooled and merged the same way
    report, err = run("-", stdin=log.read_bytes())
    assert report == seed_report and "merged by resourceVersion" in err
    # the human output says it too, and a --until record number counts records in the merged order
    for until in ("20", "2026-11-30T08:05:00Z"):
        assert run(str(log), "--until", until)[0] == run(str(SEED), "--until", until)[0]


def test_a_concatenation_that_is_out_of_order_only_after_until_is_still_merged(tmp_path, recs):
    kinds = per_kind(recs)
    log = tmp_path / "all.log"
    log.write_text("".join(pretty(kinds[k]) for k in KIND_ORDER))
    n_jobs = len(kinds["Job"])  # the first kind boundary comes after every vcjob record
    report, err = run(str(log), "--until", str(n_jobs - 1))
    assert "merged by resourceVersion" in err
    assert report == run(str(SEED), "--until", str(n_jobs - 1))[0]


def test_several_files_are_merged_by_resource_version(tmp_path, recs, seed_report):
    kinds = per_kind(recs)
    files = []
    for kind in ("Pod", "Queue", "PodGroup", "Job"):  # any order
        f = tmp_path / f"{kind.lower()}s.log"
        f.write_text(pretty(kinds[kind]))
        files.append(str(f))
    report, err = run(*files)
    assert report == seed_report
    assert "merging 4 inputs" in err
    # the same records twice (overlapping recordings) are dropped once
    report, err = run(str(SEED), *files)
    assert report == seed_report
    assert f"dropped {len(recs)} duplicate record(s)" in err


def test_a_v1_list_json_and_yaml_are_read_as_snapshots(tmp_path, recs):
    last: dict[str, dict] = {}
    for r in recs[:30]:  # the cluster as `kubectl get vcjob,pods,podgroups,queues -o json` showed it then
        uid = r["object"]["metadata"]["uid"]
        if r["type"] == "DELETED":
            last.pop(uid, None)
        else:
            last[uid] = r["object"]
    listing = {"apiVersion": "v1", "kind": "List", "items": list(last.values()), "metadata": {"resourceVersion": ""}}
    for name, text in (("list.json", json.dumps(listing, indent=4)), ("list.yaml", yaml.safe_dump(listing))):
        log = tmp_path / name
        log.write_text(text)
        report, err = run(str(log))
        assert "read as snapshots" in err and "deletions cannot be seen" in err
        (job,) = report["jobs"]
        recorded = next(r["object"]["status"] for r in reversed(recs[:30]) if r["object"]["kind"] == "Job")
        assert job["adopted"]["phase"] == recorded["state"]["phase"] == "Restarting"
        assert job["adopted"]["retryCount"] == recorded["retryCount"] == 1
        assert report["input"]["events"] == len(last)


def test_a_raw_api_pod_list_without_item_kinds_is_read(tmp_path, recs):
    pods = [r["object"] for r in recs if r["object"]["kind"] == "Pod" and r["type"] == "ADDED"]
    for p in pods:
        p.pop("kind")
        p.pop("apiVersion")
    log = tmp_path / "pods.json"
    log.write_text(json.dumps({"apiVersion": "v1", "kind": "PodList", "items": pods}))
    report, err = run(str(log))
    assert report["input"]["events"] == len(pods) and report["input"]["invalid"] == 0
    assert "no vcjob records" in err  # and what is missing is named


def test_plain_objects_without_event_types_are_snapshots_added_then_modified(tmp_path, recs):
    """`kubectl get -w -o json` without --output-watch-events: no types, and deletions look like updates."""
    log = tmp_path / "plain.json"
    log.write_text("".join(json.dumps(r["object"], indent=4) + "\n" for r in recs if r["type"] != "DELETED"))
    report, err = run(str(log))
    assert "read as snapshots" in err
    (job,) = report["jobs"]
    assert "adopted" not in job  # the first vcjob record (no status) is ADDED, later ones MODIFIED
    decisive = [(a["event"], a["action"]) for a in job["actions"] if a["action"] != "SyncJob"]
    assert decisive == [("PodFailed", "RestartJob"), ("TaskCompleted", "CompleteJob")]


@pytest.mark.parametrize("form", ["jsonl", "pretty", "yaml", "array"])
def test_a_last_record_cut_short_is_skipped_with_a_warning(tmp_path, recs, form):
    text = {"jsonl": "".join(json.dumps(r) + "\n" for r in recs), "pretty": pretty(recs),
            "yaml": kubectl_yaml(recs), "array": json.dumps(recs, indent=2)}[form]
    last = {"jsonl": json.dumps(recs[-1]), "pretty": json.dumps(recs[-1], indent=4),
            "yaml": yaml.safe_dump(recs[-1], sort_keys=True), "array": json.dumps(recs[-1], indent=2)}[form]
    cut = text[: len(text) - len(last) // 2]  # half of the last record was written
    log = tmp_path / "cut.log"
    log.write_text(cut)
    report, err = run(str(log))
    assert "incomplete" in err and "cut off" in err
    assert report["input"]["invalid"] == 1
    assert report["input"]["events"] == len(recs) - 1
    assert report["jobs"] == run("--until", str(len(recs) - 1), str(SEED))[0]["jobs"]


@pytest.mark.parametrize(
    "kinds, missing, distortion",
    [
        (("Job", "Pod", "Queue"), "no PodGroup records", "do not get to Running"),
        (("Job", "PodGroup", "Queue"), "no Pod records", "never sees them"),
        (("Pod", "PodGroup"), "no vcjob records", "nothing can be decided"),
    ],
)
def test_a_log_missing_a_kind_a_job_needs_says_which_and_what_it_distorts(tmp_path, recs, kinds, missing, distortion):
    log = tmp_path / "partial.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in recs if r["object"]["kind"] in kinds))
    res = vcbus("replay", str(log))
    assert res.returncode == 0
    err = res.stderr.decode()
    assert missing in err and distortion in err, err


def test_the_seed_log_has_every_kind_and_no_warning():
    res = vcbus("replay", str(SEED))
    assert res.returncode == 0 and res.stderr == b""


@pytest.mark.parametrize(
    "content, says",
    [
        (b"NAMESPACE   NAME                READY   STATUS    RESTARTS   AGE\ndefault   p   1/1   Running   0   5m\n",
         "kubectl's table output"),
        (b"error: you may only specify a single resource type\n", "one resource type at a time"),
        (b"job.batch.volcano.sh/resnet-dist-train\n", "not a watch log"),
        (b'{"kind": "Status", "status": "Failure"}\n', "is this a watch log?"),
        (b"greeting: hello\n", "neither a watch event"),
    ],
    ids=["table", "kubectl-error", "names", "json-status", "other-yaml"],
)
def test_anything_else_names_a_command_that_records_a_usable_log(tmp_path, content, says):
    log = tmp_path / "what.log"
    log.write_bytes(content)
    res = vcbus("replay", str(log))
    assert res.returncode == 2
    err = res.stderr.decode()
    assert says in err, err
    assert "vcbus record -A -o watch.log" in err and "--output-watch-events -o json" in err
    assert "Traceback" not in err and err.count("\n") == 1


def test_per_kind_concatenation_read_live_stops_its_rows_and_reports_merged(tmp_path, recs):
    kinds = per_kind(recs)
    data = "".join(pretty(kinds[k]) for k in KIND_ORDER).encode()
    proc = subprocess.run([sys.executable, "-m", "vcbus.cli.main", "replay", "-"], input=data, capture_output=True,
                          cwd=pathlib.Path(__file__).resolve().parents[1], timeout=120)
    assert proc.returncode == 0
    err = proc.stderr.decode()
    assert "out of resourceVersion order" in err and "the live timeline stops here" in err
    assert "Completed" in proc.stdout.decode().split("final status", 1)[1]


def test_record_and_replay_help_teach_recording_a_usable_log():
    record = vcbus("record", "--help").stdout.decode()
    for text in ("vcbus record -A -o watch.log", "--job", "--for", "--selector", "Ctrl-C", "Exit codes"):
        assert text in record, text
    replay = vcbus("replay", "--help").stdout.decode()
    for text in ("vcbus record -A -o watch.log", "vcbus replay vcjobs.log pods.log", "--follow"):
        assert text in replay, text
    top = vcbus("--help").stdout.decode()
    assert "vcbus record -A -o watch.log" in top and "kubectl get vcjob,pods" not in top


def test_a_json_array_with_an_element_nested_100000_deep_is_read_up_to_it(tmp_path, recs):
    # the element's end cannot be found without decoding it: what comes before it is replayed, it is
    # reported, and the rest of the array is said to be unread (no RecursionError traceback)
    log = tmp_path / "deep.json"
    log.write_text("[" + ",".join(json.dumps(r) for r in recs[:3]) + "," + "[" * 100_000 + "]" * 100_000 + "]")
    res = vcbus("replay", "--json", str(log))
    err = res.stderr.decode()
    assert res.returncode == 0, err
    assert "nested too deeply to decode" in err and "the rest of the JSON array is not read" in err
    assert "Traceback" not in err
    assert json.loads(res.stdout)["input"] == {"events": 3, "ignored": 0, "invalid": 1}
