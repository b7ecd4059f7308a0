"""A CRD structural schema applied as kube-apiserver 1.34 applies it: defaults first, then validation.

The schemas are the generated `crd_schemas.json` (tools/crdgen, the same data as
deploy/crds/*.yaml), so the API server and `vcbus validate` check one source.

Defaulting (`apply_defaults`) fills every absent or null property that has a
`default`, depth first, as apiextensions-apiserver's structural defaulting does.

Validation (`errors`) walks the object along the schema and reports, in the
API server's words (checked against it by tests/test_admission_schema.py):

* `type` (`must be of type integer: "string"`), with kube-openapi's rules: an
  integral float is an integer, int-or-string fields take an int or a string and
  otherwise get the three errors kube-openapi's `anyOf` gives;
* `enum`, `pattern`, `minLength`/`maxLength`, `minimum`/`maximum`,
  `minItems`/`maxItems`, `required` (`Required value`);
* `x-kubernetes-list-type: map` and `set` duplicates (`Duplicate value: {"name":"c"}`);
* `format: int32`/`int64` ranges. This one is stricter than the API server: 1.34
  stores `maxRetry: 2^40` in a CRD, but Volcano's Go types cannot decode it, so
  vcbus refuses it (`must be of type int32: "1099511627776"`, go-openapi's words).

Properties are visited in sorted order (the API server visits them in Go map
order, so its order of several errors varies). Unknown fields are not errors
(the API server prunes them).
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any

from statemachines.admission.fields import FieldError, invalid, not_supported

RANGES = {"int32": (-(1 << 31), (1 << 31) - 1), "int64": (-(1 << 63), (1 << 63) - 1)}
Schema = dict[str, Any]

_JSON_TYPES: dict[type, str] = {str: "string", list: "array", dict: "object"}


def type_name(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    return _JSON_TYPES.get(type(value), "null")


def _is_integer(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and value.is_integer())


@lru_cache(maxsize=512)
def _regex(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def apply_defaults(value: Any, schema: Schema) -> Any:
    """Fill `value`'s missing defaults in place (it is returned too)."""
    if isinstance(value, dict):
        props = schema.get("properties")
        if props:
            for key, sub in props.items():
                if "default" in sub and value.get(key) is None:
                    value[key] = json.loads(json.dumps(sub["default"]))
                if key in value:
                    apply_defaults(value[key], sub)
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for item in value.values():
                apply_defaults(item, extra)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for item in value:
            apply_defaults(item, schema["items"])
    return value


def errors(value: Any, schema: Schema, path: str) -> list[FieldError]:
    """The API server's schema errors for `value` at `path` (its field path, e.g. `spec.tasks[0]`)."""
    out: list[FieldError] = []
    _check(value, schema, path, out)
    return out


def _type_error(path: str, got: str, wanted: str) -> FieldError:
    return invalid(path, got, f'{path} in body must be of type {wanted}: "{got}"')


def _check(value: Any, schema: Schema, path: str, out: list[FieldError]) -> None:
    if value is None:
        return
    if schema.get("x-kubernetes-int-or-string"):
        if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
            _scalar(value, schema, path, out)
        else:
            got = type_name(value)
            out += [_type_error(path, got, "integer,string"),
                    FieldError("<nil>", "Invalid value", "", f'"{path}" must validate at least one schema (anyOf)', True),
                    _type_error(path, got, "integer")]  # fmt: skip
        return
    wanted = schema.get("type")
    if wanted and not _type_ok(value, wanted):
        out.append(_type_error(path, type_name(value), wanted))
        return
    if wanted == "object" or isinstance(value, dict) and wanted is None:
        _object(value, schema, path, out)
    elif wanted == "array":
        _array(value, schema, path, out)
    else:
        _scalar(value, schema, path, out)


def _type_ok(value: Any, wanted: str) -> bool:
    if wanted == "integer":
        return _is_integer(value)
    if wanted == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return type_name(value) == wanted


def _object(value: dict[str, Any], schema: Schema, path: str, out: list[FieldError]) -> None:
    props = schema.get("properties") or {}
    extra = schema.get("additionalProperties")
    for key in sorted(value):
        sub = props.get(key)
        if sub is None and isinstance(extra, dict):
            sub = extra
        if sub is not None:
            _check(value[key], sub, f"{path}.{key}" if path else key, out)
    for key in schema.get("required", ()):
        if value.get(key) is None:
            out.append(FieldError(f"{path}.{key}" if path else key, "Required value"))


def _array(value: list[Any], schema: Schema, path: str, out: list[FieldError]) -> None:
    if "minItems" in schema and len(value) < schema["minItems"]:
        out.append(invalid(path, len(value), f"{path} in body should have at least {schema['minItems']} items"))
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        out.append(invalid(path, len(value), f"{path} in body should have at most {schema['maxItems']} items"))
    items = schema.get("items")
    if isinstance(items, dict):
        for i, item in enumerate(value):
            _check(item, items, f"{path}[{i}]", out)
    list_type = schema.get("x-kubernetes-list-type")
    if list_type in ("map", "set"):
        keys = schema.get("x-kubernetes-list-map-keys", ())
        seen: set[str] = set()
        for i, item in enumerate(value):
            if list_type == "map":
                if not isinstance(item, dict):
                    continue
                ident = json.dumps({k: item[k] for k in sorted(keys) if k in item}, separators=(",", ":"))
            else:
                ident = json.dumps(item, sort_keys=True, separators=(",", ":"))
            if ident in seen:
                out.append(FieldError(f"{path}[{i}]", "Duplicate value", detail=ident))
            seen.add(ident)


def _scalar(value: Any, schema: Schema, path: str, out: list[FieldError]) -> None:
    fmt = schema.get("format")
    if fmt in RANGES and _is_integer(value):
        low, high = RANGES[fmt]
        if not low <= value <= high:
            out.append(invalid(path, int(value), f'{path} in body must be of type {fmt}: "{int(value)}"'))
            return
    if _is_integer(value) or isinstance(value, float):
        if "minimum" in schema and value < schema["minimum"]:
            out.append(invalid(path, value, f"{path} in body should be greater than or equal to {schema['minimum']}"))
        if "maximum" in schema and value > schema["maximum"]:
            out.append(invalid(path, value, f"{path} in body should be less than or equal to {schema['maximum']}"))
    if isinstance(value, str):
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            out.append(FieldError(path, "Too long", detail=f"may not be more than {schema['maxLength']} bytes"))
        if "minLength" in schema and len(value) < schema["minLength"]:
            out.append(invalid(path, value, f"{path} in body should be at least {schema['minLength']} chars long"))
        if "pattern" in schema and not _regex(schema["pattern"]).search(value):
            out.append(invalid(path, value, f"{path} in body should match '{schema['pattern']}'"))
    if "enum" in schema and value not in schema["enum"]:
        out.append(not_supported(path, value, schema["enum"]))
