"""Stream retention (max age, max bytes): set by flag or environment, kept when not named, and what
survives once old records are gone (docs/operations.md "Retention"). Real nats-server."""

from __future__ import annotations

import dataclasses
import json

import pytest

from tests.fixtures_nats import decide_and_project, publish_file, vcbus_cli
from vcbus.bus import subjects as s
from vcbus.bus.connecting import open_bus
from vcbus.bus.projector import live_buckets

pytestmark = pytest.mark.nats

STREAMS = (s.K8S_STREAM, s.JOBS_STREAM, s.CMDS_STREAM)


async def limits(settings) -> dict[str, tuple[float, int]]:
    async with open_bus(settings, ensure=False) as bus:
        out = {}
        for name in STREAMS:
            cfg = (await bus.js.stream_info(name)).config
            out[name] = (cfg.max_age or 0.0, cfg.max_bytes if cfg.max_bytes is not None else -1)
        return out


async def test_retention_is_set_by_flags_kept_by_other_commands_and_cleared_by_zero(bus_settings):
    url = bus_settings.nats_url
    res = vcbus_cli("up", "--once", "--nats", url, "--retention-max-age", "30d", "--retention-max-bytes", "2GiB")
    assert res.returncode == 0, res.stderr.decode()
    assert set((await limits(bus_settings)).values()) == {(30 * 86400.0, 2 * 1024**3)}
    # a command that does not name retention leaves it as it is
    res = vcbus_cli("status", "--nats", url)
    assert res.returncode == 0, res.stderr.decode()
    assert set((await limits(bus_settings)).values()) == {(30 * 86400.0, 2 * 1024**3)}
    # the environment sets it for every command; 0 means keep forever / unlimited
    res = vcbus_cli("status", "--nats", url, env={"VCBUS_RETENTION_MAX_AGE": "12h", "VCBUS_RETENTION_MAX_BYTES": "0"})
    assert res.returncode == 0, res.stderr.decode()
    assert set((await limits(bus_settings)).values()) == {(12 * 3600.0, -1)}
    res = vcbus_cli("up", "--once", "--nats", url, "--retention-max-age", "0")
    assert res.returncode == 0, res.stderr.decode()
    assert set((await limits(bus_settings)).values()) == {(0.0, -1)}


async def windows(settings) -> set[float]:
    async with open_bus(settings, ensure=False) as bus:
        return {(await bus.js.stream_info(name)).config.duplicate_window for name in STREAMS}


async def test_the_duplicate_window_is_vcbus_ups_and_other_commands_leave_it(bus_settings):
    """An upgrade's first `vcbus up` brings streams of the old default (1 h) to the new one (10 min);
    an operator's window stays through `vcbus status` (which used to bring it back to the default)."""
    url = bus_settings.nats_url
    async with open_bus(dataclasses.replace(bus_settings, duplicate_window=3600.0)):
        pass  # the streams as an older vcbus made them
    assert await windows(bus_settings) == {3600.0}
    res = vcbus_cli("up", "--once", "--nats", url)
    assert res.returncode == 0, res.stderr.decode()
    assert await windows(bus_settings) == {600.0}
    res = vcbus_cli("up", "--once", "--nats", url, "--duplicate-window", "6h")
    assert res.returncode == 0, res.stderr.decode()
    res = vcbus_cli("status", "--nats", url)
    assert res.returncode == 0, res.stderr.decode()
    assert await windows(bus_settings) == {6 * 3600.0}


@pytest.mark.parametrize(
    "flag, value, message",
    [
        ("--retention-max-age", "soon", "--retention-max-age 'soon': expected a duration such as 30d"),
        ("--retention-max-bytes", "2 parsecs", "--retention-max-bytes '2 parsecs': expected a size such as 10GiB"),
        ("--replicas", "7", "--replicas '7': expected 1 to 5"),
    ],
)
def test_bad_retention_flags_exit_2_with_one_line(flag, value, message):
    res = vcbus_cli("up", "--once", flag, value, "--nats", "nats://127.0.0.1:1")
    lines = res.stderr.decode().strip().splitlines()
    assert res.returncode == 2 and len(lines) == 1 and lines[0].startswith(f"error: {message}"), lines


async def test_once_old_records_are_gone_the_views_keep_each_jobs_history(bus_settings, seed_log):
    await publish_file(bus_settings, seed_log)
    await decide_and_project(bus_settings)
    async with open_bus(bus_settings) as bus:
        before = await live_buckets(bus)
    # a byte limit smaller than the log: the oldest records of every stream are dropped
    small = dataclasses.replace(bus_settings, max_bytes=64 * 1024)
    async with open_bus(small) as bus:
        k8s = await bus.js.stream_info(s.K8S_STREAM)
        assert k8s.state.first_seq > 1 and k8s.state.last_seq == 64
        after = await live_buckets(bus)
    assert after == before  # KV views are not stream records: retention leaves them alone
    history = json.loads(after[s.HISTORY_BUCKET]["default.resnet-dist-train"])
    assert [h["to"] for h in history["history"]][-1] == "Completed"
    url = bus_settings.nats_url
    # the log export holds only what is left; the job's history is still exportable whole
    res = vcbus_cli("log", "export", "--job", "default/resnet-dist-train", "--nats", url)
    assert res.returncode == 0, res.stderr.decode()
    assert 0 < len(res.stdout.splitlines()) < 64
    res = vcbus_cli("projections", "history", "default/resnet-dist-train", "--nats", url)
    assert res.returncode == 0, res.stderr.decode()
    assert json.loads(res.stdout) == history
    res = vcbus_cli("projections", "history", "default/nobody", "--nats", url)
    assert res.returncode == 1 and b"job default/nobody: no history" in res.stderr
    # a rebuild would fold only what is left: refused unless forced
    res = vcbus_cli("projections", "rebuild", "--nats", url)
    assert res.returncode == 2 and b"older events were removed (retention)" in res.stderr
