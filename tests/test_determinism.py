"""Determinism: the same log in gives the same outputs, byte for byte.

Every log is replayed twice, each time with a fresh engine, and the encoded
outputs (every domain event and command, in order) and the `vcbus replay
--json` report are compared byte for byte. The logs are the example logs
(examples/*.json* and examples/volcano/), the scenarios registered with `tests.builders.scenario`,
and every log a state-machine test builds with a `Harness` (each test case of
tests/test_sm_*.py is run again here, its logs collected). The scenarios must
build the same log twice, a simulated run must equal its own replay, and the
outputs must not depend on Python's hash seed (set and dict order).
"""

from __future__ import annotations

import hashlib
import io
import os
import pathlib
import subprocess
import sys

import msgspec
import pytest

import tests.test_sm_events
import tests.test_sm_gc
import tests.test_sm_phases
import tests.test_sm_policies
import tests.test_sm_queues
import tests.test_sm_quirks
import tests.test_sm_timelines as timelines
from statemachines import outputs as o
from statemachines.engine import Engine
from statemachines.manifests.renderer import Renderer
from statemachines.model.objects import Job
from statemachines.model.records import Observed
from tests.builders import SCENARIOS, recording_logs
from vcbus.replaying import replay_stream
from vcbus.watchlog import decode_record, read_records

ROOT = pathlib.Path(__file__).resolve().parents[1]
EXAMPLES = sorted(p.relative_to(ROOT / "examples").as_posix()  # the simulated logs and the one recorded from Volcano
                  for pattern in ("*.json*", "volcano/*.json*") for p in (ROOT / "examples").glob(pattern))


def scenario_log(name: str) -> bytes:
    return b"".join(r if r.endswith(b"\n") else r + b"\n" for r in SCENARIOS[name]())


def log_bytes(name: str) -> bytes:
    if name in SCENARIOS:
        return scenario_log(name)
    return (ROOT / "examples" / name).read_bytes()


def replay_outputs(data: bytes, *, render: bool = False) -> bytes:
    if render:
        renderer = Renderer()
        engine = Engine(render_pod=renderer.pod, render_podgroup=renderer.podgroup)
    else:
        engine = Engine()
    chunks = []
    for rec in read_records(io.BytesIO(data)):
        decoded = decode_record("log", rec)
        raw = rec.data if isinstance(decoded, Observed) and isinstance(decoded.object, Job) else None
        chunks.extend(o.encoder.encode(out) for out in engine.apply(rec.seq, decoded, raw=raw))
    chunks.extend(o.encoder.encode(out) for out in engine.final_divergences())
    return b"\n".join(chunks)


def replay_report(data: bytes) -> bytes:
    result = replay_stream(io.BytesIO(data), "log", explain=True)
    return msgspec.json.encode(result.report(explain=True))


LOGS = [*EXAMPLES, *sorted(SCENARIOS)]


def test_there_are_logs_to_check():
    assert len(EXAMPLES) >= 4
    assert len(SCENARIOS) >= 6


@pytest.mark.parametrize("name", LOGS)
def test_replaying_twice_gives_identical_bytes(name):
    data = log_bytes(name)
    first, second = replay_outputs(data), replay_outputs(data)
    assert first and first.count(b"\n") > 10
    assert first == second
    assert replay_report(data) == replay_report(data)


@pytest.mark.parametrize("name", LOGS)
def test_replaying_with_rendered_manifests_twice_gives_identical_bytes(name):
    data = log_bytes(name)
    assert replay_outputs(data, render=True) == replay_outputs(data, render=True)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_scenarios_build_the_same_log_twice(name):
    assert scenario_log(name) == scenario_log(name)


@pytest.mark.parametrize("run", [timelines.happy_path, timelines.restart_timeline], ids=lambda f: f.__name__)
def test_a_simulated_run_equals_its_replay(run):
    """What the engine decided live (records fed as they happened) is what a replay of the log decides."""
    steps = timelines.Steps()
    run(steps)
    live = b"\n".join(o.encoder.encode(out) for out in steps.c.outputs)
    replayed = replay_outputs(b"".join(steps.c.lines), render=True)
    assert live == replayed


