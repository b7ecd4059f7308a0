"""One input, one answer through the bus: `vcbus publish FILE` then `vcbus replay --nats` reports what
`vcbus replay FILE` reports, row numbers (`seq`) included.

The bus stores a log's records about the watch itself too: the two BOOKMARKs that mark a recording's
initial list (`vcbus record`, format 2) and a watch ERROR (410 Expired, the gap warning). Before, `vcbus
publish` dropped them, so the replay of the bus numbered every row of the Volcano recording 2 lower
than the replay of its file, and lost the warning of a gap. Real `vcbus` processes, a real nats-server.
"""

from __future__ import annotations

import json
import pathlib

import pytest

from tests.fixtures_nats import vcbus_cli
from tests.test_replay_cli import SEED, records

pytestmark = pytest.mark.nats

ROOT = pathlib.Path(__file__).resolve().parents[1]
VOLCANO = ROOT / "examples" / "volcano" / "resnet-dist-train.jsonl"
GONE = {"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                    "message": "too old resource version: 1012 (1020)", "reason": "Expired",
                                    "code": 410}}


def run(*args: str) -> tuple[str, str]:
    res = vcbus_cli(*args)
    assert res.returncode == 0, res.stderr.decode()
    return res.stdout.decode(), res.stderr.decode()


def test_the_bus_numbers_a_recordings_rows_as_its_file(bus_settings):
    url = bus_settings.nats_url
    assert VOLCANO.read_text().count('"type":"BOOKMARK"') == 2  # the initial list's two marks
    published = json.loads(run("publish", str(VOLCANO), "--nats", url, "-o", "json")[0])
    assert published["published"] == len(VOLCANO.read_text().splitlines()) and published["skipped"] == 0
    assert run("replay", "--nats", url)[0] == run("replay", str(VOLCANO))[0]
    assert json.loads(run("replay", "--nats", url, "--json")[0]) == json.loads(run("replay", "--json", str(VOLCANO))[0])
    # publishing it again stores nothing: the marks are deduplicated as every record is
    again = json.loads(run("publish", str(VOLCANO), "--nats", url, "-o", "json")[0])
    assert again["published"] == 0 and again["duplicates"] == published["published"]


def test_the_bus_keeps_a_watch_error_so_its_replay_warns_of_the_gap(bus_settings, tmp_path):
    url = bus_settings.nats_url
    recs = records(SEED)
    log = tmp_path / "gap.log"
    log.write_text("".join(json.dumps(r) + "\n" for r in [*recs[:20], GONE, *recs[20:]]))
    run("publish", str(log), "--nats", url)
    by_file, file_err = run("replay", "--json", str(log))
    by_bus, bus_err = run("replay", "--json", "--nats", url)
    assert json.loads(by_bus) == json.loads(by_file)
    for err in (file_err, bus_err):
        assert "record 21: a watch ERROR (410 Expired: too old resource version: 1012 (1020))" in err, err
