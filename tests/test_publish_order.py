"""The bus path gives replay's answer: `vcbus publish` and `vcbus demo` of a log replay would reorder.

Per-kind kubectl watches concatenated are merged by resourceVersion before they
are stored, and a recording's marked initial list is stored in the order replay
folds it; the real decider on a real nats-server then decides what `vcbus
replay` decides. A log already in order is stored byte for byte as before.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.fixtures_nats import decide_and_project, stream_messages, vcbus_cli
from tests.test_replay_cli import ROOT, SEED
from tests.test_replay_one_answer import concatenated, mid_job
from vcbus.bus import subjects as s

pytestmark = pytest.mark.nats


def status_of(url: str) -> dict:
    res = vcbus_cli("status", "--nats", url, "-o", "json", "default/resnet-dist-train")
    assert res.returncode == 0, res.stderr.decode()
    return json.loads(res.stdout)


async def test_publish_merges_per_kind_watches_and_decides_as_replay(bus_settings, tmp_path):
    log, _ = concatenated(tmp_path)
    res = vcbus_cli("publish", str(log), "--nats", bus_settings.nats_url)
    assert res.returncode == 0, res.stderr.decode()
    err = res.stderr.decode()
    assert "out of resourceVersion order" in err and "publishing the records merged by resourceVersion" in err
    await decide_and_project(bus_settings)
    status = status_of(bus_settings.nats_url)
    assert "Completed" in json.dumps(status) and "Pending" not in json.dumps(status.get("state", {}))
    # stored in etcd's order: the seed log's order
    stored = [json.loads(body)["object"]["metadata"]["resourceVersion"]
              for _, _, _, body in await stream_messages(bus_settings, s.K8S_STREAM)]
    assert stored == sorted(stored, key=int)


async def test_publish_of_a_recording_started_mid_job_asks_for_no_pods_that_exist(bus_settings, tmp_path):
    log = tmp_path / "mid.log"
    log.write_text("".join(json.dumps(r) + "\n" for r in mid_job(40)))
    res = vcbus_cli("publish", str(log), "--nats", bus_settings.nats_url)
    assert res.returncode == 0, res.stderr.decode()
    assert "warning" not in res.stderr.decode()
    await decide_and_project(bus_settings)
    types = [headers.get("ce-type") for _, _, headers, _ in await stream_messages(bus_settings, s.CMDS_STREAM)]
    assert "sh.volcano.cmd.pod.delete.v1" in types and "sh.volcano.cmd.pod.create.v1" not in types, types
    assert "Completed" in json.dumps(status_of(bus_settings.nats_url))


@pytest.mark.slow
def test_demo_of_per_kind_watches_shows_replays_answer(tmp_path):
    log, _ = concatenated(tmp_path)
    res = subprocess.run([sys.executable, "-m", "vcbus.cli.main", "demo", str(log)], cwd=ROOT,
                         capture_output=True, timeout=180)
    assert res.returncode == 0, res.stderr.decode()
    out = res.stdout.decode()
    assert "publishing the records merged by resourceVersion" in res.stderr.decode()
    row = next(line for line in out.splitlines() if line.startswith("default"))
    assert row.split()[:3] == ["default", "resnet-dist-train", "Completed"], out
    seed = subprocess.run([sys.executable, "-m", "vcbus.cli.main", "demo", str(SEED)], cwd=ROOT,
                          capture_output=True, timeout=180).stdout.decode()
    phases = [line for line in out.splitlines() if " -> " in line]
    assert phases == [line for line in seed.splitlines() if " -> " in line]
