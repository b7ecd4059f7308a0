"""Logs with poison records between two good jobs, for the bus and the replay poison tests.

Good jobs: the seed log's job (`default/resnet-dist-train`) and a copy of it in
namespace `team-b` (new uids, resourceVersions after the first copy's, no second
Queue). Between them, one record of each kind that used to halt the decider or
drop outputs:

- `no-namespace`: a vcjob without `metadata.namespace`;
- `deep`: a vcjob nested 1,200 levels deep (RecursionError in decoding);
- `invalid-json`: a line that is not JSON;
- `bad-time`: a good vcjob `default/bad-time` with `time: "not-a-time"` and
  `creationTimestamp: "yesterday"` (kept, not poisoned: the times count as absent);
- `crash-me`: a decodable vcjob `default/crash-me` the engine is made to fail on
  (`crashing_engine`: no real record crashes the engine; fuzzing the seed job's
  fields found none, so this fault is injected).
"""

from __future__ import annotations

import contextlib
import copy
import json
import pathlib
from collections.abc import Iterator

from statemachines.engine import Engine
from tests.test_replay_cli import records

ROOT = pathlib.Path(__file__).resolve().parents[1]
SEED = ROOT / "examples" / "resnet-dist-train.json"
CRASH_JOB = "crash-me"
RV_SHIFT = 1_000_000


def seed_records() -> list[dict]:
    return records(SEED)


def copy_in_namespace(recs: list[dict], namespace: str) -> list[dict]:
    """The seed job again in `namespace`: other uids and later resourceVersions (no Queue)."""
    out = []
    for rec in recs:
        if rec["object"]["kind"] == "Queue":
            continue
        text = json.dumps(rec).replace('"default"', f'"{namespace}"').replace('"queue": "' + namespace, '"queue": "default')
        text = text.replace('"volcano.sh/queue-name": "' + namespace, '"volcano.sh/queue-name": "default')
        new = json.loads(text.replace("-80", "-9f"))  # every uid of the seed log has "-80..."
        meta = new["object"]["metadata"]
        if meta.get("resourceVersion", "").isdigit():
            meta["resourceVersion"] = str(int(meta["resourceVersion"]) + RV_SHIFT)
        out.append(new)
    return out


def job_record(name: str, namespace: str | None, rv: int, **extra) -> dict:
    meta = {"name": name, "uid": f"uid-{name}", "resourceVersion": str(rv), "creationTimestamp": "2026-11-30T08:10:00Z"}
    if namespace is not None:
        meta["namespace"] = namespace
    job = seed_records()[1]["object"]
    obj = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": meta, "spec": copy.deepcopy(job["spec"])}
    rec = {"type": "ADDED", "object": obj}
    rec.update(extra)
    return rec


def deep_record(depth: int = 1200) -> bytes:
    rec = json.dumps(job_record("deep", "default", RV_SHIFT - 3))
    return rec[:-2].encode() + b', "deep": ' + b"[" * depth + b"]" * depth + b"}}"


def poison_lines() -> dict[str, bytes]:
    """The records between the two good jobs, by name, in log order (one JSON line each)."""
    bad_time = job_record("bad-time", "default", RV_SHIFT - 1, time="not-a-time")
    bad_time["object"]["metadata"]["creationTimestamp"] = "yesterday"
    return {
        "no-namespace": json.dumps(job_record("flaky", None, RV_SHIFT - 5)).encode(),
        "deep": deep_record(),
        "invalid-json": b'{"type": "ADDED", "object": {"kind": "Job", "metadata": }}',
        "bad-time": json.dumps(bad_time).encode(),
        "crash-me": json.dumps(job_record(CRASH_JOB, "default", RV_SHIFT - 2)).encode(),
    }


def poison_log(path: pathlib.Path) -> pathlib.Path:
    """Good job A, the poison records, good job B: one JSON line per record."""
    recs = seed_records()
    lines = [json.dumps(r).encode() for r in recs]
    lines += list(poison_lines().values())
    lines += [json.dumps(r).encode() for r in copy_in_namespace(recs, "team-b")]
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


@contextlib.contextmanager
def crashing_engine(monkeypatch) -> Iterator[None]:
    """Make `Engine.apply` fail on the crash-me vcjob *after* folding it (a half-applied engine)."""
    original = Engine.apply

    def apply(self, seq, record, *, raw=None):
        outs = original(self, seq, record, raw=raw)
        obj = getattr(record, "object", None)
        if obj is not None and obj.metadata.name == CRASH_JOB:
            raise KeyError("injected fault: the engine broke on crash-me")
        return outs

    with monkeypatch.context() as m:
        m.setattr(Engine, "apply", apply)
        yield
