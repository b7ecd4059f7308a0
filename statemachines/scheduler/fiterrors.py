"""Why tasks do not fit, worded exactly as Volcano words it (`pkg/scheduler/api/unschedule_info.go`,
`pkg/scheduler/api/job_info.go` FitError / TaskSchedulingReason, reference §3.6).

Histograms are sorted as plain strings, so `10 X` sorts before `2 Y` and uppercase before
lowercase, exactly as Go's `sort.Strings` does.
"""

from __future__ import annotations

NODE_POD_NUMBER_EXCEEDED = "node(s) pod number exceeded"
NODE_RESOURCE_FIT_FAILED = "node(s) resource fit failed"
ALL_NODES_UNAVAILABLE = "all nodes are unavailable"
NODE_UNSCHEDULABLE = "node(s) were unschedulable"
NODE_AFFINITY = "node(s) didn't match Pod's node affinity/selector"

# Status codes (pkg/scheduler/api/types.go)
SUCCESS, ERROR, UNSCHEDULABLE, UNRESOLVABLE, WAIT, SKIP = range(6)
ABORT_CODES = frozenset({ERROR, UNRESOLVABLE, WAIT, SKIP})


class FitError:
    """One node's failure for one task: its statuses as (code, reason) pairs. Immutable; `fit_error()`
    shares one instance per distinct status list (thousands of nodes fail for the same reason)."""

    __slots__ = ("statuses", "reasons_")

    def __init__(self, statuses: tuple[tuple[int, str], ...]) -> None:
        self.statuses = statuses
        self.reasons_ = tuple(reason for _, reason in statuses)

    def reasons(self) -> list[str]:
        return list(self.reasons_)

    def unresolvable(self) -> bool:
        return any(code == UNRESOLVABLE for code, _ in self.statuses)


_SHARED: dict[tuple, FitError] = {}


def fit_error(statuses: tuple[tuple[int, str], ...]) -> FitError:
    """The shared FitError for `statuses`."""
    fe = _SHARED.get(statuses)
    if fe is None:
        if len(_SHARED) > 10_000:
            _SHARED.clear()
        fe = _SHARED[statuses] = FitError(statuses)
    return fe


class FitErrors:
    """All node failures of one task in a session, or a custom text (`SetError`)."""

    __slots__ = ("nodes", "err", "_message")

    def __init__(self) -> None:
        self.nodes: dict[str, FitError] = {}
        self.err = ""
        self._message: tuple[str, int, str] | None = None  # (err, node count, text)

    def set_node(self, node: str, error: FitError) -> None:
        self.nodes[node] = error
        self._message = None

    def message(self) -> str:
        """`FitErrors.Error()` (computed once; it walks every node's reasons)."""
        cached = self._message
        if cached is not None and cached[0] == self.err and cached[1] == len(self.nodes):
            return cached[2]
        text = self._text()
        self._message = (self.err, len(self.nodes), text)
        return text

    def _text(self) -> str:
        err = self.err or f"0/{len(self.nodes)} nodes are unavailable"
        if not self.nodes:
            return err
        per_error: dict[int, list] = {}
        for fe in self.nodes.values():
            entry = per_error.get(id(fe))
            if entry is None:
                per_error[id(fe)] = [fe, 1]
            else:
                entry[1] += 1
        counts: dict[str, int] = {}
        for fe, n in per_error.values():
            for reason in fe.reasons_:
                counts[reason] = counts.get(reason, 0) + n
        return f"{err}: {', '.join(histogram(counts))}."

    def unresolvable_nodes(self) -> set[str]:
        return {name for name, fe in self.nodes.items() if fe.unresolvable()}


def histogram(counts: dict[str, int]) -> list[str]:
    """`<count> <reason>` strings in Go string order."""
    return sorted(f"{n} {reason}" for reason, n in counts.items())
