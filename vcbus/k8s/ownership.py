"""Whether a command may touch an object: the actuator's defence against a forged command.

Whoever can publish to VCBUS_CMDS steers the actuator, which holds the
controller's rights on the whole cluster. NATS authorization (deploy/) keeps
publishers out; this module makes sure that even a command that got onto the
stream acts only on what vcbus controls:

- **vcjob objects.** A pod, PodGroup or other object is the job's when it carries
  an ownerReference to a `batch.volcano.sh` Job with the job key's name *and the
  uid of the live vcjob* (read from the API server at apply time: the actuator's
  own view, never the command's claim). Deletes are the one relaxation: a pod or
  PodGroup whose ownerReference names the job but whose job is gone (or is a newer
  incarnation of that name) is that name's leftover, which the garbage collector
  would delete anyway. Labels (`volcano.sh/job-name`) are not enough: anyone who
  may create a pod may label it, while an ownerReference carries the job's uid,
  which only exists once the vcjob does (Volcano's and vcbus's pods have both).
- **Creates** carry the job uid; an empty one, or one that is not the live job's,
  is refused, and so is a manifest (pod, PodGroup) for another namespace or
  without the ownerReference to that job.
- **Scheduler commands** (bind, evict, pod conditions) act only on pods whose
  `spec.schedulerName` is one the scheduler serves (`volcano`): a pod for the
  default scheduler, or any pod of kube-system, is never bound or evicted.
- **Secrets** are updated only when vcbus created them: the actuator stamps the
  annotation `MANAGED_BY` at creation, and patches with a JSON-patch `test` of it,
  so the check and the write are one atomic request that needs no read access
  to Secrets.
- **Scheduler objects that are no vcjob's.** A PodGroup or pod without a vcjob
  ownerReference (a plain workload for the `volcano` scheduler) may be named by a
  scheduler command or event: a pod only if it is for the `volcano` scheduler, a
  PodGroup only under its own key (`<ns>/<podgroup>`, as the scheduler keys it).
  One *with* a vcjob ownerReference must be the key's live vcjob's (`check_object`).
- **Events** (RecordEvent) name the key's vcjob, a pod or PodGroup checked as above
  (with the delete rule's relaxation: an ownerReference naming the vcjob is enough, so
  a leftover's events are recorded, as its deletion is allowed), or, under a cluster
  key `_/<queue>`, that Queue; no other kind (`require_event_target`).
- **Plugin objects** (ConfigMaps, Secrets, Services, NetworkPolicies) are deleted or
  patched only if their first ownerReference names the job (a ConfigMap or Secret:
  JSON-patch `test`s in the request itself, `owner_tests`, since vcbus never reads
  them; a Service or NetworkPolicy: read first), and then with a uid precondition.

A refusal raises `Refused`; the actuator logs it, counts it (`refused`), and
acks the command: it is never executed and never retried.
"""

from __future__ import annotations

from typing import Any, Callable

JOB_GROUP = "batch.volcano.sh"
MANAGED_BY = "bus.volcano.sh/managed-by"
MANAGED_BY_VALUE = "vcbus"
SCHEDULER_NAMES = ("volcano",)


class Refused(Exception):
    """A command that would act on something vcbus does not control."""


def _get(obj: Any, *path: str) -> Any:
    """A field of a dict (API JSON, camelCase) or of a kubernetes client model (snake_case)."""
    for key in path:
        if obj is None:
            return None
        if isinstance(obj, dict):
            obj = obj.get(key)
        else:
            obj = getattr(obj, _snake(key), None)
    return obj


def _snake(key: str) -> str:
    return "".join("_" + c.lower() if c.isupper() else c for c in key)


def job_owners(obj: Any) -> list[tuple[str, str]]:
    """(name, uid) of every vcjob among `obj`'s ownerReferences."""
    refs = _get(obj, "metadata", "ownerReferences") or []
    out = []
    for ref in refs:
        api_version = _get(ref, "apiVersion") or ""
        if _get(ref, "kind") == "Job" and api_version.split("/")[0] == JOB_GROUP:
            out.append((_get(ref, "name") or "", _get(ref, "uid") or ""))
    return out


def describe(kind: str, ns: str, name: str) -> str:
    return f"{kind} {ns}/{name}"


def require_owned(obj: Any, kind: str, ns: str, job_name: str, job: dict | None, *, gone_ok: bool = False) -> None:
    """`obj` must be owned by the vcjob `ns/job_name`, whose live object is `job` (None: gone).

    `gone_ok` (deletes only): an ownerReference naming the job is enough when the job is gone or
    is a newer incarnation of that name."""
    name = _get(obj, "metadata", "name") or "?"
    owners = job_owners(obj)
    if not owners:
        raise Refused(f"{describe(kind, ns, name)} belongs to no vcjob (no batch.volcano.sh Job ownerReference)")
    uid = ((job or {}).get("metadata") or {}).get("uid") or ""
    if job is not None and (job_name, uid) in owners:
        return
    if gone_ok and any(owner == job_name for owner, _ in owners):
        return  # a leftover of the job, or of an earlier incarnation of its name: deleting it is safe
    held = ", ".join(f"{n} (uid {u or '?'})" for n, u in owners)
    if job is None:
        raise Refused(f"{describe(kind, ns, name)} is owned by vcjob {held}, not by {ns}/{job_name}, the vcjob the "
                      f"command is for (which does not exist)")
    raise Refused(f"{describe(kind, ns, name)} is owned by vcjob {held}, not {ns}/{job_name} (uid {uid})")


