"""The actuator's frequent API requests, without the `kubernetes` client's models or its urllib3 pool.

The generated client validates every call's arguments (pydantic), serializes
the body through its model layer and builds a model object of the whole
response (a V1Pod of a few KB for a pod PATCH or DELETE), even when the
caller only needs to know that the request succeeded. On a pod failure's
DeletePods (a JSON-patch ownership test, then the DELETE) that is about 0.7 ms
of CPU per pod in a process that is also bridging and deciding the same
burst of events (measured with `time.thread_time`, 40 interleaved pairs on
the test suite's API server: 2.0 ms through the models, 1.3 ms here).

`call` (and `read`, a GET decoded as plain JSON) takes the request's headers from the same `ApiClient` (`param_serialize`:
its host, default headers and auth, a refreshed token included) and sends it on
a keep-alive connection of this thread's own (`http.client`, TLS configured as
the client's urllib3 pool is: CA, client certificate, `verify_ssl`,
`tls_server_name`). urllib3's pool and the client's REST layer cost about 0.7 ms
per request here: a PATCH and DELETE after an idle pause took 10.3 ms through
them and 8.9 ms this way (p50 of 20 interleaved pairs on the test suite's API
server, 1 Dec 2026; a Go client's took 7.8 ms). A configuration this path does
not handle (a proxy) takes the client's own path. The actuator sends its
frequent requests this way: the kill's PATCH and DELETE, CreatePod, CreatePodGroup,
the vcjob and PodGroup reads, the vcjob status PATCH and the plugins' object
creates and JSON patches (its CPU per command, `time.thread_time` over a
`benchmarks/latency.py --quick` run: CreatePod 2.3 -> 0.9 ms, CreatePodGroup
1.6 -> 0.9 ms, UpdateJobStatus 2.6 -> 1.4 ms, PluginHook 2.2 -> 1.1 ms; all
commands 589 -> 362 ms).

A non-2xx answer raises the client's own `ApiException` with the status and
body, and a broken connection an `OSError`, so callers and `vcbus.k8s.apierrors`
handle both exactly as they handle errors of a generated method. A request
that fails on a reused connection before any answer (the server closed it
while idle) is sent once more on a new one; both kill requests are safe to
repeat (the out-of-sync annotation and its tests, a DELETE with a uid
precondition). Path segments are percent-encoded here: names come from
commands on the bus and must never reach another URL than the object's own.
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import threading
from typing import Any

import msgspec
from urllib.parse import quote, urlsplit

from kubernetes.client import ApiException

JSON_PATCH = "application/json-patch+json"
TIMEOUT = 60.0  # seconds, unless the client says (`request_timeout`); a timed-out request is retried like any unreachable server


def pods_path(namespace: str) -> str:
    return f"/api/v1/namespaces/{quote(namespace, safe='')}/pods"


def pod_path(namespace: str, name: str) -> str:
    return f"{pods_path(namespace)}/{quote(name, safe='')}"


def object_path(group: str, version: str, namespace: str, plural: str, name: str = "") -> str:
    """The path of a namespaced object of a group (or of its collection, without `name`)."""
    base = f"/apis/{quote(group, safe='')}/{quote(version, safe='')}/namespaces/{quote(namespace, safe='')}/{plural}"
    return f"{base}/{quote(name, safe='')}" if name else base


def read(api_client: Any, path: str) -> dict | None:
    """GET one object as plain JSON (a dict), None when it does not exist (404)."""
    try:
        return msgspec.json.decode(call(api_client, "GET", path))
    except ApiException as err:
        if err.status == 404:
            return None
        raise


def call(api_client: Any, method: str, path: str, *, body: Any = None, content_type: str | None = None) -> bytes:
    """One request; the raw response body. Raises `ApiException` on a non-2xx status."""
    headers = {"Accept": "application/json"}
    if body is not None:
        headers["Content-Type"] = content_type or "application/json"
    timeout = getattr(api_client, "request_timeout", TIMEOUT)
    route = _route(api_client.configuration, timeout)
    if route is None:  # a proxy, or a scheme http.client does not speak: the client's own path (throttled there)
        m, url, hdrs, data, post = api_client.param_serialize(
            method=method, resource_path=path, header_params=headers, body=body, auth_settings=["BearerToken"],
        )
        resp = api_client.call_api(m, url, header_params=hdrs, body=data, post_params=post, _request_timeout=timeout)
        status, reason, raw = resp.status, resp.reason, resp.read()
    else:
        # the client gives the URL, its default headers and the auth (a refreshed token included); the body,
        # plain JSON here, is encoded once by msgspec rather than walked by the client's model serializer
        m, url, hdrs, _, _ = api_client.param_serialize(
            method=method, resource_path=path, header_params=headers, auth_settings=["BearerToken"],
        )
        throttle = getattr(api_client, "throttle", None)  # vcbus.k8s.cluster.ClusterClient's rate limit
        if throttle is not None:
            throttle.wait()
        status, reason, raw = route.send(m, urlsplit(url), hdrs, None if body is None else _payload(api_client, body))
    if not 200 <= status <= 299:
        raise ApiException(status=status, reason=reason, body=raw.decode("utf-8", "replace"))
    return raw


_encode = msgspec.json.Encoder().encode


def _payload(api_client: Any, body: Any) -> bytes:
    """A request body as JSON: plain values by msgspec; anything else (a model object) as the client serializes it."""
    try:
        return _encode(body)
    except TypeError:
        return json.dumps(api_client.sanitize_for_serialization(body)).encode()


class Route:
    """Keep-alive connections to one API server, one per thread (http.client is not thread-safe)."""

    def __init__(self, scheme: str, host: str, port: int, context: ssl.SSLContext | None, server_name: str | None,
                 timeout: float = TIMEOUT):
        self.scheme, self.host, self.port = scheme, host, port
        self.timeout = timeout
        self.context, self.server_name = context, server_name
        self._local = threading.local()

    def _connect(self) -> http.client.HTTPConnection:
        if self.context is None:
            conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
            conn.connect()
        else:
            conn = http.client.HTTPSConnection(self.host, self.port, timeout=self.timeout, context=self.context)
            if self.server_name:  # TLS name other than the address (the client's tls_server_name)
                sock = socket.create_connection((self.host, self.port), self.timeout)
                conn.sock = self.context.wrap_socket(sock, server_hostname=self.server_name)
            else:
                conn.connect()
        conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return conn

    def send(self, method: str, url: Any, headers: dict, payload: bytes | None) -> tuple[int, str, bytes]:
        target = url.path + ("?" + url.query if url.query else "")
        conn = getattr(self._local, "conn", None)
        reused = conn is not None
        for attempt in (0, 1):
            if conn is None:
                conn = self._local.conn = self._connect()
            try:
                conn.request(method, target, body=payload, headers=headers)
                resp = conn.getresponse()
                return resp.status, resp.reason, resp.read()
            except (OSError, http.client.HTTPException) as err:
                conn.close()
                conn = self._local.conn = None
                stale = isinstance(err, (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError))
                if attempt == 0 and reused and stale:
                    continue  # closed by the server while idle: once more on a new connection
                if isinstance(err, OSError):
                    raise
                raise ConnectionError(f"{method} {target}: {type(err).__name__}: {err}") from None
        raise AssertionError("unreachable")


_routes: dict[int, tuple[Any, Route | None]] = {}
_routes_lock = threading.Lock()


def _route(cfg: Any, timeout: float = TIMEOUT) -> Route | None:
    """The route for a client configuration (made once per configuration object)."""
    held = _routes.get(id(cfg))
    if held is not None and held[0] is cfg:
        return held[1]
    with _routes_lock:
        route = _make_route(cfg, timeout)
        _routes[id(cfg)] = (cfg, route)  # the configuration held too: its id is never reused meanwhile
    return route


def _make_route(cfg: Any, timeout: float = TIMEOUT) -> Route | None:
    if cfg.proxy:
        return None
    url = urlsplit(cfg.host)
    if url.scheme not in ("http", "https") or not url.hostname:
        return None
    port = url.port or (443 if url.scheme == "https" else 80)
    if url.scheme == "http":
        return Route("http", url.hostname, port, None, None, timeout)
    if isinstance(cfg.assert_hostname, str):  # a name to check other than the host's: the client's path
        return None
    ctx = ssl.create_default_context(cafile=cfg.ssl_ca_cert, cadata=cfg.ca_cert_data)  # none: the system's
    if not cfg.verify_ssl:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    elif cfg.assert_hostname is False:
        ctx.check_hostname = False
    if cfg.cert_file:
        ctx.load_cert_chain(cfg.cert_file, cfg.key_file)
    return Route("https", url.hostname, port, ctx, cfg.tls_server_name or None, timeout)
