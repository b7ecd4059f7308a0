"""Domain events and commands as CloudEvents 1.0 in binary content mode (NATS headers + JSON body).

The body is the output itself, exactly as `statemachines.outputs.encoder`
writes it (its `type` field is the tag, so a body alone can be decoded). The
headers carry the CloudEvents attributes:

    ce-specversion  1.0
    ce-id           <causing VCBUS_K8S seq>:<index of the output in that record's outputs>
    ce-source       settings.ce_source: `--source`, else `/vcbus/clusters/<cluster name>` of
                    the kubeconfig context, else "/vcbus" (see `resolve_source`)
    ce-type         sh.volcano.<tag>, e.g. sh.volcano.job.phase.changed.v1
    ce-subject      <namespace>/<name> of the job
    ce-time         the event time of the causing record (RFC 3339), when known
    ce-causationid  the causing VCBUS_K8S stream sequence
    ce-datacontenttype  application/json
    ce-dataschema   urn:vcbus:schema:<tag>, the JSON Schema docs/schemas/<tag>.json (its `$id`
                    is `<tag>.json`; docs/asyncapi.yaml maps every type to its schema)
    content-type    application/json
    Nats-Msg-Id     the same as ce-id

The id is a function of the log position alone, so a decider that crashes and
decides a record again publishes the same ids, and JetStream drops the repeats.
Ids are unique within one bus; CloudEvents identifies an event by (source, id), so
clusters that feed one consumer must have different sources: the default source
names the cluster of the kubeconfig, and `--source` (or VCBUS_CE_SOURCE) sets it.
"""

from __future__ import annotations

from typing import Any

import msgspec

from statemachines import outputs as o
from vcbus.errors import UserError

SPECVERSION = "1.0"
TYPE_PREFIX = "sh.volcano."
CONTENT_TYPE = "application/json"
MSG_ID = "Nats-Msg-Id"
SCHEMA_PREFIX = "urn:vcbus:schema:"
DEFAULT_SOURCE = "/vcbus"
ENV_SOURCE = "VCBUS_CE_SOURCE"


def ce_type(out: o.Output) -> str:
    return TYPE_PREFIX + o.tag_of(type(out))


def dataschema(out_type: type) -> str:
    """The `dataschema` of an output type: `urn:vcbus:schema:<tag>` (file docs/schemas/<tag>.json)."""
    return SCHEMA_PREFIX + o.tag_of(out_type)


def output_id(seq: int, index: int) -> str:
    return f"{seq}:{index}"


def headers(out: o.Output, *, ce_id: str, source: str) -> dict[str, str]:
    h = {
        MSG_ID: ce_id,
        "ce-specversion": SPECVERSION,
        "ce-id": ce_id,
        "ce-source": source,
        "ce-type": ce_type(out),
        "ce-subject": out.job,
        "ce-causationid": str(out.seq),
        "ce-datacontenttype": CONTENT_TYPE,
        "ce-dataschema": dataschema(type(out)),
        "content-type": CONTENT_TYPE,
    }
    if out.time:
        h["ce-time"] = out.time
    return h


class CloudEvent(msgspec.Struct, frozen=True, kw_only=True):
    """One event or command as read from the bus, with its stream position.

    `data` is the typed output (`statemachines.outputs`); `stream_seq` is its
    sequence in VCBUS_JOBS (or VCBUS_CMDS), `causation` the VCBUS_K8S sequence
    of the record that caused it.
    """

    id: str
    source: str
    type: str
    subject: str
    time: str = ""
    causation: int = 0
    stream_seq: int = 0
    dataschema: str = ""
    data: o.Output

    def structured(self) -> dict[str, Any]:
        """The event in CloudEvents' structured JSON form (what `vcbus events tail --json` prints)."""
        out: dict[str, Any] = {
            "specversion": SPECVERSION,
            "id": self.id,
            "source": self.source,
            "type": self.type,
            "subject": self.subject,
        }
        if self.time:
            out["time"] = self.time
        out["datacontenttype"] = CONTENT_TYPE
        out["dataschema"] = self.dataschema or dataschema(type(self.data))
        out["causationid"] = str(self.causation)
        out["sequence"] = self.stream_seq
        out["data"] = msgspec.to_builtins(self.data)
        return out


def from_message(data: bytes, hdrs: dict[str, str] | None, stream_seq: int) -> CloudEvent:
    """Decode a message of VCBUS_JOBS or VCBUS_CMDS; raise `msgspec.DecodeError` on a bad body."""
    out = o.output_decoder.decode(data)
    h = hdrs or {}
    causation = h.get("ce-causationid", "")
    return CloudEvent(
        id=h.get("ce-id") or output_id(out.seq, 0),
        source=h.get("ce-source", ""),
        type=h.get("ce-type") or ce_type(out),
        subject=h.get("ce-subject") or out.job,
        time=h.get("ce-time") or out.time,
        causation=int(causation) if causation.isdigit() else out.seq,
        stream_seq=stream_seq,
        dataschema=h.get("ce-dataschema") or dataschema(type(out)),
        data=out,
    )


def resolve_source(source: str | None, *, kubeconfig: str | None = None, context: str | None = None) -> str:
    """The CloudEvents source: `--source`, else `/vcbus/clusters/<name>` of the kubeconfig's cluster, else /vcbus.

    `source` (the option, or VCBUS_CE_SOURCE through click's envvar) must be a URI
    reference without spaces. The cluster name is the `cluster` of the context used
    (kubectl's naming), so two clusters behind one consumer differ without any flag;
    in a pod (no kubeconfig) there is no name to read, so set --source per cluster.
    """
    if source is not None:
        if not source.strip() or any(c.isspace() for c in source):
            raise UserError(f"--source {source!r}: expected a URI reference without spaces, e.g. /vcbus/clusters/prod")
        return source
    if kubeconfig is None and context is None:
        return DEFAULT_SOURCE
    try:
        from kubernetes import config

        contexts, active = config.list_kube_config_contexts(config_file=kubeconfig)
        chosen = next((c for c in contexts if c.get("name") == context), None) if context else active
        name = ((chosen or {}).get("context") or {}).get("cluster") or ""
    except Exception:  # no readable kubeconfig: api_client_for reports it
        name = ""
    return f"{DEFAULT_SOURCE}/clusters/{_uri_segment(name)}" if name else DEFAULT_SOURCE


def _uri_segment(text: str) -> str:
    from urllib.parse import quote

    return quote(text, safe="-._~")
