"""kubectl's `-o json|yaml|wide|name` for the commands that print objects, with `--json` kept as an alias.

`output_options(choices)` adds `-o/--output` (the command's own default form when
absent) and, where a command had it, `--json` (the same as `-o json`); the command
calls `chosen(fmt, as_json)` to get the one form. `name_of(obj)` is kubectl's
`-o name` for a Kubernetes object (`job.batch.volcano.sh/resnet-dist-train`,
`pod/x`).
"""

from __future__ import annotations

from typing import Any, Callable

import click

from vcbus.errors import UserError

FORMS = ("json", "yaml", "wide", "name")


def output_options(choices: tuple[str, ...] = FORMS, *, json_alias: bool = True, default_help: str = "text") -> Callable:
    """`-o/--output` with `choices` (and `--json`, an alias of `-o json`, when `json_alias`)."""

    def decorate(fn: Callable) -> Callable:
        if json_alias:
            fn = click.option("--json", "as_json", is_flag=True, help="The same as -o json.")(fn)
        return click.option(
            "-o", "--output", "fmt", type=click.Choice(choices), default=None,
            help=f"Output format: {'|'.join(choices)} (default: {default_help}).",
        )(fn)  # fmt: skip

    return decorate


def chosen(fmt: str | None, as_json: bool = False) -> str | None:
    """The output form asked for: `-o` or `--json` (None: the command's default)."""
    if as_json:
        if fmt not in (None, "json"):
            raise UserError(f"--json and -o {fmt} ask for different outputs; give one")
        return "json"
    return fmt


def name_of(obj: dict[str, Any]) -> str:
    """kubectl's `-o name`: `<kind>[.<group>]/<name>` in lower case (`job.batch.volcano.sh/x`, `pod/x`)."""
    api = str(obj.get("apiVersion", ""))
    group = api.rsplit("/", 1)[0] if "/" in api else ""
    kind = str(obj.get("kind", "")).lower()
    name = str((obj.get("metadata") or {}).get("name", ""))
    return f"{kind}.{group}/{name}" if group else f"{kind}/{name}"


def nothing_on_bus(what: str, bus: str, namespace: str | None = None) -> None:
    """The bus commands' "No resources found": what was looked for, in which namespace, on which bus
    (`Bus.describe()`, password masked), so that an empty answer from the wrong bus is seen as such."""
    where = f" in namespace {namespace}" if namespace else ""
    click.echo(f"No {what}{where} on the bus at {bus}.", err=True)


def namespace_scope(namespace: str | None, all_namespaces: bool) -> str | None:
    """kubectl's `-n NS` / `-A` for the bus commands: the namespace to keep, None for every one.

    A bus has no current namespace (kubectl's comes from the kubeconfig context), so without
    either flag they show every namespace, as `-A`. Both is an error, as in `vcbus job list`."""
    if namespace and all_namespaces:
        raise UserError("give --namespace or --all-namespaces (-A), not both")
    return None if all_namespaces else namespace
