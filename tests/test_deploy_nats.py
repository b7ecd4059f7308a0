"""deploy/vcbus/'s NATS, run for real: its config files on nats-server, its users doing their jobs.

- `make-secrets.sh` makes Secrets the API server accepts (server-side dry run) and a certificate
  for every name the servers are reached by;
- `nats.conf` (base and encrypted/) passes `nats-server -t` with those Secrets' files;
- `auth.conf` on a real nats-server: each component's own code works as its own user (setup creates
  the streams, the bridge publishes watch records, the decider decides, the projector projects, the
  scheduler reads, a subscriber reads domain events), and what a user is not for is refused;
- on the real API server too: a NATS user without publish rights on VCBUS_CMDS (the bridge, an
  external subscriber) cannot make the actuator do anything, while the decider's user can.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import pathlib
import subprocess

import msgspec
import nats.errors
import pytest
import yaml
from cryptography import x509
from kubernetes import client

from statemachines import outputs as o
from tests.fixtures_nats import SEED_LOG
from tests.test_deploy import DEPLOY, obj, render
from vcbus.bus import subjects as s
from vcbus.bus.connecting import connect, open_bus, service_buses
from vcbus.bus.server import EmbeddedServer, find_binary
from vcbus.settings import BusSettings, NatsAuth

pytestmark = pytest.mark.nats
USERS = ("setup", "bridge", "decider", "projector", "scheduler", "actuator", "subscriber", "admin")
SECRETS_SCRIPT = DEPLOY / "make-secrets.sh"


def make_secrets(*args: str) -> list[dict]:
    out = subprocess.run(["sh", str(SECRETS_SCRIPT), *args], capture_output=True, text=True, timeout=60, check=True)
    return [d for d in yaml.safe_load_all(out.stdout) if d]


@pytest.fixture(scope="module")
def secrets() -> dict[str, dict]:
    return {d["metadata"]["name"]: d for d in make_secrets("--encryption")}


def _files(secret: dict, directory: pathlib.Path) -> pathlib.Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name, value in (secret.get("data") or {}).items():
        (directory / name).write_bytes(base64.b64decode(value))
    return directory


def test_make_secrets_gives_passwords_for_every_user_and_a_certificate_for_every_name(secrets):
    assert set(secrets) == {"nats-users", "nats-tls", "nats-encryption"}
    passwords = secrets["nats-users"]["stringData"]
    assert set(passwords) == set(USERS) and len(set(passwords.values())) == len(USERS)
    assert all(len(p) >= 32 for p in passwords.values())
    cert = x509.load_pem_x509_certificate(base64.b64decode(secrets["nats-tls"]["data"]["tls.crt"]))
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)
    assert {"nats.vcbus-system", "nats.vcbus-system.svc", "*.nats.vcbus-system.svc"} <= set(names)
    usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert {u._name for u in usages} == {"serverAuth", "clientAuth"}  # client port and routes
    assert set(make_secrets()[0]["stringData"]) == set(USERS)  # without --encryption: two Secrets
    assert [d["metadata"]["name"] for d in make_secrets()] == ["nats-users", "nats-tls"]


@pytest.mark.k8s
def test_the_secrets_pass_the_api_server(k8s, secrets):
    admin = k8s.api_client()
    ns = "vcbus-system"
    with contextlib.suppress(client.ApiException):
        client.CoreV1Api(admin).create_namespace({"metadata": {"name": ns}})
    for secret in secrets.values():  # server-side apply, dry run, strict fields
        method, url, headers, body, post = admin.param_serialize(
            method="PATCH", resource_path=f"/api/v1/namespaces/{ns}/secrets/{secret['metadata']['name']}",
            query_params=[("dryRun", "All"), ("fieldValidation", "Strict"), ("fieldManager", "vcbus-test")],
            header_params={"Accept": "application/json", "Content-Type": "application/apply-patch+yaml"},
            body=secret, auth_settings=["BearerToken"],
        )
        resp = admin.call_api(method, url, header_params=headers, body=body, post_params=post, _request_timeout=30)
        assert resp.status in (200, 201), resp.read().decode()


@pytest.mark.parametrize("overlay", ["", "encrypted"])
def test_nats_conf_is_valid_for_nats_server(overlay, secrets, tmp_path):
    """The ConfigMap's files, with the mount paths pointed at this test's copies."""
    data = obj(render(overlay), "ConfigMap", "nats-config")["data"]
    tls = _files(secrets["nats-tls"], tmp_path / "tls")
    conf_dir = tmp_path / "config"
    conf_dir.mkdir()
    for name, text in data.items():
        text = text.replace("/etc/nats-tls/", f"{tls}/").replace("store_dir: /data", f"store_dir: {tmp_path / 'data'}")
        (conf_dir / name).write_text(text)
    env = {**os.environ, "POD_NAME": "nats-0", "JS_KEY": secrets["nats-encryption"]["stringData"]["key"],
           **{f"VCBUS_{u.upper()}_PASSWORD": p for u, p in secrets["nats-users"]["stringData"].items()}}
    res = subprocess.run([find_binary(), "-c", str(conf_dir / "nats.conf"), "-t"], capture_output=True, text=True,
                         env=env, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr
    assert ("chachapoly" in data["encryption.conf"]) == (overlay == "encrypted")


# --------------------------------------------------------------------------- auth.conf, used


@pytest.fixture(scope="module")
def deployed_auth(tmp_path_factory, secrets):
    """A nats-server with JetStream and the deployment's auth.conf (passwords from the environment)."""
    auth = obj(render(), "ConfigMap", "nats-config")["data"]["auth.conf"]
    passwords = secrets["nats-users"]["stringData"]
    env = {f"VCBUS_{u.upper()}_PASSWORD": p for u, p in passwords.items()}
    server = EmbeddedServer(data_dir=tmp_path_factory.mktemp("nats-auth"), sync_interval="always", extra_config=auth)
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)  # the server resolves $VCBUS_*_PASSWORD from its environment
    try:
        server.start(timeout=20)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    try:
        yield server.url, passwords
    finally:
        server.stop()


