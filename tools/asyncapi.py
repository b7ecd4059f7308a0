"""The AsyncAPI 3.0 document of the bus (docs/asyncapi.yaml), generated from the same types as the schemas.

One channel per domain event type on VCBUS_JOBS (its subject ends in the event's
tag), one channel for the commands on VCBUS_CMDS (one subject per job, one message
per command type), and the log VCBUS_K8S. Each message's payload is a `$ref` to the
JSON Schema `tools.schemas` writes (docs/schemas/<tag>.json), and its headers
are the CloudEvents binary-mode headers `vcbus.bus.cloudevents.headers` sets, with
`ce-type` and `ce-dataschema` fixed per message. A test checks the checked-in file
is what this module generates, as for the schemas.

    .venv/bin/python -m tools.asyncapi           # rewrite docs/asyncapi.yaml
    .venv/bin/python -m tools.asyncapi --check   # exit 1 if it is stale
"""

from __future__ import annotations

import argparse
import pathlib
import sys
from typing import Any

import yaml

from statemachines import outputs as o
from vcbus.bus import subjects as s
from vcbus.bus.cloudevents import CONTENT_TYPE, SCHEMA_PREFIX, SPECVERSION, TYPE_PREFIX, dataschema

DEFAULT_PATH = pathlib.Path(__file__).resolve().parents[1] / "docs" / "asyncapi.yaml"
SCHEMA_DIR = "schemas"  # relative to the document: docs/schemas/

JOB_PARAMETERS = {"namespace": {"$ref": "#/components/parameters/namespace"},
                  "name": {"$ref": "#/components/parameters/name"}}
PARAMETERS = {
    "namespace": {"description": "The job's namespace, one subject token (`.` `*` `>` `%` and spaces as %XX)."},
    "name": {"description": "The job's name, one subject token (escaped as the namespace)."},
}


def _text(description: str, **more: Any) -> dict[str, Any]:
    return {"type": "string", "description": description, **more}


CE_HEADERS = {
    "type": "object",
    "required": ["ce-specversion", "ce-id", "ce-source", "ce-type", "ce-subject", "ce-causationid",
                 "ce-datacontenttype", "ce-dataschema", "content-type", "Nats-Msg-Id"],
    "properties": {
        "ce-specversion": _text("CloudEvents version.", const=SPECVERSION),
        "ce-id": _text("`<VCBUS_K8S seq>:<index>` (scheduler: `sched:<cut>:<session>:<index>`); unique per source."),
        "ce-source": _text("`--source` of the publisher; by default `/vcbus/clusters/<cluster>`, else `/vcbus`."),
        "ce-type": _text(f"The CloudEvents type, `{TYPE_PREFIX}<tag>`."),
        "ce-subject": _text("The job, `<namespace>/<name>`."),
        "ce-time": _text("Event time of the causing record (RFC 3339), when known.", format="date-time"),
        "ce-causationid": _text("The VCBUS_K8S sequence of the causing record (scheduler: the session's cut)."),
        "ce-datacontenttype": _text("Content type of the body.", const=CONTENT_TYPE),
        "ce-dataschema": _text(f"`{SCHEMA_PREFIX}<tag>`: the body's JSON Schema, {SCHEMA_DIR}/<tag>.json."),
        "content-type": _text("Content type of the body.", const=CONTENT_TYPE),
        "Nats-Msg-Id": _text("The same as ce-id: JetStream drops a repeat within the duplicate window."),
    },
}


def _headers(cls: type) -> dict[str, Any]:
    """The common CloudEvents headers, with this type's `ce-type` and `ce-dataschema` fixed."""
    return {"allOf": [
        {"$ref": "#/components/schemas/cloudevents-headers"},
        {"properties": {"ce-type": {"const": TYPE_PREFIX + o.tag_of(cls)},
                        "ce-dataschema": {"const": dataschema(cls)}}},
    ]}


def _message(cls: type) -> dict[str, Any]:
    tag = o.tag_of(cls)
    doc = (cls.__doc__ or "").strip().split("\n\n", 1)[0].replace("\n", " ")
    return {
        "name": cls.__name__,
        "title": TYPE_PREFIX + tag,
        "summary": doc or cls.__name__,
        "contentType": CONTENT_TYPE,
        "headers": _headers(cls),
        "payload": {"$ref": f"{SCHEMA_DIR}/{tag}.json"},
    }


