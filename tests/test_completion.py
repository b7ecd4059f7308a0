"""`vcbus completion bash|zsh|fish`: the scripts come from the command tree and complete in a real bash.

The bash script is printed by the real CLI, sourced in a real bash, and its completion
function is asked for the words a user would type (COMP_WORDS/COMP_CWORD as bash
sets them). The expected words are read from the click tree, so a command added
tomorrow is expected too. The fish script is sourced in a real fish and asked with
`complete -C`; the zsh script (the same function through bashcompinit) is typed into an
interactive zsh on a pty, TAB included. `make shells` installs zsh and fish.
"""

from __future__ import annotations

import os
import pathlib
import pty
import select
import shlex
import shutil
import signal
import subprocess
import sys
import time

import click
import pytest

from vcbus.cli.main import cli

ROOT = pathlib.Path(__file__).resolve().parents[1]


def script(shell: str) -> str:
    res = subprocess.run([sys.executable, "-m", "vcbus.cli.main", "completion", shell], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    return res.stdout


@pytest.fixture(scope="module")
def bash_file(tmp_path_factory) -> pathlib.Path:
    path = tmp_path_factory.mktemp("completion") / "vcbus.bash"
    path.write_text(script("bash"))
    return path


def complete(bash_file: pathlib.Path, line: str, cwd: pathlib.Path | None = None) -> list[str]:
    """What bash offers for the last word of `line` (a trailing space: an empty word)."""
    words = shlex.split(line) + ([""] if line.endswith(" ") else [])
    arr = " ".join(shlex.quote(w) for w in words)
    program = (f"source {shlex.quote(str(bash_file))}; COMP_WORDS=({arr}); COMP_CWORD={len(words) - 1}; "
               "_vcbus; printf '%s\\n' \"${COMPREPLY[@]}\"; complete -p vcbus")
    res = subprocess.run(["bash", "--norc", "--noprofile", "-c", program], capture_output=True, text=True,
                         timeout=60, cwd=cwd)
    assert res.returncode == 0, res.stderr
    *offered, registration = res.stdout.splitlines()
    assert registration == "complete -o default -F _vcbus vcbus"
    return [w for w in offered if w]


def subcommands(group: click.Command) -> dict[str, click.Command]:
    """A group's commands through list_commands/get_command (the top level's are loaded lazily), hidden ones too."""
    if not isinstance(group, click.Group):
        return {}
    ctx = click.Context(group)
    return {name: group.get_command(ctx, name) for name in group.list_commands(ctx)}


def test_bash_completes_commands_subcommands_options_and_choices(bash_file, tmp_path):
    top = sorted(n for n, c in subcommands(cli).items() if not c.hidden)
    assert complete(bash_file, "vcbus ") == top
    assert "job" in top and "queue" in top and "completion" in top
    assert complete(bash_file, "vcbus jo") == ["job"]
    assert complete(bash_file, "vcbus job ") == ["delete", "list", "resume", "run", "suspend", "view"]
    assert complete(bash_file, "vcbus queue c") == ["close"]
    assert complete(bash_file, "vcbus job list -o ") == ["wide", "json", "yaml", "name"]
    assert complete(bash_file, "vcbus job list --output y") == ["yaml"]
    assert complete(bash_file, "vcbus completion ") == ["bash", "zsh", "fish"]
    # an option's value is skipped when finding the command: `-n ns` is not a subcommand
    assert "--all-namespaces" in complete(bash_file, "vcbus job list -n team-a --a")
    assert complete(bash_file, "vcbus -h job l") == ["list"]
    options = complete(bash_file, "vcbus job list --")
    expected = sorted(n for p in subcommands(subcommands(cli)["job"])["list"].params
                      if isinstance(p, click.Option) for n in p.opts if n.startswith("--"))
    assert sorted(o for o in options if o != "--help") == expected
    # file names for an option that takes a path, in the shell's working directory
    (tmp_path / "job-a.yaml").write_text("{}")
    assert complete(bash_file, "vcbus job run -f job-", cwd=tmp_path) == ["job-a.yaml"]


def test_every_command_of_the_tree_is_in_each_script():
    bash, zsh, fish = script("bash"), script("zsh"), script("fish")
    assert "bashcompinit" in zsh and "complete -o default -F _vcbus vcbus" in zsh
    paths = []

    def walk(cmd: click.Command, path: str) -> None:
        paths.append((path, cmd))
        for name, sub in subcommands(cmd).items():
            walk(sub, f"{path} {name}")

    walk(cli, "vcbus")
    assert len(paths) > 30  # the walk found the tree
    for path, cmd in paths:
        assert f'"{path}") echo "' in bash, path
        if path != "vcbus":
            parent, name = path.rsplit(" ", 1)
            assert f"test (__vcbus_path) = \\'{parent}\\'' -a {name} " in fish, path
        for p in cmd.params:
            if isinstance(p, click.Option) and isinstance(p.type, click.Choice):
                long = next(n for n in p.opts if n.startswith("--"))
                assert f"-l {long[2:]}" in fish and " ".join(map(str, p.type.choices)) in fish, (path, long)


def require_shell(name: str) -> str:
    path = shutil.which(name)
    if path is not None:
        return path
    missing = f"no {name} on PATH (run `make shells`, which installs zsh and fish with apt-get)"
    if os.environ.get("VCBUS_REQUIRE_K8S", "") not in ("", "0", "false", "no"):
        pytest.fail(f"{missing}, and VCBUS_REQUIRE_K8S=1 says the completion tests must run", pytrace=False)
    pytest.skip(missing)


def test_fish_completes_from_its_script(tmp_path):
    fish = require_shell("fish")
    path = tmp_path / "vcbus.fish"
    path.write_text(script("fish"))

    def offered(line: str) -> list[str]:
        res = subprocess.run([fish, "--no-config", "-c", f"source {path}; complete -C {shlex.quote(line)}"],
                             capture_output=True, text=True, timeout=60, cwd=tmp_path)
        assert res.returncode == 0, res.stderr
        return [row.split("\t")[0] for row in res.stdout.splitlines()]

    assert offered("vcbus jo") == ["job"]
    assert offered("vcbus job ") == ["delete", "list", "resume", "run", "suspend", "view"]
    assert offered("vcbus job list -o ") == ["json", "name", "wide", "yaml"]  # fish sorts
    assert offered("vcbus job list -n team-a --all") == ["--all-namespaces"]
    assert offered("vcbus completion ") == ["bash", "fish", "zsh"]
    (tmp_path / "job-a.yaml").write_text("{}")
    assert offered("vcbus job run -f job-") == ["job-a.yaml"]


def interactive(argv: list[str], steps: list[tuple[str, str]], home: pathlib.Path, deadline: float = 60.0) -> str:
    """Type each step's keys into an interactive shell on a pty; wait until its output shows the expected text."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: the shell
        os.execvpe(argv[0], argv, {**os.environ, "PS1": "$ ", "TERM": "dumb", "HOME": str(home)})
    out = b""
    try:
        for keys, expect in steps:
            start = len(out)
            os.write(fd, keys.encode())
            end = time.monotonic() + deadline
            while expect.encode() not in out[start:]:
                assert time.monotonic() < end, f"timed out waiting for {expect!r} after {keys!r}: {out[start:]!r}"
                ready, _, _ = select.select([fd], [], [], 0.2)
                if ready:
                    out += os.read(fd, 65536)
        return out.decode(errors="replace")
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(fd)


def test_zsh_completes_through_bashcompinit(tmp_path):
    zsh = require_shell("zsh")
    path = tmp_path / "_vcbus"
    path.write_text(script("zsh"))
    bin_dir = pathlib.Path(sys.executable).parent
    interactive([zsh, "-f", "-i"], [
        (f"PATH={bin_dir}:$PATH; source {path}; echo loaded-$((40+2))\n", "loaded-42"),
        ("vcbus jo\t", "vcbus job "),  # the only match is inserted
        ("\x15vcbus job list -o \t\t", "json  name  wide  yaml"),  # ^U clears the line; two TABs list
    ], home=tmp_path)  # compinit writes its .zcompdump under HOME


def test_unknown_shell_is_a_usage_error():
    res = subprocess.run([sys.executable, "-m", "vcbus.cli.main", "completion", "tcsh"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and "tcsh" in res.stderr
