"""A 10,000-pod job (the default pod limit) for the bounded-emission tests (tests/test_bigrecords.py).

`big_log()` is the seed log's Queue, a vcjob `default/huge` with tasks master (1)
and worker (9,999), and its PodGroup Inqueue: the record of the PodGroup makes
the engine create all 10,000 pods in one pass. `reference(lines)` is what an
uninterrupted decider with the eager renderer stores: per stream, (subject,
msg id, body) in order.

Run as a script (`python -m tests.big_job NATS_URL`), it publishes the log to an
empty bus, runs a decider as `vcbus up` builds it until idle and prints one JSON
line: peak RSS (ru_maxrss) before and after deciding, and the decider's stats.
"""

from __future__ import annotations

import asyncio
import json
import resource
import sys

from tests.poison_logs import RV_SHIFT, job_record, seed_records

PODS = 10_000


def big_log(pods: int = PODS) -> list[bytes]:
    rec = job_record("huge", "default", RV_SHIFT - 4)
    rec["object"]["spec"]["tasks"][1]["replicas"] = pods - 1  # master 1 + workers
    uid = rec["object"]["metadata"]["uid"]
    recs = seed_records()
    pg = json.loads(json.dumps([r for r in recs if r["object"]["kind"] == "PodGroup"][2]))  # Inqueue
    meta = pg["object"]["metadata"]
    meta.update(name=f"huge-{uid}", namespace="default", resourceVersion=str(RV_SHIFT))
    for ref in meta.get("ownerReferences") or ():
        ref.update(name="huge", uid=uid)
    queue = [r for r in recs if r["object"]["kind"] == "Queue"]
    return [json.dumps(r).encode() for r in [*queue, rec, pg]]


def reference(lines: list[bytes], *, first_seq: int = 1) -> dict[str, list[tuple[str, str, bytes]]]:
    """The eager fold's messages: the engine renders every pod into its CreatePod at once."""
    from statemachines.engine import Engine
    from statemachines.manifests.renderer import Renderer
    from tests.fixtures_nats import expected_outputs

    renderer = Renderer()
    engine = Engine(render_pod=renderer.pod, render_podgroup=renderer.podgroup)
    return expected_outputs(list(enumerate(lines, first_seq)), engine)


def engine_as_up_builds_it():
    from statemachines.engine import Engine
    from statemachines.manifests.renderer import Renderer

    renderer = Renderer()
    return Engine(render_pod=renderer.pod, render_podgroup=renderer.podgroup)


async def publish(bus, lines: list[bytes]) -> None:  # noqa: ANN001
    from statemachines.model.records import decode
    from vcbus.bus.publisher import prepare

    for line in lines:
        msg = prepare(line, decode(line))
        assert msg is not None
        await bus.js.publish(msg.subject, msg.body, headers=msg.headers)


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def _main(url: str) -> None:
    import msgspec

    from tests.fixtures_nats import FROZEN_EARLY
    from vcbus.bus.connecting import open_bus
    from vcbus.bus.decider import Decider
    from vcbus.settings import BusSettings

    async with open_bus(BusSettings(nats_url=url)) as bus:
        await publish(bus, big_log())
        before = _peak_mb()
        decider = Decider(bus, engine=engine_as_up_builds_it(), clock=lambda: FROZEN_EARLY)
        await decider.run(until_idle=True)
        print(json.dumps({"before_mb": before, "peak_mb": _peak_mb(), "stats": msgspec.to_builtins(decider.stats)}))


if __name__ == "__main__":
    asyncio.run(_main(sys.argv[1]))
