"""JSON Schemas of every domain event and command, generated from the msgspec types.

One file per type in docs/schemas/, named after the tag (`job.phase.changed.v1.json`),
plus `index.json` mapping each CloudEvents type to its file and stream, and
`k8s.refused.v1.json`: the REFUSED record the actuator appends to VCBUS_K8S (not a
CloudEvent: a log record, as the watch and TIMER records are). The
types in `statemachines/outputs.py` are the source of truth; a test checks
that the checked-in files are what this module generates.

    .venv/bin/python -m tools.schemas           # rewrite docs/schemas/
    .venv/bin/python -m tools.schemas --check   # exit 1 if they are stale
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
from typing import Any

import msgspec

from statemachines import outputs as o
from statemachines.model.records import REFUSED, RefusalSpec
from vcbus.bus import subjects as s
from vcbus.bus.cloudevents import TYPE_PREFIX

DIALECT = "https://json-schema.org/draft/2020-12/schema"
DEFAULT_DIR = pathlib.Path(__file__).resolve().parents[1] / "docs" / "schemas"


def schema_of(cls: type) -> dict[str, Any]:
    tag = o.tag_of(cls)
    generated = msgspec.json.schema(cls)
    command = cls in o.COMMANDS
    return {
        "$schema": DIALECT,
        "$id": f"{tag}.json",
        "title": f"{TYPE_PREFIX}{tag}",
        "description": (
            f"Body of a {'command on VCBUS_CMDS' if command else 'domain event on VCBUS_JOBS'} "
            f"(CloudEvents type {TYPE_PREFIX}{tag}); generated from statemachines.outputs.{cls.__name__}."
        ),
        **generated,
    }


def generate() -> dict[str, str]:
    """File name -> content of every schema file."""
    files: dict[str, str] = {}
    index = []
    for cls in (*o.DOMAIN_EVENTS, *o.COMMANDS):
        tag = o.tag_of(cls)
        files[f"{tag}.json"] = json.dumps(schema_of(cls), indent=2, sort_keys=False) + "\n"
        command = cls in o.COMMANDS
        index.append(
            {
                "type": TYPE_PREFIX + tag,
                "tag": tag,
                "class": cls.__name__,
                "stream": s.CMDS_STREAM if command else s.JOBS_STREAM,
                "subject": f"{s.CMDS_PREFIX}.<namespace>.<name>"
                if command
                else f"{s.JOBS_PREFIX}.<namespace>.<name>.{s.event_subtype(tag)}",
                "schema": f"{tag}.json",
            }
        )
    files["index.json"] = json.dumps(index, indent=2) + "\n"
    files[REFUSAL_FILE] = json.dumps(refusal_schema(), indent=2, sort_keys=False) + "\n"
    return files


REFUSAL_FILE = "k8s.refused.v1.json"


def refusal_schema() -> dict[str, Any]:
    """The REFUSED record's body (statemachines.model.records.RefusalRecord)."""
    generated = msgspec.json.schema(RefusalSpec)
    return {
        "$schema": DIALECT,
        "$id": REFUSAL_FILE,
        "title": "REFUSED record",
        "description": (
            f"A command the API server refused for good, appended by the actuator to {s.K8S_STREAM} on "
            f"{s.K8S_PREFIX}.{s.REFUSAL_KIND}.<namespace>.<name> (msg id `refused:<the command's msg id>`); "
            "the decider folds it (docs/events.md). Generated from statemachines.model.records.RefusalSpec."
        ),
        "type": "object",
        "required": ["type", "refusal"],
        "properties": {
            "type": {"enum": [REFUSED]},
            "time": {"type": "string", "description": "when the actuator had the answer (RFC 3339)"},
            "refusal": {"$ref": "#/$defs/RefusalSpec"},
        },
        "$defs": generated.get("$defs", {}),
    }


def stale(directory: pathlib.Path = DEFAULT_DIR) -> list[str]:
    """Files that are missing, different or left over in `directory`."""
    want = generate()
    problems = []
    for name, content in want.items():
        path = directory / name
        if not path.exists():
            problems.append(f"{name}: missing")
        elif path.read_text() != content:
            problems.append(f"{name}: out of date")
    for path in sorted(directory.glob("*.json")) if directory.exists() else ():
        if path.name not in want:
            problems.append(f"{path.name}: no such type any more")
    return problems


def write(directory: pathlib.Path = DEFAULT_DIR) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    want = generate()
    for name, content in want.items():
        (directory / name).write_text(content)
    for path in directory.glob("*.json"):
        if path.name not in want:
            path.unlink()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Generate (or --check) docs/schemas/ from statemachines.outputs.")
    ap.add_argument("--check", action="store_true", help="exit 1 if the files are not current")
    ap.add_argument("--dir", type=pathlib.Path, default=DEFAULT_DIR)
    args = ap.parse_args(argv)
    if args.check:
        problems = stale(args.dir)
        for p in problems:
            print(p, file=sys.stderr)
        return 1 if problems else 0
    write(args.dir)
    print(f"wrote {len(generate())} files to {args.dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
