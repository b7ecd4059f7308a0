"""One CLI convention, kubectl's, walked over the whole click tree so that it cannot drift.

Every `vcbus` command is found by walking `vcbus.cli.main.cli` (through list_commands/get_command,
as its commands are loaded lazily); a new command must either follow the rules below or be named
in an allow-list here, with the reason (docs/cli.md "Conventions"):

- `-o/--output` is kubectl's output format: a choice that offers json and yaml, `name` where
  what is printed has names, `wide` where the default is a table; `--json` is an alias of
  `-o json`, never a form of its own. A command with no `-o` prints no objects (NO_OBJECTS).
- `-n/--namespace` and `-A/--all-namespaces` mean what they mean in kubectl; a command that
  lists across namespaces takes both.
- `--kubeconfig` and `--context` come together, on exactly the commands that talk to a cluster.
- A command that finds nothing says where it looked: the bus (URL, password masked) or the
  cluster (kubecli.nothing_found); the bus commands are run here against a real nats-server.
"""

from __future__ import annotations

import click
import pytest

from tests.fixtures_nats import vcbus_cli
from vcbus.cli.main import cli
from vcbus.cli.output import namespace_scope
from vcbus.errors import UserError

FORMS = {"json", "yaml", "wide", "name"}

# --------------------------------------------------------------------------- allow-lists (documented in docs/cli.md)

NO_OBJECTS = {
    "completion": "prints a shell script",
    "demo": "a narrated run of the example job",
    "up": "a server: logs, no objects",
    "scheduler": "a server: logs, no objects",
    "webhook": "a server: logs, no objects",
}
O_IS_A_FILE = {
    "log export": "writes a watch log (NDJSON records, not objects); -o FILE as before issue 13",
    "record": "writes a watch log (NDJSON records, not objects); -o FILE as before issue 13",
}
NO_NAME = {  # -o without `name`: what they print has no name of its own
    "schedule": "scheduling sessions of a snapshot, not named objects",
    "why-pending": "an explanation of one job, not objects",
    "projections history": "one job's history entry (the job is the argument)",
    "validate": "findings about the files, not objects",
    "divergences": "rows are divergences (job, record, field), which have no name of their own",
    "replay": "one report of a log's jobs (the `--json` contract, docs/replay.md), not objects",
    "publish": "one document of what was stored (kind Published), not objects",
    "log import": "one document of what was stored (kind Published), not objects",
    "projections rebuild": "one document of what was rebuilt (kind Rebuilt), not objects",
    "projections verify": "one document of the comparison (kind Verified), not objects",
    "bus repartition": "one document of what was copied (kind Repartitioned), not objects",
}
NO_WIDE = {  # -o without `wide`: the default is not a table
    "render": "the default is the YAML manifests",
    "job run": "prints the created jobs (kubectl create has no wide either)",
    "job suspend": "prints the Command it created (kubectl create has no wide either)",
    "job resume": "prints the Command it created (kubectl create has no wide either)",
    "queue open": "prints the Command it created (kubectl create has no wide either)",
    "queue close": "prints the Command it created (kubectl create has no wide either)",
    "job delete": "prints the deleted job (kubectl delete has no wide either)",
    "poison retry": "prints the one record it published, not a table",
    "job view": "a description of one job, not a table",
    "schedule": "the default is text sessions",
    "why-pending": "the default is text",
    "projections history": "the default is the stored JSON",
    "validate": "the default is text findings",
    "replay": "the default is the text report (timelines and final statuses)",
    "publish": "the default is one line",
    "log import": "the default is one line",
    "projections rebuild": "the default is one line",
    "projections verify": "the default is one line (and the differences)",
    "bus repartition": "the default is one line",
}
NO_YAML: dict[str, str] = {}
SINGLE_NAMESPACE = {  # -n without -A: one object, or one namespace to write into
    "job delete", "job suspend", "job resume", "job view", "job run", "render",
}
CLUSTER_COMMANDS = {
    "job delete", "job list", "job resume", "job run", "job suspend", "job view",
    "queue close", "queue get", "queue list", "queue open",
    "record", "up", "webhook",
}


def commands(group: click.Group = cli, path: tuple[str, ...] = ()):
    ctx = click.Context(group)  # through list_commands/get_command: the top level's commands are loaded lazily
    for name in group.list_commands(ctx):
        sub = group.get_command(ctx, name)
        assert sub is not None, (path, name)
        if isinstance(sub, click.Group):
            yield from commands(sub, (*path, name))
        else:
            yield " ".join((*path, name)), sub


ALL = dict(commands())


def option(cmd: click.Command, flag: str) -> click.Option | None:
    return next((p for p in cmd.params if isinstance(p, click.Option) and flag in p.opts + p.secondary_opts), None)


def test_the_allow_lists_name_only_commands_that_exist():
    named = (set(NO_OBJECTS) | set(O_IS_A_FILE) | set(NO_NAME) | set(NO_WIDE) | set(NO_YAML)
             | SINGLE_NAMESPACE | CLUSTER_COMMANDS)
    assert named <= set(ALL), sorted(named - set(ALL))
    assert len(ALL) > 30  # the walk found the tree


