"""Stream names, subjects and KV keys: the bus's public addressing contract (docs/events.md).

    VCBUS_K8S   vcbus.k8s.<kind>.<namespace>.<name>      watch records (kind lower-case)
                vcbus.k8s.timer.<namespace>.<name>       TIMER records the decider appends
    VCBUS_JOBS  vcbus.job.<namespace>.<name>.<event>     domain events, <event> = the event's tag
                                                         without "job.", e.g. phase.changed.v1
    VCBUS_CMDS  vcbus.cmd.<namespace>.<name>             commands for the cluster side

Cluster-scoped objects (Queue) use `_` as namespace (never a valid namespace).
A name token is escaped so that it is always exactly one subject token:
`.`, `*`, `>`, `%` and whitespace become `%XX` (Kubernetes names only ever
contain `.` of these). Wildcards therefore work per job: `vcbus.job.default.*.phase.>`
is every phase change in namespace default.

KV keys are `<namespace>.<name>` (a namespace has no dot, so the first dot
splits); keys starting with `_` are bookkeeping (`_position`).
"""

from __future__ import annotations

import re

K8S_STREAM = "VCBUS_K8S"
JOBS_STREAM = "VCBUS_JOBS"
CMDS_STREAM = "VCBUS_CMDS"
K8S_PREFIX = "vcbus.k8s"
JOBS_PREFIX = "vcbus.job"
CMDS_PREFIX = "vcbus.cmd"
STATUS_BUCKET = "vcbus_status"
HISTORY_BUCKET = "vcbus_history"
POSITION_KEY = "_position"
CLUSTER_SCOPE = "_"
TIMER_KIND = "timer"

_UNSAFE = re.compile(r"[%.*>\s]")
_ESCAPED = re.compile(r"%([0-9A-F]{2})")
_KV_KEY = re.compile(r"^[-/_=.a-zA-Z0-9]+$")


def token(text: str) -> str:
    """`text` as one subject token (escaped; never empty)."""
    if not text:
        raise ValueError("empty subject token")
    return _UNSAFE.sub(lambda m: f"%{ord(m.group()):02X}", text)


def untoken(tok: str) -> str:
    return _ESCAPED.sub(lambda m: chr(int(m.group(1), 16)), tok)


def split_job(job: str) -> tuple[str, str]:
    """`"<namespace>/<name>"` -> (namespace, name)."""
    ns, sep, name = job.partition("/")
    if not sep or not ns or not name:
        raise ValueError(f"not a job key (NAMESPACE/NAME): {job!r}")
    return ns, name


def k8s_subject(kind: str, namespace: str, name: str) -> str:
    return f"{K8S_PREFIX}.{token(kind.lower())}.{token(namespace or CLUSTER_SCOPE)}.{token(name)}"


def timer_subject(job: str) -> str:
    ns, name = split_job(job)
    return f"{K8S_PREFIX}.{TIMER_KIND}.{token(ns)}.{token(name)}"


def event_subtype(tag: str) -> str:
    """The subject tail of an event tag: `job.phase.changed.v1` -> `phase.changed.v1`."""
    return tag[4:] if tag.startswith("job.") else tag


def event_subject(job: str, tag: str) -> str:
    ns, name = split_job(job)
    return f"{JOBS_PREFIX}.{token(ns)}.{token(name)}.{event_subtype(tag)}"


def command_subject(job: str) -> str:
    ns, name = split_job(job)
    return f"{CMDS_PREFIX}.{token(ns)}.{token(name)}"


def job_of_subject(subject: str) -> str:
    """The job key of a `vcbus.job.*` or `vcbus.cmd.*` subject."""
    parts = subject.split(".")
    if len(parts) < 4:
        raise ValueError(f"not a job subject: {subject!r}")
    return f"{untoken(parts[2])}/{untoken(parts[3])}"


def event_filter(*, namespace: str | None = None, name: str | None = None, types: tuple[str, ...] = ()) -> list[str]:
    """Subject filters on VCBUS_JOBS for a namespace or job (None: all), and event types.

    A type may be a tag (`job.phase.changed.v1`), a CloudEvents type
    (`sh.volcano.job.phase.changed.v1`) or a prefix of the tail (`phase.changed`, `timer`).
    """
    if name is not None and namespace is None:
        raise ValueError("a job filter needs its namespace")
    ns = token(namespace) if namespace else "*"
    nm = token(name) if name else "*"
    base = f"{JOBS_PREFIX}.{ns}.{nm}"
    if not types:
        return [f"{base}.>"]
    out = []
    for t in types:
        tail = type_tail(t)
        out.append(f"{base}.{tail}" if re.search(r"\.v\d+$", tail) else f"{base}.{tail}.>")
    return out


def type_tail(text: str) -> str:
    t = text.strip()
    for prefix in ("sh.volcano.", "job."):
        if t.startswith(prefix):
            t = t[len(prefix):]
    if not t or any(c in t for c in " *>") or t.startswith(".") or t.endswith(".") or ".." in t:
        raise ValueError(f"not an event type: {text!r}")
    return t


def command_filter(*, namespace: str | None = None, name: str | None = None) -> list[str]:
    ns = token(namespace) if namespace else "*"
    nm = token(name) if name else "*"
    return [f"{CMDS_PREFIX}.{ns}.{nm}"]


def kv_key(job: str) -> str:
    ns, name = split_job(job)
    key = f"{ns}.{name}"
    if not _KV_KEY.match(key):
        raise ValueError(f"job {job!r} cannot be a KV key")
    return key


def job_of_key(key: str) -> str:
    ns, _, name = key.partition(".")
    return f"{ns}/{name}"
