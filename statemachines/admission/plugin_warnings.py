"""Plugin arguments Volcano admits but does not use as written: warnings, never denials.

Volcano's webhook does not check plugin arguments (only the mpi plugin's
`--master` task), and its plugins parse them when the controller creates the
job's pods, logging what they cannot use. A job Volcano runs must not be denied
by vcbus, so `vcbus validate` reports these as warnings (exit status unchanged):

- a flag Go's `flag` package refuses (`invalid value "abc" for flag -port:
  parse error`): the plugin logs it and keeps the defaults of that flag and of
  every flag after it;
- the ssh plugin's `ssh-port` outside 1-65535: upstream `validateSSHPort`
  (pkg/controllers/job/plugins/ssh/ssh.go) logs `invalid ssh port <n>, falling
  back to default port 22 ...` and uses 22;
- the other plugins' ports (pytorch, tensorflow and mpi `port`, ray `port`,
  `dashboardPort`, `clientPort`) outside 1-65535: upstream uses them as they
  are (pkg/controllers/job/plugins/distributed-framework/*), so the pods get a
  containerPort the API server refuses and are never created.
"""

from __future__ import annotations

from typing import Any

from statemachines.plugins.args import parse_flags
from statemachines.plugins.registry import PLUGINS
from statemachines.plugins.ssh import SshPlugin

PORT_FLAGS = ("port", "ssh-port", "dashboardPort", "clientPort")


def _port_warning(name: str, flag: str, port: int) -> str:
    head = f"{name} plugin: -{flag}={port} is not a port (1-65535)"
    if name == SshPlugin.NAME:
        return f"{head}: Volcano falls back to port 22 (invalid ssh port {port}, falling back to default port 22 ...)"
    return (f"{head}: Volcano admits the job as it is, but the API server will refuse its pods"
            f" (containerPort: Invalid value: {port}: must be between 1 and 65535, inclusive)")


def plugin_warnings(job: dict[str, Any]) -> list[tuple[str, str]]:
    """(field, warning) for each plugin argument Volcano would log and not use as written."""
    spec = job.get("spec")
    plugins = spec.get("plugins") if isinstance(spec, dict) else None
    if not isinstance(plugins, dict):
        return []
    out: list[tuple[str, str]] = []
    for name in sorted(plugins):
        cls, args = PLUGINS.get(name), plugins[name]
        if cls is None or not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            continue
        field = f"spec.plugins.{name}"
        parsed = parse_flags(args, cls.FLAGS)
        if parsed.error:
            out.append((field, f"{name} plugin: {parsed.error} (Volcano logs it and uses the defaults from there on)"))
        for flag in cls.FLAGS:
            port = parsed.values[flag.name]
            if flag.name in PORT_FLAGS and flag.type == "int" and isinstance(port, int) and not 1 <= port <= 65535:
                out.append((field, _port_warning(name, flag.name, port)))
    return out
