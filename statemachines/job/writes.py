"""The job controller's writes besides its pods: the status, its bookkeeping, the PodGroup.

- `status_function` applies the phase's status function (the job machine's
  transition for the handling's trigger) and says which guard decided it;
- `write_status` is UpdateJobStatus: the new status becomes the job's, with
  `StatusChanged` and, when the phase moved, `PhaseChanged` and one more pass;
- `bookkeep_plugins` / `bookkeep_volumes` keep `status.controlledResources`
  (and create the generated PVCs once, §6.4);
- `ensure_podgroup` is createOrUpdatePodGroup (§6.3), skipped on the sync that
  spends the last retry (`last_retry_spent`);
- `record_podgroup_event` is recordPodGroupEvent: the Warning PodGroupPending.

Used by syncJob (`sync.py`) and killJob / killTarget (`kill.py`).
"""

from __future__ import annotations

import msgspec

from statemachines import outputs as o
from statemachines.cache import JobEntry, PodGroupState
from statemachines.job.causes import guard_text
from statemachines.job.context import JobContext
from statemachines.job.handling import Check, Handling, retries_exhausted, total_replicas
from statemachines.job.machine import HANDLERS, fire_why
from statemachines.manifests.pod import pvc_name
from statemachines.model.status import JobStatus
from statemachines.model.vocabulary import Phase

_PENDING = Phase.PENDING.value


def status_function(entry: JobEntry, status: JobStatus, handling: Handling, facts: SpecFacts) -> str | None:
    """Apply the phase's status function to `status`; when it reports a transition, the guard
    that decided it in words ("" for an unguarded trigger such as restart), else None. `facts`:
    the job's `spec_facts`, which the caller (a sync or a kill) has already."""
    if handling.trigger is None:
        return None
    if handling.retry:
        status.retry_count += 1
    phase = status.state.phase
    source = phase if phase in HANDLERS else _PENDING
    check = Check(facts.spec, status, facts.replicas)  # the spec's total replicas, summed once per spec
    dest, guards = fire_why(source, handling.trigger, check)
    if dest is None:
        return None
    status.state.phase = dest
    return "; ".join(guard_text(fn.__name__, want, check) for fn, want in guards)


def record_podgroup_event(ctx: JobContext, entry: JobEntry, pg: PodGroupState) -> None:
    """`recordPodGroupEvent` (pkg/controllers/job/job_controller_actions.go), at every sync that finds
    the PodGroup: a Warning PodGroupPending on the vcjob while the PodGroup's latest True condition is
    not Scheduled. Volcano records it at every such sync and leaves the repeats to Kubernetes' event
    aggregation; vcbus says it again only when its text changes, or after the condition was Scheduled
    (or gone) at a sync in between (`PodGroupState.pending_said`)."""
    pending = pg.pending
    said, pg.pending_said = pg.pending_said, pending
    if pending is not None and pending != said:
        kind, message = pending
        ctx.emit(o.RecordEvent, entry, event_type="Warning", reason="PodGroupPending",
                 message=f"PodGroup {entry.namespace}:{entry.name} {kind.lower()}, reason: {message}")


def write_status(ctx: JobContext, entry: JobEntry, status: JobStatus, action: str, guard: str | None = None) -> None:
    """UpdateJobStatus: the new status becomes the job's; a phase change asks for one more pass.

    `guard` is what `status_function` said about the move; with the request being
    handled (`ctx.cause`) it makes the `PhaseChanged.cause`."""
    old = entry.status
    old_phase = old.state.phase if old is not None else ""
    entry.status = status
    versions = entry.versions
    versions.add((status.state.phase, status.version))
    if len(versions) > 128:  # bounded: keep the 64 latest
        entry.versions = set(sorted(versions, key=lambda pv: pv[1])[-64:])
    if old is None or old_phase != status.state.phase or old.retry_count != status.retry_count:
        trail = entry.trail
        trail.append((status.state.phase, status.retry_count))
        if len(trail) > 64:
            del trail[:-64]
    # built by their keywords (`JobContext.emit`): a pair of these for most pod records
    out, key, seq, now = ctx.out, entry.key, ctx.seq, ctx.now
    meta = entry.job.metadata if entry.job is not None else None  # the vcjob it was computed from
    out.append(o.UpdateJobStatus(job=key, seq=seq, time=now, status=status, job_version=status.version,
                                 uid=meta.uid if meta else "", resource_version=meta.resource_version if meta else ""))
    out.append(o.StatusChanged(job=key, seq=seq, time=now, status=status))
    if status.state.phase != old_phase:
        out.append(  # (by keywords as well)
            o.PhaseChanged(
                job=key,
                seq=seq,
                time=now,
                from_phase=old_phase,
                to_phase=status.state.phase,
                action=action,
                retry_count=status.retry_count,
                version=status.version,
                cause=ctx.cause(entry, guard or ""),
            )
        )
        entry.followup = True


class SpecFacts:
    """What the controller derives from one job spec object, made once (`spec_facts`)."""

    __slots__ = (
        "spec", "plugins", "plugin_resources", "plugins_booked", "wanted", "volumes", "volumes_read", "replicas",
        "resolutions",
    )

    def __init__(self, entry: JobEntry) -> None:
        spec = self.spec = entry.job.spec  # type: ignore[union-attr]  # an entry being synced has its job
        self.plugins = sorted((spec.plugins or {}).keys())
        # controlledResources entries the plugins book: ("plugin-<name>", name)
        self.plugin_resources = [(f"plugin-{name}", name) for name in self.plugins]
        # the last controlledResources map found to book them all (sync_job): a map is never changed
        # in place (`bookkeep_plugins` makes a new one), so the same object needs no second look
        self.plugins_booked: object = ()  # none yet (not None: a status without the map has that)
        self.wanted = (spec.min_available, _min_task_member(entry), spec.priority_class_name)  # PodGroup spec
        self.volumes: list[dict] | None = None  # spec.volumes decoded, on first need (bookkeep_volumes)
        self.volumes_read = False
        self.replicas = total_replicas(spec)  # what most guards compare with (`Check.replicas`)
        self.resolutions: dict = {}  # the policies' answers for this spec (`statemachines.policies.resolve`'s memo)


