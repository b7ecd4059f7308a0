"""Scheduler configuration: Volcano's scheduler-conf shape and parsing rules (reference §1)."""

from __future__ import annotations

import pytest
import yaml

from statemachines.scheduler.config import (
    BUILTIN_CONFIG,
    DEFAULT_CONFIG,
    DEFAULT_CONFIG_YAML,
    ConfigError,
    config_from_dict,
    config_to_dict,
)


def test_default_config_is_the_helm_yaml():
    assert config_from_dict(yaml.safe_load(DEFAULT_CONFIG_YAML)) == DEFAULT_CONFIG
    assert DEFAULT_CONFIG.actions == ("enqueue", "allocate", "backfill")
    assert DEFAULT_CONFIG.plugin_names() == [
        "priority", "gang", "conformance", "overcommit", "drf", "predicates", "proportion", "nodeorder", "binpack",
    ]
    gang = DEFAULT_CONFIG.tiers[0].plugins[1]
    assert gang.name == "gang" and not gang.enabled("preemptable") and gang.enabled("reclaimable")
    assert "binpack" not in BUILTIN_CONFIG.plugin_names()


def test_round_trip_keeps_only_what_was_set():
    data = config_to_dict(DEFAULT_CONFIG)
    assert data["tiers"][0]["plugins"][1] == {"name": "gang", "enablePreemptable": False}
    assert config_from_dict(data) == DEFAULT_CONFIG


def test_actions_are_split_on_commas_and_trimmed():
    config = config_from_dict({"actions": " enqueue ,allocate,  backfill,reclaim,preempt ", "tiers": []})
    assert config.actions == ("enqueue", "allocate", "backfill", "reclaim", "preempt")


def test_unset_flags_default_to_true_except_cluster_order_and_hierarchy():
    config = config_from_dict({"actions": "allocate", "tiers": [{"plugins": [{"name": "drf"}]}]})
    option = config.tiers[0].plugins[0]
    for flag in ("job_order", "job_ready", "job_pipelined", "job_enqueued", "task_order", "preemptable",
                 "reclaimable", "preemptive", "queue_order", "predicate", "best_node", "node_order", "victim",
                 "job_starving", "overused", "allocatable"):
        assert option.enabled(flag), flag
    assert not option.enabled("cluster_order") and not option.enabled("hierarchy")


def test_arguments_and_configurations():
    config = config_from_dict({
        "actions": "enqueue, allocate",
        "tiers": [{"plugins": [{"name": "overcommit", "arguments": {"overcommit-factor": 1.5}}]}],
        "configurations": [{"name": "allocate", "arguments": {"predicateErrorCacheEnable": False}}],
    })
    assert config.tiers[0].plugins[0].arguments == {"overcommit-factor": 1.5}
    assert config.action_arguments("allocate") == {"predicateErrorCacheEnable": False}
    assert config.action_arguments("enqueue") == {}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ("nope", "(top level): expected a mapping, got a string"),
        ({"tiers": []}, "actions: required, a comma-separated string, got null"),
        ({"actions": "enqueue, shuffle"}, "actions: failed to find Action 'shuffle'"),
        ({"actions": ""}, "actions: failed to find Action ''"),
        ({"actions": "allocate", "tier": []}, "tier: unknown field"),
        ({"actions": "allocate", "tiers": {}}, "tiers: expected a list, got a mapping"),
        ({"actions": "allocate", "tiers": [{"plugins": [{"name": "gang"}, {"name": "sla"}]}]},
         "tiers[0].plugins[1].name: unknown plugin 'sla'"),
        ({"actions": "allocate", "tiers": [{"plugins": []}, {"plugins": [{"name": "gang"}, {}]}]},
         "tiers[1].plugins[1].name: required, a plugin name"),
        ({"actions": "allocate", "tiers": [{"plugins": [{"name": "gang", "enableJobReady": "yes"}]}]},
         "tiers[0].plugins[0].enableJobReady: expected true or false, got a string"),
        ({"actions": "allocate", "tiers": [{"plugins": [{"name": "gang", "enableJobRedy": True}]}]},
         "tiers[0].plugins[0].enableJobRedy: unknown field"),
        ({"actions": "allocate", "tiers": [{"plugins": [{"name": "drf", "enableHierarchy": True},
                                                        {"name": "proportion"}]}]},
         "tiers[0]: proportion and drf with hierarchy enabled conflicts"),
        ({"actions": "allocate", "configurations": [{"name": "alocate"}]},
         "configurations[0].name: unknown action 'alocate'"),
        ({"actions": "allocate", "tiers": [{"plugins": [{"name": "binpack", "arguments": [1]}]}]},
         "tiers[0].plugins[0].arguments: expected a mapping, got a list"),
    ],
)
def test_errors_name_the_field(data, message):
    with pytest.raises(ConfigError) as err:
        config_from_dict(data, source="conf.yaml")
    assert str(err.value).startswith(f"conf.yaml: {message}")
    assert "\n" not in str(err.value)


def test_hierarchy_only_conflicts_within_one_tier():
    config = config_from_dict({"actions": "allocate", "tiers": [
        {"plugins": [{"name": "drf", "enableHierarchy": True}]}, {"plugins": [{"name": "proportion"}]}]})
    assert config.tiers[0].plugins[0].enabled("hierarchy")
