"""API requests on the reaction's path, without the `kubernetes` client's models.

The generated client validates every call's arguments (pydantic), serializes
the body through its model layer and builds a model object of the whole
response (a V1Pod of a few KB for a pod PATCH or DELETE), even when the
caller only needs to know that the request succeeded. On a pod failure's
DeletePods (a JSON-patch ownership test, then the DELETE) that is about 0.7 ms
of CPU per pod in a process that is also bridging and deciding the same
burst of events (measured with `time.thread_time`, 40 interleaved pairs on
the test suite's API server: 2.0 ms through the models, 1.3 ms here).

`call` sends one request through the same `ApiClient` (its host, TLS, auth
and connection pool) and returns the raw body. A non-2xx answer raises the
client's own `ApiException` with the status and body, so callers and
`vcbus.k8s.apierrors` handle it exactly as an error of a generated method.
Path segments are percent-encoded here: names come from commands on the bus
and must never reach another URL than the object's own.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from kubernetes.client import ApiException

JSON_PATCH = "application/json-patch+json"
TIMEOUT = 60.0  # seconds; a timed-out request is retried like any unreachable server (vcbus.k8s.apierrors)


def pod_path(namespace: str, name: str) -> str:
    return f"/api/v1/namespaces/{quote(namespace, safe='')}/pods/{quote(name, safe='')}"


def call(api_client: Any, method: str, path: str, *, body: Any = None, content_type: str | None = None) -> bytes:
    """One request; the raw response body. Raises `ApiException` on a non-2xx status."""
    headers = {"Accept": "application/json"}
    if body is not None:
        headers["Content-Type"] = content_type or "application/json"
    m, url, hdrs, data, post = api_client.param_serialize(
        method=method, resource_path=path, header_params=headers, body=body, auth_settings=["BearerToken"],
    )
    resp = api_client.call_api(m, url, header_params=hdrs, body=data, post_params=post, _request_timeout=TIMEOUT)
    raw = resp.read()
    if not 200 <= resp.status <= 299:
        raise ApiException(status=resp.status, reason=resp.reason, body=raw.decode("utf-8", "replace"))
    return raw
