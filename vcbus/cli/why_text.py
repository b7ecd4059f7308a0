"""The words of `vcbus why-pending`: finding the job's report and saying what holds it back.

A job is named by its vcjob or its PodGroup (`NS/NAME`). The scheduler's `JobReport` for its
PodGroup (from the session just run, `statemachines.scheduler.reports`) holds the facts;
`why` says in one sentence what holds the job back, in the order Volcano's session would
meet the obstacles (queue state, enqueue, pods, gang validity, fit), and `explain` adds one
line per fact: the PodGroup, its queue, the gang event and condition Volcano writes, and
each task's status with the reason each node refused it.
"""

from __future__ import annotations

from typing import Any

from vcbus.cli.schedule_text import plural, resources
from vcbus.errors import UserError
from vcbus.k8s.ownership import job_owners

WAITING_PHASES = ("", "Pending", "Inqueue", "Unknown")


def find_report(result: Any, key: str) -> Any:  # SessionResult -> JobReport | None
    """The report of the job `key` (`ns/vcjob` or `ns/podgroup`), or None."""
    for report in result.reports.values():
        if key in (report.job, report.podgroup):
            return report
    return None


def not_found(snapshot: Any, result: Any, key: str, source: str) -> UserError:
    """Exit 1: why there is no report for `key`, listing the jobs there are."""
    known = sorted({r.job for r in result.reports.values()})
    listing = f"known jobs: {', '.join(known)}" if known else "no job has a PodGroup there"
    return UserError(f"job {key} not found in {source}; {listing}", exit_code=1)


def _owned_podgroup(snapshot: Any, ns: str, name: str) -> dict | None:
    """The PodGroup of vcjob ns/name (owned by it), if the snapshot has one."""
    for (kind, pg_ns, _), obj in snapshot.objects.items():
        if kind != "PodGroup" or pg_ns != ns:
            continue
        if any(owner == name for owner, _ in job_owners(obj)):  # a vcjob's, not a batch/v1 Job's of that name
            return obj
    return None


def without_report(snapshot: Any, key: str, source: str) -> str:  # a vcbus.snapshots.Snapshot
    """The answer (exit 0) for a job the session has no report of: a PodGroup (asked by its name or its
    vcjob's) whose queue does not exist, a vcjob without its PodGroup yet, a finished vcjob; else ''."""
    ns, _, name = key.partition("/")
    pg = snapshot.objects.get(("PodGroup", ns, name)) or _owned_podgroup(snapshot, ns, name)
    if pg is not None:
        queue = (pg.get("spec") or {}).get("queue") or "default"
        pg_name = pg["metadata"]["name"]
        return (f"{key} waits: its PodGroup {pg_name} is in queue {queue}, which does not exist in {source}; "
                "the scheduler skips PodGroups of missing queues.")
    done = finished_vcjob(snapshot, key)
    if done:
        return done
    if ("Job", ns, name) in snapshot.objects:
        return (f"{key} waits for its PodGroup: the vcjob has none in {source} yet (the job controller creates it "
                "first, then the pods).")
    return ""


FINISHED = ("Completed", "Failed", "Aborted", "Terminated")


def finished_vcjob(snapshot: Any, key: str) -> str:  # a vcbus.snapshots.Snapshot
    """The sentence for a vcjob that has finished (so it has no PodGroup to wait on), or ''."""
    ns, _, name = key.partition("/")
    vcjob = snapshot.objects.get(("Job", ns, name))
    phase = ((vcjob or {}).get("status") or {}).get("state", {}).get("phase", "")
    if phase in FINISHED:
        return f"{key} is not pending: the vcjob is {phase}."
    return ""


def _pending(report: Any) -> int:
    return sum(1 for t in report.tasks if t.status == "Pending")


def gang_event(report: Any) -> str:
    """The PodGroup's Warning event `<P>/<T> tasks in gang unschedulable: <FitError>` (P = Pending tasks)."""
    if report.phase not in WAITING_PHASES or not report.fit_error:
        return ""
    return f"{_pending(report)}/{report.tasks_total} tasks in gang unschedulable: {report.fit_error}"


