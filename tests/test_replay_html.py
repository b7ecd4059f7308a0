"""`vcbus replay --html`: the page's embedded data, its bounds and the option's errors (no browser here;
tests/test_replay_html_browser.py looks at the page in chromium)."""

from __future__ import annotations

import json
import pathlib

from tests.test_replay_cli import SEED, records, replay_json, vcbus, write_jsonl
from vcbus.replay_html import page_data, render
from vcbus.replay_lanes import collect_lanes
from vcbus.replaying import Until, replay_stream

OPEN = '<script type="application/json" id="vcbus-data">'


def embedded(page: str) -> dict:
    start = page.index(OPEN) + len(OPEN)
    return json.loads(page[start:page.index("</script>", start)])


def html_of(*args: str, out: pathlib.Path) -> dict:
    res = vcbus("replay", *args, "--html", str(out))
    assert res.returncode == 0, res.stderr.decode()
    return embedded(out.read_text())


def test_the_page_holds_the_report_the_lanes_and_the_records_rows_came_from(tmp_path):
    data = html_of(str(SEED), out=tmp_path / "p.html")
    (job,) = replay_json(str(SEED))["jobs"]
    (shown,) = data["jobs"]
    assert shown["history"] == job["history"] and shown["actions"] == job["actions"]
    assert [g["task"] for g in shown["tasks"]] == ["master", "worker"]
    assert [p["name"] for g in shown["tasks"] for p in g["pods"]] == [
        "resnet-dist-train-master-0", "resnet-dist-train-worker-0", "resnet-dist-train-worker-1"]
    log = records(SEED)
    for g in shown["tasks"]:
        for pod in g["pods"]:
            # recreated once by the restart: version 0 then 1, each pod object's segments back to back
            assert [s["version"] for s in pod["segments"]][0] == "0" and pod["segments"][-1]["version"] == "1"
            for seg in pod["segments"]:
                rec = json.loads(data["records"][str(seg["seq"])]["text"])
                assert rec == log[seg["seq"] - 1] and rec["object"]["metadata"]["uid"] == seg["uid"]
    # every row's record is there: phase changes and actions
    for seq in {h["seq"] for h in job["history"]} | {a["seq"] for a in job["actions"]}:
        assert json.loads(data["records"][str(seq)]["text"]) == log[seq - 1]
    n = len(data["records"])
    assert data["recordsNote"].startswith(f"Raw records: {n} of the {n} records that changed a row")


def test_per_kind_files_merged_draw_the_same_lanes(tmp_path):
    log = records(SEED)
    kinds = sorted({r["object"].get("kind", "Job") for r in log})
    files = [str(write_jsonl(tmp_path / f"{k}.jsonl", [r for r in log if r["object"].get("kind", "Job") == k]))
             for k in kinds]
    merged = html_of(*files, out=tmp_path / "m.html")
    single = html_of(str(SEED), out=tmp_path / "s.html")
    assert merged["jobs"][0]["tasks"] == single["jobs"][0]["tasks"]
    assert merged["jobs"][0]["history"] == single["jobs"][0]["history"]


def test_until_cuts_the_lanes_where_the_replay_stops(tmp_path):
    data = html_of(str(SEED), "--until", "20", out=tmp_path / "u.html")
    segs = [s for g in data["jobs"][0]["tasks"] for p in g["pods"] for s in p["segments"]]
    assert max(s["seq"] for s in segs) == 20 and {s["version"] for s in segs} == {"0"}
    assert max(int(k) for k in data["records"]) <= 20


def test_raw_records_are_bounded_and_the_page_says_so():
    with open(SEED, "rb") as fh:
        result = replay_stream(fh, str(SEED))
    report = result.report()
    with open(SEED, "rb") as fh:
        lanes = collect_lanes([(fh, str(SEED))], report, until=Until(None), max_records=5, max_bytes=300)
    assert len(lanes["records"]) == 5 and lanes["dropped"] > 0 and lanes["cut"] == 5
    assert all(len(r["text"]) < 400 and "(cut: " in r["text"] for r in lanes["records"].values())
    data = page_data(report, lanes, source="seed")
    assert f"5 of the {5 + lanes['dropped']} records" in data["recordsNote"]
    assert f"the {lanes['dropped']} later ones were left out" in data["recordsNote"]
    assert "5 were cut" in data["recordsNote"]


def test_no_record_can_end_the_script_element():
    page = render({"jobs": [], "records": {"1": {"text": "</script><!-- \u2028 <b>"}}, "recordsNote": "",
                   "source": "x", "generated": "", "input": {"events": 0, "ignored": 0, "invalid": 0}})
    body = page[page.index(OPEN):]
    assert body.count("</script>") == 2  # the data's own end, the code's end
    assert embedded(page)["records"]["1"]["text"] == "</script><!-- \u2028 <b>"
    assert "http://" not in page.replace("http://www.w3.org/2000/svg", "") and "https://" not in page


def test_html_needs_a_file_it_can_read_twice_and_write(tmp_path):
    res = vcbus("replay", "-", "--html", str(tmp_path / "x.html"), stdin=SEED.read_bytes())
    assert res.returncode == 2 and b"--html reads the log twice" in res.stderr and b"Traceback" not in res.stderr
    res = vcbus("replay", str(SEED), "--html", str(tmp_path / "no" / "x.html"))
    assert res.returncode == 2 and b"no such directory" in res.stderr and b"Traceback" not in res.stderr
    res = vcbus("replay", str(SEED), "--html", str(tmp_path))
    assert res.returncode == 2 and b"is a directory" in res.stderr and b"Traceback" not in res.stderr


def test_html_with_json_keeps_stdout_a_json_document(tmp_path):
    res = vcbus("replay", str(SEED), "--json", "--html", str(tmp_path / "j.html"))
    assert res.returncode == 0, res.stderr.decode()
    assert json.loads(res.stdout)["jobs"][0]["name"] == "resnet-dist-train"
    assert (tmp_path / "j.html").stat().st_size > 0
