"""Reading a scheduler configuration file: Volcano's `volcano-scheduler.conf`, bounded.

The scheduler takes the same YAML as Volcano's (`actions`, `tiers` of `plugins`
with their options and `arguments`, `configurations` per action; see
`statemachines.scheduler.config`). `load_config(path)` reads it with PyYAML's
safe loader, then hands the plain data to the pure `config_from_dict`, which
checks every field. The file may also be the ConfigMap a Volcano install
holds it in (`kind: ConfigMap`, the text under `data["volcano-scheduler.conf"]`
or the only `*.conf` key), so `kubectl get cm volcano-scheduler-configmap -o
yaml > sched.yaml` is a valid input.

A scheduler config is small, so reading is bounded: files over `MAX_BYTES`
are refused, and YAML is read by `vcbus.guarded_yaml` (no alias bombs, no
nesting deep enough to exhaust the stack; anchors and aliases within its
bounds work).

Every problem is a `ConfigFileError` (a `UserError`, exit code 2) whose
message names the file and, for a bad field, the field path:
`sched.yaml: tiers[1].plugins[2].name: unknown plugin 'foo'`.
"""

from __future__ import annotations

import pathlib
from typing import Any

from statemachines.scheduler.config import DEFAULT_CONFIG, ConfigError, SchedulerConfig, config_from_dict
from vcbus.errors import UserError
from vcbus.guarded_yaml import yaml_values

MAX_BYTES = 1024 * 1024
CONF_KEY = "volcano-scheduler.conf"


class ConfigFileError(UserError):
    """A scheduler configuration file that cannot be used."""


def load_config(path: str | pathlib.Path | None) -> SchedulerConfig:
    """The config in `path`; None: Volcano's default (the helm install's)."""
    if path is None:
        return DEFAULT_CONFIG
    source = str(path)
    text = _read(source)
    data = parse_yaml(source, text)
    data = _unwrap_configmap(source, data)
    if isinstance(data, str):  # a ConfigMap's value is itself YAML text
        data = parse_yaml(f"{source} ({CONF_KEY})", data)
    try:
        return config_from_dict(data, source=source)
    except ConfigError as err:  # its message starts with `source:`
        raise ConfigFileError(str(err)) from None


def _read(source: str) -> str:
    p = pathlib.Path(source)
    try:
        size = p.stat().st_size
        if size > MAX_BYTES:
            raise ConfigFileError(f"{source}: {size} bytes; a scheduler config is at most {MAX_BYTES} bytes")
        raw = p.read_bytes()[: MAX_BYTES + 1]
    except FileNotFoundError:
        raise ConfigFileError(f"{source}: no such file") from None
    except IsADirectoryError:
        raise ConfigFileError(f"{source}: is a directory, not a scheduler config file") from None
    except OSError as err:
        raise ConfigFileError(f"{source}: cannot read: {err.strerror or err}") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ConfigFileError(f"{source}: not UTF-8 text (byte {err.start})") from None


def parse_yaml(source: str, text: str) -> Any:
    """One YAML document as plain data, with vcbus.guarded_yaml's depth and alias guards."""
    if len(text) > MAX_BYTES:
        raise ConfigFileError(f"{source}: more than {MAX_BYTES} characters")
    docs = yaml_values(text, source)
    if not docs:
        raise ConfigFileError(f"{source}: empty; expected a scheduler config (actions, tiers)")
    if len(docs) > 1:
        raise ConfigFileError(f"{source}:{docs[1][0]}: more than one YAML document; expected one scheduler config")
    return docs[0][2]


def _unwrap_configmap(source: str, data: Any) -> Any:
    if not (isinstance(data, dict) and data.get("kind") == "ConfigMap"):
        return data
    entries = data.get("data")
    if not isinstance(entries, dict):
        raise ConfigFileError(f"{source}: data: a ConfigMap with no data; expected the key {CONF_KEY}")
    if CONF_KEY in entries:
        key = CONF_KEY
    else:
        confs = sorted(k for k in entries if str(k).endswith(".conf"))
        if len(confs) != 1:
            raise ConfigFileError(
                f"{source}: data: expected the key {CONF_KEY} (or exactly one *.conf key), found "
                f"{', '.join(map(str, sorted(entries))) or 'none'}"
            )
        key = confs[0]
    value = entries[key]
    if not isinstance(value, str):
        raise ConfigFileError(f"{source}: data.{key}: expected the config as text, found {type(value).__name__}")
    return value