@pytest.mark.parametrize("path", sorted(ALL))
def test_output_is_kubectls_format_option(path):
    cmd = ALL[path]
    out, as_json = option(cmd, "-o"), option(cmd, "--json")
    if path in O_IS_A_FILE:
        assert out is not None and not isinstance(out.type, click.Choice)
        return
    if out is None:
        assert path in NO_OBJECTS, f"`vcbus {path}` prints objects without -o json|yaml|wide|name: add -o (or allow-list it)"
        assert as_json is None, f"`vcbus {path}`: --json without -o"
        return
    assert path not in NO_OBJECTS, f"`vcbus {path}` has -o: take it off NO_OBJECTS"
    assert out.opts == ["-o", "--output"], f"`vcbus {path}`: -o/--output as kubectl"
    assert isinstance(out.type, click.Choice), f"`vcbus {path}`: -o takes a format"
    forms = set(out.type.choices)
    missing = {"json", "yaml"} - forms - ({"yaml"} if path in NO_YAML else set())
    if path not in NO_NAME:
        missing |= {"name"} - forms
    if path not in NO_WIDE:
        missing |= {"wide"} - forms
    assert not missing, f"`vcbus {path} -o` lacks {sorted(missing)}"
    assert forms - FORMS <= {"table", "text"}, f"`vcbus {path} -o` offers forms kubectl does not know: {forms - FORMS}"
    if as_json is not None:
        assert as_json.is_flag and "json" in forms, f"`vcbus {path}`: --json is an alias of -o json"


@pytest.mark.parametrize("path", sorted(ALL))
def test_namespaces_are_kubectls_n_and_a(path):
    cmd = ALL[path]
    ns, every = option(cmd, "--namespace"), option(cmd, "--all-namespaces")
    if ns is None:
        assert every is None, f"`vcbus {path}`: -A without -n"
        return
    assert "-n" in ns.opts, f"`vcbus {path}`: --namespace without -n"
    if path in SINGLE_NAMESPACE:
        return
    assert every is not None and "-A" in every.opts and every.is_flag, f"`vcbus {path}`: -n without -A"


@pytest.mark.parametrize("path", sorted(ALL))
def test_cluster_commands_take_kubeconfig_and_context(path):
    cmd = ALL[path]
    has = (option(cmd, "--kubeconfig") is not None, option(cmd, "--context") is not None)
    if path in CLUSTER_COMMANDS:
        assert has == (True, True), f"`vcbus {path}` talks to a cluster: --kubeconfig and --context"
    else:
        assert has == (False, False), f"`vcbus {path}`: --kubeconfig/--context on a command not in CLUSTER_COMMANDS"


def test_a_bus_has_no_current_namespace_so_no_flag_means_every_one():
    assert namespace_scope(None, False) is None
    assert namespace_scope("team-a", False) == "team-a"
    with pytest.raises(UserError, match="not both"):  # as `vcbus job list`
        namespace_scope("team-a", True)


@pytest.mark.nats
@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("status",), "No jobs on the bus at {url}."),
        (("status", "-n", "team-a"), "No jobs in namespace team-a on the bus at {url}."),
        (("poison", "list"), "No poisoned records on the bus at {url}."),
        (("poison", "list", "-n", "team-a"), "No poisoned records in namespace team-a on the bus at {url}."),
        (("events", "tail", "--since", "1", "--no-follow"), "No events on the bus at {url}."),
        (("events", "tail", "-n", "team-a", "--commands", "--since", "1", "--no-follow"),
         "No commands in namespace team-a on the bus at {url}."),
        (("projections", "history", "team-a/nope"), "no history in vcbus_history on the bus at {url}"),
        (("divergences",), "No divergences on the bus at {url}."),
        (("divergences", "-n", "team-a", "-o", "wide"), "No divergences in namespace team-a on the bus at {url}."),
    ],
)
def test_finding_nothing_names_the_bus(bus_settings, args, says):
    url = bus_settings.nats_url
    res = vcbus_cli(*args, "--nats", url)
    assert res.returncode in (0, 1), res.stderr.decode()  # 0 for an empty list, 1 for no such job
    assert says.format(url=url) in res.stderr.decode()
    assert res.stdout == b""


@pytest.mark.nats
def test_bus_partitions_prints_every_form(bus_settings):
    import json

    import yaml

    url = bus_settings.nats_url
    as_json = json.loads(vcbus_cli("bus", "partitions", "-o", "json", "--nats", url).stdout)
    assert as_json and yaml.safe_load(vcbus_cli("bus", "partitions", "-o", "yaml", "--nats", url).stdout) == as_json
    names = vcbus_cli("bus", "partitions", "-o", "name", "--nats", url).stdout.decode().splitlines()
    assert names == [f"consumer/{r['consumer']}" for r in as_json]
    wide = vcbus_cli("bus", "partitions", "-o", "wide", "--nats", url).stdout.decode().splitlines()
    assert wide[0].split()[:2] == ["PARTITION", "CONSUMER"] and len(wide) == len(as_json) + 1
