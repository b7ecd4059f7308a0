"""vcbus.k8s.rawcalls: the reaction's requests on a keep-alive connection of their own.

On the test suite's real API server (TLS, client certificates), and on a small
real HTTP server of this file that closes every connection after its answer,
as an API server (or a proxy before it) closes one that sat idle.
"""

from __future__ import annotations

import http.server
import json
import threading

import pytest
from kubernetes import client
from kubernetes.client import ApiException

from vcbus.k8s import rawcalls

pytestmark = pytest.mark.k8s


def test_requests_go_over_one_kept_connection_per_thread_with_the_clients_tls_and_identity(k8s, k8s_namespace):
    api = k8s.api_client()
    ns = k8s_namespace
    core = client.CoreV1Api(api)
    core.create_namespaced_pod(ns, {"metadata": {"name": "p", "annotations": {"a": "b"}},
                                    "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    raw = rawcalls.call(api, "PATCH", rawcalls.pod_path(ns, "p"), content_type=rawcalls.JSON_PATCH,
                        body=[{"op": "add", "path": "/metadata/annotations/x", "value": "1"}])
    assert json.loads(raw)["metadata"]["annotations"]["x"] == "1"
    route = rawcalls._route(api.configuration)
    assert route is not None and route.context is not None  # https, the kubeconfig's CA and client certificate
    first = route._local.conn
    rawcalls.call(api, "GET", rawcalls.pod_path(ns, "p"))
    assert route._local.conn is first  # kept
    other: list = []
    worker = threading.Thread(target=lambda: (rawcalls.call(api, "GET", rawcalls.pod_path(ns, "p")),
                                              other.append(route._local.conn)))
    worker.start()
    worker.join(60)
    assert other and other[0] is not first  # each thread its own (http.client is not thread-safe)
    with pytest.raises(ApiException) as err:
        rawcalls.call(api, "DELETE", rawcalls.pod_path(ns, "p"), body={"preconditions": {"uid": "not-its-uid"}})
    assert err.value.status == 409 and "precondition" in err.value.body.lower()
    with pytest.raises(ApiException) as err:
        rawcalls.call(api, "GET", rawcalls.pod_path(ns, "no-such-pod"))
    assert err.value.status == 404


class ClosingHandler(http.server.BaseHTTPRequestHandler):
    """Answers as HTTP/1.1 (so the client keeps the connection), then closes it anyway."""

    protocol_version = "HTTP/1.1"
    connections: list[int] = []

    def do_PATCH(self) -> None:  # noqa: N802 - http.server's naming
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        type(self).connections.append(self.client_address[1])
        answer = json.dumps({"got": json.loads(body), "auth": self.headers.get("authorization")}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)
        self.close_connection = True

    def log_message(self, *args) -> None:
        pass


def test_a_connection_the_server_closed_is_replaced_and_the_request_sent_once_more():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), ClosingHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        cfg = client.Configuration()
        cfg.host = f"http://127.0.0.1:{server.server_address[1]}"
        cfg.api_key = {"authorization": "token-1"}
        cfg.api_key_prefix = {"authorization": "Bearer"}
        api = client.ApiClient(cfg)
        for n in range(3):
            raw = rawcalls.call(api, "PATCH", "/x", body=[{"op": "add", "n": n}], content_type=rawcalls.JSON_PATCH)
            assert json.loads(raw) == {"got": [{"op": "add", "n": n}], "auth": "Bearer token-1"}
        assert len(set(ClosingHandler.connections)) == 3  # a new connection each time, no error seen
    finally:
        server.shutdown()
        server.server_close()


def test_a_proxy_or_a_host_it_cannot_speak_to_takes_the_clients_own_path():
    cfg = client.Configuration()
    cfg.host = "https://127.0.0.1:6443"
    cfg.proxy = "http://proxy.example:3128"
    assert rawcalls._route(cfg) is None
    cfg = client.Configuration()
    cfg.host = "https://127.0.0.1:6443"
    cfg.assert_hostname = "api.internal"  # a name other than the host's to check: urllib3 does that
    assert rawcalls._route(cfg) is None
    cfg = client.Configuration()
    cfg.host = "https://127.0.0.1:6443"
    cfg.verify_ssl = False
    route = rawcalls._route(cfg)
    assert route is not None and route.context is not None and not route.context.check_hostname


def test_a_plain_body_and_a_model_object_reach_the_api_server_alike(k8s, k8s_namespace):
    """Plain JSON bodies are encoded by msgspec (UTF-8, not the client's model walk); a model object still
    goes as the client serializes it."""
    api = k8s.api_client()
    ns = k8s_namespace
    plain = {"metadata": {"name": "plain", "annotations": {"note": "café ✓"}},
             "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    model = client.V1Pod(metadata=client.V1ObjectMeta(name="model", annotations={"note": "café ✓"}),
                         spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="busybox")]))
    for body in (plain, model):
        rawcalls.call(api, "POST", rawcalls.pods_path(ns), body=body)
    for name in ("plain", "model"):
        got = json.loads(rawcalls.call(api, "GET", rawcalls.pod_path(ns, name)))
        assert got["metadata"]["annotations"]["note"] == "café ✓"
        assert got["spec"]["containers"][0]["image"] == "busybox"