_DIGEST = """
import sys
sys.path.insert(0, {root!r})
from tests.test_determinism import digest
print(digest())
"""


def digest() -> str:
    """sha256 over the replayed outputs of every log: the examples, the scenarios, the harness logs."""
    h = hashlib.sha256()
    for name in LOGS:
        h.update(replay_outputs(log_bytes(name), render=True))
    for _, fn, kw in CASES:
        with recording_logs() as logs:
            fn(**kw)
        for records in logs:
            h.update(replay_outputs(b"".join(r + b"\n" for r in records), render=True))
    return h.hexdigest()


def test_outputs_do_not_depend_on_the_hash_seed():
    """Set and dict iteration order change with PYTHONHASHSEED; decisions must not."""
    digests = set()
    for seed in ("0", "4242"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        proc = subprocess.run([sys.executable, "-c", _DIGEST.format(root=str(ROOT))], env=env, cwd=ROOT,
                              capture_output=True, text=True, timeout=120, check=False)
        assert proc.returncode == 0, proc.stderr
        digests.add(proc.stdout.strip())
    digests.add(digest())
    assert len(digests) == 1


# ---------------------------------------------------------------- every log the tests build


def _cases(module) -> list[tuple[str, object, dict]]:
    """Each test case of `module`: its parametrize marks expanded (no fixtures are used there)."""
    out = []
    for name, fn in vars(module).items():
        if not name.startswith("test_") or not callable(fn):
            continue
        combos: list[tuple[dict, list[str]]] = [({}, [])]
        for mark in getattr(fn, "pytestmark", []):
            if mark.name != "parametrize":
                continue
            names = mark.args[0]
            names = [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)
            expanded = []
            for kw, label in combos:
                for i, value in enumerate(mark.args[1]):
                    values = value.values if hasattr(value, "marks") else (value,) if len(names) == 1 else value
                    expanded.append(({**kw, **dict(zip(names, values))}, [*label, str(i)]))
            combos = expanded
        short = module.__name__.rsplit(".", 1)[-1]
        out.extend((f"{short}.{name}[{'-'.join(label)}]", fn, kw) for kw, label in combos)
    return out


CASES = [c for m in (tests.test_sm_events, tests.test_sm_phases, tests.test_sm_policies, tests.test_sm_quirks,
                     tests.test_sm_queues, tests.test_sm_gc)
         for c in _cases(m)]


@pytest.mark.parametrize("case,fn,kw", CASES, ids=[c[0] for c in CASES])
def test_every_harness_log_replays_identically(case, fn, kw):
    with recording_logs() as logs:
        fn(**kw)
    for records in logs:
        data = b"".join(r + b"\n" for r in records)
        assert replay_outputs(data) == replay_outputs(data)
        assert replay_outputs(data, render=True) == replay_outputs(data, render=True)


def test_most_state_machine_tests_build_logs():
    built = 0
    for _, fn, kw in CASES:
        with recording_logs() as logs:
            fn(**kw)
        built += bool(logs)
    assert built > 100


_LOG_DIGEST = """
import hashlib, sys
sys.path.insert(0, {root!r})
from tests.test_determinism import SCENARIOS, scenario_log
h = hashlib.sha256()
for name in sorted(SCENARIOS):
    h.update(scenario_log(name))
print(h.hexdigest())
"""


def test_scenario_logs_do_not_depend_on_the_hash_seed():
    digests = set()
    for seed in ("0", "4242"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        proc = subprocess.run([sys.executable, "-c", _LOG_DIGEST.format(root=str(ROOT))], env=env, cwd=ROOT,
                              capture_output=True, text=True, timeout=120, check=False)
        assert proc.returncode == 0, proc.stderr
        digests.add(proc.stdout.strip())
    assert len(digests) == 1
