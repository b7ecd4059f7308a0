"""Cluster access for the kubectl-like commands (`vcbus job ...`, `vcbus queue ...`).

What they share: the `--kubeconfig`/`--context` options and the namespace kubectl
would use, one request helper that turns every API failure into one line (401/403
naming the verb and the resource, an unreachable server naming its address, a
kind the server does not serve), and kubectl's output forms (`-o json|yaml|name|wide`,
tables padded as kubectl's, ages as kubectl prints them, "No resources found"
naming the cluster on stderr).
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Callable

import click

from vcbus import exitcodes
from vcbus.cli.output import output_options, print_document, print_names, print_table
from vcbus.errors import UserError
from vcbus.k8s.watching import KubeApiError, ResourceKind, api_request


class ClusterError(UserError):
    """The cluster cannot be used: unreachable, credentials refused, a kind not served, an object rejected."""

    exit_code = exitcodes.CLUSTER


class NotFound(UserError):
    """The named object does not exist (exit code 1: the answer is no)."""

    exit_code = exitcodes.NEGATIVE


def cluster_options(fn: Callable) -> Callable:
    fn = click.option("--context", metavar="NAME", help="The kubeconfig context to use (default: its current one).")(fn)
    fn = click.option(
        "--kubeconfig", metavar="PATH", type=click.Path(dir_okay=False), help="The cluster's kubeconfig (default: $KUBECONFIG, ~/.kube/config)."
    )(fn)
    return fn


def output_option(choices: tuple[str, ...] = ("wide", "json", "yaml", "name"), default_help: str = "a table, as kubectl's") -> Callable:
    return output_options(choices, json_alias=False, default_help=default_help)


def _context(kubeconfig: str | None, context: str | None) -> tuple[str, str]:
    """(context name, namespace kubectl would use: the context's, else default)."""
    try:
        from kubernetes import config

        contexts, active = config.list_kube_config_contexts(config_file=kubeconfig)
        chosen = next((c for c in contexts if c.get("name") == context), None) if context else active
        chosen = chosen or {}
        return chosen.get("name", ""), (chosen.get("context") or {}).get("namespace") or "default"
    except Exception:  # no kubeconfig (in a pod): the default namespace
        return "", "default"


class Cluster:
    """One API server, reached as `--kubeconfig`/`--context` (or the in-cluster account) say."""

    def __init__(self, kubeconfig: str | None, context: str | None) -> None:
        from vcbus.k8s.cluster import api_client_for

        self.api = api_client_for(kubeconfig, context=context)
        self.host = self.api.configuration.host
        self.context, self.namespace = _context(kubeconfig, context)

    def describe(self) -> str:
        return f"cluster {self.host}" + (f" (context {self.context})" if self.context else "")

    def request(
        self,
        method: str,
        rk: ResourceKind,
        *,
        verb: str,
        namespace: str | None = None,
        name: str | None = None,
        body: Any = None,
        query: dict[str, Any] | None = None,
        content_type: str | None = None,
    ) -> Any:
        path = rk.path(namespace if rk.namespaced else None, name)
        try:
            return api_request(self.api, method, path, body=body, query=query, content_type=content_type)
        except KubeApiError as err:
            raise self._error(err, rk, verb, namespace, name) from None
        except Exception as err:  # urllib3/socket errors: the server cannot be reached
            reason = getattr(err, "reason", None) or err
            raise ClusterError(f"cannot reach the API server at {self.host}: {reason}") from None

    def _error(self, err: KubeApiError, rk: ResourceKind, verb: str, namespace: str | None, name: str | None) -> UserError:
        body = err.body if isinstance(err.body, dict) else {}
        message = body.get("message") or (err.body.decode(errors="replace").strip() if isinstance(err.body, bytes)
                                          else str(err.body or "")).strip()
        resource = f"{rk.plural}.{rk.group}" if rk.group else rk.plural
        where = f" in namespace {namespace}" if rk.namespaced and namespace else ""
        if err.status == 401:
            return ClusterError(f"the API server at {self.host} refused the kubeconfig's credentials (401 Unauthorized)")
        if err.status == 403:
            return ClusterError(f"forbidden: cannot {verb} {resource}{where} on {self.describe()}: {message}")
        if err.status == 404:
            details = body.get("details") or {}
            if name and body.get("reason") == "NotFound" and details.get("name") == name:
                label = f"{namespace}/{name}" if rk.namespaced and namespace else name
                return NotFound(f"{rk.kind.lower()} {label} not found on {self.describe()}")
            return ClusterError(f"{self.describe()} does not serve {resource} (are Volcano's CRDs installed?)")
        return ClusterError(f"{verb} {resource}{where}: {err.status} {body.get('reason') or ''}: {message}".replace(" : ", ": "))


# ---------------------------------------------------------------------- output


def emit(objects: list[dict], fmt: str | None, *, single: bool, rk: ResourceKind, table: Callable[[list[dict]], list[list[str]]]) -> None:
    """Print objects as kubectl does: one object or a List for json/yaml, `kind.group/name` for name, else a table."""
    if fmt in ("json", "yaml"):
        doc: Any = objects[0] if single else {"apiVersion": "v1", "items": objects, "kind": "List",
                                              "metadata": {"resourceVersion": ""}}
        print_document(doc, fmt, indent=4)  # kubectl's JSON is indented by 4
        return
    if fmt == "name":
        print_names(f"{rk.kind.lower()}.{rk.group}/{obj['metadata']['name']}" for obj in objects)
        return
    print_table(table(objects))


def nothing_found(cluster: Cluster, namespace: str | None, *, namespaced: bool = True) -> None:
    """kubectl's "No resources found", naming where it looked: the namespace and the cluster."""
    if not namespaced:
        click.echo(f"No resources found on {cluster.describe()}.", err=True)
        return
    where = "any namespace" if namespace is None else f"namespace {namespace}"
    click.echo(f"No resources found in {where} of {cluster.describe()}.", err=True)


def age(timestamp: str | None, now: dt.datetime | None = None) -> str:
    """kubectl's HumanDuration of the time since `timestamp` (RFC 3339), `<unknown>` without one."""
    if not timestamp:
        return "<unknown>"
    try:
        then = dt.datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    except ValueError:
        return "<unknown>"
    seconds = int(((now or dt.datetime.now(dt.timezone.utc)) - then).total_seconds())
    return human_duration(seconds)


def human_duration(seconds: int) -> str:
    if seconds < -1:
        return "<invalid>"
    if seconds < 0:
        return "0s"
    if seconds < 120:
        return f"{seconds}s"
    minutes, hours = seconds // 60, seconds // 3600
    if minutes < 10:
        return f"{minutes}m{seconds % 60}s" if seconds % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d{hours % 24}h" if hours % 24 else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        return f"{hours // 24 // 365}y{(hours // 24) % 365}d"
    return f"{hours // 24 // 365}y"


def parse_name(value: str, namespace: str | None, default_namespace: str, *, what: str) -> tuple[str, str]:
    """NS/NAME, or NAME in -n's namespace (else the context's): (namespace, name)."""
    ns, sep, name = value.partition("/")
    if not sep:
        ns, name = namespace or default_namespace, value
    elif namespace and namespace != ns:
        raise UserError(f"{what} {value!r} names namespace {ns} but -n says {namespace}")
    if not ns or not name or "/" in name:
        raise UserError(f"{what} {value!r}: expected NAMESPACE/NAME or NAME")
    return ns, name


def command_object(target: dict, action: str, namespace: str) -> dict:
    """A bus.volcano.sh Command as vcctl makes it: generateName `<target>-<action>-`, owned by its target."""
    meta = target["metadata"]
    ref = {
        "apiVersion": target["apiVersion"],
        "kind": target["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    return {
        "apiVersion": "bus.volcano.sh/v1alpha1",
        "kind": "Command",
        "metadata": {"generateName": f"{meta['name']}-{action.lower()}-", "namespace": namespace,
                     "ownerReferences": [ref]},
        "target": ref,
        "action": action,
    }