def spec_facts(entry: JobEntry) -> SpecFacts:
    """The facts of the entry's job spec, derived once per spec object.

    Kept on the entry (`JobEntry.facts`), so they live as long as the job; the
    outputs that carry them share them and never mutate them."""
    facts = entry.facts
    if facts is None or facts.spec is not entry.job.spec:  # type: ignore[union-attr]  # an entry being synced has its job
        facts = entry.facts = SpecFacts(entry)
    return facts


def plugin_names(entry: JobEntry) -> list[str]:
    return spec_facts(entry).plugins


def bookkeep_plugins(status: JobStatus, plugins: list[str], *, add: bool) -> None:
    resources = dict(status.controlled_resources or {})
    for name in plugins:
        if add:
            resources[f"plugin-{name}"] = name
        else:
            resources.pop(f"plugin-{name}", None)
    status.controlled_resources = resources or None


_volumes = msgspec.json.Decoder(list[dict] | None)


def bookkeep_volumes(ctx: JobContext, entry: JobEntry, status: JobStatus) -> None:
    """PVC handling at initiation (§6.4): book every claim, create the generated ones once.

    A volume without `volumeClaimName` gets the controller's generated name, made
    deterministic here (`statemachines.manifests.pod.pvc_name`, the name the pods mount),
    and its PVC is created from `volumeClaim`. Volcano also writes that name back
    into the job spec; vcbus does not write specs (docs/fidelity.md).
    """
    job = entry.job
    assert job is not None
    volumes = job_volumes(entry)
    if not volumes:
        return
    resources = dict(status.controlled_resources or {})
    ident = {"metadata": {"name": job.metadata.name, "uid": job.metadata.uid}}
    for index, volume in enumerate(volumes):
        claim = volume.get("volumeClaimName") or pvc_name(ident, index)
        resources[f"volume-pvc-{claim}"] = claim
        spec = volume.get("volumeClaim")
        if not volume.get("volumeClaimName") and spec is not None and claim not in entry.pvcs:
            ctx.emit(o.CreatePVC, entry, name=claim, job_uid=job.metadata.uid, claim=spec)
            entry.pvcs.add(claim)
    status.controlled_resources = resources or None


def job_volumes(entry: JobEntry) -> list[dict] | None:
    """The job spec's `volumes`, decoded once per spec object."""
    facts = spec_facts(entry)
    if not facts.volumes_read:
        facts.volumes = _volumes.decode(entry.job.spec.volumes)  # type: ignore[union-attr]  # an entry being synced has its job
        facts.volumes_read = True
    return facts.volumes


def _min_task_member(entry: JobEntry) -> dict[str, int]:
    out = {}
    for task in entry.job.spec.tasks:  # type: ignore[union-attr]  # an entry being synced has its job
        pp = task.partition_policy
        if task.min_available is not None:
            out[task.name] = task.min_available
        elif pp is not None and pp.min_partitions and pp.partition_size:
            out[task.name] = pp.min_partitions * pp.partition_size
        else:
            out[task.name] = task.replicas
    return out


def ensure_podgroup(ctx: JobContext, entry: JobEntry) -> None:
    """createOrUpdatePodGroup (§6.3): create it when we know of none, else update what changed."""
    job = entry.job
    assert job is not None
    wanted = spec_facts(entry).wanted
    pg = entry.pg
    if pg is None:
        name = f"{job.metadata.name}-{job.metadata.uid}"
        ctx.emit(
            o.CreatePodGroup,
            entry,
            name=name,
            job_uid=job.metadata.uid,
            min_member=wanted[0],
            min_task_member=wanted[1],
            queue=job.spec.queue,
            priority_class_name=wanted[2],
            podgroup=ctx.render_podgroup(entry),
        )
        entry.pg = PodGroupState(name)
        entry.pg.spec = wanted
    elif pg.spec is not None and pg.spec is not wanted:
        if pg.spec != wanted:
            # Only what Volcano updates: minMember, minTaskMember, priorityClassName (§6.3).
            ctx.emit(
                o.UpdatePodGroup,
                entry,
                name=pg.name,
                min_member=wanted[0],
                min_task_member=wanted[1],
                priority_class_name=wanted[2],
            )
        pg.spec = wanted  # the equal tuple itself: the next sync sees at once that nothing is to be done


def last_retry_spent(entry: JobEntry, status: JobStatus, handling: Handling) -> bool:
    """Restarting's sync on the failure that exhausted maxRetry: the job goes to Failed, so no PodGroup.

    Volcano's syncJob runs createOrUpdatePodGroup before `restartingUpdateStatus` checks
    maxRetry, but in a cluster the PodGroup lister still holds the one KillJob just deleted,
    so nothing is recreated and the job goes straight to Failed (what a real cluster showed).
    vcbus's cache reflects its own deletion at once, so it decides the recreation only after
    the maxRetry check instead (docs/fidelity.md)."""
    return handling.trigger == "restarting_check" and retries_exhausted(Check(entry.job.spec, status))  # type: ignore[union-attr]  # an entry being synced has its job
