"""The examples of every command's `--help`: a subcommand without its own shows its group's about it,
and a group without its own shows its subcommands' (tests/test_help_examples.py parses and runs them).

A command's examples are the lines of its help that start with `vcbus <its path>` (its `Examples:`
section, or the root's own list). `LazyGroup` passes each command it imports through `share_examples`.
"""

from __future__ import annotations

import click


def example_lines(help_text: str | None, path: str) -> list[str]:
    """The lines of `help_text` that are examples of the command at `path` (`vcbus job list`)."""
    out = []
    for line in (help_text or "").splitlines():
        text = line.strip()
        if text == path or text.startswith(path + " ") or f"| {path}" in text:
            out.append(text)
    return out


def _with_examples(help_text: str | None, lines: list[str]) -> str:
    block = "\n".join(f"  {line}" for line in lines)
    return f"{(help_text or '').rstrip()}\n\n\b\nExamples:\n{block}\n"


def share_examples(cmd: click.Command, path: str) -> None:
    """Give `cmd` (at `path`) and, if it is a group, each command under it the examples they lack."""
    if not isinstance(cmd, click.Group):
        return
    own = example_lines(cmd.help, path)
    gathered: list[str] = []
    for name, sub in cmd.commands.items():
        sub_path = f"{path} {name}"
        share_examples(sub, sub_path)
        if not example_lines(sub.help, sub_path):
            inherited = [line for line in own if line == sub_path or line.startswith(sub_path + " ")]
            if inherited:
                sub.help = _with_examples(sub.help, inherited)
        gathered += example_lines(sub.help, sub_path)[:2]
    if not own and gathered:
        cmd.help = _with_examples(cmd.help, gathered)