def as_user(url: str, passwords: dict, user: str, **more) -> BusSettings:
    return BusSettings(nats_url=url, auth=NatsAuth(user=user, password=passwords[user]), **more)


async def wipe(url: str, passwords: dict) -> None:
    nc = await connect(url, auth=NatsAuth(user="admin", password=passwords["admin"]))
    js = nc.jetstream()
    for name in (s.K8S_STREAM, s.JOBS_STREAM, s.CMDS_STREAM, f"KV_{s.STATUS_BUCKET}", f"KV_{s.HISTORY_BUCKET}",
                 "KV_vcbus_bridge"):
        with contextlib.suppress(Exception):
            await js.delete_stream(name)
    await nc.close()


async def refused_publish(url: str, passwords: dict, user: str, subject: str, body: bytes = b"{}") -> None:
    """`user` publishes to `subject` through JetStream: no acknowledgement ever comes back."""
    nc = await connect(url, auth=NatsAuth(user=user, password=passwords[user]))
    try:
        with pytest.raises((nats.errors.TimeoutError, nats.errors.Error)):
            await nc.jetstream().publish(subject, body, timeout=2)
    finally:
        await nc.close()


async def messages(url: str, passwords: dict, stream: str) -> int:
    nc = await connect(url, auth=NatsAuth(user="admin", password=passwords["admin"]))
    try:
        return (await nc.jetstream().stream_info(stream)).state.messages
    finally:
        await nc.close()


