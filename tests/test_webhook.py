"""The HTTPS AdmissionReview server (`vcbus webhook`): routing, TLS with a test CA, fail-closed answers."""

from __future__ import annotations

import base64
import datetime as dt
import http.client
import ipaddress
import json
import socket
import ssl
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from statemachines.admission import QueueIndex, default_queues
from vcbus.webhook.server import AdmissionServer


@dataclass(frozen=True)
class WebhookTLS:
    ca_pem: bytes
    cert_file: str
    key_file: str
    ca_file: str


def make_tls(directory: Path, host: str = "127.0.0.1") -> WebhookTLS:
    """A throwaway CA and a serving certificate for `host` signed by it."""
    now = dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "vcbus-test-ca")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=5))
          .not_valid_after(now + dt.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(host)), x509.DNSName("localhost")]),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))
    ca_pem = ca.public_bytes(serialization.Encoding.PEM)
    paths = {"ca.crt": ca_pem, "tls.crt": cert.public_bytes(serialization.Encoding.PEM),
             "tls.key": key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())}
    for name, data in paths.items():
        (directory / name).write_bytes(data)
    return WebhookTLS(ca_pem, str(directory / "tls.crt"), str(directory / "tls.key"), str(directory / "ca.crt"))


@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    return make_tls(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def server(tls):
    srv = AdmissionServer(("127.0.0.1", 0), cert_file=tls.cert_file, key_file=tls.key_file, queues=default_queues)
    srv.start_background()
    yield srv
    srv.shutdown()
    srv.server_close()


def post(server, tls, path, body, *, content_type="application/json"):
    context = ssl.create_default_context(cafile=tls.ca_file)
    conn = http.client.HTTPSConnection("127.0.0.1", server.port, context=context, timeout=10)
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    conn.request("POST", path, raw, {"Content-Type": content_type})
    response = conn.getresponse()
    data = response.read()
    conn.close()
    return response.status, data


def review(obj, *, operation="CREATE", old=None, resource=("batch.volcano.sh", "v1alpha1", "jobs"), uid="u-1"):
    request = {"uid": uid, "operation": operation, "object": obj,
               "resource": dict(zip(("group", "version", "resource"), resource))}
    if old is not None:
        request["oldObject"] = old
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


JOB = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "j", "namespace": "ns"},
       "spec": {"queue": "default", "plugins": {"pytorch": []},
                "tasks": [{"name": "master", "replicas": 1, "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}]}}


def answer(server, tls, path, body):
    status, data = post(server, tls, path, body)
    assert status == 200
    reply = json.loads(data)
    assert reply["apiVersion"] == "admission.k8s.io/v1" and reply["kind"] == "AdmissionReview"
    return reply["response"]


def test_mutate_returns_a_base64_json_patch_with_the_request_uid(server, tls):
    response = answer(server, tls, "/jobs/mutate", review(JOB, uid="abc"))
    assert response["uid"] == "abc" and response["allowed"] is True and response["patchType"] == "JSONPatch"
    patch = json.loads(base64.b64decode(response["patch"]))
    assert [op["path"] for op in patch] == ["/spec/schedulerName", "/spec/maxRetry", "/spec/tasks", "/spec/minAvailable", "/spec/plugins"]
    assert patch[-1]["value"] == {"pytorch": [], "svc": []}


def test_mutate_refuses_update_with_volcano_text(server, tls):
    response = answer(server, tls, "/jobs/mutate", review(JOB, operation="UPDATE"))
    assert response["allowed"] is False and response["status"]["message"] == "expect operation to be 'CREATE' "


def test_validate_create_allows_a_valid_job(server, tls):
    response = answer(server, tls, "/jobs/validate", review({**JOB, "spec": {**JOB["spec"], "minAvailable": 1}}))
    assert response == {"uid": "u-1", "allowed": True}


def test_validate_create_denies_with_volcano_message(server, tls):
    bad = {**JOB, "spec": {**JOB["spec"], "minAvailable": 5, "queue": "nope"}}
    response = answer(server, tls, "/jobs/validate", review(bad))
    assert response["allowed"] is False
    assert response["status"]["message"] == ("job 'minAvailable' should not be greater than total replicas in tasks; "
                                             'unable to find job queue: queue.scheduling.volcano.sh "nope" not found;')


@pytest.mark.parametrize("name", ["Bad_Name", "Foo-Bar"])
def test_validate_create_refuses_a_name_the_api_server_refuses(server, tls, name):
    bad = {**JOB, "metadata": {**JOB["metadata"], "name": name}, "spec": {**JOB["spec"], "minAvailable": 1}}
    response = answer(server, tls, "/jobs/validate", review(bad))
    assert response["allowed"] is False
    assert response["status"]["message"] == (
        f'Job.batch.volcano.sh "{name}" is invalid: metadata.name: Invalid value: "{name}": a lowercase RFC 1123 '
        "subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an "
        "alphanumeric character (e.g. 'example.com', regex used for validation is "
        "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
    )


def test_queue_validate_create_refuses_a_name_the_api_server_refuses(server, tls):
    queue = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "Bad_Queue"},
             "spec": {"weight": 1}}
    response = answer(server, tls, "/queues/validate",
                      review(queue, resource=("scheduling.volcano.sh", "v1beta1", "queues")))
    assert response["allowed"] is False
    assert response["status"]["message"].startswith(
        'Queue.scheduling.volcano.sh "Bad_Queue" is invalid: metadata.name: Invalid value: "Bad_Queue": '
        "a lowercase RFC 1123 subdomain"
    )


def test_validate_update_first_failure(server, tls):
    new = {**JOB, "spec": {**JOB["spec"], "queue": "other"}}
    response = answer(server, tls, "/jobs/validate", review(new, operation="UPDATE", old=JOB))
    assert response["status"]["message"].startswith("job updates may not change fields other than")


def test_validate_other_operation(server, tls):
    response = answer(server, tls, "/jobs/validate", review(JOB, operation="DELETE"))
    assert response["status"]["message"] == "expect operation to be 'CREATE' or 'UPDATE'"


def test_wrong_resource_is_denied(server, tls):
    response = answer(server, tls, "/jobs/validate", review(JOB, resource=("", "v1", "pods")))
    assert response["allowed"] is False
    assert response["status"]["message"] == "expect resource to be batch.volcano.sh/v1alpha1, Resource=jobs"


def test_queue_paths(server, tls):
    resource = ("scheduling.volcano.sh", "v1beta1", "queues")
    queue = {"metadata": {"name": "q"}, "spec": {}}
    mutated = answer(server, tls, "/queues/mutate", review(queue, resource=resource))
    assert json.loads(base64.b64decode(mutated["patch"]))[0] == {"op": "add", "path": "/spec/reclaimable", "value": True}
    denied = answer(server, tls, "/queues/validate", review({"metadata": {"name": "default"}}, operation="DELETE", resource=resource) |
                    {"request": {"uid": "d", "operation": "DELETE", "name": "default", "oldObject": {"metadata": {"name": "default"}},
                                 "resource": dict(zip(("group", "version", "resource"), resource))}})
    assert denied["status"]["message"] == "`default` queue can not be deleted"


def test_fail_closed_on_garbage(server, tls):
    status, data = post(server, tls, "/jobs/validate", b"{not json")
    assert status == 200 and json.loads(data)["response"]["allowed"] is False
    response = answer(server, tls, "/jobs/validate", {"kind": "AdmissionReview"})
    assert response["allowed"] is False and response["status"]["message"] == "the AdmissionReview has no request"
    response = answer(server, tls, "/jobs/validate", review("not an object"))
    assert response["allowed"] is False


def test_fail_closed_when_queues_cannot_be_read(tls):
    def broken() -> QueueIndex:
        raise RuntimeError("apiserver unreachable")

    srv = AdmissionServer(("127.0.0.1", 0), cert_file=tls.cert_file, key_file=tls.key_file, queues=broken)
    srv.start_background()
    try:
        response = answer(srv, tls, "/jobs/validate", review(JOB))
        assert response["allowed"] is False and "apiserver unreachable" in response["status"]["message"]
    finally:
        srv.shutdown()
        srv.server_close()


def test_unknown_path_healthz_and_plain_http(server, tls):
    assert post(server, tls, "/pods/validate", review(JOB))[0] == 404
    context = ssl.create_default_context(cafile=tls.ca_file)
    conn = http.client.HTTPSConnection("127.0.0.1", server.port, context=context, timeout=10)
    conn.request("GET", "/healthz")
    assert conn.getresponse().read() == b"ok"
    conn.close()
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as raw:  # no TLS: dropped, server survives
        raw.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        try:
            assert b"ok" not in raw.recv(100)
        except ConnectionResetError:
            pass
    assert answer(server, tls, "/jobs/mutate", review(JOB))["allowed"] is True


def test_untrusted_client_ca_cannot_talk(server, tmp_path):
    other = make_tls(tmp_path)
    with pytest.raises(ssl.SSLError):
        post(server, other, "/jobs/mutate", review(JOB))


def test_cli_serves_and_stops_on_sigterm(tls, tmp_path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    queues = tmp_path / "q.yaml"
    queues.write_text("apiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata: {name: default}\nstatus: {state: Open}\n")
    vcbus = str(Path(sys.executable).parent / "vcbus")
    proc = subprocess.Popen([vcbus, "webhook", "--tls-cert", tls.cert_file, "--tls-key", tls.key_file, "--host", "127.0.0.1",
                             "--port", str(port), "--queues", str(queues)], stderr=subprocess.PIPE, text=True)
    try:
        assert "listening on https://127.0.0.1:" in proc.stderr.readline()

        class Fake:
            pass

        fake = Fake()
        fake.port = port
        deadline = time.monotonic() + 10
        while True:
            try:
                assert answer(fake, tls, "/jobs/validate", review(JOB))["allowed"] is True
                break
            except ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
    finally:
        proc.terminate()
        assert proc.wait(timeout=10) == 0


def test_cli_refuses_bad_key_and_teaches(tmp_path, tls):
    vcbus = str(Path(sys.executable).parent / "vcbus")
    junk = tmp_path / "junk.pem"
    junk.write_text("not a key")
    queues = tmp_path / "q.yaml"
    queues.write_text("kind: Queue\nmetadata: {name: default}\n")
    done = subprocess.run([vcbus, "webhook", "--tls-cert", tls.cert_file, "--tls-key", str(junk), "--port", "0", "--queues",
                           str(queues)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stderr.startswith("error: cannot load --tls-cert/--tls-key")
    helped = subprocess.run([vcbus, "webhook", "--help"], capture_output=True, text=True, timeout=60)
    assert "Examples:" in helped.stdout
