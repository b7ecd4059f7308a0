"""The exit codes of every `vcbus` command, in one place.

The CLI uses these constants (`vcbus.errors.UserError`, `vcbus.bus.errors.BusError`,
`vcbus.cli.kubecli.ClusterError`, `vcbus.cli.main`) and docs/cli.md prints `TABLE`;
tests/test_exit_codes.py checks that the table in docs/cli.md is this one and that
no command exits with a code missing from it, so the documentation cannot drift.

Codes 0-3 are the historical ones (2 for unusable input, 3 for "the bus is down",
as scripts already rely on); 4 separates "the cluster is unreachable or refused"
from bad input, as 3 does for the bus.
"""

from __future__ import annotations

OK = 0
NEGATIVE = 1
USAGE = 2
BUS = 3
CLUSTER = 4
INTERRUPTED = 130

# (code, meaning, examples): docs/cli.md's table, row by row.
TABLE: tuple[tuple[int, str, str], ...] = (
    (
        OK,
        "success",
        "the command did what it was asked; a list that finds nothing is still 0; a server (`up`, `scheduler`, "
        "`webhook`) stopped by Ctrl-C or SIGTERM, as Volcano's controllers stop; `record` stopped so "
        "(everything received is written)",
    ),
    (
        NEGATIVE,
        "the answer is no",
        "no such job or queue (`status`, `why-pending`, `job view`, `queue get`, `poison retry`); "
        "divergences found (`replay --compare`, `divergences`; those the known Volcano race explains do not "
        "count, docs/fidelity.md); objects denied (`validate`); "
        "KV views differ from the log (`projections verify`); a job that cannot be rendered (`render`)",
    ),
    (
        USAGE,
        "bad input",
        "an unknown option or value, an unreadable or invalid file, a missing kubeconfig, "
        "a taken port, a missing binary; one line names what and where",
    ),
    (BUS, "the bus is unavailable", "no nats-server at --nats, a failed publish, a stream with an unexpected shape"),
    (
        CLUSTER,
        "the cluster is unavailable or refused",
        "the API server is unreachable, answers 401 or RBAC's 403 (the message names the verb and resource; a 403 "
        "of admission, a quota or PodSecurity refusing one object, is recorded and `vcbus up` goes on), "
        "does not serve a kind (CRDs not installed), or rejects the object (`job run`)",
    ),
    (
        INTERRUPTED,
        "interrupted",
        "Ctrl-C before the command was done (any command waiting); SIGTERM too where a command follows: "
        "`replay` of a live log (after its report of what it read), `events tail`; and `up --once`, "
        "which has an end, so is not a server (what it decided is stored; run it again to go on)",
    ),
)

CODES = frozenset(code for code, _, _ in TABLE)


def markdown_table() -> str:
    """TABLE as the Markdown table of docs/cli.md."""
    lines = ["| code | meaning | when |", "|---:|---|---|"]
    lines += [f"| {code} | {meaning} | {when} |" for code, meaning, when in TABLE]
    return "\n".join(lines) + "\n"
