"""The scheduler configuration: Volcano's `volcano-scheduler.conf` shape, parsed and checked.

```yaml
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
configurations:
- name: allocate
  arguments: {predicateErrorCacheEnable: true}
```

Rules (`pkg/scheduler/util.go` UnmarshalSchedulerConf, `pkg/scheduler/plugins/defaults.go`):
`actions` is split on commas and trimmed, an unknown action is an error; every `enable*`
flag left unset means true (`enabledClusterOrder` excepted); `proportion` and `drf` with
`enableHierarchy: true` in one tier are rejected with Volcano's message. vcbus is stricter
than Volcano in three places, so a typo cannot silently change behaviour: unknown keys,
plugin names vcbus does not implement and wrongly typed flags are errors naming the field
(Volcano ignores unknown keys and skips unknown plugins with a log line).

Statemachines cannot import yaml: adapters parse the YAML and pass the dict.
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import Struct, field

ACTIONS = ("enqueue", "allocate", "backfill", "preempt", "reclaim")
PLUGINS = ("priority", "gang", "conformance", "overcommit", "drf", "predicates", "proportion", "nodeorder", "binpack")

# yaml key -> attribute, in Volcano's PluginOption order.
FLAGS = {
    "enableJobOrder": "job_order",
    "enableHierarchy": "hierarchy",
    "enableJobReady": "job_ready",
    "enableJobPipelined": "job_pipelined",
    "enableTaskOrder": "task_order",
    "enablePreemptable": "preemptable",
    "enableReclaimable": "reclaimable",
    "enablePreemptive": "preemptive",
    "enableQueueOrder": "queue_order",
    "enabledClusterOrder": "cluster_order",
    "enablePredicate": "predicate",
    "enableBestNode": "best_node",
    "enableNodeOrder": "node_order",
    "enableTargetJob": "target_job",
    "enableReservedNodes": "reserved_nodes",
    "enableJobEnqueued": "job_enqueued",
    "enabledVictim": "victim",
    "enableJobStarving": "job_starving",
    "enabledOverused": "overused",
    "enabledAllocatable": "allocatable",
    "enabledHyperNodeOrder": "hyper_node_order",
    "enabledSubJobReady": "sub_job_ready",
    "enabledSubJobPipelined": "sub_job_pipelined",
    "enabledSubJobOrder": "sub_job_order",
    "enabledHyperNodeGradient": "hyper_node_gradient",
}
_DEFAULT_OFF = frozenset({"hierarchy", "cluster_order"})


class ConfigError(ValueError):
    """A scheduler configuration that cannot be used; the message names the field path."""


class PluginOption(Struct, frozen=True, rename="camel", omit_defaults=True, gc=False):
    """One plugin of a tier: its name, its `enable*` flags (None = unset) and `arguments`."""

    name: str
    job_order: bool | None = field(default=None, name="enableJobOrder")
    hierarchy: bool | None = field(default=None, name="enableHierarchy")
    job_ready: bool | None = field(default=None, name="enableJobReady")
    job_pipelined: bool | None = field(default=None, name="enableJobPipelined")
    task_order: bool | None = field(default=None, name="enableTaskOrder")
    preemptable: bool | None = field(default=None, name="enablePreemptable")
    reclaimable: bool | None = field(default=None, name="enableReclaimable")
    preemptive: bool | None = field(default=None, name="enablePreemptive")
    queue_order: bool | None = field(default=None, name="enableQueueOrder")
    cluster_order: bool | None = field(default=None, name="enabledClusterOrder")
    predicate: bool | None = field(default=None, name="enablePredicate")
    best_node: bool | None = field(default=None, name="enableBestNode")
    node_order: bool | None = field(default=None, name="enableNodeOrder")
    target_job: bool | None = field(default=None, name="enableTargetJob")
    reserved_nodes: bool | None = field(default=None, name="enableReservedNodes")
    job_enqueued: bool | None = field(default=None, name="enableJobEnqueued")
    victim: bool | None = field(default=None, name="enabledVictim")
    job_starving: bool | None = field(default=None, name="enableJobStarving")
    overused: bool | None = field(default=None, name="enabledOverused")
    allocatable: bool | None = field(default=None, name="enabledAllocatable")
    hyper_node_order: bool | None = field(default=None, name="enabledHyperNodeOrder")
    sub_job_ready: bool | None = field(default=None, name="enabledSubJobReady")
    sub_job_pipelined: bool | None = field(default=None, name="enabledSubJobPipelined")
    sub_job_order: bool | None = field(default=None, name="enabledSubJobOrder")
    hyper_node_gradient: bool | None = field(default=None, name="enabledHyperNodeGradient")
    arguments: dict[str, Any] = {}

    def enabled(self, flag: str) -> bool:
        """The flag's value; unset means true (`ApplyPluginConfDefaults`), except hierarchy/cluster order."""
        value = getattr(self, flag)
        if value is None:
            return flag not in _DEFAULT_OFF
        return bool(value)