def why(report: Any) -> str:  # a JobReport
    """One sentence: what holds the job back (or that nothing does)."""
    r = report
    if r.phase in ("Running", "Completed"):
        return f"{r.job} is not pending: its PodGroup is {r.phase}."
    if r.queue_state != "Open":
        return f"{r.job} waits: its queue {r.queue} is {r.queue_state or 'not yet Open'}; Volcano schedules only Open queues."
    if r.enqueue_message:
        return f"{r.job} waits for enqueue, which refuses it: {r.enqueue_message}"
    if r.phase in ("", "Pending") and not r.tasks_total:
        return f"{r.job} waits for enqueue to admit its PodGroup (phase {r.phase or 'Pending'})."
    if not r.tasks_total:
        return f"{r.job} has no pods yet: its PodGroup is {r.phase}, the job controller creates them next."
    if r.valid:
        return f"{r.job} is not schedulable as a gang yet: {r.valid}."
    if r.ready:
        binding = sum(1 for t in r.tasks if t.status == "Binding")
        if binding:
            return (f"{r.job} fits: this session binds {plural(binding, 'pod')}; "
                    "its PodGroup turns Running once the binds show on the pods.")
        return f"{r.job} is ready (minAvailable {r.min_member} met); its PodGroup turns Running once its pods run."
    big = next((t for t in r.tasks if t.too_big), None)
    if big is not None:
        return f"{r.job} cannot run: {big.name} is larger than any node: {big.too_big}."
    refused = [t for t in r.tasks if t.fit_error]
    if refused:
        placed = sum(1 for t in r.tasks if t.reason == "Schedulable")
        if not placed:
            return (f"{r.job} does not fit: no node can take any of its tasks ({refused[0].name}: "
                    f"{refused[0].fit_error})")
        return (f"{r.job} does not fit as a gang: {placed} of {plural(r.tasks_total, 'task')} fit, then "
                f"{len(refused)} fit no node beside them, and the gang needs {r.min_member} placed at once "
                "(minAvailable).")
    return (f"{r.job} was not placed, and no node refused it: its queue {r.queue} has no room left within its "
            "deserved share, or the session ended before reaching it.")


def explain(report: Any) -> list[str]:  # a JobReport
    """The report in words, one fact per line."""
    r = report
    lines = [why(r)]
    ns, _, pg = r.podgroup.partition("/")
    lines.append(f"  podgroup   {pg}: phase {r.phase or 'Pending'}, minMember {r.min_member}, "
                 f"{plural(r.tasks_total, 'task')}")
    lines.append(
        f"  queue      {r.queue}: {r.queue_state or 'no state'}, share {r.queue_share:.2f}, "
        f"deserved {resources(r.queue_deserved)}; allocated {resources(r.queue_allocated)}"
    )
    if r.enqueue_message:
        lines.append(f"  enqueue    {r.enqueue_message}")
    if r.valid:
        lines.append(f"  valid      {r.valid}")
    event = gang_event(r)
    if event:
        lines.append(f"  gang       {event}")
        lines.append(f"             (the PodGroup's Warning event: {_pending(r)} of the {r.tasks_total} tasks Pending)")
    if r.condition_type:
        text = f": {r.condition_message}" if r.condition_message else ""
        lines.append(f"  condition  {r.condition_type}{text}")
        short = r.condition_message.split("/", 1)[0]
        if r.condition_type == "Unschedulable" and short.isdigit():
            lines.append(f"             (the PodGroup's condition: {plural(int(short), 'more placed task')} needed for "
                         f"minAvailable {r.min_member})")
    if r.tasks:
        lines.append("  tasks")
    for t in r.tasks:
        where = f" on {t.node}" if t.node else ""
        detail = f" {t.reason}: {t.message}" if t.reason else ""
        lines.append(f"    {t.name} ({t.role or 'no role'}) {t.status}{where}{':' if detail else ''}{detail}")
        if t.too_big:
            lines.append(f"      every node: {t.too_big}")
        for node, reasons in t.node_errors.items():
            lines.append(f"      {node}: {', '.join(reasons)}")
    return lines
