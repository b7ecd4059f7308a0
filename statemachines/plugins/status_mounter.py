"""`status-mounter`: the vcjob status as env vars and as live files (vendor plugin, not upstream).

Restated from the seed document (a cloud vendor's Volcano guide). Flags:
`mountPoint` (unset: no files), `addEnv` (true), `values` (`retryCount`,
comma-separated), `statusJson` (false; adds `jsonStatus`), `prefix` (`Job_`),
`containers` (`*`, or comma-separated container names).

- Env vars `<prefix><value>` (and `<prefix>jsonStatus`) are fixed when the pod
  is created: they hold the status the controller saw then.
- Files `<mountPoint>/<value>` (and `jsonStatus`) must stay live, so they come
  from a per-job ConfigMap `<job>-status-mounter` (ownerReference to the job),
  mounted without subPath (the kubelet swaps the files when the ConfigMap
  changes). `status_mounter_configmap(job, status)` is the pure function the
  status projection calls to keep it current; OnJobAdd and OnJobUpdate also
  apply it on every sync (not guarded by the bookkeeping key).
- OnJobDelete only drops the `plugin-status-mounter` key: the ConfigMap stays
  (surviving pods keep live files) and goes away with the job (GC).

The decisions on the reference's ten open questions are in docs/plugins.md.
"""

from __future__ import annotations

import json
from typing import Any

from statemachines.plugins.args import Flag, ParsedArgs, go_quote, parse_flags, split_list
from statemachines.plugins.base import (
    CREATE_OR_UPDATE_DATA,
    ApplyObject,
    Effect,
    Plugin,
    append_env,
    append_mount,
    append_volume,
    containers,
    job_name,
    object_meta,
)

NAME = "status-mounter"
VOLUME_NAME = "status-mounter"
JSON_STATUS = "jsonStatus"
# The scalar JobStatus fields (API names, case-sensitive), plus `phase` (status.state.phase).
VALUE_NAMES = (
    "pending",
    "running",
    "succeeded",
    "failed",
    "terminating",
    "unknown",
    "retryCount",
    "version",
    "minAvailable",
    "phase",
)

FLAGS = (
    Flag("mountPoint", "string", "", "directory where the status files appear; unset: no files"),
    Flag("addEnv", "bool", True, "inject the values as environment variables"),
    Flag("values", "string", "retryCount", "comma-separated status fields to expose"),
    Flag("statusJson", "bool", False, "also expose the whole status as JSON, named jsonStatus"),
    Flag("prefix", "string", "Job_", "prefix of the environment variable names"),
    Flag("containers", "string", "*", "comma-separated container names, * for all"),
)


def configmap_name(job: dict[str, Any]) -> str:
    return f"{job_name(job)}-{NAME}"


def value_names(args: ParsedArgs) -> list[str]:
    """The requested value names that are known, in the order given (unknown names are skipped)."""
    return [name for name in split_list(args.str("values")) if name in VALUE_NAMES]


def status_value(status: dict[str, Any] | None, name: str) -> str:
    """One value as file/env text: a decimal number (0 when absent), or the phase."""
    status = status or {}
    if name == "phase":
        return str((status.get("state") or {}).get("phase") or "")
    return str(int(status.get(name) or 0))


def _omit_empty(value: Any) -> Any:
    """Drop zero values from mappings, as the API's `omitempty` JSON does."""
    if isinstance(value, dict):
        kept = {key: _omit_empty(item) for key, item in value.items()}
        return {key: item for key, item in kept.items() if item not in (None, "", 0, {}, []) or item is True}
    if isinstance(value, list):
        return [_omit_empty(item) for item in value]
    return value


def json_status(status: dict[str, Any] | None) -> str:
    """The whole status as the API serialises it: compact JSON, zero fields omitted, keys sorted."""
    return json.dumps(_omit_empty(status or {}), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def status_data(args: ParsedArgs, status: dict[str, Any] | None) -> dict[str, str]:
    """Name -> text for every exposed value (files and env share it). No trailing newline."""
    data = {name: status_value(status, name) for name in value_names(args)}
    if args.bool("statusJson"):
        data[JSON_STATUS] = json_status(status)
    return data


def validate_args(args: list[str] | None) -> list[str]:
    """Problems the admission webhook reports for these arguments (a vcbus addition)."""
    parsed = parse_flags(args, FLAGS)
    problems = []
    if parsed.error:
        problems.append(parsed.error)
    unknown = [name for name in split_list(parsed.str("values")) if name not in VALUE_NAMES]
    if unknown:
        problems.append(f"unknown values [{' '.join(unknown)}], valid values are [{' '.join(VALUE_NAMES)}]")
    mount = parsed.str("mountPoint")
    if mount and not mount.startswith("/"):
        problems.append(f"mountPoint {go_quote(mount)} must be an absolute path (quotes are not removed)")
    return problems


def _mounter_args(job: dict[str, Any]) -> ParsedArgs | None:
    plugins = (job.get("spec") or {}).get("plugins") or {}
    if NAME not in plugins:
        return None
    return parse_flags(plugins.get(NAME), FLAGS)


def status_mounter_configmap(job: dict[str, Any], status: dict[str, Any] | None) -> dict[str, Any] | None:
    """The ConfigMap behind the status files of `job` for `status`, or None.

    None when the job has no status-mounter plugin or no mountPoint. Pure: the
    status projection calls it whenever the job status changes and applies the
    result (create, or replace `data` when it differs).
    """
    args = _mounter_args(job)
    if args is None or not args.str("mountPoint"):
        return None
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": object_meta(job, configmap_name(job)),
        "data": status_data(args, status),
    }


class StatusMounterPlugin(Plugin):
    NAME = NAME
    FLAGS = FLAGS

    def selected(self, container: dict[str, Any]) -> bool:
        wanted = split_list(self.args.str("containers"))
        return "*" in wanted or container.get("name") in wanted

    def on_pod_create(self, pod: dict[str, Any], job: dict[str, Any]) -> None:
        status = job.get("status") or {}
        chosen = [c for c in containers(pod) if self.selected(c)]
        if self.args.bool("addEnv"):
            prefix = self.args.str("prefix")
            env = [{"name": f"{prefix}{key}", "value": value} for key, value in status_data(self.args, status).items()]
            for container in chosen:
                append_env(container, env)
        mount = self.args.str("mountPoint")
        if not mount or not chosen:
            return
        append_volume(pod, {"name": VOLUME_NAME, "configMap": {"name": configmap_name(job), "optional": True}})
        for container in chosen:
            taken = {m.get("mountPath") for m in container.get("volumeMounts") or []}
            if mount not in taken:
                append_mount(container, {"name": VOLUME_NAME, "mountPath": mount, "readOnly": True})

    def _configmap(self, job: dict[str, Any]) -> list[Effect]:
        manifest = status_mounter_configmap(job, job.get("status"))
        if manifest is None:
            return []
        return [ApplyObject(manifest=manifest, mode=CREATE_OR_UPDATE_DATA, plugin=self.NAME)]

    def on_job_add(self, job: dict[str, Any], controlled: dict[str, str]) -> list[Effect]:
        effects = self._configmap(job)
        controlled[self.key] = self.NAME
        return effects

    def on_job_update(self, job: dict[str, Any], controlled: dict[str, str]) -> list[Effect]:
        return self._configmap(job)

    def on_job_delete(self, job: dict[str, Any], controlled: dict[str, str]) -> list[Effect]:
        controlled.pop(self.key, None)
        return []
