"""Kubernetes' own schemas (core/v1 PodTemplateSpec and what it references) as CRD structural schemas.

Source: the OpenAPI v3 document `/openapi/v3/api/v1` of the pinned kube-apiserver
(scripts/envtest-versions.env). `extract()` keeps the component schemas reachable
from `ROOTS`, without descriptions; the result is stored in
`deploy/crds/src/k8s-core-v1.json` so that generating the CRDs needs no server
(tests/test_crdgen.py checks that the stored copy still equals what the test
apiserver serves).

`Inliner` turns one of those schemas into what controller-gen writes for a Go
field of that type in Volcano's CRDs (`config/crd/volcano/bases/*.yaml`):

* every `$ref` (bare or wrapped in `allOf`) is inlined: a CRD schema has no refs;
* `IntOrString` becomes `anyOf: [integer, string]` + `x-kubernetes-int-or-string`,
  and `Quantity` the same plus controller-gen's quantity `pattern`;
* an embedded `ObjectMeta` (a pod template's metadata) becomes controller-gen's
  `generateEmbeddedObjectMeta` subset: labels, annotations, name, namespace, finalizers;
* `default` is kept only where the Go type carries a `+default=` marker: openapi-gen
  also writes the zero value of every required field (`name: default ""`,
  `containerPort: default 0`) and `{}` for every struct, which a CRD must not
  have (a missing required name would be defaulted to "" instead of refused);
* `enum` (from `+enum` types), `x-kubernetes-patch-*` and descriptions are dropped,
  as controller-gen does for Volcano's Job CRD (`maxDescLen=0`); list and map
  types, `required`, `format` and bounds are kept.
"""

from __future__ import annotations

import copy
import json
from typing import Any

ROOTS = (
    "io.k8s.api.core.v1.PodTemplateSpec",
    "io.k8s.api.core.v1.PersistentVolumeClaimSpec",
    "io.k8s.api.core.v1.ResourceRequirements",
    "io.k8s.api.core.v1.Affinity",
    "io.k8s.apimachinery.pkg.apis.meta.v1.OwnerReference",
    "io.k8s.apimachinery.pkg.apis.meta.v1.Time",
    "io.k8s.apimachinery.pkg.api.resource.Quantity",
)
"""The Kubernetes types Volcano's CRDs use (PodTemplateSpec, PVC spec, OwnerReference, ...)."""

QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
ATOMIC_EMBEDDERS = frozenset({
    "io.k8s.api.core.v1.ConfigMapEnvSource", "io.k8s.api.core.v1.SecretEnvSource",
    "io.k8s.api.core.v1.ConfigMapVolumeSource", "io.k8s.api.core.v1.ConfigMapProjection",
    "io.k8s.api.core.v1.SecretProjection",
})  # fmt: skip
"""Types that embed `LocalObjectReference` inline (k8s.io/api core/v1 types.go): controller-gen carries that
struct's `+structType=atomic` over to them as `x-kubernetes-map-type: atomic`; openapi-gen does not."""
DROPPED = frozenset({"description", "enum", "x-kubernetes-patch-merge-key", "x-kubernetes-patch-strategy",
                     "x-kubernetes-unions", "example", "externalDocs"})  # fmt: skip


def _ref_name(ref: str) -> str:
    return ref.rsplit("/", 1)[-1]


def _refs(node: Any, out: set[str]) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref":
                out.add(_ref_name(value))
            else:
                _refs(value, out)
    elif isinstance(node, list):
        for item in node:
            _refs(item, out)


def _strip_descriptions(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _strip_descriptions(v) for k, v in node.items() if k != "description"}
    if isinstance(node, list):
        return [_strip_descriptions(v) for v in node]
    return node


def extract(document: dict[str, Any], roots: tuple[str, ...] = ROOTS) -> dict[str, Any]:
    """The component schemas reachable from `roots` in an OpenAPI v3 document, descriptions removed."""
    schemas = document["components"]["schemas"]
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        if name not in schemas:
            raise KeyError(f"{name} is not in the OpenAPI document")
        seen.add(name)
        found: set[str] = set()
        _refs(schemas[name], found)
        todo.extend(sorted(found - seen))
    return {name: _strip_descriptions(schemas[name]) for name in sorted(seen)}


def dumps(schemas: dict[str, Any], version: str) -> str:
    """The stored form: stable JSON, one schema per line group, with the Kubernetes version."""
    return json.dumps({"kubernetesVersion": version, "schemas": schemas}, indent=1, sort_keys=True) + "\n"


class Inliner:
    """Structural CRD schemas for Kubernetes types, from the stored OpenAPI component schemas."""

    def __init__(self, schemas: dict[str, Any]):
        self.schemas = schemas

    def schema(self, name: str) -> dict[str, Any]:
        """The inlined structural schema of the component `name` (e.g. `io.k8s.api.core.v1.PodTemplateSpec`)."""
        return self._named(name, stack=())

    def _named(self, name: str, stack: tuple[str, ...]) -> dict[str, Any]:
        if name in stack:
            raise ValueError(f"recursive type {name} cannot be inlined: {' -> '.join(stack)}")
        if name in (QUANTITY, INT_OR_STRING):
            out: dict[str, Any] = {"anyOf": [{"type": "integer"}, {"type": "string"}]}
            if name == QUANTITY:
                out["pattern"] = QUANTITY_PATTERN
            out["x-kubernetes-int-or-string"] = True
            return out
        if name == OBJECT_META:
            return self._embedded_meta()
        out = self._node(self.schemas[name], stack + (name,))
        if name in ATOMIC_EMBEDDERS:
            out["x-kubernetes-map-type"] = "atomic"
        return out

    def _embedded_meta(self) -> dict[str, Any]:
        props = self.schemas[OBJECT_META]["properties"]
        keep = {}
        for field in ("annotations", "finalizers", "labels", "name", "namespace"):
            node = {k: v for k, v in props[field].items() if k not in ("x-kubernetes-list-type", "x-kubernetes-patch-strategy")}
            keep[field] = self._node(node, ())
        return {"type": "object", "properties": keep}

    def _node(self, node: dict[str, Any], stack: tuple[str, ...]) -> dict[str, Any]:
        if "$ref" in node:
            return self._named(_ref_name(node["$ref"]), stack)
        all_of = node.get("allOf")
        if all_of and len(all_of) == 1 and "$ref" in all_of[0]:
            return self._named(_ref_name(all_of[0]["$ref"]), stack)
        out: dict[str, Any] = {}
        required = set(node.get("required", ()))
        for key, value in node.items():
            if key in DROPPED or key == "default":
                continue
            if key == "properties":
                props = {}
                for field, sub in sorted(value.items()):
                    inlined = self._node(sub, stack)
                    if "default" in sub and field not in required and not _is_struct_default(sub):
                        inlined = {**inlined, "default": copy.deepcopy(sub["default"])}
                    props[field] = inlined
                out[key] = props
            elif key in ("items", "additionalProperties") and isinstance(value, dict):
                out[key] = self._node(value, stack)
            elif key == "required":
                out[key] = sorted(value)
            elif key in ("oneOf", "anyOf", "allOf"):
                raise ValueError(f"cannot make {key} structural in {'/'.join(stack)}")
            else:
                out[key] = copy.deepcopy(value)
        if "properties" in out or "additionalProperties" in out:
            out.setdefault("type", "object")
        return out


def _is_struct_default(sub: dict[str, Any]) -> bool:
    """openapi-gen's `default: {}` on a struct-valued field (not a `+default=` marker)."""
    return sub.get("default") == {} or "allOf" in sub or "$ref" in sub
