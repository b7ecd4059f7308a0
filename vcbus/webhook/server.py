"""The HTTPS AdmissionReview server: stdlib `http.server`, one thread per request, TLS via `ssl`.

Routes `POST /jobs/mutate`, `/jobs/validate`, `/queues/mutate`, `/queues/validate`,
`/cronjobs/validate` (with the zones the CronJob names, read here) and `/jobflows/validate` to
`statemachines.admission.review.handle`; `GET /healthz`
answers `ok`. Every review is timed and counted by path and answer
(`vcbus_webhook_request_seconds`, `vcbus_webhook_reviews_total`), served on
`vcbus webhook --metrics-addr`. The server fails closed: a body that is not JSON, a queue
source that cannot be read, or any unexpected error is answered with
`allowed: false` and the reason, never with an empty 200.
"""

from __future__ import annotations

import json
import logging
import ssl
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from statemachines.admission import QueueIndex
from statemachines.admission.review import PATHS, Settings, handle
from statemachines.model.zone import Zone
from vcbus.cronjobs.zonedata import zones_of
from vcbus.observability import metrics

log = logging.getLogger("vcbus.webhook")

MAX_BODY = 3 * 1024 * 1024  # upstream's MaxRequestBody
QueueSource = Callable[[], QueueIndex]


CRONJOBS_PATH = "/cronjobs/validate"


def review_zones(review: Any) -> dict[str, Zone]:
    """The time zones the reviewed CronJob names, as data (the domain loads none)."""
    request = review.get("request") if isinstance(review, dict) else None
    return zones_of(request.get("object")) if isinstance(request, dict) else {}


def _denial(uid: str, message: str) -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": uid, "allowed": False, "status": {"metadata": {}, "message": message}},
    }


class AdmissionHandler(BaseHTTPRequestHandler):
    """One request. `server` is an `AdmissionServer`."""

    server: AdmissionServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # stdlib signature
        log.debug("%s " + format, self.address_string(), *args)

    def _send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # stdlib name
        if self.path.split("?")[0] == "/healthz":
            self._send(200, b"ok", "text/plain")
        else:
            self._send(404, b"not found\n", "text/plain")

    def do_POST(self) -> None:  # stdlib name
        path = self.path.split("?")[0]
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if not 0 <= length <= MAX_BODY:
            self.close_connection = True
            self._send(413, b"request body too large or without a length\n", "text/plain")
            return
        raw = self.rfile.read(length)
        if path not in PATHS:
            self._send(404, b"not found\n", "text/plain")
            return
        uid = ""
        started = time.perf_counter()
        try:
            review = json.loads(raw)
            uid = str(((review or {}).get("request") or {}).get("uid", "")) if isinstance(review, dict) else ""
            answer = handle(path, review, queues=self.server.queues(), settings=self.server.settings,
                            zones=review_zones(review) if path == CRONJOBS_PATH else None)
        except json.JSONDecodeError as err:
            answer = _denial(uid, f"the request body is not JSON: {err}")
        except Exception as err:  # fail closed on anything unexpected
            log.exception("admission %s failed", path)
            answer = _denial(uid, f"vcbus webhook error: {err}")
        allowed = answer.get("response", {}).get("allowed")
        metrics.admission(path, allowed is True, time.perf_counter() - started)
        log.info("%s uid=%s allowed=%s", path, uid, allowed)
        self._send(200, json.dumps(answer).encode())


class AdmissionServer(ThreadingHTTPServer):
    """A threaded HTTPS server holding the settings and the queue source."""

    daemon_threads = True

    def __init__(
        self,
        address: tuple[str, int],
        *,
        cert_file: str,
        key_file: str,
        queues: QueueSource,
        settings: Settings | None = None,
    ) -> None:
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.minimum_version = ssl.TLSVersion.TLSv1_2
        self.context.load_cert_chain(cert_file, key_file)
        super().__init__(address, AdmissionHandler)
        self.queues = queues
        self.settings = settings or Settings()

    def finish_request(self, request: Any, client_address: Any) -> None:
        """TLS handshake in the request's own thread, so a slow client never blocks `accept`."""
        request.settimeout(30)
        try:
            tls = self.context.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError) as err:
            log.info("TLS handshake with %s failed: %s", client_address, err)
            return
        super().finish_request(tls, client_address)

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def start_background(self) -> threading.Thread:
        """Serve in a daemon thread (tests, embedding); stop with `shutdown()`."""
        thread = threading.Thread(target=self.serve_forever, name="vcbus-webhook", daemon=True)
        thread.start()
        return thread
