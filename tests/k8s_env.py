"""A real etcd + kube-apiserver for tests, in the spirit of controller-runtime's envtest.

No kubelet, no scheduler, no controller-manager: just the API. Binaries come
from `scripts/envtest.sh` (`$KUBEBUILDER_ASSETS`, else the cache directory
`~/.cache/vcbus/envtest/<k8s-version>/`); versions are pinned in
`scripts/envtest-versions.env`. The session fixture lives in
`tests/fixtures_k8s.py`; this module holds the non-fixture logic.

What `EnvTest.start()` does:

* generates a CA, an apiserver serving certificate (127.0.0.1/localhost), a
  client certificate for the test user (group `system:masters`, so RBAC lets it
  do anything) and an ECDSA service-account signing key;
* starts etcd on free loopback ports (`--unsafe-no-fsync`: tests only);
* starts kube-apiserver on a free loopback port with RBAC, client-cert auth and
  the `ServiceAccount` admission plugin disabled (it needs the token controller,
  which we do not run), and waits for `/readyz`;
* installs every CRD in `deploy/crds/` and waits until each is Established and
  its resources are served.

`stop_apiserver()` / `start_apiserver()` restart only the apiserver (same port,
same etcd) and `compact_etcd()` compacts etcd's history, so tests can exercise
watch resumption and `410 Gone`.

The API server keeps an audit log of the pod writes a controller or a scheduler makes
(`AUDIT_POLICY`: every create of a pod or of a pod's binding, at level Metadata, once
answered) in `audit.log` of its work dir, across restarts; `audit_events()` reads it
(tests/test_faults_cluster.py counts each pod's creates and binds with it).
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import json
import os
import pathlib
import shutil
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass

import yaml

REPO = pathlib.Path(__file__).resolve().parents[1]
VERSIONS_FILE = REPO / "scripts" / "envtest-versions.env"
CRD_DIR = REPO / "deploy" / "crds"

# How long a child process gets between SIGTERM and SIGKILL.
_TERM_TIMEOUT = 15.0


# The API server's audit policy: each create of a pod or of a pod binding, once answered (the
# request's verb, user, object and answer code; no bodies); nothing else.
AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [
        {"level": "Metadata", "verbs": ["create"],
         "resources": [{"group": "", "resources": ["pods", "pods/binding"]}]},
        {"level": "None"},
    ],
}


class EnvTestError(RuntimeError):
    """The test control plane could not be started or driven."""


def read_versions(path: pathlib.Path = VERSIONS_FILE) -> dict[str, str]:
    """Parse the KEY=VALUE lines of scripts/envtest-versions.env (K8S_VERSION, ETCD_VERSION, KWOK_VERSION)."""
    out: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.partition("=")
        out[key.strip()] = value.strip().strip('"').strip("'")
    return out


def _has_assets(d: pathlib.Path) -> bool:
    return all(os.access(d / b, os.X_OK) for b in ("kube-apiserver", "etcd"))


def cache_dir() -> pathlib.Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return pathlib.Path(base) / "vcbus" / "envtest" / read_versions()["K8S_VERSION"]


def asset_dir() -> pathlib.Path | None:
    """Where kube-apiserver and etcd are, using the same rules as scripts/envtest.sh."""
    env = os.environ.get("KUBEBUILDER_ASSETS")
    if env and _has_assets(pathlib.Path(env)):
        return pathlib.Path(env)
    d = cache_dir()
    return d if _has_assets(d) else None


def missing_assets_message() -> str:
    v = read_versions()
    return (
        "no envtest binaries (kube-apiserver + etcd): run `make envtest` (builds "
        f"kube-apiserver {v['K8S_VERSION']} and etcd {v['ETCD_VERSION']} into {cache_dir()}, "
        "needs Go) or set KUBEBUILDER_ASSETS to a directory holding both binaries "
        "(e.g. `setup-envtest use <version> -p path`)"
    )


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --------------------------------------------------------------------------- certificates


@dataclass
class Certs:
    ca_crt: pathlib.Path
    serving_crt: pathlib.Path
    serving_key: pathlib.Path
    client_crt: pathlib.Path
    client_key: pathlib.Path
    sa_key: pathlib.Path
    sa_pub: pathlib.Path


def generate_certs(d: pathlib.Path) -> Certs:
    """A throw-away PKI for one test session (ECDSA P-256: fast to generate)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    d.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.timezone.utc)
    not_before, not_after = now - dt.timedelta(hours=1), now + dt.timedelta(days=7)

    def key():
        return ec.generate_private_key(ec.SECP256R1())

    def write_key(k, path: pathlib.Path) -> pathlib.Path:
        path.write_bytes(
            k.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        path.chmod(0o600)
        return path

    def write_cert(c, path: pathlib.Path) -> pathlib.Path:
        path.write_bytes(c.public_bytes(serialization.Encoding.PEM))
        return path

    ca_key = key()
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "vcbus-envtest-ca")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, key_cert_sign=True, crl_sign=True,
                content_commitment=False, key_encipherment=False, data_encipherment=False,
                key_agreement=False, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )

    def leaf(subject: x509.Name, usage, sans=None):
        k = key()
        b = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(ca_name)
            .public_key(k.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(not_before)
            .not_valid_after(not_after)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
            )
        )
        if sans:
            b = b.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        return k, b.sign(ca_key, hashes.SHA256())

    srv_key, srv = leaf(
        x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]),
        ExtendedKeyUsageOID.SERVER_AUTH,
        [
            x509.DNSName("localhost"),
            x509.DNSName("kubernetes"),
            x509.DNSName("kubernetes.default"),
            x509.DNSName("kubernetes.default.svc"),
            x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
            x509.IPAddress(ipaddress.ip_address("10.0.0.1")),
        ],
    )
    cli_key, cli = leaf(
        x509.Name(
            [
                x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:masters"),
                x509.NameAttribute(NameOID.COMMON_NAME, "vcbus-test-admin"),
            ]
        ),
        ExtendedKeyUsageOID.CLIENT_AUTH,
    )
    sa_key = key()
    sa_pub = d / "sa.pub"
    sa_pub.write_bytes(
        sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return Certs(
        ca_crt=write_cert(ca, d / "ca.crt"),
        serving_crt=write_cert(srv, d / "apiserver.crt"),
        serving_key=write_key(srv_key, d / "apiserver.key"),
        client_crt=write_cert(cli, d / "admin.crt"),
        client_key=write_key(cli_key, d / "admin.key"),
        sa_key=write_key(sa_key, d / "sa.key"),
        sa_pub=sa_pub,
    )


# --------------------------------------------------------------------------- processes


def _tail(path: pathlib.Path, n: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "(no log)"


def _terminate(proc: subprocess.Popen | None, timeout: float = _TERM_TIMEOUT) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


class EnvTest:
    """etcd + kube-apiserver child processes, CRDs installed. See the module docstring."""

    def __init__(self, assets: pathlib.Path, workdir: pathlib.Path, crd_dir: pathlib.Path = CRD_DIR):
        self.assets = pathlib.Path(assets)
        self.workdir = pathlib.Path(workdir)
        self.crd_dir = pathlib.Path(crd_dir)
        self.etcd_port = free_port()
        self.etcd_peer_port = free_port()
        self.port = free_port()
        self.etcd_url = f"http://127.0.0.1:{self.etcd_port}"
        self.url = f"https://127.0.0.1:{self.port}"
        self.certs: Certs | None = None
        self.kubeconfig: pathlib.Path = self.workdir / "kubeconfig"
        self.audit_log: pathlib.Path = self.workdir / "audit.log"
        self._etcd: subprocess.Popen | None = None
        self._apiserver: subprocess.Popen | None = None
        self._clients: list = []
        self._admin = None

    # ---- lifecycle

    def start(self, timeout: float = 90.0) -> "EnvTest":
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.certs = generate_certs(self.workdir / "pki")
        self._write_kubeconfig()
        self.start_etcd(timeout)
        self.start_apiserver(timeout)
        self.install_crds(timeout=timeout)
        return self

    def stop(self) -> None:
        for c in self._clients:
            try:
                c.close()
            except Exception:  # noqa: BLE001 - best effort at teardown
                pass
        self._clients.clear()
        self._admin = None
        self.stop_apiserver()
        _terminate(self._etcd)
        self._etcd = None

    # ---- etcd

    def start_etcd(self, timeout: float = 60.0) -> None:
        if self._etcd is not None and self._etcd.poll() is None:
            return
        data = self.workdir / "etcd-data"
        log = self.workdir / "etcd.log"
        peer = f"http://127.0.0.1:{self.etcd_peer_port}"
        cmd = [
            str(self.assets / "etcd"),
            "--name=envtest",
            f"--data-dir={data}",
            f"--listen-client-urls={self.etcd_url}",
            f"--advertise-client-urls={self.etcd_url}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=envtest={peer}",
            "--unsafe-no-fsync=true",
            "--log-level=warn",
        ]
        with open(log, "ab") as f:
            self._etcd = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=self.workdir)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._etcd.poll() is not None:
                raise EnvTestError(f"etcd exited with {self._etcd.returncode}:\n{_tail(log)}")
            try:
                with urllib.request.urlopen(self.etcd_url + "/health", timeout=2) as r:
                    if json.loads(r.read()).get("health") == "true":
                        return
            except (OSError, ValueError):
                pass
            time.sleep(0.1)
        raise EnvTestError(f"etcd not healthy after {timeout}s:\n{_tail(log)}")

    def _etcd_post(self, path: str, body: dict) -> dict:
        req = urllib.request.Request(
            self.etcd_url + path,
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.loads(r.read())

    def etcd_revision(self) -> int:
        """etcd's current revision (what kube resourceVersions are made of)."""
        key = base64.b64encode(b"/registry/").decode()
        out = self._etcd_post("/v3/kv/range", {"key": key, "limit": 1, "keys_only": True})
        return int(out["header"]["revision"])

    def compact_etcd(self, revision: int | None = None) -> int:
        """Compact etcd history up to `revision` (default: the current one).

        Watches from an older resourceVersion that reach etcd then fail with
        410 Gone. The apiserver's watch cache still serves its own window of
        events, so to force a 410 for a recent resourceVersion restart the
        apiserver too (its cache is then rebuilt from a fresh list).
        """
        rev = revision if revision is not None else self.etcd_revision()
        self._etcd_post("/v3/kv/compaction", {"revision": rev, "physical": True})
        return rev

    # ---- kube-apiserver

    def _apiserver_cmd(self) -> list[str]:
        c = self.certs
        assert c is not None
        return [
            str(self.assets / "kube-apiserver"),
            f"--etcd-servers={self.etcd_url}",
            f"--cert-dir={self.workdir / 'apiserver-certs'}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={self.port}",
            f"--tls-cert-file={c.serving_crt}",
            f"--tls-private-key-file={c.serving_key}",
            f"--client-ca-file={c.ca_crt}",
            f"--service-account-key-file={c.sa_pub}",
            f"--service-account-signing-key-file={c.sa_key}",
            "--service-account-issuer=https://kubernetes.default.svc",
            "--service-cluster-ip-range=10.0.0.0/24",
            "--authorization-mode=RBAC",
            # ServiceAccount admission needs the token controller (not run here).
            "--disable-admission-plugins=ServiceAccount",
            "--allow-privileged=true",
            # The default reconciler rejects a loopback advertise address (log noise only).
            "--endpoint-reconciler-type=none",
            # API priority & fairness needs its bootstrap config; not useful in tests.
            "--enable-priority-and-fairness=false",
            # pod and binding creates, written before the answer goes out (AUDIT_POLICY)
            f"--audit-policy-file={self._audit_policy()}",
            f"--audit-log-path={self.audit_log}",
            "--audit-log-mode=blocking",
            "--audit-log-format=json",
            "--v=1",
        ]

    def _audit_policy(self) -> pathlib.Path:
        path = self.workdir / "audit-policy.yaml"
        path.write_text(yaml.safe_dump(AUDIT_POLICY))
        return path

    def audit_events(self, namespace: str | None = None) -> list[dict]:
        """The audit log's events (AUDIT_POLICY), oldest first; only `namespace`'s when given.

        A line cut short by a SIGKILLed API server is skipped.
        """
        out = []
        if not self.audit_log.exists():
            return out
        for line in self.audit_log.read_text(errors="replace").splitlines():
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            if namespace is None or (ev.get("objectRef") or {}).get("namespace") == namespace:
                out.append(ev)
        return out

    def start_apiserver(self, timeout: float = 90.0) -> None:
        if self._apiserver is not None and self._apiserver.poll() is None:
            return
        log = self.workdir / "apiserver.log"
        with open(log, "ab") as f:
            f.write(f"==== start {dt.datetime.now().isoformat()}\n".encode())
            f.flush()
            self._apiserver = subprocess.Popen(
                self._apiserver_cmd(), stdout=f, stderr=subprocess.STDOUT, cwd=self.workdir
            )
        self._wait_ready(timeout, log)

    def stop_apiserver(self, grace: float = 3.0) -> None:
        """SIGTERM, then SIGKILL after `grace` seconds.

        With a watch open, kube-apiserver's graceful shutdown stops listening at
        once but then blocks on the open stream for a long time; clients see the
        same either way (a closed connection), so the grace period is short.
        """
        _terminate(self._apiserver, grace)
        self._apiserver = None

    def kill_apiserver(self) -> None:
        """SIGKILL, no grace: a crash (tests/test_faults_cluster.py); `start_apiserver` brings it back."""
        if self._apiserver is not None and self._apiserver.poll() is None:
            self._apiserver.kill()
            self._apiserver.wait(30)
        self._apiserver = None

    def signal_etcd(self, sig: int) -> None:
        """Send etcd a signal: SIGSTOP pauses it (requests to it hang, as on a stalled disk), SIGCONT resumes."""
        assert self._etcd is not None and self._etcd.poll() is None, "etcd is not running"
        self._etcd.send_signal(sig)

    @property
    def apiserver_running(self) -> bool:
        return self._apiserver is not None and self._apiserver.poll() is None

    def _ssl_context(self) -> ssl.SSLContext:
        assert self.certs is not None
        ctx = ssl.create_default_context(cafile=str(self.certs.ca_crt))
        ctx.load_cert_chain(str(self.certs.client_crt), str(self.certs.client_key))
        return ctx

    def _wait_ready(self, timeout: float, log: pathlib.Path) -> None:
        ctx = self._ssl_context()
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            if self._apiserver is None or self._apiserver.poll() is not None:
                rc = self._apiserver.returncode if self._apiserver else None
                raise EnvTestError(f"kube-apiserver exited with {rc}:\n{_tail(log)}")
            try:
                with urllib.request.urlopen(self.url + "/readyz", context=ctx, timeout=3) as r:
                    if r.status == 200:
                        return
            except urllib.error.HTTPError as e:
                last = f"HTTP {e.code}"
            except OSError as e:
                last = str(e)
            time.sleep(0.2)
        raise EnvTestError(f"kube-apiserver not ready after {timeout}s ({last}):\n{_tail(log)}")

    # ---- clients

    def _write_kubeconfig(self) -> None:
        c = self.certs
        assert c is not None
        cfg = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {"name": "envtest", "cluster": {"server": self.url, "certificate-authority": str(c.ca_crt)}}
            ],
            "users": [
                {
                    "name": "envtest-admin",
                    "user": {"client-certificate": str(c.client_crt), "client-key": str(c.client_key)},
                }
            ],
            "contexts": [{"name": "envtest", "context": {"cluster": "envtest", "user": "envtest-admin"}}],
            "current-context": "envtest",
        }
        self.kubeconfig.write_text(yaml.safe_dump(cfg, sort_keys=False))

    def api_client(self):
        """A new `kubernetes.client.ApiClient` for the test admin (closed at stop())."""
        from kubernetes import config

        client = config.new_client_from_config(config_file=str(self.kubeconfig))
        self._clients.append(client)
        return client

    def _client(self):
        if self._admin is None:
            self._admin = self.api_client()
        return self._admin

    # ---- CRDs

    def crd_documents(self) -> list[dict]:
        docs: list[dict] = []
        for path in sorted(self.crd_dir.glob("*.yaml")):
            docs.extend(d for d in yaml.safe_load_all(path.read_text()) if d)
        return docs

    def install_crds(self, docs: list[dict] | None = None, timeout: float = 60.0) -> list[str]:
        """Create (or replace) the CRDs and wait until they are Established and served."""
        from kubernetes import client as k
        from kubernetes.client.exceptions import ApiException

        docs = self.crd_documents() if docs is None else docs
        api = self._client()
        ext = k.ApiextensionsV1Api(api)
        names = []
        for doc in docs:
            name = doc["metadata"]["name"]
            names.append(name)
            try:
                ext.create_custom_resource_definition(doc)
            except ApiException as e:
                if e.status != 409:
                    raise
                cur = ext.read_custom_resource_definition(name)
                doc = {**doc, "metadata": {**doc["metadata"], "resourceVersion": cur.metadata.resource_version}}
                ext.replace_custom_resource_definition(name, doc)
        deadline = time.monotonic() + timeout
        pending = dict((d["metadata"]["name"], d) for d in docs)
        while pending:
            for name, doc in list(pending.items()):
                crd = ext.read_custom_resource_definition(name)
                conds = {c.type: c.status for c in (crd.status.conditions or [])}
                if conds.get("Established") != "True":
                    continue
                # Established: the handler is installed; make sure a list is served.
                spec = doc["spec"]
                version = next(v["name"] for v in spec["versions"] if v.get("served", True))
                try:
                    k.CustomObjectsApi(api).list_cluster_custom_object(
                        spec["group"], version, spec["names"]["plural"], limit=1
                    )
                except ApiException:
                    continue
                del pending[name]
            if not pending:
                break
            if time.monotonic() > deadline:
                raise EnvTestError(f"CRDs not established after {timeout}s: {sorted(pending)}")
            time.sleep(0.1)
        return names

    # ---- convenience

    def create_namespace(self, name: str) -> str:
        from kubernetes import client as k

        k.CoreV1Api(self._client()).create_namespace(k.V1Namespace(metadata=k.V1ObjectMeta(name=name)))
        return name

    def logs(self) -> dict[str, str]:
        return {n: _tail(self.workdir / n, 200) for n in ("etcd.log", "apiserver.log")}


def cleanup_dir(path: pathlib.Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
