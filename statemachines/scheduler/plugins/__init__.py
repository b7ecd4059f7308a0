"""The scheduler plugins vcbus implements, by name (Volcano's `pkg/scheduler/plugins/factory.go`)."""

from __future__ import annotations

from statemachines.scheduler.plugins import (
    binpack,
    conformance,
    drf,
    gang,
    nodeorder,
    overcommit,
    predicates,
    priority,
    proportion,
)

OPENERS = {
    "priority": priority.open_plugin,
    "gang": gang.open_plugin,
    "conformance": conformance.open_plugin,
    "overcommit": overcommit.open_plugin,
    "drf": drf.open_plugin,
    "predicates": predicates.open_plugin,
    "proportion": proportion.open_plugin,
    "nodeorder": nodeorder.open_plugin,
    "binpack": binpack.open_plugin,
}
