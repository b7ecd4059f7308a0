"""The bus path reads every form `vcbus replay` reads: one input, one answer.

`kubectl get <kind> -A --watch --output-watch-events -o yaml`, one watch per kind
and the outputs concatenated, is a log `vcbus replay` reads (and merges by
resourceVersion, saying so). `vcbus publish` and `vcbus demo` read it through the
same reader (`vcbus.watchlog`), detect the same disorder with the same words and
store the records in the order replay folds them: `vcbus replay FILE`, `vcbus
replay -` (a real pipe), `vcbus publish FILE` then `vcbus replay --nats` (a real
nats-server) and `vcbus demo FILE` give the same answer. Before, publish and
demo refused the file as "invalid JSON".
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.fixtures_nats import vcbus_cli
from tests.test_publish_all_or_nothing import stored
from tests.test_replay_cli import ROOT, SEED, records
from tests.test_replay_forms import KIND_ORDER, kubectl_yaml, per_kind
from tests.test_replay_one_answer import piped

pytestmark = pytest.mark.nats

MERGED = "records of different kinds are out of resourceVersion order, as when one watch per kind is concatenated"


def yaml_watches(tmp_path):
    """One `kubectl get <kind> -w --output-watch-events -o yaml` per kind, concatenated."""
    kinds = per_kind(records(SEED))
    log = tmp_path / "watches.yaml"
    log.write_text("---\n".join(kubectl_yaml(kinds[k]) for k in KIND_ORDER))
    return log


def ok(res: subprocess.CompletedProcess) -> tuple[str, str]:
    assert res.returncode == 0, res.stderr.decode()
    return res.stdout.decode(), res.stderr.decode()


def test_a_yaml_watch_log_published_replays_as_its_file(bus_settings, tmp_path):
    url = bus_settings.nats_url
    log = yaml_watches(tmp_path)
    by_file, file_err = ok(vcbus_cli("replay", "--json", str(log)))
    assert MERGED in file_err and "replaying the records merged by resourceVersion" in file_err
    by_pipe = piped(log, "--json")
    assert by_pipe.returncode == 0 and by_pipe.stdout.decode() == by_file
    out, err = ok(vcbus_cli("publish", str(log), "--nats", url, "-o", "json"))
    assert MERGED in err and "publishing the records merged by resourceVersion" in err, err
    assert json.loads(out)["published"] == len(records(SEED))
    by_bus, _ = ok(vcbus_cli("replay", "--json", "--nats", url))
    assert json.loads(by_bus) == json.loads(by_file)
    (job,) = json.loads(by_file)["jobs"]
    assert job["status"]["state"]["phase"] == "Completed" and not job["divergences"]
    # the text reports too
    assert ok(vcbus_cli("replay", "--nats", url))[0] == ok(vcbus_cli("replay", str(log)))[0]


def test_a_yaml_log_in_order_is_published_whole(bus_settings, tmp_path):
    url = bus_settings.nats_url
    log = tmp_path / "watch.yaml"
    log.write_text(kubectl_yaml(records(SEED)))
    out, err = ok(vcbus_cli("publish", str(log), "--nats", url, "-o", "json"))
    assert "warning" not in err and json.loads(out)["published"] == len(records(SEED))
    assert json.loads(ok(vcbus_cli("replay", "--json", "--nats", url))[0]) == json.loads(
        ok(vcbus_cli("replay", "--json", str(SEED)))[0])


async def test_a_bad_yaml_record_is_named_by_its_line_and_nothing_is_stored(bus_settings, tmp_path):
    url = bus_settings.nats_url
    recs = records(SEED)
    good = kubectl_yaml(recs[:3])
    log = tmp_path / "bad.yaml"
    log.write_text(good + "---\nobject: {kind: Pod, metadata: [\ntype: ADDED\n---\n" + kubectl_yaml(recs[3:]))
    line = good.count("\n") + 2
    by_replay = vcbus_cli("replay", "--strict", str(log))
    res = vcbus_cli("publish", str(log), "--nats", url)
    err = res.stderr.decode()
    assert res.returncode == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith(f"error: {log}:{line}: record 4 ") and "invalid YAML" in err, err
    assert err == by_replay.stderr.decode()  # the words replay --strict says
    assert await stored(bus_settings) == 0


def test_a_kubectl_list_is_published_as_replay_reads_it(bus_settings, tmp_path):
    """`kubectl get vcjobs,pods,podgroups,queues -A -o json`: a v1 List, read as snapshots, with replay's warning."""
    url = bus_settings.nats_url
    latest: dict[str, dict] = {}
    for r in records(SEED):
        latest[r["object"]["metadata"]["uid"]] = r["object"]
    log = tmp_path / "list.json"
    log.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": list(latest.values())}, indent=4))
    by_file, file_err = ok(vcbus_cli("replay", "--json", str(log)))
    out, err = ok(vcbus_cli("publish", str(log), "--nats", url, "-o", "json"))
    assert "read as snapshots" in file_err and "read as snapshots" in err, err
    assert json.loads(out)["published"] == len(latest)
    assert json.loads(ok(vcbus_cli("replay", "--json", "--nats", url))[0]) == json.loads(by_file)


