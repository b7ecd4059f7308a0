"""The Kubernetes PodTemplate validation that the job webhook runs per task (step 4f), a subset.

Upstream calls Kubernetes' own `ValidatePodTemplate` (after defaulting) with
object name = task name and namespace = job namespace, then (step 4g) checks
integer CPU requests when `topologyPolicy` is set. This module restates the
checks users actually trip over, with Kubernetes' paths and wording, in
Kubernetes' order:

- metadata: name (DNS-1123 subdomain), namespace; template labels;
- volumes: name (required, DNS label, unique), at most one volume type
  (none is defaulted to emptyDir, as Kubernetes defaulting does first);
- containers and initContainers: at least one container; name (required,
  DNS label, unique across both lists); image required; ports (name, number,
  protocol); env names; volumeMounts (known volume, mountPath, unique);
  imagePullPolicy; resources (non-negative, integer where required,
  requests <= limits, requests == limits for extended resources);
- restartPolicy, dnsPolicy, hostname/subdomain;
- pod-level `resources` when the PodLevelResources gate is on (the default):
  requests <= limits, requests >= the containers' aggregate, container
  limits <= pod limits.

Not restated (the API server still checks them when the pods are created):
security contexts, probes, lifecycle, affinity, tolerations, DNS config,
topology spread, per-volume-type fields, env valueFrom details.
"""

from __future__ import annotations

import re
from typing import Any

from statemachines.admission.fields import (
    FieldError,
    duplicate,
    forbidden,
    invalid,
    is_dns1123_label,
    is_dns1123_subdomain,
    is_label_value,
    is_qualified_name,
    not_found,
    not_supported,
    regex_error,
    required,
)
from statemachines.admission.quantity import Quantity, QuantityError
from statemachines.admission.resources import is_native, pod_totals

VOLUME_TYPES = (
    "hostPath", "emptyDir", "gcePersistentDisk", "awsElasticBlockStore", "gitRepo", "secret", "nfs", "iscsi",
    "glusterfs", "persistentVolumeClaim", "rbd", "flexVolume", "cinder", "cephfs", "flocker", "downwardAPI", "fc",
    "azureFile", "configMap", "vsphereVolume", "quobyte", "azureDisk", "photonPersistentDisk", "projected",
    "portworxVolume", "scaleIO", "storageos", "csi", "ephemeral", "image",
)  # fmt: skip
_ENV_NAME_FMT = "[-._a-zA-Z][-._a-zA-Z0-9]*"
_ENV_NAME_MSG = (
    "a valid environment variable name must consist of alphabetic characters, digits, '_', '-', or '.', "
    "and must not start with a digit"
)
_STANDARD_CONTAINER_RESOURCES = ("cpu", "memory", "ephemeral-storage")


def _dns_label(value: str, path: str) -> list[FieldError]:
    return [invalid(path, value, msg) for msg in is_dns1123_label(value)]


def _port_name_errors(name: str) -> list[str]:
    errs = []
    if len(name) > 15:
        errs.append("must be no more than 15 bytes")
    if not re.fullmatch("[-a-z0-9]+", name):
        errs.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if not re.search("[a-z]", name):
        errs.append("must contain at least one letter (a-z)")
    if "--" in name:
        errs.append("must not contain consecutive hyphens")
    if name and (name[0] == "-" or name[-1] == "-"):
        errs.append("must not begin or end with a hyphen")
    return errs


