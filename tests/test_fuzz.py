"""Fuzzing with a seeded generator (`tests/fuzzing.py`): replay, validate, render and the decider's engine.

Whatever the input, no exception escapes and memory stays bounded:

- replay (`replay_stream`, skipping bad records) always returns a report;
- the engine raises only its documented refusals for a decodable record (a job
  over the pod limit, a duration Go refuses); the decider sets those aside;
- `vcbus validate` and `vcbus render` answer 0, 1 or 2, never a traceback;
- on a real nats-server the decider and the projector get through a fuzzed
  log and the good job in it completes.

Each test's RSS growth is bounded (a 10M-replica job is among the mutations; it
used to take gigabytes). A failure names its seed: `watch_log(base,
random.Random(seed), ...)` rebuilds the case.
"""

from __future__ import annotations

import json
import random

import pytest
import yaml

from statemachines.admission.bounds import BoundsProblem
from statemachines.engine import Engine
from statemachines.model.durations import DurationError
from statemachines.model.records import RecordError, decode
from tests.fuzzing import manifest_text, watch_log
from tests.poison_logs import ROOT, copy_in_namespace, seed_records
from tests.soak_projector import rss_kb
from vcbus.cli.main import main
from vcbus.replaying import replay_stream

SEEDS = range(60)
MAX_GROWTH_KB = 300 * 1024
REFUSALS = (BoundsProblem, DurationError)


@pytest.fixture(scope="module")
def base() -> list[dict]:
    return seed_records()


def test_replay_of_fuzzed_logs_always_returns_a_report(base):
    before = rss_kb()
    for seed in SEEDS:
        lines = watch_log(base, random.Random(seed), mutated=6)
        said: list[str] = []
        try:
            result = replay_stream(iter(lines), f"fuzz-{seed}", skip_invalid=True, on_problem=said.append,
                                   on_warning=said.append)
            report = result.report()
        except Exception as err:  # noqa: BLE001 - the property under test
            pytest.fail(f"seed {seed}: replay raised {type(err).__name__}: {err}")
        assert isinstance(report["jobs"], list), seed
    assert rss_kb() - before < MAX_GROWTH_KB


def test_the_engine_raises_only_its_documented_refusals(base):
    before = rss_kb()
    refused = 0
    for seed in SEEDS:
        engine = Engine()
        for i, line in enumerate(watch_log(base, random.Random(seed), mutated=6), 1):
            try:
                record = decode(line)
            except RecordError:
                continue  # poison before the engine: the decider's first catch
            except Exception as err:  # noqa: BLE001
                pytest.fail(f"seed {seed} line {i}: decode raised {type(err).__name__}: {err}")
            try:
                engine.apply(i, record)
            except REFUSALS:
                refused += 1
                engine = Engine()  # the decider refolds without the record; here the rest starts afresh
            except Exception as err:  # noqa: BLE001
                pytest.fail(f"seed {seed} line {i}: the engine raised {type(err).__name__}: {err}")
    assert rss_kb() - before < MAX_GROWTH_KB


def _job() -> dict:
    return yaml.safe_load((ROOT / "examples" / "resnet-dist-train.yaml").read_text())


@pytest.mark.parametrize("command", ["validate", "render"])
def test_validate_and_render_answer_every_fuzzed_vcjob(tmp_path, capsys, command):
    job = _job()
    before = rss_kb()
    codes = set()
    for seed in SEEDS:
        path = tmp_path / f"fuzz-{seed}.yaml"
        path.write_text(manifest_text(job, random.Random(seed)))
        try:
            code = main([command, str(path)])
        except Exception as err:  # noqa: BLE001 - it would be a traceback
            pytest.fail(f"seed {seed}: {command} raised {type(err).__name__}: {err}")
        capsys.readouterr()
        assert code in (0, 1, 2), (seed, code)
        codes.add(code)
    assert 1 in codes  # the mutations do reach the checks
    assert rss_kb() - before < MAX_GROWTH_KB


@pytest.mark.nats
async def test_the_decider_and_projector_get_through_a_fuzzed_log(bus_settings, base):
    from tests.fixtures_nats import decide_and_project
    from vcbus.bus import subjects as s
    from vcbus.bus.connecting import open_bus
    from vcbus.bus.projector import live_buckets
    from vcbus.bus.publisher import prepare

    lines = []
    for seed in range(3):
        lines += watch_log(base, random.Random(1000 + seed), mutated=8)
    lines += [json.dumps(r).encode() for r in copy_in_namespace(base, "good")]
    async with open_bus(bus_settings) as bus:
        for i, line in enumerate(lines):
            try:
                msg = prepare(line, decode(line))
            except Exception:  # noqa: BLE001 - published as a buggy bridge would: raw, on a job subject
                msg = None
                await bus.js.publish("vcbus.k8s.job.default.fuzz", line, headers={"Nats-Msg-Id": f"fuzz:{i}"})
            if msg is not None:
                await bus.js.publish(msg.subject, msg.body, headers=msg.headers)
    decider, projector = await decide_and_project(bus_settings)  # returns: nothing halted either
    async with open_bus(bus_settings) as bus:
        status = (await live_buckets(bus))[s.STATUS_BUCKET]
    good = json.loads(status[s.kv_key("good/resnet-dist-train")])
    assert good["state"]["phase"] == "Completed"
    assert decider.stats.poison >= 1