@pytest.mark.slow
def test_demo_of_a_yaml_watch_log_shows_replays_answer(tmp_path):
    log = yaml_watches(tmp_path)
    out, err = ok(subprocess.run([sys.executable, "-m", "vcbus.cli.main", "demo", str(log)], cwd=ROOT,
                                 capture_output=True, timeout=240))
    assert "publishing the records merged by resourceVersion" in err, err
    row = next(line for line in out.splitlines() if line.startswith("default"))
    assert row.split()[:3] == ["default", "resnet-dist-train", "Completed"], out
    seed, _ = ok(subprocess.run([sys.executable, "-m", "vcbus.cli.main", "demo", str(SEED)], cwd=ROOT,
                                capture_output=True, timeout=240))
    assert [line for line in out.splitlines() if " -> " in line] == [
        line for line in seed.splitlines() if " -> " in line]


@pytest.mark.parametrize("command", [("publish",), ("log", "import")])
def test_a_last_record_cut_short_is_skipped_with_replays_warning(bus_settings, tmp_path, command):
    """A log copied while it was written: replay skips its last record with a warning, and so does the bus path."""
    url = bus_settings.nats_url
    lines = [json.dumps(r) for r in records(SEED)]
    log = tmp_path / "cut.jsonl"
    log.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][: len(lines[-1]) // 2])
    _, file_err = ok(vcbus_cli("replay", "--json", str(log)))
    out, err = ok(vcbus_cli(*command, str(log), "--nats", url, "-o", "json"))
    skipped = next(line for line in file_err.splitlines() if "incomplete" in line)
    assert skipped in err.splitlines(), err
    assert json.loads(out)["published"] == len(lines) - 1
    assert json.loads(ok(vcbus_cli("replay", "--json", "--nats", url))[0])["jobs"] == json.loads(
        ok(vcbus_cli("replay", "--json", str(log)))[0])["jobs"]


def test_a_concatenation_cut_short_is_merged_as_replay_merges_it(bus_settings, tmp_path):
    """Per-kind watches concatenated, the last record cut off: replay skips it and merges the rest; so does the bus."""
    url = bus_settings.nats_url
    whole = yaml_watches(tmp_path).read_text()
    log = tmp_path / "cut.yaml"
    log.write_text(whole[: whole.rindex("type: ")])  # the last document without its `type:`, as kubectl was killed
    by_file, file_err = ok(vcbus_cli("replay", "--json", str(log)))
    assert MERGED in file_err and "incomplete" in file_err
    _, err = ok(vcbus_cli("publish", str(log), "--nats", url))
    assert "publishing the records merged by resourceVersion" in err and "incomplete" in err, err
    assert json.loads(ok(vcbus_cli("replay", "--json", "--nats", url))[0])["jobs"] == json.loads(by_file)["jobs"]
