"""`vcbus events tail`: --since TIME filters by event time, an unknown --type is an error (real nats-server)."""

from __future__ import annotations

import datetime as dt
import json
import signal
import subprocess
import sys

import pytest

from tests.fixtures_nats import decide_and_project, publish_file, stream_messages, vcbus_cli
from tests.test_replay_live import Output
from vcbus.bus import subjects as s

pytestmark = pytest.mark.nats


def _times(lines: list[str]) -> list[dt.datetime]:
    return [dt.datetime.fromisoformat(json.loads(line)["time"].replace("Z", "+00:00")) for line in lines]


async def test_since_time_keeps_the_events_at_or_after_that_event_time(bus_settings, seed_log):
    url = bus_settings.nats_url
    await publish_file(bus_settings, seed_log)
    await decide_and_project(bus_settings)
    every = vcbus_cli("events", "tail", "--since", "1", "--no-follow", "--json", "--nats", url)
    assert every.returncode == 0, every.stderr.decode()
    all_lines = every.stdout.decode().splitlines()
    assert len(all_lines) == len(await stream_messages(bus_settings, s.JOBS_STREAM))
    times = sorted(set(_times(all_lines)))
    assert len(times) >= 3  # the seed log spans several record times
    cut = times[len(times) // 2]
    # The log was published just now, long after its records' times: the stream's store time would keep
    # everything; the event time keeps only what happened at or after the cut.
    res = vcbus_cli("events", "tail", "--since", cut.strftime("%Y-%m-%dT%H:%M:%SZ"), "--no-follow", "--json",
                    "--nats", url)  # fmt: skip
    assert res.returncode == 0, res.stderr.decode()
    kept = res.stdout.decode().splitlines()
    assert kept and all(t >= cut for t in _times(kept))
    assert len(kept) == sum(1 for t in _times(all_lines) if t >= cut) < len(all_lines)
    # A duration ago: every seed event happened before (their times are the log's, hours old or more).
    now_ish = vcbus_cli("events", "tail", "--since", "1m", "--no-follow", "--json", "--nats", url)
    latest = max(times)
    if latest < dt.datetime.now(dt.UTC) - dt.timedelta(minutes=2):
        assert now_ish.returncode == 0 and now_ish.stdout == b""


@pytest.mark.parametrize("bad", ["phse.changed", "timers", "job.nope.v1"])
def test_unknown_type_is_an_error_naming_the_known_ones(bus_settings, bad):
    res = vcbus_cli("events", "tail", "--type", bad, "--no-follow", "--nats", bus_settings.nats_url)
    assert res.returncode == 2
    err = res.stderr.decode()
    assert f"--type: {bad!r} matches no event type" in err and "phase.changed" in err and "Traceback" not in err


@pytest.mark.parametrize("good", ["phase.changed", "timer", "sh.volcano.job.phase.changed.v1", "job.status.changed.v1"])
def test_known_types_and_prefixes_are_accepted(bus_settings, good):
    res = vcbus_cli("events", "tail", "--type", good, "--since", "1", "--no-follow", "--nats", bus_settings.nats_url)
    assert res.returncode == 0, res.stderr.decode()


async def test_output_forms_show_the_same_events(bus_settings, seed_log):
    import yaml

    url = bus_settings.nats_url
    await publish_file(bus_settings, seed_log)
    await decide_and_project(bus_settings)
    base = ("events", "tail", "--since", "1", "--no-follow", "--type", "phase.changed", "--nats", url)
    as_json = [json.loads(x) for x in vcbus_cli(*base, "--json").stdout.decode().splitlines()]
    assert as_json and all(e["type"] == "sh.volcano.job.phase.changed.v1" for e in as_json)
    assert [json.loads(x) for x in vcbus_cli(*base, "-o", "json").stdout.decode().splitlines()] == as_json
    assert list(yaml.safe_load_all(vcbus_cli(*base, "-o", "yaml").stdout.decode())) == as_json
    assert vcbus_cli(*base, "-o", "name").stdout.decode().splitlines() == [f"{e['type']}/{e['id']}" for e in as_json]
    plain = vcbus_cli(*base).stdout.decode().splitlines()
    wide = vcbus_cli(*base, "-o", "wide").stdout.decode().splitlines()
    assert [w.split("  id=")[0] for w in wide] == plain
    assert [w.split("  id=")[1] for w in wide] == [f"{e['id']} source={e['source']}" for e in as_json]
    both = vcbus_cli(*base, "--json", "-o", "yaml")
    assert both.returncode == 2 and b"--json and -o yaml ask for different outputs" in both.stderr


async def test_following_a_settled_bus_says_how_to_see_its_history(bus_settings, seed_log):
    """`vcbus events tail` follows new events only: on a bus whose job has settled it would print nothing
    and wait, so it says on stderr how many the bus holds and how to see them (stdout stays the events)."""
    await publish_file(bus_settings, seed_log)
    await decide_and_project(bus_settings)
    held = len(await stream_messages(bus_settings, s.JOBS_STREAM))
    proc = subprocess.Popen([sys.executable, "-m", "vcbus.cli.main", "events", "tail", "--nats", bus_settings.nats_url],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    err = Output(proc.stderr)
    try:
        line = err.wait_for(lambda text: "following new events" in text, "the hint")
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=120) == 130
    finally:
        proc.kill()
        proc.wait()
    assert f"it holds {held:,} already: `vcbus events tail --since 1` prints them first" in line, line
    assert proc.stdout.read() == b""
