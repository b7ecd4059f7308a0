"""Private keys in vcjob plugin arguments never reach the bus: redacted, with a digest kept.

Volcano's ssh plugin takes the user's key pair as plugin arguments
(`spec.plugins.ssh: ["--ssh-private-key=-----BEGIN ...", ...]`, upstream
`pkg/controllers/job/plugins/ssh/ssh.go`). Published as observed, that key
would sit in every vcjob record on VCBUS_K8S, in every `vcbus log export` and
in every file replay, readable by anyone who may read the log. The bridge (and
`vcbus record`) therefore pass each vcjob through `redact_job` first:

- the value of `ssh-private-key`, in any of Go's flag spellings (`-f=v`,
  `--f=v`, `-f v`, `--f v`), becomes `redacted:sha256:<hex of the key>`: a
  change of key is still a visible change in the log, and two records with the
  same key still compare equal, but the key cannot be read back;
- the `kubectl.kubernetes.io/last-applied-configuration` annotation, which holds
  a second copy of the spec, gets the same treatment (dropped if it is not JSON).

Why nothing downstream needs the key: the decider never renders the ssh Secret.
It emits a `PluginHook` command; the actuator reads the *live* vcjob from the
API server when it applies the hook (vcbus.k8s.actuator `_PluginHook`) and
renders the Secret from that object, so the key travels from the API server
to the Secret without crossing NATS. The ssh plugin's other effects (the
Secret's name, its mounts in every pod, the `config` key) do not depend on the
key, so decisions made from a redacted record are the same ones.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

SECRET_FLAGS = {"ssh": ("ssh-private-key",)}
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
PREFIX = "redacted:sha256:"


def digest(value: str) -> str:
    if value.startswith(PREFIX):
        return value  # already redacted (a record read back from the log)
    return PREFIX + hashlib.sha256(value.encode()).hexdigest()


def redact_args(args: list[Any], secret_flags: tuple[str, ...]) -> list[Any]:
    """`args` with the value of each flag in `secret_flags` replaced by its digest."""
    out: list[Any] = []
    take_next = False
    for arg in args:
        if take_next:
            out.append(digest(arg) if isinstance(arg, str) else arg)
            take_next = False
            continue
        if isinstance(arg, str) and arg.startswith("-"):
            dashes = len(arg) - len(arg.lstrip("-"))
            flag, sep, value = arg[dashes:].partition("=")
            if flag in secret_flags and dashes in (1, 2):
                if sep:
                    out.append(f"{arg[: len(arg) - len(value)]}{digest(value)}")
                    continue
                take_next = True  # `-flag value`: a string flag takes the next element
        out.append(arg)
    return out


def _redact_spec(spec: Any) -> Any:
    if not isinstance(spec, dict) or not isinstance(spec.get("plugins"), dict):
        return spec
    plugins = spec["plugins"]
    changed = {
        name: redact_args(args, flags)
        for name, flags in SECRET_FLAGS.items()
        if isinstance(args := plugins.get(name), list)
    }
    if not changed or all(changed[n] == plugins[n] for n in changed):
        return spec
    return {**spec, "plugins": {**plugins, **changed}}


def _redact_last_applied(meta: dict) -> dict:
    annotations = meta.get("annotations")
    if not isinstance(annotations, dict) or LAST_APPLIED not in annotations:
        return meta
    try:
        applied = json.loads(annotations[LAST_APPLIED])
        if not isinstance(applied, dict):
            raise ValueError
        redacted = {**applied, "spec": _redact_spec(applied.get("spec"))}
        value: str | None = json.dumps(redacted, separators=(",", ":"), sort_keys=False) + "\n"
        if redacted == applied:
            return meta
    except ValueError:
        value = None  # not JSON: it cannot be redacted, so it is dropped
    annotations = dict(annotations)
    if value is None:
        del annotations[LAST_APPLIED]
    else:
        annotations[LAST_APPLIED] = value
    return {**meta, "annotations": annotations}


def is_vcjob(obj: Any) -> bool:
    return (
        isinstance(obj, dict)
        and obj.get("kind") == "Job"
        and str(obj.get("apiVersion") or "").startswith("batch.volcano.sh/")
    )


def redact_job(obj: Any) -> Any:
    """A vcjob without private keys in clear (see the module docstring); anything else as it is.

    The input is never modified: a copy is made of what changes."""
    if not is_vcjob(obj):
        return obj
    spec = _redact_spec(obj.get("spec"))
    meta = obj.get("metadata")
    new_meta = _redact_last_applied(meta) if isinstance(meta, dict) else meta
    if spec is obj.get("spec") and new_meta is meta:
        return obj
    out = dict(obj)
    if "spec" in obj:
        out["spec"] = spec
    if meta is not None:
        out["metadata"] = new_meta
    return out
