"""Connecting to a NATS server that demands credentials and TLS, as the nats CLI does.

Real nats-server processes (vcbus.bus.server.EmbeddedServer with extra config):
users with passwords and nkeys, TLS with a private CA and client certificates,
and decentralised auth (operator, account, user JWT in a .creds file). Every
command that connects takes `--creds`, `--nkey`, `--user`/`--password`,
`--tlscert`/`--tlskey`/`--tlsca`, and the nats CLI's environment variables
(NATS_URL, NATS_CREDS, NATS_NKEY, NATS_USER, NATS_PASSWORD, NATS_CERT, NATS_KEY,
NATS_CA). Passwords never appear in what vcbus prints.
"""

from __future__ import annotations

import json
import pathlib

import pytest

from tests.fixtures_nats import vcbus_cli
from tests.nats_secure import Operator, Pki, secure_server, user_seed
from vcbus.bus.connecting import open_bus
from vcbus.bus.errors import BusError
from vcbus.settings import BusSettings, NatsAuth

pytestmark = pytest.mark.nats

PASSWORD = "s3cr3t-Pa55word"
NO_NATS_ENV = {"NATS_URL": "", "VCBUS_NATS_URL": "", "NATS_USER": "", "NATS_PASSWORD": "", "NATS_CREDS": "",
               "NATS_NKEY": "", "NATS_CERT": "", "NATS_KEY": "", "NATS_CA": ""}


def cli(*args: str, env: dict[str, str] | None = None):
    return vcbus_cli(*args, env={**NO_NATS_ENV, **(env or {})}, timeout=60)


def one_line_error(res) -> str:
    err = res.stderr.decode()
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Pki:
    return Pki.create(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def nkey_file(tmp_path_factory) -> tuple[pathlib.Path, str]:
    seed, public = user_seed()
    path = tmp_path_factory.mktemp("nkey") / "user.nk"
    path.write_text(seed + "\n")
    return path, public


@pytest.fixture(scope="module")
def users_server(tmp_path_factory, nkey_file):
    """Plain TCP, authorization required: user alice (password) and one nkey user."""
    config = (
        "authorization {\n"
        "  users = [\n"
        f'    {{user: alice, password: "{PASSWORD}"}}\n'
        f"    {{nkey: {nkey_file[1]}}}\n"
        "  ]\n"
        "}\n"
    )
    with secure_server(tmp_path_factory.mktemp("nats-users"), config) as url:
        yield url


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory, pki):
    """TLS with a private CA; clients must show a certificate of that CA, and a password."""
    config = pki.server_block(verify=True) + f'authorization {{ user: bob, password: "{PASSWORD}" }}\n'
    with secure_server(tmp_path_factory.mktemp("nats-tls"), config, tls=True) as url:
        yield url


def test_user_and_password_by_flags_by_the_nats_cli_environment_and_in_the_url(users_server):
    assert cli("status", "--nats", users_server, "--user", "alice", "--password", PASSWORD).returncode == 0
    env = {"NATS_URL": users_server, "NATS_USER": "alice", "NATS_PASSWORD": PASSWORD}
    res = cli("status", env=env)
    assert res.returncode == 0, res.stderr
    with_userinfo = users_server.replace("nats://", f"nats://alice:{PASSWORD}@")
    assert cli("status", "--nats", with_userinfo).returncode == 0
    # replay has its own --nats (an optional value); it takes the same credential flags
    res = cli("replay", "--nats", users_server, "--user", "alice", "--password", PASSWORD, "--json")
    assert res.returncode == 0, res.stderr
    res = cli("replay", "--nats", users_server, "--json")
    assert res.returncode == 3 and "the server wants credentials" in one_line_error(res)


def test_a_refused_login_says_so_in_one_line_without_the_password(users_server):
    res = cli("status", "--nats", users_server, "--user", "alice", "--password", "wrong-" + PASSWORD)
    assert res.returncode == 3
    line = one_line_error(res)
    assert "authorization violation" in line.lower() and "--user" in line
    assert PASSWORD not in line
    res = cli("status", "--nats", users_server.replace("nats://", f"nats://alice:x{PASSWORD}@"))
    line = one_line_error(res)
    assert res.returncode == 3 and "alice:***@127.0.0.1" in line and PASSWORD not in line
    res = cli("status", "--nats", users_server)  # no credentials at all
    assert res.returncode == 3 and "the server wants credentials" in one_line_error(res)


def test_vcbus_up_logs_the_url_without_its_password(users_server, tmp_path):
    url = users_server.replace("nats://", f"nats://alice:{PASSWORD}@")
    res = cli("up", "--once", "--nats", url)
    out = res.stdout.decode() + res.stderr.decode()
    assert res.returncode == 0, out
    assert f"vcbus up: {users_server.replace('nats://', 'nats://alice:***@')}" in out
    assert PASSWORD not in out


