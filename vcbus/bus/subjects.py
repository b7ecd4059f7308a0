"""Stream names, subjects and KV keys: the bus's public addressing contract (docs/events.md).

    VCBUS_K8S   vcbus.k8s.<kind>.<namespace>.<name>      watch records (kind lower-case)
                vcbus.k8s.timer.<namespace>.<name>       TIMER records the decider appends
                vcbus.k8s.refusal.<namespace>.<name>     REFUSED records the actuator appends
    VCBUS_JOBS  vcbus.job.<namespace>.<name>.<event>     domain events, <event> = the event's tag
                                                         without "job.", e.g. phase.changed.v1
    VCBUS_CMDS  vcbus.cmd.<namespace>.<name>             commands for the cluster side

Cluster-scoped objects (Queue) use `_` as namespace (never a valid namespace).
A name token is escaped so that it is always exactly one subject token:
`.`, `*`, `>`, `%`, whitespace and control characters become `%XX`, one per
UTF-8 byte (Kubernetes names only ever contain `.` of these). Wildcards
therefore work per job: `vcbus.job.default.*.phase.>` is every phase change in
namespace default.

KV keys are `<namespace>.<name>`, escaped so that no two jobs share a key (the
split is injective): every character outside `[-/_.a-zA-Z0-9]` (and `=`) becomes
`=XX`, one per UTF-8 byte; in the namespace `.` is escaped too (`=2E`), so
the first dot splits (`team.a/x` is `team=2Ea.x`, `team/a.x` is `team.a.x`);
in the name a dot that would make an empty subject token (first, last, or next
to another dot) is escaped. Every valid Kubernetes name keeps the key it always
had (`default.resnet-dist-train`). Keys starting with `_` are bookkeeping
(`_position`). A name that cannot be represented (empty, or longer than
`MAX_TOKEN` bytes once escaped) raises `Unaddressable` (a ValueError): the
services report such records as poison, they never skip them silently.
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
REFUSAL_KIND = "refusal"

MAX_TOKEN = 1024
"""Most bytes of one escaped subject token or KV key part (a Kubernetes name is at most 253)."""

_UNSAFE = re.compile(r"[%.*>\s\x00-\x1f\x7f]")
_ESCAPED = re.compile(r"(?:%[0-9A-F]{2})+")
_KV_KEY = re.compile(r"^[-/_=.a-zA-Z0-9]+$")
_KV_SAFE = frozenset("-/_.abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
_KV_ESCAPED = re.compile(r"(?:=[0-9A-F]{2})+")


class Unaddressable(ValueError):
    """A name no subject token or KV key can represent (empty, or too long)."""


def _bytes_of(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def _unescape(run: str, mark: str) -> str:
    try:
        return bytes.fromhex(run.replace(mark, "")).decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:  # not something `token`/`kv_key` wrote: leave it as it is
        return run


def token(text: str) -> str:
    """`text` as one subject token (escaped; never empty)."""
    if not text:
        raise Unaddressable("empty subject token")
    tok = _UNSAFE.sub(lambda m: "".join(f"%{b:02X}" for b in _bytes_of(m.group())), text)
    if len(_bytes_of(tok)) > MAX_TOKEN:
        raise Unaddressable(f"name {text[:40]!r}... is longer than {MAX_TOKEN} bytes once escaped")
    return tok


def untoken(tok: str) -> str:
    return _ESCAPED.sub(lambda m: _unescape(m.group(), "%"), tok)


def header_value(text: str) -> str:
    """`text` fit for a NATS header value: `%` and control characters (CR, LF, NUL...) as `%XX`."""
    return re.sub(r"[%\x00-\x1f\x7f]", lambda m: f"%{ord(m.group()):02X}", text)


def split_job(job: str) -> tuple[str, str]:
    """`"<namespace>/<name>"` -> (namespace, name)."""
    ns, sep, name = job.partition("/")
    if not sep or not ns or not name:
        raise Unaddressable(f"not a job key (NAMESPACE/NAME): {job!r}")
    return ns, name


def k8s_subject(kind: str, namespace: str, name: str) -> str:
    return f"{K8S_PREFIX}.{token(kind.lower())}.{token(namespace or CLUSTER_SCOPE)}.{token(name)}"


def timer_subject(job: str) -> str:
    ns, name = split_job(job)
    return f"{K8S_PREFIX}.{TIMER_KIND}.{token(ns)}.{token(name)}"


def refusal_subject(job: str) -> str:
    ns, name = split_job(job)
    return f"{K8S_PREFIX}.{REFUSAL_KIND}.{token(ns)}.{token(name)}"


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


def _kv_part(text: str, *, dots: bool) -> str:
    out = []
    last = len(text) - 1
    for i, char in enumerate(text):
        if char in _KV_SAFE and (
            char != "." or (dots and 0 < i < last and text[i - 1] != "." and text[i + 1] != ".")
        ):
            out.append(char)
        else:
            out.extend(f"={b:02X}" for b in _bytes_of(char))
    part = "".join(out)
    if len(part) > MAX_TOKEN:
        raise Unaddressable(f"name {text[:40]!r}... is longer than {MAX_TOKEN} bytes once escaped")
    return part


def kv_key(job: str) -> str:
    """The KV key of `job` (`<namespace>/<name>`): injective, see the module docstring."""
    ns, name = split_job(job)
    key = f"{_kv_part(ns, dots=False)}.{_kv_part(name, dots=True)}"
    if not _KV_KEY.match(key):  # cannot happen: every other character is escaped
        raise Unaddressable(f"job {job!r} cannot be a KV key")
    return key


def job_of_key(key: str) -> str:
    ns, _, name = key.partition(".")
    return f"{_unkv(ns)}/{_unkv(name)}"


def _unkv(part: str) -> str:
    return _KV_ESCAPED.sub(lambda m: _unescape(m.group(), "="), part)
