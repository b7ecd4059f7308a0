"""A fault-injecting HTTPS proxy in front of the API server: the one stand-in of the fault rounds.

Why a stand-in: a real kube-apiserver answers 429 only when API Priority and Fairness sheds load and
5xx only when something in it is broken, neither on demand nor at a chosen rate. Issue 31 allows
this one place. Everything else is the real server: the proxy passes every request through, watches
streamed as they arrive, except a seeded fraction (`rate`), which it answers itself, each kind as
often as the others:

- `429`: 429 Too Many Requests with `Retry-After: 1` (what APF's rejection carries), not forwarded;
- `500`: 500 Internal Server Error, not forwarded (the request never reached the server);
- `lost`: forwarded, the server's answer dropped and 503 Service Unavailable given instead: the write
  happened although the client saw a failure (only for requests that are not watches).

The answers are `metav1.Status` objects, as the API server writes them. TLS: the proxy presents the
API server's own serving certificate (it names 127.0.0.1) and forwards with the test admin's client
certificate; it does not ask for the caller's certificate, so every caller acts as the admin.

`FaultProxy(url, ctx, rate=0.1, seed=1).start()`; `.url`; `.kubeconfig(src, dst)` writes a copy of
`src` that points at the proxy; `.counts` (requests, passed, and each fault); `.stop()`.
"""

from __future__ import annotations

import http.client
import http.server
import json
import random
import socket
import ssl
import sys
import threading
import urllib.parse
from collections import Counter
from typing import Any

import yaml

from tests.k8s_env import free_port

FAULTS = ("429", "500", "lost")
_STATUS = {"429": (429, "TooManyRequests"), "500": (500, "InternalError"), "lost": (503, "ServiceUnavailable")}
_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "proxy-connection", "upgrade", "te"}


class FaultProxy:
    def __init__(self, upstream: str, upstream_ctx: ssl.SSLContext, serving_cert: str, serving_key: str, *,
                 rate: float = 0.1, seed: int = 0) -> None:
        url = urllib.parse.urlsplit(upstream)
        self.upstream = (url.hostname or "127.0.0.1", url.port or 443)
        self.upstream_ctx = upstream_ctx
        self.rate = rate
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.counts: Counter[str] = Counter()
        self.port = free_port()
        self.url = f"https://127.0.0.1:{self.port}"
        self.enabled = True
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(serving_cert, serving_key)
        self.server = _Server(("127.0.0.1", self.port), _Handler, self, ctx)
        self.thread = threading.Thread(target=self.server.serve_forever, name="fault-proxy", daemon=True)

    def start(self) -> FaultProxy:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.server.close_all()
        self.thread.join(10)

    def kubeconfig(self, src, dst) -> None:
        with open(src) as f:
            cfg = yaml.safe_load(f)
        for cluster in cfg["clusters"]:
            cluster["cluster"]["server"] = self.url
        with open(dst, "w") as out:
            yaml.safe_dump(cfg, out, sort_keys=False)

    def choose(self, watch: bool) -> str:
        """'' to pass the request through, else the fault to answer it with (seeded)."""
        with self.lock:
            self.counts["requests"] += 1
            if not self.enabled or self.rng.random() >= self.rate:
                self.counts["passed"] += 1
                return ""
            fault = self.rng.choice(FAULTS[:2] if watch else FAULTS)
            self.counts[fault] += 1
            return fault


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, addr, handler, proxy: FaultProxy, ctx: ssl.SSLContext) -> None:
        self.proxy = proxy
        self.ctx = ctx
        self.open: set[Any] = set()  # upstream connections in use, shut down by close_all (watches block in them)
        self.open_lock = threading.Lock()
        super().__init__(addr, handler)

    def handle_error(self, request, client_address) -> None:
        if not isinstance(sys.exc_info()[1], (OSError, ValueError, http.client.HTTPException)):
            super().handle_error(request, client_address)  # a side going away is no error of the proxy's

    def get_request(self):
        sock, addr = super().get_request()
        return self.ctx.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), addr

    def track(self, conn: Any, on: bool) -> None:
        with self.open_lock:
            (self.open.add if on else self.open.discard)(conn)

    def close_all(self) -> None:
        with self.open_lock:
            conns, self.open = list(self.open), set()
        for conn in conns:  # the handler's thread sees its read end and closes the connection itself
            try:
                conn.sock and conn.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def setup(self) -> None:
        super().setup()
        self.upstream: http.client.HTTPSConnection | None = None

    def finish(self) -> None:
        self._drop_upstream()
        super().finish()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass

    def do_GET(self) -> None:  # noqa: N802 - http.server's names
        self.relay()

    do_POST = do_PUT = do_PATCH = do_DELETE = do_GET  # noqa: N815

    def relay(self) -> None:
        proxy = self.server.proxy
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
        fault = proxy.choose(watch=query.get("watch", [""])[0] in ("1", "true"))
        if fault in ("429", "500"):
            self.answer(fault)
            return
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP and k.lower() != "host"}
        try:
            resp = self.forward(body, headers)
        except (OSError, http.client.HTTPException) as err:
            self.answer_status(502, "BadGateway", f"fault proxy: the API server did not answer ({err})")
            return
        if fault == "lost":
            resp.read()
            self.answer(fault)
            return
        self.pass_back(resp)

    def forward(self, body: bytes | None, headers: dict[str, str]) -> http.client.HTTPResponse:
        for attempt in (1, 2):  # a kept-alive upstream connection may have been closed by the server
            if self.upstream is None:
                host, port = self.server.proxy.upstream
                self.upstream = http.client.HTTPSConnection(host, port, context=self.server.proxy.upstream_ctx,
                                                            timeout=400)
                self.server.track(self.upstream, True)
            try:
                self.upstream.request(self.command, self.path, body=body, headers=headers)
                return self.upstream.getresponse()
            except (OSError, http.client.HTTPException):
                self._drop_upstream()
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def pass_back(self, resp: http.client.HTTPResponse) -> None:
        self.send_response_only(resp.status, resp.reason)
        for key, value in resp.getheaders():
            if key.lower() not in _HOP:
                self.send_header(key, value)
        try:
            if resp.chunked:  # a watch, or a list the server streams: pass each piece on as it comes
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                while piece := resp.read1(65536):
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
            else:
                data = resp.read()
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            self.wfile.flush()
        except (OSError, ValueError, http.client.HTTPException):  # a side went away (ValueError: a chunk cut)
            self._drop_upstream()
            self.close_connection = True
        if resp.will_close:
            self._drop_upstream()

    def answer(self, fault: str) -> None:
        code, reason = _STATUS[fault]
        self.answer_status(code, reason, f"fault proxy: injected {fault}")

    def answer_status(self, code: int, reason: str, message: str) -> None:
        status = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
                  "reason": reason, "code": code}
        if code == 429:
            status["details"] = {"retryAfterSeconds": 1}
        data = json.dumps(status).encode()
        self.send_response_only(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if code == 429:
            self.send_header("Retry-After", "1")
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _drop_upstream(self) -> None:
        if self.upstream is not None:
            self.server.track(self.upstream, False)
            self.upstream.close()
            self.upstream = None
