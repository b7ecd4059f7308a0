"""`ssh`: key Secret and its mounts (upstream `plugins/ssh`).

Flags: `ssh-key-file-path` (`/root/.ssh`), `ssh-private-key` (""),
`ssh-public-key` (""), `ssh-port` (22; at OnJobAdd a value <= 0 or > 65535
falls back to 22).

OnPodCreate mounts Secret `<job>-ssh` (items under `.ssh/`, defaultMode 0600,
or 0644 when the path is not `/root/.ssh`) at the key path with subPath `.ssh`
in every container and init container.

OnJobAdd (guarded by `plugin-ssh`) creates or updates the Secret: `config` is
generated from the tasks; the keys are the user's (verbatim) or, when no
private key is given, left for the adapter to generate (`fill_ssh_keys`): the
domain has no randomness. OnJobUpdate is a no-op (the subPath mount would not
see updates anyway). OnJobDelete deletes the Secret.
"""

from __future__ import annotations

import base64
from typing import Any

from statemachines.plugins.args import Flag
from statemachines.plugins.base import (
    CREATE_OR_UPDATE_SECRET,
    ApplyObject,
    Effect,
    Plugin,
    all_containers,
    append_mount,
    append_volume,
    job_name,
    object_meta,
    pod_name,
    tasks,
    template_spec,
)

SSH_PRIVATE_KEY = "id_rsa"
SSH_PUBLIC_KEY = "id_rsa.pub"
SSH_AUTHORIZED_KEYS = "authorized_keys"
SSH_CONFIG = "config"
SSH_ABSOLUTE_PATH = "/root/.ssh"
SSH_RELATIVE_PATH = ".ssh"


def secret_name(job: dict[str, Any]) -> str:
    return f"{job_name(job)}-ssh"


def ssh_config(job: dict[str, Any], port: int) -> str:
    """The `config` key: no host-key checks, then one `Host` block per pod."""
    lines = ["StrictHostKeyChecking no", "UserKnownHostsFile /dev/null"]
    name = job_name(job)
    for task in tasks(job):
        spec = template_spec(task)
        for index in range(int(task.get("replicas") or 0)):
            host = spec.get("hostname") or pod_name(name, task.get("name", ""), index)
            sub = spec.get("subdomain") or name
            lines += [f"Host {host}", f"  HostName {host}.{sub}", f"  Port {port}"]
            if spec.get("hostname"):
                break
    return "".join(line + "\n" for line in lines)


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


class SshPlugin(Plugin):
    NAME = "ssh"
    FLAGS = (
        Flag("ssh-key-file-path", "string", SSH_ABSOLUTE_PATH, "The path used to store ssh private and public keys"),
        Flag("ssh-private-key", "string", "", "The input string of the private key"),
        Flag("ssh-public-key", "string", "", "The input string of the public key"),
        Flag("ssh-port", "int", 22, "SSH port used in ssh config. Default Port: 22"),
    )

    @property
    def port(self) -> int:
        port = self.args.int("ssh-port")
        return port if 0 < port <= 65535 else 22

    def on_pod_create(self, pod: dict[str, Any], job: dict[str, Any]) -> None:
        name = secret_name(job)
        path = self.args.str("ssh-key-file-path")
        items = [
            {"key": key, "path": f"{SSH_RELATIVE_PATH}/{key}"}
            for key in (SSH_PRIVATE_KEY, SSH_PUBLIC_KEY, SSH_AUTHORIZED_KEYS, SSH_CONFIG)
        ]
        mode = 0o600 if path == SSH_ABSOLUTE_PATH else 0o644
        append_volume(pod, {"name": name, "secret": {"secretName": name, "items": items, "defaultMode": mode}})
        for container in all_containers(pod):
            append_mount(container, {"name": name, "mountPath": path, "subPath": SSH_RELATIVE_PATH})

    def secret(self, job: dict[str, Any]) -> ApplyObject:
        """The Secret; with a user key its data is complete, otherwise the adapter fills the keys."""
        data = {SSH_CONFIG: b64(ssh_config(job, self.port))}
        private = self.args.str("ssh-private-key")
        if private:
            public = self.args.str("ssh-public-key")
            data = {
                SSH_PRIVATE_KEY: b64(private),
                SSH_PUBLIC_KEY: b64(public),
                SSH_AUTHORIZED_KEYS: b64(public),
                **data,
            }
        manifest = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": object_meta(job, secret_name(job)),
            "type": "Opaque",
            "data": data,
        }
        return ApplyObject(
            manifest=manifest, mode=CREATE_OR_UPDATE_SECRET, plugin=self.NAME, fill_ssh_keys=not private
        )

    def add_objects(self, job: dict[str, Any]) -> list[Effect]:
        return [self.secret(job)]

    def delete_objects(self, job: dict[str, Any]) -> list[Effect]:
        return [self.delete(job, "v1", "Secret", secret_name(job))]


def fill_ssh_keys(manifest: dict[str, Any], private_key: str, public_key: str) -> dict[str, Any]:
    """A copy of the ssh Secret with a generated key pair added (what the adapter does for `fill_ssh_keys`)."""
    data = dict(manifest.get("data") or {})
    data.update(
        {
            SSH_PRIVATE_KEY: b64(private_key),
            SSH_PUBLIC_KEY: b64(public_key),
            SSH_AUTHORIZED_KEYS: b64(public_key),
        }
    )
    return {**manifest, "data": dict(sorted(data.items()))}
