"""The API server's size limits on an object (reference: apimachinery's ValidateAnnotationsSize, etcd's request limit).

- annotations: the sum of the keys' and values' lengths at most 262,144 bytes
  (256 KiB), else `metadata.annotations: Too long: may not be more than 262144
  bytes`, part of the API server's `... is invalid:` answer;
- the whole object: etcd (`--max-request-bytes`, 1.5 MiB by default) refuses a
  larger write, and the API server answers 500 `etcdserver: request is too
  large`. vcbus measures the object's compact JSON; the stored object also
  carries managedFields, so an object just under the limit may still be refused.
"""

from __future__ import annotations

import json
from typing import Any

from statemachines.admission.fields import FieldError

MAX_ANNOTATIONS_BYTES = 256 * 1024
MAX_OBJECT_BYTES = 1536 * 1024
TOO_LARGE = "etcdserver: request is too large"


def annotation_errors(obj: dict[str, Any]) -> list[FieldError]:
    """`metadata.annotations: Too long: ...` when the annotations exceed 256 KiB in all."""
    meta = obj.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, dict) else None
    if not isinstance(annotations, dict):
        return []
    total = sum(len(str(k).encode()) + len(str(v).encode()) for k, v in annotations.items() if v is not None)
    if total <= MAX_ANNOTATIONS_BYTES:
        return []
    return [FieldError("metadata.annotations", "Too long", detail=f"may not be more than {MAX_ANNOTATIONS_BYTES} bytes")]


def object_bytes(obj: Any) -> int:
    """The size of `obj` as compact JSON, as the API server stores it."""
    return len(json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogatepass"))


def size_error(obj: Any) -> str:
    """Why etcd would refuse to store `obj` ("" when it fits)."""
    size = object_bytes(obj)
    if size <= MAX_OBJECT_BYTES:
        return ""
    return f"{TOO_LARGE} (the object is {size:,} bytes as JSON; etcd stores at most {MAX_OBJECT_BYTES:,}, 1.5 MiB)"
