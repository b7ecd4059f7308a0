"""Every `--help` has examples, and each example is a command line that works.

The click tree is walked as `vcbus completion` walks it (every command and subcommand). Each command's
help must hold at least one example of it (a line starting `vcbus <its path>`; a subcommand without
its own shows its group's, vcbus/cli/examples.py). Every example line of every help is then parsed as
the shell and vcbus would parse it (`|`, `&&`, `<(...)`, redirections and comments taken apart; each
`vcbus ...` part resolved to its command and its options and arguments parsed, types and files
checked). The files an example names are the repository's when it has them (examples/...), else
stand-ins: a watch log (the seed's), the seed vcjob, a queue. The examples that need no bus and no
cluster (replay, validate, render, schedule, why-pending --from, completion) are then run as real
processes and must not exit 2 (bad input or usage); the others need a server and are only parsed
here (their tests run them).
"""

from __future__ import annotations

import json
import pathlib
import shlex
import shutil
import subprocess
import sys

import click
import pytest

from vcbus.cli.examples import example_lines
from vcbus.cli.main import cli

ROOT = pathlib.Path(__file__).resolve().parents[1]
SEED_LOG = ROOT / "examples" / "resnet-dist-train.json"
SEED_JOB = ROOT / "examples" / "resnet-dist-train.yaml"
QUEUES = {"apiVersion": "v1", "kind": "List", "items": [
    {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "default"},
     "spec": {"weight": 1}, "status": {"state": "Open"}}]}
# stand-ins an example may run with: name -> its content (any other file is an empty one: parsed only)
STAND_INS = {"watch.log": SEED_LOG.read_bytes(), "job.yaml": SEED_JOB.read_bytes(), "new.yaml": SEED_JOB.read_bytes(),
             "live.yaml": SEED_JOB.read_bytes(), "app.yaml": SEED_JOB.read_bytes() + (
                 b"---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n"),
             "queues.yaml": json.dumps(QUEUES).encode()}
OFFLINE = {("replay",), ("validate",), ("render",), ("schedule",), ("why-pending",), ("completion",)}
FILE_SUFFIXES = (".log", ".jsonl", ".json", ".yaml", ".conf", ".crt", ".key", ".html")


def commands(cmd: click.Command = cli, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], click.Command]]:
    out = [(path, cmd)]
    if isinstance(cmd, click.Group):
        ctx = click.Context(cmd)
        for name in cmd.list_commands(ctx):
            sub = cmd.get_command(ctx, name)
            if sub is not None and not sub.hidden:
                out += commands(sub, (*path, name))
    return out


