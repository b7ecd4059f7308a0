"""A seeded generator of bad watch records and vcjob manifests, for the fuzz tests.

Each case starts from a real shape (the seed log's records, the seed vcjob) and
applies a few mutations at random paths: a value replaced by one from `ODD`
(wrong types, int32 and int64 edges, a 10M replica count, Go durations the
engine must refuse, NUL, CR, unicode, unquoted dates, long strings, nesting),
a key deleted, a list emptied or repeated, a record's type or time changed,
or a record repeated. The same seed gives the same cases, so a failure names
its seed and can be replayed.
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Iterator
from typing import Any


def _deep(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = [value]
    return value


ODD: tuple[Any, ...] = (
    None, "", "soon", "99999999999h", "1d", "10m", "-5s", 0, -1, 1, 3.5, True, False,
    2**31 - 1, 2**31, 2**63, 2**64, 10_000_000, -(2**31) - 1,
    [], {}, [1, 2], {"a": 1}, "x" * 300, "a\x00b", "cr\rlf\n", "名前", "2026-11-30", "not-a-time",
    "2026-11-30T08:00:00Z", "team.a", "a/b", "%2E", "*", ">", _deep(40),
)  # fmt: skip
WATCH_TYPES = ("ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR", "TIMER", "", "added")


def paths(value: Any, prefix: tuple = ()) -> Iterator[tuple]:
    """Every path (tuple of keys and indexes) inside `value`, the root excluded."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield prefix + (key,)
            yield from paths(item, prefix + (key,))
    elif isinstance(value, list):
        for i, item in enumerate(value[:8]):
            yield prefix + (i,)
            yield from paths(item, prefix + (i,))


def _parent(value: Any, path: tuple) -> Any:
    for step in path[:-1]:
        value = value[step]
    return value


def mutate(value: Any, rng: random.Random, count: int) -> Any:
    """A copy of `value` with `count` random mutations."""
    value = copy.deepcopy(value)
    for _ in range(count):
        every = list(paths(value))
        if not every:
            return value
        path = rng.choice(every)
        parent, last = _parent(value, path), path[-1]
        roll = rng.random()
        if roll < 0.6:
            parent[last] = copy.deepcopy(rng.choice(ODD))
        elif roll < 0.75 and isinstance(parent, dict):
            del parent[last]
        elif roll < 0.85 and isinstance(parent[last], list):
            parent[last] = parent[last] * rng.choice((0, 2, 3))
        elif roll < 0.95 and isinstance(parent, dict):
            parent[rng.choice(("name", "namespace", "replicas", "timeout", "uid", "extra"))] = copy.deepcopy(
                rng.choice(ODD)
            )
        else:  # an object where a scalar was (or the other way round)
            parent[last] = copy.deepcopy(value.get("metadata")) if isinstance(value, dict) else None
    return value


def watch_log(base: list[dict], rng: random.Random, *, mutated: int) -> list[bytes]:
    """`base` with `mutated` of its records mutated (and sometimes retyped or repeated), as JSON lines."""
    records = [copy.deepcopy(r) for r in base]
    for _ in range(mutated):
        i = rng.randrange(len(records))
        rec = mutate(records[i], rng, rng.randint(1, 4))
        if rng.random() < 0.15 and isinstance(rec, dict):
            rec["type"] = rng.choice(WATCH_TYPES)
        if rng.random() < 0.15 and isinstance(rec, dict):
            rec["time"] = rng.choice(ODD)
        if rng.random() < 0.2:
            records.insert(i + 1, rec)  # a mutated copy beside the original
        else:
            records[i] = rec
    lines = []
    for rec in records:
        try:
            lines.append(json.dumps(rec, ensure_ascii=rng.random() < 0.5).encode())
        except (TypeError, ValueError):  # a self-reference from the last mutation kind
            lines.append(b'{"type": "ADDED", "object": ')
    if rng.random() < 0.3:
        lines.insert(rng.randrange(len(lines)), b"{not json")
    return lines


def manifest_text(job: dict, rng: random.Random) -> str:
    """A mutated vcjob as YAML or JSON text (sometimes with a raw edit the dumper would not make)."""
    import yaml

    mutated = mutate(job, rng, rng.randint(1, 5))
    try:
        text = json.dumps(mutated) if rng.random() < 0.4 else yaml.safe_dump(mutated, allow_unicode=True)
    except (TypeError, ValueError):
        text = "kind: Job\nmetadata: &a\n  name: *a\n"
    if rng.random() < 0.1:
        text = text.replace("name: ", "name: 2026-11-30 #", 1)
    return text
