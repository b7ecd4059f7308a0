"""What kube-apiserver's decoding of a custom resource refuses, before defaults and webhooks.

`kubectl apply` / `create` ask for server-side field validation `Strict`: the
API server decodes the body and answers 400 BadRequest, before any webhook or
schema rule, for (order as the API server gives them, checked against it in
tests/test_validate_strict.py):

1. `metadata` fields of the wrong Go type or a time that does not parse (the
   first one only, in Go's words): `Job in version "v1alpha1" cannot be handled
   as a Job: json: cannot unmarshal number into Go struct field
   ObjectMeta.creationTimestamp of type string`, `... parsing time "soon" as
   "2006-01-02T15:04:05Z07:00": cannot parse "soon" as "2006"`;
2. otherwise, every duplicated key (document order), then every unknown field
   of `metadata`, then every other unknown field (sorted): `... strict decoding
   error: duplicate field "spec.minAvailable", unknown field "spec.minAvaliable"`.
   Unknown is what structural pruning would drop: a key the CRD schema does
   not declare (the pod template included, `imagePulPolicy`), `metadata`'s
   against ObjectMeta.

`type_errors` are the schema's type errors alone (`spec.tasks[1].replicas in
body must be of type integer: "string"`): Volcano's webhook decodes the object
into its Go types before it mutates or checks anything, so a job whose fields
have the wrong types never reaches its rules; vcbus says which field and which
type, from the CRD schema, before running them.

Duplicated keys cannot be seen once an object is decoded: the callers (the
manifest readers of `vcbus validate` and `vcbus render`) pass them in. The
webhook receives objects the API server has already decoded and pruned, so
only the type errors apply there.
"""

from __future__ import annotations

from typing import Any

from statemachines.admission import structural
from statemachines.admission.fields import FieldError, invalid
from statemachines.admission.gotime import rfc3339_error

VOLCANO_KINDS: dict[str, frozenset[str]] = {
    "batch.volcano.sh/v1alpha1": frozenset({"Job", "CronJob"}),
    "bus.volcano.sh/v1alpha1": frozenset({"Command"}),
    "scheduling.volcano.sh/v1beta1": frozenset({"Queue", "PodGroup"}),
    "flow.volcano.sh/v1alpha1": frozenset({"JobFlow", "JobTemplate"}),
    "topology.volcano.sh/v1alpha1": frozenset({"HyperNode"}),
    "nodeinfo.volcano.sh/v1alpha1": frozenset({"Numatopology"}),
    "config.volcano.sh/v1alpha1": frozenset({"ColocationConfiguration"}),
    "shard.volcano.sh/v1alpha1": frozenset({"NodeShard"}),
}
"""The kinds Volcano's CRDs serve, by apiVersion (upstream config/crd/volcano/bases/*.yaml, config/crd/jobflow/bases/*.yaml)."""

_VOLCANO_GROUPS = frozenset(api.partition("/")[0] for api in VOLCANO_KINDS)
_TIME = "time"
_OWNER_REFERENCE = ("OwnerReference", {"apiVersion": "string", "kind": "string", "name": "string", "uid": "types.UID",
                                       "controller": "bool", "blockOwnerDeletion": "bool"})
_MANAGED_FIELDS = ("ManagedFieldsEntry", {"manager": "string", "operation": "v1.ManagedFieldsOperationType",
                                          "apiVersion": "string", "time": _TIME, "fieldsType": "string",
                                          "fieldsV1": "any", "subresource": "string"})
OBJECT_META: dict[str, Any] = {
    "name": "string", "generateName": "string", "namespace": "string", "selfLink": "string", "uid": "types.UID",
    "resourceVersion": "string", "generation": "int64", "creationTimestamp": _TIME, "deletionTimestamp": _TIME,
    "deletionGracePeriodSeconds": "int64", "labels": "map[string]string", "annotations": "map[string]string",
    "ownerReferences": ("[]v1.OwnerReference", _OWNER_REFERENCE), "finalizers": "[]string",
    "managedFields": ("[]v1.ManagedFieldsEntry", _MANAGED_FIELDS),
}
"""ObjectMeta's fields and their Go types (a list of structs: its type and the struct's name and fields)."""

_INT_RANGE = {"int64": (-(1 << 63), (1 << 63) - 1)}


_JSON_TYPES: dict[type, str] = {str: "string", list: "array", dict: "object"}


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    return _JSON_TYPES.get(type(value), "null")


