"""The AsyncAPI document and the CloudEvents attributes agree with the code that publishes.

docs/asyncapi.yaml is generated (tests/test_docs_current.py checks it is current); here
its content is checked against the publishing code itself: every event and command type
has a message whose payload is its JSON Schema file and whose fixed headers are what
`cloudevents.headers` sets for an instance; channel addresses are the subjects
`vcbus.bus.subjects` builds. And the CloudEvents source: `--source`, else the cluster
of the kubeconfig context, else /vcbus.
"""

from __future__ import annotations

import pathlib
import re

import msgspec.inspect as mi
import pytest
import yaml

from statemachines import outputs as o
from tools.asyncapi import document
from vcbus.bus import subjects as s
from vcbus.bus.cloudevents import DEFAULT_SOURCE, headers, resolve_source
from vcbus.errors import UserError

ROOT = pathlib.Path(__file__).resolve().parents[1]


ZERO = {mi.StrType: "", mi.IntType: 0, mi.FloatType: 0.0, mi.BoolType: False, mi.ListType: [], mi.DictType: {}}


def instance(cls: type) -> o.Output:
    """An output of type `cls` for job team-a/train.v2, its other required fields zero."""
    info = mi.type_info(cls)
    required = {f.name: ZERO.get(type(f.type)) for f in info.fields if f.required}
    return cls(**{**required, "job": "team-a/train.v2", "seq": 7})


def test_every_type_has_a_message_with_its_schema_and_fixed_headers():
    doc = document()
    messages = doc["components"]["messages"]
    common = doc["components"]["schemas"]["cloudevents-headers"]
    for cls in (*o.DOMAIN_EVENTS, *o.COMMANDS):
        tag = o.tag_of(cls)
        msg = messages[tag]
        assert (ROOT / "docs" / msg["payload"]["$ref"]).exists(), tag
        fixed = msg["headers"]["allOf"][1]["properties"]
        h = headers(instance(cls), ce_id="7:0", source="/x")
        assert fixed["ce-type"]["const"] == h["ce-type"] and fixed["ce-dataschema"]["const"] == h["ce-dataschema"]
        assert set(common["required"]) <= set(h), tag
        assert set(h) - {"ce-time"} <= set(common["properties"])
        assert h["ce-dataschema"].removeprefix("urn:vcbus:schema:") + ".json" == pathlib.Path(msg["payload"]["$ref"]).name


def test_channel_addresses_are_the_published_subjects():
    channels = document()["channels"]
    for cls in o.DOMAIN_EVENTS:
        tag = o.tag_of(cls)
        address = channels[tag]["address"].format(namespace=s.token("team-a"), name=s.token("train.v2"))
        assert address == s.event_subject("team-a/train.v2", tag)
    assert channels["commands"]["address"].format(namespace="team-a", name="j") == s.command_subject("team-a/j")
    assert set(channels["commands"]["messages"]) == {o.tag_of(c) for c in o.COMMANDS}
    for name, ch in channels.items():
        params = set(re.findall(r"\{(\w+)\}", ch["address"]))
        assert params == set(ch["parameters"]), name


def test_operations_and_refs_resolve():
    doc = document()

    def resolve(ref: str):
        node = doc
        for part in ref.removeprefix("#/").split("/"):
            node = node[part]
        return node

    text = yaml.safe_dump(doc)
    refs = re.findall(r"\$ref: '?(#/[^'\n]+)'?", text)
    assert refs
    for ref in refs:
        resolve(ref)
    assert doc["asyncapi"] == "3.0.0"
    assert {op["action"] for op in doc["operations"].values()} == {"receive", "send"}


def test_source_option_then_cluster_name_then_default(tmp_path):
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "a",
        "clusters": [{"name": "prod-eu", "cluster": {"server": "https://a"}},
                     {"name": "lab cluster/2", "cluster": {"server": "https://b"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "a", "context": {"cluster": "prod-eu", "user": "u"}},
                     {"name": "b", "context": {"cluster": "lab cluster/2", "user": "u"}}]}))
    assert resolve_source("/mine") == "/mine"
    assert resolve_source("/mine", kubeconfig=str(kubeconfig)) == "/mine"
    assert resolve_source(None, kubeconfig=str(kubeconfig)) == "/vcbus/clusters/prod-eu"
    assert resolve_source(None, kubeconfig=str(kubeconfig), context="b") == "/vcbus/clusters/lab%20cluster%2F2"
    assert resolve_source(None) == DEFAULT_SOURCE == "/vcbus"
    with pytest.raises(UserError, match="--source ' ': expected a URI reference"):
        resolve_source(" ")