async def test_each_component_does_its_job_as_its_own_user_and_nothing_else(deployed_auth, tmp_path, monkeypatch):
    from vcbus.bus.decider import Decider
    from vcbus.bus.projector import Projector
    from vcbus.bus.publisher import publish_records
    from vcbus.bus.scheduling import SchedulerService
    from vcbus.client import subscribe

    url, pw = deployed_auth
    await wipe(url, pw)
    creds = tmp_path / "creds"  # as the Deployment mounts Secret nats-users
    creds.mkdir()
    for user in ("bridge", "decider", "projector", "scheduler", "actuator"):
        (creds / user).write_text(pw[user] + "\n")
    settings = as_user(url, pw, "setup", service_credentials=creds)
    async with open_bus(settings) as bus:  # setup creates the streams and buckets
        async with service_buses(bus, ("bridge", "decider", "projector", "scheduler", "actuator")) as buses:
            assert all(b is not bus for b in buses.values())
            with open(SEED_LOG, "rb") as fh:
                await publish_records(buses["bridge"].js, fh, str(SEED_LOG))
            kv = await buses["bridge"].js.create_key_value(bucket="vcbus_bridge", history=1)
            await kv.put("pods", b"{}")
            assert (await kv.get("pods")).value == b"{}"
            decider = Decider(buses["decider"], clock=lambda: "1970-01-01T00:00:00Z")
            await decider.run(until_idle=True)
            assert decider.stats.outputs > 0
            assert decider.stats.snapshots == 1  # its clean stop's snapshot (vcbus.bus.statesnap)
            projector = Projector(buses["projector"])
            await projector.run(until_idle=True)
            assert projector.snapshots is not None and projector.snapshots.saves == 1
            status = await (await buses["projector"].js.key_value(s.STATUS_BUCKET)).keys()
            assert status
            scheduler = SchedulerService(buses["scheduler"])
            await scheduler.run(until_idle=True)
    commands = await messages(url, pw, s.CMDS_STREAM)
    assert commands > 0
    # an external subscriber reads the domain events as user `subscriber`
    monkeypatch.setenv("NATS_USER", "subscriber")
    monkeypatch.setenv("NATS_PASSWORD", pw["subscriber"])
    async with subscribe("audit", url=url) as events:
        first = await asyncio.wait_for(events.__anext__(), 30)
        assert first.type == "sh.volcano.job.observed.v1" and first.subject == "default/resnet-dist-train"
    # what each user is not for
    forged = s.command_subject("default/resnet-dist-train")
    for user in ("bridge", "projector", "actuator", "subscriber", "setup"):
        await refused_publish(url, pw, user, forged)
    for user in ("decider", "scheduler", "actuator", "subscriber", "projector"):
        await refused_publish(url, pw, user, "vcbus.k8s.vcjob.default.x")
    await refused_publish(url, pw, "bridge", s.event_subject("default/x", "job.phase.changed.v1"))
    await refused_publish(url, pw, "projector", s.event_subject("default/x", "job.phase.changed.v1"))
    assert await messages(url, pw, s.CMDS_STREAM) == commands
    # the decider appends a TIMER record to VCBUS_K8S when a delayed action falls due (the bridge may
    # write anything under vcbus.k8s.>; the readers may not)
    nc = await connect(url, auth=NatsAuth(user="decider", password=pw["decider"]))
    try:
        ack = await nc.jetstream().publish(s.timer_subject("default/x"), b"{}", timeout=10)
        assert ack.stream == s.K8S_STREAM
    finally:
        await nc.close()
    for user in ("projector", "actuator", "subscriber"):
        await refused_publish(url, pw, user, s.timer_subject("default/x"))
    # nobody but the actuator reads the commands; nobody but setup changes a stream
    for user in ("bridge", "subscriber", "projector"):
        nc = await connect(url, auth=NatsAuth(user=user, password=pw[user]))
        try:
            with pytest.raises((nats.errors.TimeoutError, nats.errors.Error)):
                await nc.jetstream().add_consumer(s.CMDS_STREAM, durable_name=f"spy-{user}", timeout=2)
            with pytest.raises((nats.errors.TimeoutError, nats.errors.Error)):
                await nc.request(f"$JS.API.STREAM.DELETE.{s.CMDS_STREAM}", b"", timeout=2)
        finally:
            await nc.close()
    assert await messages(url, pw, s.CMDS_STREAM) == commands