def _unmarshal(value: Any, struct: str, path: str, go_type: str) -> str:
    got = _json_type(value)
    if got == "number" and go_type in _INT_RANGE:
        got = f"number {value}"
    return f"json: cannot unmarshal {got} into Go struct field {struct}.{path} of type {go_type}"


def _scalar_error(value: Any, struct: str, path: str, go_type: str) -> str:
    """Go's error decoding JSON `value` into a field of `go_type` ("" when it decodes)."""
    if value is None or go_type == "any":
        return ""
    if go_type == _TIME:
        return _unmarshal(value, struct, path, "string") if not isinstance(value, str) else rfc3339_error(value)
    if go_type in _INT_RANGE:
        low, high = _INT_RANGE[go_type]
        integral = isinstance(value, (int, float)) and not isinstance(value, bool) and float(value).is_integer()
        return "" if integral and low <= value <= high else _unmarshal(value, struct, path, go_type)
    if go_type == "bool":
        return "" if isinstance(value, bool) else _unmarshal(value, struct, path, go_type)
    if go_type.startswith("map[string]"):
        if not isinstance(value, dict):
            return _unmarshal(value, struct, path, go_type)
        return next((e for e in (_scalar_error(v, struct, path, "string") for v in value.values()) if e), "")
    if go_type == "[]string":
        if not isinstance(value, list):
            return _unmarshal(value, struct, path, go_type)
        return next((e for e in (_scalar_error(v, struct, path, "string") for v in value) if e), "")
    return "" if isinstance(value, str) else _unmarshal(value, struct, path, go_type)


def _struct_error(obj: dict[str, Any], struct: str, fields: dict[str, Any], prefix: str,
                  where: str) -> tuple[str, str] | None:
    """(field path, Go's error) of the first field of `obj` that does not decode, else None."""
    for key, value in obj.items():
        spec = fields.get(key)
        path, here = f"{prefix}{key}", f"{where}.{key}"
        if spec is None:
            continue
        if isinstance(spec, tuple):  # a list of structs
            list_type, (item_struct, item_fields) = spec
            if value is None:
                continue
            if not isinstance(value, list):
                return here, _unmarshal(value, struct, path, list_type)
            for i, item in enumerate(value):
                if item is None:
                    continue
                if not isinstance(item, dict):
                    return f"{here}[{i}]", _unmarshal(item, struct, path, list_type.removeprefix("[]"))
                error = _struct_error(item, item_struct, item_fields, f"{path}.", f"{here}[{i}]")
                if error:
                    return error
            continue
        message = _scalar_error(value, struct, path, spec)
        if message:
            return here, message
    return None


def kind_problem(obj: dict[str, Any]) -> tuple[str, str] | None:
    """Why kubectl cannot send `obj`: ("validation", kubectl's schema check) or ("mapping", no such kind), else None.

    kubectl checks `apiVersion`, then `kind` (`kind not set`, `kind isn't string
    type`); a kind or version no CRD of a Volcano group serves has no REST mapping
    (`no matches for kind "Jobb" in version "batch.volcano.sh/v1alpha1"`).
    Kinds of other groups are left to the caller.
    """
    for key in ("apiVersion", "kind"):
        value = obj.get(key)
        if value is None or value == "":
            return "validation", f"{key} not set"
        if not isinstance(value, str):
            return "validation", f"{key} isn't string type"
    api, kind = obj["apiVersion"], obj["kind"]
    group = api.partition("/")[0] if "/" in api else ""
    if group in _VOLCANO_GROUPS and kind not in VOLCANO_KINDS.get(api, ()):
        return "mapping", f'no matches for kind "{kind}" in version "{api}"'
    return None


def metadata_error(obj: dict[str, Any], go_path: str = "") -> tuple[str, str] | None:
    """(field path, Go's error) of the first `metadata` field that does not decode into ObjectMeta, else None.

    The API server decodes `metadata` alone (`Go struct field ObjectMeta.creationTimestamp`);
    kubectl decodes the whole object before it sends it (`go_path="metadata."`:
    `ObjectMeta.metadata.creationTimestamp`).
    """
    meta = obj.get("metadata")
    if meta is None:
        return None
    if not isinstance(meta, dict):
        return "metadata", f"json: cannot unmarshal {_json_type(meta)} into Go value of type v1.ObjectMeta"
    return _struct_error(meta, "ObjectMeta", OBJECT_META, go_path, "metadata")