def document() -> dict[str, Any]:
    channels: dict[str, Any] = {}
    operations: dict[str, Any] = {}
    messages: dict[str, Any] = {}
    for cls in o.DOMAIN_EVENTS:
        tag = o.tag_of(cls)
        messages[tag] = _message(cls)
        channels[tag] = {
            "address": f"{s.JOBS_PREFIX}.{{namespace}}.{{name}}.{s.event_subtype(tag)}",
            "title": f"{cls.__name__} events (stream {s.JOBS_STREAM})",
            "parameters": JOB_PARAMETERS,
            "messages": {tag: {"$ref": f"#/components/messages/{tag}"}},
        }
        operations[f"receive.{tag}"] = {
            "action": "receive",
            "channel": {"$ref": f"#/channels/{tag}"},
            "messages": [{"$ref": f"#/channels/{tag}/messages/{tag}"}],
        }
    commands = {}
    for cls in o.COMMANDS:
        tag = o.tag_of(cls)
        messages[tag] = _message(cls)
        commands[tag] = {"$ref": f"#/components/messages/{tag}"}
    channels["commands"] = {
        "address": f"{s.CMDS_PREFIX}.{{namespace}}.{{name}}",
        "title": f"Commands for the cluster side (stream {s.CMDS_STREAM})",
        "description": "Every command of one job on one subject, in decision order; `ce-type` tells them apart.",
        "parameters": JOB_PARAMETERS,
        "messages": commands,
    }
    operations["receive.commands"] = {
        "action": "receive",
        "channel": {"$ref": "#/channels/commands"},
        "messages": [{"$ref": f"#/channels/commands/messages/{tag}"} for tag in commands],
    }
    channels["log"] = {
        "address": f"{s.K8S_PREFIX}.{{kind}}.{{namespace}}.{{name}}",
        "title": f"The log: Kubernetes watch records as observed (stream {s.K8S_STREAM})",
        "description": "Not CloudEvents: the watch event as the API server sent it, `managedFields` reduced "
                       "to who wrote and when (docs/events.md). `kind` `timer` holds the decider's TIMER "
                       "records, `refusal` the actuator's REFUSED records (a command the API server refused "
                       "for good), `bookmark` and `error` the log's BOOKMARK and watch ERROR records.",
        "parameters": {
            "kind": {"description": "Lower-case kind: job, pod, podgroup, queue, command, node, priorityclass, "
                                        "namespace, persistentvolumeclaim, persistentvolume, storageclass, csinode, "
                                        "volumeattachment, service, "
                                        "replicationcontroller, replicaset, statefulset, daemonset, batchjob (a batch/v1 Job), "
                                        "cronjob, jobflow, jobtemplate, timer, refusal, bookmark, error."},
            "namespace": {"description": "The object's namespace, `_` for cluster-scoped objects."},
            "name": {"$ref": "#/components/parameters/name"},
        },
        "messages": {"watch-record": {"$ref": "#/components/messages/watch-record"}},
    }
    messages["watch-record"] = {
        "name": "WatchRecord",
        "title": "A Kubernetes watch event",
        "contentType": CONTENT_TYPE,
        "headers": {"type": "object", "properties": {
            name: {"type": "string"} for name in ("Nats-Msg-Id", "Vcbus-Kind", "Vcbus-Namespace", "Vcbus-Name",
                                                  "Vcbus-Resource-Version", "Vcbus-Type", "Vcbus-Job")}},
        "payload": {"type": "object", "required": ["type"], "properties": {
            "type": {"type": "string", "enum": ["ADDED", "MODIFIED", "DELETED", "TIMER", "REFUSED"]},
            "object": {"type": "object", "description": "the watched object (ADDED, MODIFIED, DELETED)"},
            "timer": {"type": "object", "description": "TIMER: job, id, due"},
            "refusal": {"type": "object", "description": "REFUSED: job, command, name, task, seq, jobUid, "
                                                         "jobVersion, code, reason, message (docs/events.md)"}}},
    }
    operations["send.log"] = {"action": "send", "channel": {"$ref": "#/channels/log"},
                              "messages": [{"$ref": "#/channels/log/messages/watch-record"}]}
    return {
        "asyncapi": "3.0.0",
        "info": {
            "title": "vcbus",
            "version": "1",
            "description": "Volcano Job semantics on NATS JetStream: the log (VCBUS_K8S), the domain events "
                           "(VCBUS_JOBS) and the commands (VCBUS_CMDS), events and commands as CloudEvents 1.0 in "
                           "binary content mode. Generated by `make docs` (tools.asyncapi) from "
                           "statemachines/outputs.py, the source of docs/schemas/ too; see docs/events.md.",
        },
        "defaultContentType": CONTENT_TYPE,
        "servers": {"embedded": {"host": "127.0.0.1:4222", "protocol": "nats",
                                 "description": "Any nats-server with JetStream; `vcbus up` starts one on demand."}},
        "channels": channels,
        "operations": operations,
        "components": {"messages": messages, "schemas": {"cloudevents-headers": CE_HEADERS},
                       "parameters": PARAMETERS},
    }


def render() -> str:
    header = "# Generated by `make docs` (python -m tools.asyncapi) from statemachines/outputs.py: do not edit.\n"
    return header + yaml.dump(document(), Dumper=_NoAliases, sort_keys=False, width=120, allow_unicode=True)


class _NoAliases(yaml.SafeDumper):
    """Write shared dicts out in full: no `&id001` anchors in a document people read."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Generate (or --check) docs/asyncapi.yaml.")
    ap.add_argument("--check", action="store_true", help="exit 1 if the file is not current")
    ap.add_argument("--path", type=pathlib.Path, default=DEFAULT_PATH)
    args = ap.parse_args(argv)
    if args.check:
        current = args.path.exists() and args.path.read_text() == render()
        if not current:
            print(f"{args.path}: out of date (run: make docs)", file=sys.stderr)
        return 0 if current else 1
    args.path.write_text(render())
    print(f"wrote {args.path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
