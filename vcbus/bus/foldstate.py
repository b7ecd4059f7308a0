"""The decider's fold: its engine, how far it has folded the log, and the records it set aside.

One `FoldState` per decider, shared by the parts that change it: `Deciding`
(vcbus.bus.deciding) folds a record into `engine`, the rebuild
(vcbus.bus.rebuilding) replaces `engine` with a refolded or restored one, and
the decider (vcbus.bus.decider) moves `applied` on and picks its `partition`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from vcbus.bus import partitions as parts


@dataclass
class FoldState:
    engine: Any  # statemachines.engine.Engine, or the queue role's QueueFold (vcbus.bus.queueing)
    partition: parts.Partition = field(default_factory=parts.Partition)  # which part of VCBUS_K8S it folds
    applied: int = 0  # the last VCBUS_K8S sequence folded (or skipped)
    poisoned: set[int] = field(default_factory=set)  # VCBUS_K8S sequences set aside (never folded)
    retried: set[int] = field(default_factory=set)  # poisoned sequences whose retry was decided
