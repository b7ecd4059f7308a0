"""NodePorts' filter (kube-scheduler `pkg/scheduler/framework/plugins/nodeports`): a node fails when
a pod on it already claims one of the pod's host ports (same protocol and port, and the same
host IP or either of them 0.0.0.0). Pods placed earlier in the session count.
"""

from __future__ import annotations

from statemachines.scheduler.fiterrors import UNSCHEDULABLE

FREE_PORTS = "node(s) didn't have free ports for the requested pod ports"
ANY_IP = "0.0.0.0"


def conflict(wanted: tuple[tuple[str, str, int], ...], used: tuple[tuple[str, str, int], ...]) -> bool:
    for ip, protocol, port in wanted:
        for u_ip, u_protocol, u_port in used:
            if port == u_port and protocol == u_protocol and (ip in (u_ip, ANY_IP) or u_ip == ANY_IP):
                return True
    return False


def prepare(fact):
    """The per-node check of this task's host ports, or None when it claims none."""
    constraints = fact.constraints
    wanted = constraints.ports if constraints is not None else ()
    if not wanted:
        return None

    def check(node) -> tuple[int, str] | None:
        for task in node.tasks.values():
            other = task.fact.constraints
            if other is not None and other.ports and conflict(wanted, other.ports):
                return (UNSCHEDULABLE, FREE_PORTS)
        return None

    return check
