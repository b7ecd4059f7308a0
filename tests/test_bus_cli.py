"""The bus commands as a user runs them: real processes, a real server, exit codes and messages."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.fixtures_nats import decide_and_project, publish_file, stream_messages, vcbus_cli, wipe
from vcbus.bus import subjects as s

pytestmark = pytest.mark.nats


@pytest.mark.parametrize(
    "command",
    [("up",), ("publish",), ("status",), ("events", "tail"), ("log", "export"), ("log", "import"),
     ("projections", "rebuild"), ("replay",)],
)
def test_help_teaches_with_examples(command):
    res = vcbus_cli(*command, "--help")
    assert res.returncode == 0
    assert b"Example" in res.stdout and b"--nats" in res.stdout


async def test_bad_input_is_a_clear_error_and_publishes_nothing(bus_settings, seed_log, tmp_path):
    good = seed_log.read_bytes()
    bad = tmp_path / "bad.log"
    bad.write_bytes(good + b'{"type": "ADDED", "object": {"kind": "Pod", "apiVersion": "v1", "metadata": {}}}\n')
    res = vcbus_cli("publish", str(bad), "--nats", bus_settings.nats_url)
    assert res.returncode == 2
    line = good.count(b"\n") + 1
    assert res.stderr.decode().startswith(f"error: {bad}:{line}: record 65 (byte {len(good)}): Pod without metadata.name")
    assert b"Traceback" not in res.stderr
    assert await stream_messages(bus_settings, s.K8S_STREAM) == []


def test_a_missing_file_is_a_clear_error(bus_settings, tmp_path):
    res = vcbus_cli("publish", str(tmp_path / "nope.log"), "--nats", bus_settings.nats_url)
    assert (res.returncode, res.stderr) == (2, f"error: {tmp_path / 'nope.log'}: no such file\n".encode())


async def test_publish_reads_standard_input(bus_settings, seed_log):
    res = vcbus_cli("publish", "-", stdin=seed_log.read_bytes(), env={"VCBUS_NATS_URL": bus_settings.nats_url})
    assert res.returncode == 0, res.stderr.decode()
    assert b"published 64 records from <stdin>" in res.stderr


async def test_export_then_import_restores_the_log_with_its_sequence_numbers(bus_settings, seed_log, tmp_path):
    url = bus_settings.nats_url
    await publish_file(bus_settings, seed_log)
    await decide_and_project(bus_settings)
    before = await stream_messages(bus_settings, s.K8S_STREAM)
    exported = tmp_path / "export.jsonl"
    res = vcbus_cli("log", "export", "-o", str(exported), "--nats", url)
    assert res.returncode == 0, res.stderr.decode()
    assert len(exported.read_bytes().splitlines()) == len(before) == 64

    res = vcbus_cli("log", "import", str(exported), "--nats", url)
    assert res.returncode == 2 and b"already holds records" in res.stderr

    await wipe(url)
    res = vcbus_cli("log", "import", str(exported), "--nats", url)
    assert res.returncode == 0, res.stderr.decode()
    after = await stream_messages(bus_settings, s.K8S_STREAM)
    assert [(seq, subj, body) for seq, subj, _, body in after] == [(seq, subj, body) for seq, subj, _, body in before]

    res = vcbus_cli("log", "export", "--job", "default/resnet-dist-train", "--since", "60", "--nats", url)
    assert res.returncode == 0
    assert len(res.stdout.splitlines()) == 5


async def test_replay_from_the_bus_equals_replay_from_the_file(bus_settings, seed_log):
    await publish_file(bus_settings, seed_log)
    from_file = vcbus_cli("replay", "--json", str(seed_log))
    from_bus = vcbus_cli("replay", "--nats", bus_settings.nats_url, "--json")
    assert from_bus.returncode == 0, from_bus.stderr.decode()
    assert from_bus.stdout == from_file.stdout
    one = vcbus_cli("replay", "--nats", "--job", "default/resnet-dist-train", env={"VCBUS_NATS_URL": bus_settings.nats_url})
    assert one.returncode == 0 and b"Completed" in one.stdout
    both = vcbus_cli("replay", str(seed_log), "--nats", bus_settings.nats_url)
    assert both.returncode == 2 and b"FILE or --nats, not both" in both.stderr


async def test_status_formats_and_errors(bus_settings, seed_log):
    url = bus_settings.nats_url
    res = vcbus_cli("status", "--nats", url)
    assert res.returncode == 0 and f"No jobs on the bus at {url}.".encode() in res.stderr  # names where it looked
    await publish_file(bus_settings, seed_log)
    await decide_and_project(bus_settings)
    doc = yaml.safe_load(vcbus_cli("status", "-o", "yaml", "--nats", url).stdout)
    assert doc["kind"] == "List" and doc["items"][0]["status"]["retryCount"] == 1
    wide = vcbus_cli("status", "-o", "wide", "-n", "default", "--nats", url).stdout.decode().splitlines()
    assert wide[0].split()[-3:] == ["RUNNING-DURATION", "LAST-TRANSITION", "POISONED"] and "15m58s" in wide[1]
    assert wide[0].split()[6] == "TASKS" and wide[1].split()[6] == "master:Succeeded=1/Failed=0,worker:Succeeded=0/Failed=0"
    other = vcbus_cli("status", "-n", "other", "--nats", url)
    assert other.stdout == b"" and f"No jobs in namespace other on the bus at {url}.".encode() in other.stderr
    # kubectl's -A and -o name; -n and -A together is an error, as in `vcbus job list`
    assert vcbus_cli("status", "-A", "-o", "name", "--nats", url).stdout == b"job.batch.volcano.sh/resnet-dist-train\n"
    res = vcbus_cli("status", "-n", "other", "-A", "--nats", url)
    assert res.returncode == 2 and res.stderr == b"error: give --namespace or --all-namespaces (-A), not both\n"
    res = vcbus_cli("status", "default/nope", "--nats", url)
    assert res.returncode == 1 and b"error: job default/nope has no status on the bus" in res.stderr
    res = vcbus_cli("status", "a/b/c", "--nats", url)
    assert res.returncode == 2 and b"expected NAMESPACE/NAME" in res.stderr


async def test_events_tail_prints_one_line_per_event_and_filters_commands(bus_settings, seed_log):
    url = bus_settings.nats_url
    await publish_file(bus_settings, seed_log)
    await decide_and_project(bus_settings)
    lines = vcbus_cli("events", "tail", "--since", "1", "--no-follow", "--nats", url).stdout.decode().splitlines()
    assert len(lines) == len(await stream_messages(bus_settings, s.JOBS_STREAM))
    assert "job.phase.changed" in lines[3] and '"" -> Pending (SyncJob' in lines[3]
    cmds = vcbus_cli("events", "tail", "--commands", "--since", "1", "--no-follow", "--json", "--nats", url)
    types = {json.loads(line)["type"] for line in cmds.stdout.splitlines()}
    assert "sh.volcano.cmd.pod.create.v1" in types and all(t.startswith("sh.volcano.cmd.") for t in types)
    res = vcbus_cli("events", "tail", "--since", "yesterday", "--nats", url)
    assert res.returncode == 2 and b"--since 'yesterday'" in res.stderr
