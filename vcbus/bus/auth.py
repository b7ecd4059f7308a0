"""Credentials and TLS for NATS connections, and keeping secrets out of what vcbus prints.

`connect_options(auth, urls)` turns a `vcbus.settings.NatsAuth` (the nats
CLI's `--creds`, `--nkey`, `--user`/`--password`, `--tlscert`/`--tlskey`/
`--tlsca`) into nats.py's connect keyword arguments. Files are checked here,
before any connection, so that a wrong path or a file of the wrong kind is a
one-line `UserError` naming the flag and the file, not a failure deep inside
nats.py after its connect timeout.

TLS: a `tls://` URL, a CA, or a client certificate give an `ssl.SSLContext`
that verifies the server against `--tlsca` (a private CA) or else the
system's trust store. nats.py upgrades `nats://` URLs to TLS when the server
requires it, with that same context.

`redact(text)` replaces the password (or token) of every `scheme://user:pass@`
in a text by `***`. Every URL vcbus logs or puts into an error goes through
it (vcbus.bus.connecting), and so does the text of nats.py's errors, which can
quote the URL they failed on.
"""

from __future__ import annotations

import pathlib
import re
import ssl
from typing import Any

from vcbus.errors import UserError
from vcbus.settings import NatsAuth

# scheme://user:password@ and scheme://token@ (NATS reads a lone userinfo as a token)
_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^@/\s,]+)@")
MASK = "***"
CREDS_JWT = "-----BEGIN NATS USER JWT-----"


def _mask(match: re.Match[str]) -> str:
    userinfo = match.group("userinfo")
    user, sep, _ = userinfo.partition(":")
    return f"{match.group('scheme')}{user}:{MASK}@" if sep else f"{match.group('scheme')}{MASK}@"


def redact(text: str, *secrets: str | None) -> str:
    """`text` with URL passwords and tokens, and each of `secrets`, replaced by ***."""
    out = _USERINFO.sub(_mask, text)
    for secret in secrets:
        if secret:
            out = out.replace(secret, MASK)
    return out


def urls_of(url: str) -> list[str]:
    """The servers of a `--nats` value: one URL, or several separated by commas."""
    return [u.strip() for u in url.split(",") if u.strip()]


def _file(flag: str, path: pathlib.Path | None) -> str | None:
    if path is None:
        return None
    if not path.is_file():
        raise UserError(f"{flag} {path}: no such file")
    try:
        path.read_bytes()
    except OSError as err:
        raise UserError(f"{flag} {path}: cannot read it ({err.strerror})") from None
    return str(path)


def _check_creds(path: str) -> None:
    text = pathlib.Path(path).read_text(errors="replace")
    if CREDS_JWT not in text or "SU" not in text:
        raise UserError(f"--creds {path}: not a NATS credentials file (no user JWT and nkey seed in it)")


def _nkey_seed(path: str) -> str:
    words = pathlib.Path(path).read_text(errors="replace").split()
    seed = next((w for w in words if w.startswith("SU")), None)
    if seed is None:
        raise UserError(f"--nkey {path}: no user nkey seed (a word starting with SU) in it")
    try:
        import nkeys

        nkeys.from_seed(bytearray(seed.encode()))
    except ImportError:
        raise UserError("--nkey needs the nkeys package: pip install nkeys") from None
    except Exception:
        raise UserError(f"--nkey {path}: the seed in it is not a valid nkey seed") from None
    return seed


def tls_context(auth: NatsAuth, urls: list[str]) -> ssl.SSLContext | None:
    """The TLS context: with a CA, a client certificate or a tls:// URL; else None (plain, or upgrade)."""
    cert = _file("--tlscert", auth.tls_cert)
    key = _file("--tlskey", auth.tls_key)
    ca = _file("--tlsca", auth.tls_ca)
    if bool(cert) != bool(key):
        raise UserError("--tlscert and --tlskey go together: give both, or neither")
    if not (cert or ca or any(u.startswith("tls://") for u in urls)):
        return None
    try:
        ctx = ssl.create_default_context(cafile=ca)
    except ssl.SSLError as err:
        raise UserError(f"--tlsca {ca}: not a PEM CA certificate ({err.reason or err})") from None
    if cert:
        try:
            ctx.load_cert_chain(cert, key)
        except ssl.SSLError as err:
            raise UserError(f"--tlscert {cert} / --tlskey {key}: not a PEM certificate and its key ({err.reason or err})") from None
    return ctx


def connect_options(auth: NatsAuth, urls: list[str]) -> dict[str, Any]:
    """nats.py `connect()` keyword arguments for `auth` (see the module docstring)."""
    if auth.creds and auth.nkey:
        raise UserError("--creds and --nkey are two ways to say who you are: give one")
    if auth.password and not auth.user:
        raise UserError("--password needs --user (NATS_PASSWORD needs NATS_USER)")
    opts: dict[str, Any] = {}
    creds = _file("--creds", auth.creds)
    if creds:
        _check_creds(creds)
        opts["user_credentials"] = creds
    nkey = _file("--nkey", auth.nkey)
    if nkey:
        opts["nkeys_seed_str"] = _nkey_seed(nkey)
    if auth.user:
        opts["user"] = auth.user
        opts["password"] = auth.password or ""
    ctx = tls_context(auth, urls)
    if ctx is not None:
        opts["tls"] = ctx
    return opts


SERVICES = ("bridge", "decider", "projector", "scheduler", "actuator")


def service_auth(directory: pathlib.Path, service: str, base: NatsAuth) -> NatsAuth | None:
    """The identity of `service` in a `--service-credentials` directory, with `base`'s TLS; None if
    the directory names none for it (the service then uses `base`)."""
    tls = {"tls_cert": base.tls_cert, "tls_key": base.tls_key, "tls_ca": base.tls_ca}
    creds, nkey, password = directory / f"{service}.creds", directory / f"{service}.nk", directory / service
    if creds.is_file():
        return NatsAuth(creds=creds, **tls)
    if nkey.is_file():
        return NatsAuth(nkey=nkey, **tls)
    if password.is_file():
        try:
            secret = password.read_text().strip()
        except OSError as err:
            raise UserError(f"--service-credentials {password}: cannot read it ({err.strerror})") from None
        if not secret:
            raise UserError(f"--service-credentials {password}: empty (the password of NATS user {service})")
        return NatsAuth(user=service, password=secret, **tls)
    return None
