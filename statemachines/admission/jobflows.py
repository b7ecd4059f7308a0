"""Volcano's JobFlow validating webhook: `pkg/webhooks/admission/jobflows/validate/validate_jobflow.go`.

CREATE and UPDATE run one check (validateJobFlowDAG): the flows and their `dependsOn.targets` form
a graph (`util.go`'s LoadVertexs, IsDAG). A target that names no flow is refused with
`jobflow Flow is not DAG: vertex is not defined: <target>`, a cycle (a flow depending on itself
too) with `jobflow Flow is not DAG`. Two flows of one name are one vertex, the later one's targets
winning, as Volcano's map does. Volcano walks a Go map, so with several undefined targets the one
it names is any of them; here it is the first in the flows' order.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

NOT_DAG = "jobflow Flow is not DAG"
NOT_DEFINED = "vertex is not defined"


def _graph(jobflow: Mapping[str, Any]) -> dict[str, list[str]]:
    spec = raw_spec if isinstance(raw_spec := jobflow.get("spec"), dict) else {}
    graph: dict[str, list[str]] = {}
    for flow in spec.get("flows") or ():
        if not isinstance(flow, dict):
            continue
        depends = raw if isinstance(raw := flow.get("dependsOn"), dict) else {}
        graph[str(flow.get("name") or "")] = [str(t) for t in depends.get("targets") or ()]
    return graph


def _cyclic(graph: dict[str, list[str]]) -> bool:
    """IsDAG's walk: from each vertex, a target already on the path is a cycle."""
    def walk(vertex: str, path: set[str]) -> bool:
        for target in graph[vertex]:
            if target in path:
                return True
            path.add(target)
            if walk(target, path):
                return True
            path.discard(target)
        return False

    return any(walk(v, {v}) for v in graph)


def validate_jobflow(jobflow: Mapping[str, Any]) -> str:
    """validateJobFlowDAG's message ("" if the flows form a DAG)."""
    graph = _graph(jobflow)
    for targets in graph.values():
        for target in targets:
            if target not in graph:
                return f"{NOT_DAG}: {NOT_DEFINED}: {target}"
    return NOT_DAG if _cyclic(graph) else ""