class Tier(Struct, frozen=True, gc=False):
    plugins: tuple[PluginOption, ...] = ()


class Configuration(Struct, frozen=True, gc=False):
    """Arguments of one action (`configurations[]`)."""

    name: str
    arguments: dict[str, Any] = {}


class SchedulerConfig(Struct, frozen=True, gc=False):
    actions: tuple[str, ...]
    tiers: tuple[Tier, ...] = ()
    configurations: tuple[Configuration, ...] = ()

    def action_arguments(self, action: str) -> dict[str, Any]:
        """`GetArgOfActionFromConf`: the first configuration named `action`, else {}."""
        for conf in self.configurations:
            if conf.name == action:
                return conf.arguments
        return {}

    def plugin_names(self) -> list[str]:
        return [p.name for tier in self.tiers for p in tier.plugins]


def _type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


def _mapping(value: object, path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(f"{path}: expected a mapping, got {_type(value)}")
    return value


def _list(value: object, path: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ConfigError(f"{path}: expected a list, got {_type(value)}")
    return value


def _arguments(value: object, path: str) -> dict[str, Any]:
    if value is None:
        return {}
    args = _mapping(value, path)
    for key in args:
        if not isinstance(key, str):
            raise ConfigError(f"{path}: keys must be strings, got {key!r}")
    return dict(args)


def _plugin(value: object, path: str) -> PluginOption:
    data = _mapping(value, path)
    name = data.get("name")
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{path}.name: required, a plugin name")
    if name not in PLUGINS:
        raise ConfigError(f"{path}.name: unknown plugin {name!r} (vcbus implements {', '.join(PLUGINS)})")
    kwargs: dict[str, Any] = {"name": name}
    for key, raw in data.items():
        if key == "name":
            continue
        if key == "arguments":
            kwargs["arguments"] = _arguments(raw, f"{path}.arguments")
            continue
        attr = FLAGS.get(key) if isinstance(key, str) else None
        if attr is None:
            raise ConfigError(f"{path}.{key}: unknown field (expected name, arguments or an enable* flag)")
        if raw is None:
            continue
        if not isinstance(raw, bool):
            raise ConfigError(f"{path}.{key}: expected true or false, got {_type(raw)}")
        kwargs[attr] = raw
    return PluginOption(**kwargs)


def config_from_dict(data: object, *, source: str = "scheduler config") -> SchedulerConfig:
    """Check and convert a parsed `volcano-scheduler.conf`; raise `ConfigError` naming the field."""
    try:
        return _config(data)
    except ConfigError as err:
        raise ConfigError(f"{source}: {err}") from None


def _config(data: object) -> SchedulerConfig:
    top = _mapping(data, "(top level)")
    for key in top:
        if key not in ("actions", "tiers", "configurations", "metrics"):
            raise ConfigError(f"{key}: unknown field (expected actions, tiers, configurations, metrics)")
    raw_actions = top.get("actions")
    if not isinstance(raw_actions, str):
        raise ConfigError(f"actions: required, a comma-separated string, got {_type(raw_actions)}")
    actions = []
    for part in raw_actions.split(","):
        name = part.strip()
        if name not in ACTIONS:
            raise ConfigError(f"actions: failed to find Action {name!r} (vcbus implements {', '.join(ACTIONS)})")
        actions.append(name)
    tiers = []
    for i, raw_tier in enumerate(_list(top.get("tiers"), "tiers")):
        tier = _mapping(raw_tier, f"tiers[{i}]")
        for key in tier:
            if key != "plugins":
                raise ConfigError(f"tiers[{i}].{key}: unknown field (expected plugins)")
        plugins = tuple(
            _plugin(raw, f"tiers[{i}].plugins[{j}]") for j, raw in enumerate(_list(tier.get("plugins"), f"tiers[{i}].plugins"))
        )
        names = [p.name for p in plugins]
        if "proportion" in names and any(p.name == "drf" and p.hierarchy for p in plugins):
            raise ConfigError(f"tiers[{i}]: proportion and drf with hierarchy enabled conflicts")
        tiers.append(Tier(plugins))
    configurations = []
    for i, raw_conf in enumerate(_list(top.get("configurations"), "configurations")):
        conf = _mapping(raw_conf, f"configurations[{i}]")
        for key in conf:
            if key not in ("name", "arguments"):
                raise ConfigError(f"configurations[{i}].{key}: unknown field (expected name, arguments)")
        action = conf.get("name")
        if not isinstance(action, str) or action not in ACTIONS:
            raise ConfigError(f"configurations[{i}].name: unknown action {action!r}")
        configurations.append(Configuration(action, _arguments(conf.get("arguments"), f"configurations[{i}].arguments")))
    return SchedulerConfig(tuple(actions), tuple(tiers), tuple(configurations))


def config_to_dict(config: SchedulerConfig) -> dict[str, Any]:
    """The configuration back in Volcano's shape (unset flags left out)."""
    out: dict[str, Any] = {"actions": ", ".join(config.actions), "tiers": []}
    for tier in config.tiers:
        out["tiers"].append({"plugins": [msgspec.to_builtins(p) for p in tier.plugins]})
    if config.configurations:
        out["configurations"] = [{"name": c.name, "arguments": dict(c.arguments)} for c in config.configurations]
    return out


# ------------------------------------------------------------------ argument readers (framework/arguments.go)


def arg_int(args: dict[str, Any], key: str, default: int) -> int:
    """`Arguments.GetInt`: an int, else the default (Volcano logs and keeps the default)."""
    value = args.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def arg_float(args: dict[str, Any], key: str, default: float) -> float:
    value = args.get(key)
    if isinstance(value, bool):
        return default
    return float(value) if isinstance(value, (int, float)) else default


def arg_bool(args: dict[str, Any], key: str, default: bool) -> bool:
    value = args.get(key)
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        lowered = value.strip()
        if lowered in ("1", "t", "T", "TRUE", "true", "True"):
            return True
        if lowered in ("0", "f", "F", "FALSE", "false", "False"):
            return False
    return default


def arg_str(args: dict[str, Any], key: str, default: str) -> str:
    value = args.get(key)
    return value if isinstance(value, str) else default


DEFAULT_CONFIG_YAML = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
"""

# The same, as the dict yaml.safe_load gives (a test checks they agree).
DEFAULT_CONFIG = config_from_dict(
    {
        "actions": "enqueue, allocate, backfill",
        "tiers": [
            {"plugins": [{"name": "priority"}, {"name": "gang", "enablePreemptable": False}, {"name": "conformance"}]},
            {
                "plugins": [
                    {"name": "overcommit"},
                    {"name": "drf", "enablePreemptable": False},
                    {"name": "predicates"},
                    {"name": "proportion"},
                    {"name": "nodeorder"},
                    {"name": "binpack"},
                ]
            },
        ],
    },
    source="DEFAULT_CONFIG",
)

# Volcano's built-in fallback (`DefaultSchedulerConf` in pkg/scheduler/util.go): no binpack, no flags.
BUILTIN_CONFIG = config_from_dict(
    {
        "actions": "enqueue, allocate, backfill",
        "tiers": [
            {"plugins": [{"name": "priority"}, {"name": "gang"}, {"name": "conformance"}]},
            {"plugins": [{"name": n} for n in ("overcommit", "drf", "predicates", "proportion", "nodeorder")]},
        ],
    },
    source="BUILTIN_CONFIG",
)
