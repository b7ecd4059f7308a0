"""Volcano's CRD schemas from the small declarative descriptions in `deploy/crds/src/<plural>.yaml`.

Each description is written from Volcano's Go API types (volcano-sh/apis
`pkg/apis/batch/v1alpha1/job.go`, `pkg/apis/scheduling/v1beta1/types.go`,
`pkg/apis/bus/v1alpha1/commands.go`): one entry of `types` per Go type, one field
per Go field with its kubebuilder markers. A field is `TYPE` or a mapping
`{type: TYPE, description, required: true, listType, <schema keywords>}`; TYPE is

* a scalar: `string`, `boolean`, `integer` (Go `int`), `int32`, `int64`,
  `duration` (metav1.Duration: a string), `time` (metav1.Time), `quantity`,
  `object` (anything, kept as sent);
* `[]TYPE` (a list), `map[TYPE]` (string keys);
* `k8s:<name>`: a Kubernetes type from the stored OpenAPI schemas (tools/crdgen/k8s.py);
* the name of another entry of `types` (a struct with `fields`, or a named scalar
  such as an enum, like Go's `type Event string` with its `+kubebuilder:validation:Enum`).

The output follows controller-gen's conventions (properties and `required` sorted,
`format: int32` for int32), so the counts of constraints can be compared with
Volcano's generated CRDs.
"""

from __future__ import annotations

import copy
from typing import Any

from tools.crdgen.k8s import QUANTITY_PATTERN, Inliner

SCALARS: dict[str, dict[str, Any]] = {
    "string": {"type": "string"},
    "boolean": {"type": "boolean"},
    "integer": {"type": "integer"},
    "int32": {"type": "integer", "format": "int32"},
    "int64": {"type": "integer", "format": "int64"},
    "duration": {"type": "string"},
    "time": {"type": "string", "format": "date-time"},
    "object": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
    "quantity": {"anyOf": [{"type": "integer"}, {"type": "string"}], "pattern": QUANTITY_PATTERN,
                 "x-kubernetes-int-or-string": True},
}  # fmt: skip
FIELD_KEYS = frozenset({"type", "description", "required", "listType", "mapType"})
SCHEMA_KEYS = frozenset({"default", "enum", "pattern", "minimum", "maximum", "minLength", "maxLength",
                         "minItems", "maxItems", "format"})  # fmt: skip


class DescriptionError(ValueError):
    """A description file says something the generator cannot turn into a schema."""


class Describer:
    """Turns one description (`types`, `root`) into an `openAPIV3Schema`."""

    def __init__(self, source: str, types: dict[str, Any], k8s: Inliner, descriptions: bool = True):
        self.source = source
        self.types = types
        self.k8s = k8s
        self.descriptions = descriptions

    def root(self, name: str) -> dict[str, Any]:
        """The CRD's openAPIV3Schema for the root type `name` (apiVersion, kind and metadata added)."""
        schema = self._type(name, stack=())
        props = schema.setdefault("properties", {})
        props["apiVersion"] = {"type": "string"}
        props["kind"] = {"type": "string"}
        props["metadata"] = {"type": "object"}
        schema["properties"] = dict(sorted(props.items()))
        return schema

    def _fail(self, where: str, what: str) -> DescriptionError:
        return DescriptionError(f"{self.source}: {where}: {what}")

    def _expr(self, expr: str, where: str, stack: tuple[str, ...]) -> dict[str, Any]:
        if not isinstance(expr, str) or not expr:
            raise self._fail(where, f"type must be a non-empty string, not {expr!r}")
        if expr.startswith("[]"):
            return {"type": "array", "items": self._expr(expr[2:], where, stack)}
        if expr.startswith("map[") and expr.endswith("]"):
            return {"type": "object", "additionalProperties": self._expr(expr[4:-1], where, stack)}
        if expr in SCALARS:
            return copy.deepcopy(SCALARS[expr])
        if expr.startswith("k8s:"):
            try:
                return self.k8s.schema(expr[4:])
            except KeyError:
                raise self._fail(where, f"{expr[4:]} is not in the stored Kubernetes schemas") from None
        return self._type(expr, stack, where)

    def _type(self, name: str, stack: tuple[str, ...], where: str = "") -> dict[str, Any]:
        if name not in self.types:
            raise self._fail(where or name, f"unknown type {name!r} (not a scalar, []T, map[T], k8s:... or an entry of types)")
        if name in stack:
            raise self._fail(name, f"recursive type: {' -> '.join(stack + (name,))}")
        spec = self.types[name]
        if not isinstance(spec, dict):
            raise self._fail(name, "a type must be a mapping with `fields` or `type`")
        if "fields" in spec:
            out: dict[str, Any] = {"type": "object"}
            if self.descriptions and spec.get("description"):
                out["description"] = spec["description"]
            props, required = {}, []
            for field, fspec in sorted((spec["fields"] or {}).items()):
                props[field] = self._field(fspec, f"{name}.{field}", stack + (name,))
                if isinstance(fspec, dict) and fspec.get("required"):
                    required.append(field)
            out["properties"] = props
            if required:
                out["required"] = sorted(required)
            if spec.get("mapType"):
                out["x-kubernetes-map-type"] = spec["mapType"]
            return out
        if "type" in spec:
            base = self._expr(spec["type"], name, stack + (name,))
            return _constrain(base, spec, lambda what: self._fail(name, what))
        raise self._fail(name, "a type needs `fields` (a struct) or `type` (a named scalar)")

    def _field(self, fspec: Any, where: str, stack: tuple[str, ...]) -> dict[str, Any]:
        if isinstance(fspec, str):
            return self._expr(fspec, where, stack)
        if not isinstance(fspec, dict) or "type" not in fspec:
            raise self._fail(where, "a field is a TYPE or a mapping with `type`")
        unknown = set(fspec) - FIELD_KEYS - SCHEMA_KEYS
        if unknown:
            raise self._fail(where, f"unknown keys {sorted(unknown)}")
        out = self._expr(fspec["type"], where, stack)
        out = _constrain(out, fspec, lambda what: self._fail(where, what))
        if self.descriptions and fspec.get("description"):
            out = {"description": fspec["description"], **{k: v for k, v in out.items() if k != "description"}}
        elif "description" in out and not self.descriptions:
            del out["description"]
        if fspec.get("listType"):
            out["x-kubernetes-list-type"] = fspec["listType"]
        if fspec.get("mapType"):
            out["x-kubernetes-map-type"] = fspec["mapType"]
        return out


def _constrain(base: dict[str, Any], spec: dict[str, Any], fail) -> dict[str, Any]:
    out = dict(base)
    for key in sorted(SCHEMA_KEYS & set(spec)):
        if key in ("minItems", "maxItems") and out.get("type") != "array":
            raise fail(f"{key} on a non-list")
        out[key] = copy.deepcopy(spec[key])
    return out