def _meta_unknown(meta: dict[str, Any]) -> list[str]:
    out = [f"metadata.{key}" for key in meta if key not in OBJECT_META]
    for key in ("ownerReferences", "managedFields"):
        _, (_, fields) = OBJECT_META[key]
        items = meta.get(key)
        for i, item in enumerate(items if isinstance(items, list) else []):
            if isinstance(item, dict):
                out += [f"metadata.{key}[{i}].{k}" for k in item if k not in fields]
    return sorted(out)


def unknown_fields(obj: dict[str, Any], schema: dict[str, Any]) -> list[str]:
    """Field paths structural pruning would drop from `obj`: `metadata`'s first, then the rest, each sorted."""
    meta = obj.get("metadata")
    out: list[str] = []
    stack: list[tuple[str, Any, dict[str, Any]]] = [("", {k: v for k, v in obj.items() if k != "metadata"}, schema)]
    while stack:
        path, value, sub = stack.pop()
        if isinstance(value, dict) and sub.get("type", "object") == "object" and not sub.get("x-kubernetes-int-or-string"):
            props = sub.get("properties") or {}
            extra = sub.get("additionalProperties")
            for key, item in value.items():
                here = f"{path}.{key}" if path else str(key)
                child = props.get(key, extra if isinstance(extra, dict) else None)
                if child is None:
                    if not (path == "" and key in ("apiVersion", "kind")):
                        out.append(here)
                    continue
                stack.append((here, item, child))
        elif isinstance(value, list) and isinstance(sub.get("items"), dict):
            stack.extend((f"{path}[{i}]", item, sub["items"]) for i, item in enumerate(value))
    return (_meta_unknown(meta) if isinstance(meta, dict) else []) + sorted(out)


def strict_errors(obj: dict[str, Any], schema: dict[str, Any], duplicates: list[str]) -> list[tuple[str, str]]:
    """(field path, error) of each strict decoding error of `obj`, in the API server's order.

    `duplicates`: the paths of the keys the object's text gives twice (a decoded object cannot show them).
    """
    return [(path, f'duplicate field "{path}"') for path in duplicates] + [
        (path, f'unknown field "{path}"') for path in unknown_fields(obj, schema)
    ]


def decode_message(kind: str, api_version: str, error: str) -> str:
    """The API server's 400: `Job in version "v1alpha1" cannot be handled as a Job: <error>`."""
    version = api_version.rpartition("/")[2]
    return f'{kind} in version "{version}" cannot be handled as a {kind}: {error}'


def strict_message(kind: str, api_version: str, errors: list[tuple[str, str]]) -> str:
    return decode_message(kind, api_version, "strict decoding error: " + ", ".join(text for _, text in errors))


def type_errors(obj: dict[str, Any], schema: dict[str, Any]) -> list[FieldError]:
    """What Go's typed decoding refuses: the CRD schema's type errors (`must be of type ...`), then times.

    A `format: date-time` string (`status.state.lastTransitionTime`) is a metav1.Time, which
    Go parses as RFC 3339: `Invalid value: "soon": parsing time "soon" as ...`.
    """
    body = {k: v for k, v in obj.items() if k != "metadata"}
    mistyped = [e for e in structural.errors(body, schema, "") if _is_type_error(e)]
    return mistyped or _time_errors(body, schema)


def _time_errors(body: dict[str, Any], schema: dict[str, Any]) -> list[FieldError]:
    out: list[FieldError] = []
    stack: list[tuple[str, Any, dict[str, Any]]] = [("", body, schema)]
    while stack:
        path, value, sub = stack.pop()
        if isinstance(value, dict):
            props = sub.get("properties") or {}
            stack.extend((f"{path}.{k}" if path else k, v, props[k]) for k, v in reversed(value.items()) if k in props)
        elif isinstance(value, list) and isinstance(sub.get("items"), dict):
            stack.extend((f"{path}[{i}]", v, sub["items"]) for i, v in reversed(list(enumerate(value))))
        elif isinstance(value, str) and sub.get("format") == "date-time":
            error = rfc3339_error(value)
            if error:
                out.append(invalid(path, value, error))
    return out


def _is_type_error(error: FieldError) -> bool:
    """A `must be of type` error (int-or-string's `<nil>` anyOf line included), not an int32/int64 range error."""
    if error.path == "<nil>":
        return True
    return " must be of type " in error.detail and not any(f" must be of type {f}:" in error.detail for f in structural.RANGES)