def require_manifest(manifest: dict, kind: str, ns: str, job_name: str, job: dict) -> None:
    """A manifest to create: in the job's namespace and owned by the job."""
    meta = manifest.get("metadata") or {}
    where = meta.get("namespace") or ns
    if where != ns:
        raise Refused(f"{kind} {meta.get('name', '?')} for vcjob {ns}/{job_name} is for namespace {where}")
    if manifest.get("kind", kind) != kind:
        raise Refused(f"{kind} command for {ns}/{job_name} carries a {manifest.get('kind')} manifest")
    require_owned(manifest, kind, ns, job_name, job)


def require_schedulable(pod: Any, ns: str, scheduler_names: tuple[str, ...] = SCHEDULER_NAMES) -> None:
    """The scheduler acts only on the pods it is responsible for."""
    scheduler = _get(pod, "spec", "schedulerName") or "default-scheduler"
    if scheduler not in scheduler_names:
        name = _get(pod, "metadata", "name") or "?"
        raise Refused(
            f"pod {ns}/{name} is for scheduler {scheduler!r}, not {' or '.join(map(repr, scheduler_names))}"
        )


def check_object(obj: Any, kind: str, ns: str, key_name: str, read_job: Callable[[], dict | None],
                 plain: Callable[[], None], *, gone_ok: bool = False) -> bool:
    """An object a command or event names: one with a vcjob ownerReference must be the key's live
    vcjob's (`require_owned`); one without is judged by `plain` (raises `Refused`). False: the object
    is a leftover of the key's vcjob, which is gone, so the command is moot (the caller drops it).
    `gone_ok` (events, like deletes): an ownerReference naming the key's vcjob is enough, unread."""
    owners = job_owners(obj)
    if not owners:
        plain()
        return True
    if gone_ok and any(owner == key_name for owner, _ in owners):
        return True
    job = read_job()
    if job is None and any(owner == key_name for owner, _ in owners):
        return False
    require_owned(obj, kind, ns, key_name, job)
    return True


def require_own_key(obj: Any, kind: str, ns: str, key_name: str) -> None:
    """A PodGroup of no vcjob is named by the scheduler under its own key, `<ns>/<podgroup>`."""
    name = _get(obj, "metadata", "name") or "?"
    if name != key_name:
        raise Refused(f"{describe(kind, ns, name)} belongs to no vcjob and is not {ns}/{key_name}")


EVENT_KINDS = ("Job", "Pod", "PodGroup", "Queue", "CronJob", "JobFlow")


def require_event_target(kind: str, target: str, key_ns: str, key_name: str, *, cluster: bool) -> None:
    """What a RecordEvent may be about, before anything is read: the vcjob of its key, a pod or
    PodGroup of the key's namespace (checked once read), or under a cluster key the key's Queue."""
    if kind not in EVENT_KINDS:
        raise Refused(f"an event about a {kind} ({target}): vcbus records events only on {', '.join(EVENT_KINDS)}")
    if kind == "Job" and target != key_name:
        raise Refused(f"an event about vcjob {key_ns}/{target} under the key of vcjob {key_ns}/{key_name}")
    if kind in ("CronJob", "JobFlow") and key_name != f"{kind.lower()}:{target}":  # keyed by their object
        raise Refused(f"an event about {kind} {key_ns}/{target} under the key {key_ns}/{key_name} "
                      f"(theirs is {key_ns}/{kind.lower()}:{target})")
    if kind == "Queue" and (not cluster or target != key_name):
        raise Refused(f"an event about Queue {target} under the key {key_ns}/{key_name} (queues have `_/<queue>`)")


def owner_tests(job_name: str) -> list[dict[str, Any]]:
    """JSON-patch `test`s: the object's first ownerReference is the vcjob `job_name` (vcbus puts
    it first on everything it creates). With nothing else in the patch, the request is a read
    that needs only `patch`, and it returns the object (its uid) when the tests hold."""
    ref = "/metadata/ownerReferences/0/"
    return [
        {"op": "test", "path": ref + "apiVersion", "value": f"{JOB_GROUP}/v1alpha1"},
        {"op": "test", "path": ref + "kind", "value": "Job"},
        {"op": "test", "path": ref + "name", "value": job_name},
    ]


def managed_test() -> dict[str, Any]:
    return {"op": "test", "path": "/metadata/annotations/" + _pointer(MANAGED_BY), "value": MANAGED_BY_VALUE}


def mark_managed(manifest: dict) -> dict:
    """A copy of `manifest` with the annotation saying vcbus created it."""
    meta = dict(manifest.get("metadata") or {})
    meta["annotations"] = {**(meta.get("annotations") or {}), MANAGED_BY: MANAGED_BY_VALUE}
    return {**manifest, "metadata": meta}


def managed_patch(fields: dict[str, dict[str, Any]], tests: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """A JSON patch that sets the keys of `fields` (`{"data": {...}}`) only if the object carries
    vcbus's annotation (or passes `tests` instead); keys not named are kept, as a merge patch would keep them."""
    ops: list[dict[str, Any]] = list(tests) if tests is not None else [managed_test()]
    for field, values in fields.items():
        for key, value in values.items():
            ops.append({"op": "add", "path": f"/{field}/{_pointer(key)}", "value": value})
    return ops


def _pointer(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")
