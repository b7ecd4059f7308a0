"""Throwaway NATS security material for tests, and nats-servers that demand it.

- `Pki`: a private CA (not in any trust store), a server certificate for
  127.0.0.1/localhost and a client certificate, made with `cryptography`;
- `user_seed()`: a fresh user nkey (seed and public key), with `nkeys`;
- `Operator`: decentralised auth as `nsc` sets it up - an operator, an account with
  JetStream, and user JWTs in `.creds` files (signed here with `nkeys`);
- `secure_server(...)`: a real nats-server (vcbus.bus.server.EmbeddedServer) with
  extra config (authorization, tls, operator), its URL with the right scheme.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import hashlib
import ipaddress
import json
import os
import pathlib
import time
from collections.abc import Iterator
from dataclasses import dataclass

import nkeys
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from vcbus.bus.server import EmbeddedServer


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())


def _cert(subject: str, key, issuer_name: x509.Name, issuer_key, *, ca: bool = False, server: bool = False,
          client: bool = False) -> x509.Certificate:
    now = dt.datetime.now(dt.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if server:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
    usages = ([ExtendedKeyUsageOID.SERVER_AUTH] if server else []) + ([ExtendedKeyUsageOID.CLIENT_AUTH] if client else [])
    if usages:
        builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


@dataclass
class Pki:
    ca: pathlib.Path
    server_cert: pathlib.Path
    server_key: pathlib.Path
    client_cert: pathlib.Path
    client_key: pathlib.Path

    @classmethod
    def create(cls, directory: pathlib.Path) -> Pki:
        directory.mkdir(parents=True, exist_ok=True)
        ca_key = _key()
        ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "vcbus test CA")])
        ca = _cert("vcbus test CA", ca_key, ca_name, ca_key, ca=True)
        files = {}
        for who, opts in (("server", {"server": True}), ("client", {"client": True})):
            key = _key()
            cert = _cert(f"vcbus test {who}", key, ca_name, ca_key, **opts)
            files[f"{who}_cert"] = directory / f"{who}.pem"
            files[f"{who}_key"] = directory / f"{who}-key.pem"
            files[f"{who}_cert"].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
            files[f"{who}_key"].write_bytes(_pem_key(key))
        (directory / "ca.pem").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
        return cls(ca=directory / "ca.pem", **files)

    def server_block(self, *, verify: bool) -> str:
        return (
            "tls {\n"
            f"  cert_file: {json.dumps(str(self.server_cert))}\n"
            f"  key_file: {json.dumps(str(self.server_key))}\n"
            f"  ca_file: {json.dumps(str(self.ca))}\n"
            f"  verify: {'true' if verify else 'false'}\n"
            "  timeout: 5\n"
            "}\n"
        )


def user_seed() -> tuple[str, str]:
    """(seed `SU...`, public key `U...`) of a fresh user nkey."""
    return _keypair(nkeys.PREFIX_BYTE_USER)


def _keypair(prefix: int) -> tuple[str, str]:
    seed = nkeys.encode_seed(os.urandom(32), prefix)
    kp = nkeys.from_seed(bytearray(seed))
    return seed.decode(), kp.public_key.decode()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _jwt(claims: dict, signer_seed: str) -> str:
    header = _b64(json.dumps({"typ": "JWT", "alg": "ed25519-nkey"}).encode())
    claims = {**claims, "jti": ""}
    claims["jti"] = base64.b32encode(hashlib.sha256(json.dumps(claims).encode()).digest()).rstrip(b"=").decode()
    payload = _b64(json.dumps(claims).encode())
    kp = nkeys.from_seed(bytearray(signer_seed.encode()))
    signature = _b64(kp.sign(f"{header}.{payload}".encode()))
    return f"{header}.{payload}.{signature}"


class Operator:
    """An operator and one JetStream-enabled account; `creds(...)` writes a user's .creds file."""

    def __init__(self) -> None:
        self.op_seed, self.op_pub = _keypair(nkeys.PREFIX_BYTE_OPERATOR)
        self.acc_seed, self.acc_pub = _keypair(nkeys.PREFIX_BYTE_ACCOUNT)
        now = int(time.time())
        self.op_jwt = _jwt({"iat": now, "iss": self.op_pub, "sub": self.op_pub, "name": "vcbus-test",
                            "nats": {"type": "operator", "version": 2}}, self.op_seed)
        unlimited = {"subs": -1, "data": -1, "payload": -1, "imports": -1, "exports": -1, "wildcards": True,
                     "conn": -1, "leaf": -1, "mem_storage": -1, "disk_storage": -1, "streams": -1, "consumer": -1}
        self.acc_jwt = _jwt({"iat": now, "iss": self.op_pub, "sub": self.acc_pub, "name": "vcbus",
                             "nats": {"type": "account", "version": 2, "limits": unlimited}}, self.op_seed)
        _, self.sys_pub = _keypair(nkeys.PREFIX_BYTE_ACCOUNT)  # JetStream needs a system account
        self.sys_jwt = _jwt({"iat": now, "iss": self.op_pub, "sub": self.sys_pub, "name": "SYS",
                             "nats": {"type": "account", "version": 2}}, self.op_seed)

    def server_block(self) -> str:
        return (
            f"operator: {self.op_jwt}\n"
            f"system_account: {self.sys_pub}\n"
            "resolver: MEMORY\n"
            f"resolver_preload: {{\n  {self.acc_pub}: {self.acc_jwt}\n  {self.sys_pub}: {self.sys_jwt}\n}}\n"
        )

    def creds(self, path: pathlib.Path, name: str = "vcbus", permissions: dict | None = None) -> pathlib.Path:
        seed, pub = user_seed()
        nats = {"type": "user", "version": 2, "subs": -1, "data": -1, "payload": -1, **(permissions or {})}
        jwt = _jwt({"iat": int(time.time()), "iss": self.acc_pub, "sub": pub, "name": name, "nats": nats}, self.acc_seed)
        path.write_text(
            "-----BEGIN NATS USER JWT-----\n"
            f"{jwt}\n"
            "------END NATS USER JWT------\n\n"
            "************************* IMPORTANT *************************\n"
            "NKEY Seed printed below can be used to sign and prove identity.\n\n"
            "-----BEGIN USER NKEY SEED-----\n"
            f"{seed}\n"
            "------END USER NKEY SEED------\n"
        )
        return path


@contextlib.contextmanager
def secure_server(directory: pathlib.Path, config: str, *, tls: bool = False) -> Iterator[str]:
    """A nats-server with JetStream and `config` appended; yields its URL (tls:// with `tls`)."""
    server = EmbeddedServer(data_dir=directory, sync_interval="always", extra_config=config)
    server.start(timeout=20)
    try:
        yield server.url.replace("nats://", "tls://", 1) if tls else server.url
    finally:
        server.stop()