async def test_bus_errors_and_descriptions_are_redacted(users_server):
    url = users_server.replace("nats://", f"nats://alice:{PASSWORD}@")
    async with open_bus(BusSettings(nats_url=url)) as bus:
        assert PASSWORD not in bus.describe() and "alice:***@" in bus.describe()
    with pytest.raises(BusError) as err:
        async with open_bus(BusSettings(nats_url=url.replace(PASSWORD, PASSWORD + "x"))):
            pass
    assert PASSWORD not in str(err.value) and "alice:***@" in str(err.value)
    with pytest.raises(BusError) as err:
        async with open_bus(BusSettings(nats_url=users_server, auth=NatsAuth(user="alice", password="no" + PASSWORD))):
            pass
    assert PASSWORD not in str(err.value)


def test_an_nkey_seed_file_by_flag_and_environment(users_server, nkey_file, tmp_path):
    path, _ = nkey_file
    res = cli("status", "--nats", users_server, "--nkey", str(path))
    assert res.returncode == 0, res.stderr
    assert cli("status", env={"NATS_URL": users_server, "NATS_NKEY": str(path)}).returncode == 0
    other, _ = user_seed()  # a valid seed the server does not know
    (tmp_path / "other.nk").write_text(other)
    res = cli("status", "--nats", users_server, "--nkey", str(tmp_path / "other.nk"))
    assert res.returncode == 3 and "authorization violation" in one_line_error(res).lower()
    (tmp_path / "bad.nk").write_text("not a seed\n")
    res = cli("status", "--nats", users_server, "--nkey", str(tmp_path / "bad.nk"))
    assert res.returncode == 2 and "--nkey" in one_line_error(res) and "bad.nk" in one_line_error(res)


def test_tls_with_a_private_ca_and_a_client_certificate(tls_server, pki):
    tls = ["--tlsca", str(pki.ca), "--tlscert", str(pki.client_cert), "--tlskey", str(pki.client_key)]
    login = ["--user", "bob", "--password", PASSWORD]
    res = cli("status", "--nats", tls_server, *tls, *login)
    assert res.returncode == 0, res.stderr
    env = {"NATS_URL": tls_server, "NATS_CA": str(pki.ca), "NATS_CERT": str(pki.client_cert),
           "NATS_KEY": str(pki.client_key), "NATS_USER": "bob", "NATS_PASSWORD": PASSWORD}
    assert cli("status", env=env).returncode == 0
    # a nats:// URL is upgraded to TLS when the server requires it
    assert cli("status", "--nats", tls_server.replace("tls://", "nats://"), *tls, *login).returncode == 0


def test_tls_failures_name_the_certificate_problem(tls_server, pki):
    login = ["--user", "bob", "--password", PASSWORD]
    client = ["--tlscert", str(pki.client_cert), "--tlskey", str(pki.client_key)]
    res = cli("status", "--nats", tls_server, *client, *login)  # the system trust store does not know the CA
    line = one_line_error(res)
    assert res.returncode == 3 and "certificate verify failed" in line.lower() and "--tlsca" in line
    res = cli("status", "--nats", tls_server, "--tlsca", str(pki.ca), *login)  # no client certificate
    assert res.returncode == 3
    one_line_error(res)


def test_bad_credential_flags_are_one_line_errors_before_any_connection(users_server, pki, tmp_path):
    cases = [
        (["--creds", str(tmp_path / "missing.creds")], "--creds", "no such file"),
        (["--tlscert", str(pki.client_cert)], "--tlscert and --tlskey go together", ""),
        (["--password", "x"], "--password needs --user", ""),
        (["--tlsca", str(pki.client_key)], "--tlsca", "not a PEM CA certificate"),
    ]
    (tmp_path / "x.creds").write_text("hello\n")
    cases.append((["--creds", str(tmp_path / "x.creds")], "not a NATS credentials file", ""))
    for flags, *words in cases:
        res = cli("status", "--nats", users_server, *flags)
        line = one_line_error(res)
        assert res.returncode == 2, (flags, line)
        assert all(w in line for w in words), (flags, line)


def test_decentralised_auth_with_a_creds_file(tmp_path):
    op = Operator()
    creds = op.creds(tmp_path / "vcbus.creds")
    with secure_server(tmp_path / "nats", op.server_block()) as url:
        res = cli("status", "--nats", url, "--creds", str(creds))
        assert res.returncode == 0, res.stderr
        res = cli("status", "-o", "json", env={"NATS_URL": url, "NATS_CREDS": str(creds)})
        assert res.returncode == 0 and json.loads(res.stdout)["items"] == []
        stranger = Operator().creds(tmp_path / "stranger.creds")  # signed by another account
        res = cli("status", "--nats", url, "--creds", str(stranger))
        assert res.returncode == 3
        one_line_error(res)