def vcbus_parts(line: str) -> list[list[str]]:
    """The `vcbus ...` command lines of one example line, each as its argument list."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars="|&;<>()")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    parts: list[list[str]] = [[]]
    redirect = False
    for token in lexer:
        if token in ("|", "&&", "||", ";", "(", ")", "<(", "$(") or set(token) <= set("|&;()"):
            parts.append([])
        elif token in (">", "<", ">>", "2>"):
            redirect = True
        elif redirect:
            redirect = False
        else:
            parts[-1].append(token)
    return [p[1:] for p in parts if p and p[0] == "vcbus"]


def every_example() -> list[tuple[str, str, list[str]]]:
    out = []
    for path, cmd in commands():
        for line in example_lines(cmd.help, " ".join(("vcbus", *path))):
            for args in vcbus_parts(line):
                out.append((" ".join(path) or "vcbus", line, args))
    unique = {(line, tuple(args)): (where, line, args) for where, line, args in out}
    return list(unique.values())


EXAMPLES = every_example()


def test_every_help_has_examples_of_its_command():
    missing = [" ".join(("vcbus", *path)) for path, cmd in commands()
               if not example_lines(cmd.help, " ".join(("vcbus", *path)))]
    assert not missing, f"no example in the --help of {missing}"
    assert len(EXAMPLES) > 100


def resolved(args: list[str], tmp: pathlib.Path) -> tuple[list[str], bool]:
    """`args` with each file the repository has made absolute and every other file a stand-in in `tmp`;
    and whether every file is one the example can run with."""
    out, runnable = [], True
    for arg in args:
        value = arg.split("=", 1)[-1] if arg.startswith("--") and "=" in arg else arg
        home = value.startswith("~/")
        if value.startswith("-") or not (value.endswith(FILE_SUFFIXES) or home):
            out.append(arg)
            continue
        if (ROOT / value).exists():
            out.append(arg.replace(value, str(ROOT / value)))
            continue
        assert home or "/" not in value or value.startswith("/"), f"{value}: no such file in the repository"
        name = pathlib.Path(value).name
        stand_in = tmp / name
        if name in STAND_INS:
            stand_in.write_bytes(STAND_INS[name])
        else:
            stand_in.write_bytes(b"")
            runnable = runnable and value.endswith(".html")  # an output file
        out.append(arg.replace(value, str(stand_in)))
    return out, runnable


def parse(args: list[str]) -> tuple[tuple[str, ...], click.Context]:
    """The command `vcbus ARGS` names, and its context once its options and arguments are parsed."""
    cmd: click.Command = cli
    ctx = click.Context(cli, info_name="vcbus")
    path: tuple[str, ...] = ()
    rest = list(args)
    while isinstance(cmd, click.Group) and rest and not rest[0].startswith("-"):
        sub = cmd.get_command(ctx, rest[0])
        assert sub is not None, f"no command {rest[0]!r} under {' '.join(('vcbus', *path))}"
        path, cmd, rest = (*path, rest[0]), sub, rest[1:]
        ctx = click.Context(cmd, info_name=path[-1], parent=ctx)
    return path, cmd.make_context(" ".join(("vcbus", *path)), rest, parent=ctx.parent)


def checked(where: str, line: str, args: list[str], tmp: pathlib.Path) -> tuple[list[str], tuple[str, ...], bool]:
    """The example parsed (a failure names the help and the line): its arguments, command and whether
    it runs here (no server, no standard input, nothing followed, only files it can run with)."""
    try:
        args, runnable = resolved(args, tmp)
        path, _ = parse(args)
    except click.UsageError as err:
        pytest.fail(f"--help of {where}: {line!r}: {err.format_message()}")
    except AssertionError as err:
        pytest.fail(f"--help of {where}: {line!r}: {err}")
    offline = path[:1] in OFFLINE and not {"--nats", "-", "--follow", "-f"} & set(args)
    return args, path, offline and runnable


@pytest.mark.parametrize("where, line, args", EXAMPLES, ids=[line for _, line, _ in EXAMPLES])
def test_each_example_parses(where, line, args, tmp_path):
    checked(where, line, args, tmp_path)


RUNNABLE = [e for e in EXAMPLES if e[2][:1] and (e[2][0],) in OFFLINE]


@pytest.mark.slow
@pytest.mark.parametrize("where, line, args", RUNNABLE, ids=[line for _, line, _ in RUNNABLE])
def test_each_offline_example_runs(where, line, args, tmp_path):
    args, _, runs = checked(where, line, args, tmp_path)
    if not runs:
        return  # a server, standard input or a follow: parsed above, run by the command's own tests
    res = subprocess.run([sys.executable, "-m", "vcbus.cli.main", *args], capture_output=True, cwd=tmp_path,
                         timeout=300, stdin=subprocess.DEVNULL)
    assert res.returncode in (0, 1), f"--help of {where}: {line!r} exited {res.returncode}: {res.stderr.decode()}"
    assert b"Traceback" not in res.stderr


def test_the_shell_parts_of_an_example_are_taken_apart():
    assert vcbus_parts("vcbus replay watch.log --json | jq '.jobs[]'") == [["replay", "watch.log", "--json"]]
    assert vcbus_parts("source <(vcbus completion bash)") == [["completion", "bash"]]
    assert vcbus_parts("vcbus demo --keep && vcbus status -o wide       # keep") == [["demo", "--keep"],
                                                                                   ["status", "-o", "wide"]]
    assert vcbus_parts("vcbus log export > cluster.jsonl") == [["log", "export"]]
    assert shutil.which("sh")  # the examples are shell lines