def _ports(ports: list[dict[str, Any]], path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    names: set[str] = set()
    for i, port in enumerate(ports):
        here = f"{path}[{i}]"
        name = str(port.get("name") or "")
        if name:
            msgs = _port_name_errors(name)
            if msgs:
                errs += [invalid(f"{here}.name", name, msg) for msg in msgs]
            elif name in names:
                errs.append(duplicate(f"{here}.name", name))
            names.add(name)
        for key in ("containerPort", "hostPort"):
            number = int(port.get(key) or 0)
            if number == 0:
                if key == "containerPort":
                    errs.append(required(f"{here}.{key}"))
            elif not 1 <= number <= 65535:
                errs.append(invalid(f"{here}.{key}", number, "must be between 1 and 65535, inclusive"))
        protocol = port.get("protocol") or "TCP"  # defaulted
        if protocol not in ("SCTP", "TCP", "UDP"):
            errs.append(not_supported(f"{here}.protocol", protocol, ("SCTP", "TCP", "UDP")))
    return errs


def _env(env: list[dict[str, Any]], path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    for i, var in enumerate(env):
        name = str(var.get("name") or "")
        here = f"{path}[{i}].name"
        if not name:
            errs.append(required(here))
        if not re.fullmatch(_ENV_NAME_FMT, name):
            errs.append(invalid(here, name, regex_error(_ENV_NAME_MSG, _ENV_NAME_FMT, "my.env-name", "MY_ENV.NAME", "MyEnvName1")))
        if name == ".":
            errs.append(invalid(here, name, "must not be '.'"))
        elif name == "..":
            errs.append(invalid(here, name, "must not be '..'"))
        elif name.startswith(".."):
            errs.append(invalid(here, name, "must not start with '..'"))
    return errs


def _mounts(mounts: list[dict[str, Any]], volumes: set[str], path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    seen: set[str] = set()
    for i, mount in enumerate(mounts):
        here = f"{path}[{i}]"
        name, mount_path = str(mount.get("name") or ""), str(mount.get("mountPath") or "")
        if not name:
            errs.append(required(f"{here}.name"))
        if name not in volumes:
            errs.append(not_found(f"{here}.name", name))
        if not mount_path:
            errs.append(required(f"{here}.mountPath"))
        if mount_path in seen:
            errs.append(invalid(f"{here}.mountPath", mount_path, "must be unique"))
        seen.add(mount_path)
    return errs


def _quantities(raw: dict[str, Any] | None, path: str, errs: list[FieldError]) -> dict[str, Quantity]:
    result = {}
    for name, value in sorted((raw or {}).items()):
        try:
            quantity = Quantity.parse(value)
        except QuantityError:
            errs.append(invalid(f"{path}[{name}]", str(value), "quantities must match the regular expression "
                                "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"))
            continue
        if quantity.sign() < 0:
            errs.append(invalid(f"{path}[{name}]", str(quantity), "must be greater than or equal to 0"))
        elif not is_native(name) and quantity.milli_value() % 1000:
            errs.append(invalid(f"{path}[{name}]", str(quantity), "must be an integer"))
        result[name] = quantity
    return result


def _overcommit(name: str) -> bool:
    return is_native(name) and not name.startswith("hugepages-")


def _resources(resources: dict[str, Any], path: str, *, container: bool) -> list[FieldError]:
    errs: list[FieldError] = []
    limits = _quantities(resources.get("limits"), f"{path}.limits", errs)
    requests = _quantities(resources.get("requests"), f"{path}.requests", errs)
    if container:
        for kind, listed in (("limits", limits), ("requests", requests)):
            for name in listed:
                if is_native(name) and name not in _STANDARD_CONTAINER_RESOURCES and not name.startswith("hugepages-"):
                    errs.append(invalid(f"{path}.{kind}[{name}]", name, "must be a standard resource for containers"))
    for name, request in requests.items():
        limit = limits.get(name)
        if limit is not None:
            if request != limit and not _overcommit(name):
                errs.append(invalid(f"{path}.requests", str(request), f"must be equal to {name} limit of {limit}"))
            elif limit < request:
                errs.append(
                    invalid(f"{path}.requests", str(request), f"must be less than or equal to {name} limit of {limit}")
                )
        elif not _overcommit(name):
            errs.append(required(f"{path}.limits", "Limit must be set for non overcommitable resources"))
    return errs


def _containers(
    items: list[dict[str, Any]], path: str, volumes: set[str], names: set[str], *, init: bool
) -> list[FieldError]:
    errs: list[FieldError] = []
    if not items and not init:
        return [required(path)]
    for i, ctr in enumerate(items):
        here = f"{path}[{i}]"
        name = str(ctr.get("name") or "")
        errs += [required(f"{here}.name")] if not name else _dns_label(name, f"{here}.name")
        if not ctr.get("image"):
            errs.append(required(f"{here}.image"))
        errs += _ports(list(ctr.get("ports") or []), f"{here}.ports")
        errs += _env(list(ctr.get("env") or []), f"{here}.env")
        errs += _mounts(list(ctr.get("volumeMounts") or []), volumes, f"{here}.volumeMounts")
        policy = ctr.get("imagePullPolicy")
        if policy and policy not in ("Always", "IfNotPresent", "Never"):
            errs.append(not_supported(f"{here}.imagePullPolicy", policy, ("Always", "IfNotPresent", "Never")))
        errs += _resources(ctr.get("resources") or {}, f"{here}.resources", container=True)
        if name in names:
            errs.append(duplicate(f"{here}.name", name))
        names.add(name)
    return errs


def _volumes(volumes: list[dict[str, Any]], path: str) -> tuple[set[str], list[FieldError]]:
    errs: list[FieldError] = []
    valid: set[str] = set()
    for i, volume in enumerate(volumes):
        here = f"{path}[{i}]"
        found: list[FieldError] = []
        types = [t for t in VOLUME_TYPES if volume.get(t) is not None]  # none: defaulted to emptyDir
        if len(types) > 1:
            found.append(forbidden(f"{here}.{types[1]}", "may not specify more than 1 volume type"))
        name = str(volume.get("name") or "")
        found += [required(f"{here}.name")] if not name else _dns_label(name, f"{here}.name")
        if name in valid:
            found.append(duplicate(f"{here}.name", name))
        if found:
            errs += found
        else:
            valid.add(name)
    return valid, errs


def _pod_resources(spec: dict[str, Any], path: str) -> list[FieldError]:
    resources = spec.get("resources")
    if resources is None:
        return []
    errs = _resources(resources, path, container=False)
    pod_requests = _quantities(resources.get("requests"), f"{path}.requests", [])
    pod_limits = _quantities(resources.get("limits"), f"{path}.limits", [])
    for name, total in sorted(pod_totals(spec, "requests", pod_level=False).items()):
        wanted = pod_requests.get(name)
        if wanted is not None and wanted.sign() and wanted < total:
            errs.append(invalid(f"{path}.requests[{name}]", str(wanted),
                                f"must be greater than or equal to aggregate container requests of {total}"))
    for i, ctr in enumerate(spec.get("containers") or []):
        for name, limit in sorted(_quantities((ctr.get("resources") or {}).get("limits"), "", []).items()):
            pod_limit = pod_limits.get(name)
            if pod_limit is not None and pod_limit < limit:
                errs.append(invalid(f"{path}.containers[{i}][{name}].limits", str(limit),
                                    f"must be less than or equal to pod limits of {pod_limit}"))
    return errs


def validate_pod_template(
    template: dict[str, Any], *, name: str, namespace: str, pod_level_resources: bool = True
) -> list[FieldError]:
    """Field errors of a task template validated as PodTemplate `<namespace>/<name>`."""
    errs: list[FieldError] = []
    if not name:
        errs.append(required("metadata.name", "name or generateName is required"))
    else:
        errs += [invalid("metadata.name", name, msg) for msg in is_dns1123_subdomain(name)]
    if not namespace:
        errs.append(required("metadata.namespace"))
    else:
        errs += [invalid("metadata.namespace", namespace, msg) for msg in is_dns1123_label(namespace)]
    labels = (template.get("metadata") or {}).get("labels") or {}
    for key, value in labels.items():
        errs += [invalid("template.labels", key, msg) for msg in is_qualified_name(key)]
        errs += [invalid("template.labels", value, msg) for msg in is_label_value(str(value))]
    spec = template.get("spec") or {}
    path = "template.spec"
    volumes, volume_errs = _volumes(list(spec.get("volumes") or []), f"{path}.volumes")
    errs += volume_errs
    names: set[str] = set()
    errs += _containers(list(spec.get("containers") or []), f"{path}.containers", volumes, names, init=False)
    errs += _containers(list(spec.get("initContainers") or []), f"{path}.initContainers", volumes, names, init=True)
    restart = spec.get("restartPolicy") or "Always"
    if restart not in ("Always", "OnFailure", "Never"):
        errs.append(not_supported(f"{path}.restartPolicy", restart, ("Always", "OnFailure", "Never")))
    dns = spec.get("dnsPolicy") or "ClusterFirst"
    if dns not in ("ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"):
        errs.append(not_supported(f"{path}.dnsPolicy", dns, ("ClusterFirstWithHostNet", "ClusterFirst", "Default", "None")))
    for key in ("hostname", "subdomain"):
        if spec.get(key):
            errs += _dns_label(str(spec[key]), f"{path}.{key}")
    if pod_level_resources:
        errs += _pod_resources(spec, f"{path}.resources")
    return errs


def topology_cpu_error(task: dict[str, Any], position: int) -> str:
    """Step 4g: with a topologyPolicy other than none, every container needs an integer, non-zero CPU request."""
    policy = task.get("topologyPolicy") or ""
    if policy in ("", "none"):
        return ""
    spec = (task.get("template") or {}).get("spec") or {}
    for k, ctr in enumerate(list(spec.get("containers") or []) + list(spec.get("initContainers") or [])):
        resources = ctr.get("resources") or {}
        requests = resources.get("requests") or resources.get("limits") or {}
        try:
            cpu = Quantity.parse(requests["cpu"]) if "cpu" in requests else Quantity(0)
        except QuantityError:
            cpu = Quantity(0)
        if cpu.ceil_value() * 1000 != cpu.milli_value() or cpu.ceil_value() == 0:
            return f"the cpu request isn't an integer in spec.task[{position}] container[{k}]."
    return ""
