"""kubectl's `-o json|yaml|wide|name` for the commands that print objects, with `--json` kept as an alias.

The one code path of every command's output forms (tests/test_output_path.py keeps it so):

- `output_options(choices)` adds `-o/--output` (the command's own default form when
  absent) and, where a command had it, `--json` (the same as `-o json`); the command
  calls `chosen(fmt, as_json)` to get the one form.
- `print_document(doc, fmt)` prints one document (built-ins or msgspec Structs) as JSON
  (indented) or YAML (block style, keys in their order); `document_text(doc, fmt, one_line=True)`
  is one document of a stream (`vcbus events tail`: a JSON line, or a YAML document after `---`).
- `print_names(names)` is `-o name`: one name a line; `name_of(obj)` is kubectl's name of a
  Kubernetes object (`job.batch.volcano.sh/resnet-dist-train`, `pod/x`).
- `print_table(rows)` is the default table: columns padded by three spaces, as kubectl's tabwriter.
"""

from __future__ import annotations

import sys
from typing import Any, Callable, Iterable

import click

from vcbus.errors import UserError

FORMS = ("json", "yaml", "wide", "name")


def output_options(choices: tuple[str, ...] = FORMS, *, json_alias: bool = True, default_help: str = "text",
                   default: str | None = None, dest: str = "fmt") -> Callable:
    """`-o/--output` with `choices` (and `--json`, an alias of `-o json`, when `json_alias`); absent, `default`."""

    def decorate(fn: Callable) -> Callable:
        if json_alias:
            fn = click.option("--json", "as_json", is_flag=True, help="The same as -o json.")(fn)
        return click.option(
            "-o", "--output", dest, type=click.Choice(choices), default=default,
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


def document_text(doc: Any, fmt: str, *, one_line: bool = False, indent: int = 2) -> str:
    """`doc` as -o json (indented, or on one line when `one_line`: a stream's line) or -o yaml
    (a stream's document starts with `---` when `one_line`); msgspec Structs as their JSON form."""
    if fmt == "json":
        import msgspec

        raw = msgspec.json.encode(doc)
        return (raw if one_line else msgspec.json.format(raw, indent=indent)).decode() + "\n"
    if fmt != "yaml":
        raise ValueError(f"document_text: no document form {fmt!r}")
    text = _yaml(doc)
    return "---\n" + text if one_line else text


def print_document(doc: Any, fmt: str, *, indent: int = 2) -> None:
    """Print one document as -o json or -o yaml (YAML streamed as it is written: a replay's report is large)."""
    if fmt == "yaml":
        sys.stdout.flush()
        _yaml(doc, sys.stdout)
        return
    click.echo(document_text(doc, fmt, indent=indent), nl=False)


def _yaml(doc: Any, stream: Any = None) -> Any:
    """Block style, the keys in their order, unicode as is (libyaml's dumper when there is one)."""
    import msgspec
    import yaml

    return yaml.dump(msgspec.to_builtins(doc), stream, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper),
                     sort_keys=False, allow_unicode=True)


def print_names(names: Iterable[str]) -> None:
    """-o name: one name a line."""
    for name in names:
        click.echo(name)


def print_table(rows: list[list[str]]) -> None:
    """Columns padded by three spaces, as kubectl's tabwriter; no trailing blanks."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        click.echo("   ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())


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