@pytest.mark.k8s
async def test_a_nats_user_without_publish_rights_on_cmds_cannot_make_the_actuator_act(deployed_auth, k8s,
                                                                                       k8s_namespace):
    from tests.test_actuator_ownership import create_job, owner, plain_pod
    from vcbus.k8s.actuating import ActuatorService

    url, pw = deployed_auth
    await wipe(url, pw)
    api = k8s.api_client()
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    ns = k8s_namespace
    job = create_job(custom, ns, "train")
    core.create_namespaced_pod(ns, plain_pod("train-worker-0", owner_ref=owner(job)))
    key = f"{ns}/train"
    async with open_bus(as_user(url, pw, "setup")):
        pass  # the streams
    kill = o.DeletePod(job=key, seq=1, name="train-worker-0", reason="kill")
    body = msgspec.json.encode(kill)
    for user in ("bridge", "subscriber", "projector", "actuator"):  # the actuator cannot command itself either
        await refused_publish(url, pw, user, s.command_subject(key), body)
    assert await messages(url, pw, s.CMDS_STREAM) == 0
    async with open_bus(as_user(url, pw, "actuator"), ensure=False) as bus:
        service = ActuatorService(bus, api)
        await service.run(stop=asyncio.Event(), until_idle=True)
        assert service.results["applied"] == service.results["done"] == 0
        assert core.read_namespaced_pod("train-worker-0", ns).metadata.deletion_timestamp is None
        # the decider's user may: the same command, published by it, is carried out
        async with open_bus(as_user(url, pw, "decider"), ensure=False) as decider:
            await decider.js.publish(s.command_subject(key), body, headers={"Nats-Msg-Id": "1:0"})
        await service.run(stop=asyncio.Event(), until_idle=True)
        assert service.results["applied"] == 1
    deadline = asyncio.get_running_loop().time() + 30
    while True:  # deleted (no kubelet: gone at once, or marked for deletion)
        pods = core.list_namespaced_pod(ns).items
        if not pods or pods[0].metadata.deletion_timestamp:
            break
        assert asyncio.get_running_loop().time() < deadline
        await asyncio.sleep(0.2)


async def test_vcbus_up_runs_each_service_as_its_own_user(deployed_auth, tmp_path):
    """As the Deployment runs it: `vcbus up` logs in as `setup` (which may publish nothing) and its
    services as themselves (`--service-credentials`): the seed log is decided and projected."""
    from tests.fixtures_nats import vcbus_cli

    url, pw = deployed_auth
    await wipe(url, pw)
    creds = tmp_path / "nats-users"
    creds.mkdir()
    for user in ("decider", "projector"):
        (creds / user).write_text(pw[user])
    admin = {"NATS_USER": "admin", "NATS_PASSWORD": pw["admin"], "NATS_URL": url}
    assert vcbus_cli("publish", str(SEED_LOG), env=admin).returncode == 0
    setup = {"NATS_URL": url, "NATS_USER": "setup", "NATS_PASSWORD": pw["setup"]}
    alone = vcbus_cli("up", "--once", env=setup)  # without its services' identities: refused
    assert alone.returncode != 0 and "Traceback" not in alone.stderr.decode()
    res = vcbus_cli("up", "--once", "--service-credentials", str(creds), env=setup)
    out = res.stderr.decode()
    assert res.returncode == 0, out
    assert all(pw[u] not in out for u in pw)
    status = vcbus_cli("status", "-o", "json", env=admin)
    assert [j["metadata"]["name"] for j in json.loads(status.stdout)["items"]] == ["resnet-dist-train"]
    # inside the vcbus pod (`kubectl exec deploy/vcbus -- vcbus ...`) commands log in as `setup`: it reads
    status = vcbus_cli("status", "-o", "json", env=setup)
    assert status.returncode == 0, status.stderr
    assert [j["metadata"]["name"] for j in json.loads(status.stdout)["items"]] == ["resnet-dist-train"]
    events = vcbus_cli("events", "tail", "--since", "1", "--no-follow", env=setup)
    assert events.returncode == 0 and b"resnet-dist-train" in events.stdout, events.stderr
    assert vcbus_cli("publish", str(SEED_LOG), env=setup).returncode != 0  # but writes nothing


def test_auth_conf_lets_setup_create_every_stream_and_bucket_vcbus_makes():
    """A new stream or KV bucket in vcbus.bus.streams must get its users in auth.conf too."""
    from vcbus.bus.streams import BUCKETS, STREAMS
    from vcbus.k8s.bridge import BRIDGE_BUCKET

    auth = obj(render(), "ConfigMap", "nats-config")["data"]["auth.conf"]
    setup = auth[auth.index("{user: setup"):auth.index("{user: bridge")]
    for stream in [*STREAMS, *(f"KV_{b}" for b in (*BUCKETS, BRIDGE_BUCKET))]:
        assert f'"$JS.API.STREAM.CREATE.{stream}"' in setup, f"auth.conf: user setup cannot create {stream}"
        assert f'"$JS.API.STREAM.UPDATE.{stream}"' in setup, f"auth.conf: user setup cannot update {stream}"
