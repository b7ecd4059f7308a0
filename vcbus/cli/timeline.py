"""Rendering a replay report for a person: a timeline and a status table per job."""

from __future__ import annotations

import re
import sys
from typing import Iterator

from rich.text import Text

from vcbus.cli.textcols import style, table, use_color, width_for

PHASE_STYLE = {
    "Pending": "yellow",
    "Running": "green",
    "Restarting": "magenta",
    "Completing": "cyan",
    "Completed": "bold green",
    "Aborting": "red",
    "Aborted": "bold red",
    "Terminating": "red",
    "Terminated": "bold red",
    "Failed": "bold red",
}

STATUS_FIELDS = (
    "minAvailable",
    "pending",
    "running",
    "succeeded",
    "failed",
    "terminating",
    "unknown",
    "retryCount",
    "version",
    "runningDuration",
)


def _phase(text: str) -> Text:
    return Text(text or '""', style=PHASE_STYLE.get(text, ""))


def _summarize_commands(cmds: list[dict]) -> list[str]:
    out: list[str] = []
    created = [c["name"] for c in cmds if c["command"] == "CreatePod"]
    deleted = [c["name"] for c in cmds if c["command"] == "DeletePod"]
    if created:
        out.append(f"create pods {', '.join(created)}")
    if deleted:
        out.append(f"delete pods {', '.join(deleted)}")
    for c in cmds:
        if c["command"] in ("CreatePodGroup", "DeletePodGroup", "UpdatePodGroup"):
            out.append(f"{c['command']} {c['name']}")
        elif c["command"] == "DeleteBusCommand":
            out.append(f"consume Command {c['name']}")
    return out


_LABEL = re.compile(r"^(?:job\[(\d+)\]|task\[([^\]]*)\]\[(\d+)\])")


def _policy_label(line: str) -> str:
    """`job[0]: ...` as `job policy 1: ...`, `task[w][1]: ...` as `task w policy 2: ...` (1-based)."""
    m = _LABEL.match(line)
    if m is None:
        return line
    if m.group(1) is not None:
        return f"job policy {int(m.group(1)) + 1}{line[m.end():]}"
    return f"task {m.group(2)} policy {int(m.group(3)) + 1}{line[m.end():]}"


Row = tuple[int, int, str, str, Text]  # seq, order within the record, time, what happened, phase


def action_row(a: dict, *, explain: bool, all_actions: bool) -> Row | None:
    """A resolution. Default SyncJob ones only with --all-actions, or with --explain when some
    policy was considered and did not match (the reasoning rows)."""
    if a["action"] == "SyncJob" and not all_actions and not a.get("delay"):
        if not (explain and a.get("explain")):
            return None
    what = a["event"] or "PodGroup phase change"
    if a["event"] == "PodFailed":
        what += f" (exit code {a['exitCode']})"
    if a["pod"]:
        what += f" pod {a['pod']}"
    elif a["task"]:
        what += f" task {a['task']}"
    what += f" -> {a['action']}"
    if a.get("policyText"):  # the policy by its content; its text carries the timeout
        what += f"  [{'timer: ' if a['policy'].startswith('timer:') else ''}{a['policyText']}]"
    else:
        what += f"  [{a['policy']}]"
        if a.get("delay"):
            what += f" after {a['delay']}"
    if a.get("reason") and a["action"] == "SyncJob":
        what += f" ({a['reason']})"
    if explain and a.get("explain"):
        what += "".join(f"\n    - not {_policy_label(line)}" for line in a["explain"])
    return (a["seq"], 0, a["time"], what, Text(""))


def phase_row(p: dict, *, explain: bool = False) -> Row:
    """A phase change and its cause; --explain adds the action it happened under."""
    text = Text.assemble(_phase(p["from"]), " -> ", _phase(p["to"]))
    what = f"  retryCount {p['retryCount']}, version {p['version']}"
    if p.get("cause"):
        what += f"; because {p['cause']}"
    if explain:
        source = p["from"] or '"" (a new job)'
        what += f"\n    - while executing {p['reason']} in phase {source}"
    return (p["seq"], 1, p["time"], what, text)


def command_rows(seq: int, cmds: list[dict]) -> list[Row]:
    return [(seq, 2, "", line, Text("")) for line in _summarize_commands(cmds)]


def divergence_row(d: dict) -> Row:
    if d.get("known"):  # explained by Volcano itself (docs/fidelity.md), not a vcbus error
        return (d["seq"], 3, d["time"], f"divergence {d['field']}: log says {d['recorded']}, vcbus {d['decided']} "
                "(known Volcano race: its delayed action lost the status write)", Text("~", style="yellow"))
    return (d["seq"], 3, d["time"], f"DIVERGENCE {d['field']}: log says {d['recorded']}, vcbus {d['decided']}",
            Text("!", style="bold red"))


def error_row(e: dict) -> Row:
    return (e["seq"], 3, "", f"sync failed: {e['message']}", Text("!", style="bold red"))


def timeline_rows(job: dict, *, explain: bool, all_actions: bool) -> list[tuple[int, str, str, Text]]:
    """(seq, time, what happened, phase) rows, in log order."""
    rows: list[Row] = []
    for a in job["actions"]:
        row = action_row(a, explain=explain, all_actions=all_actions)
        if row is not None:
            rows.append(row)
    rows.extend(phase_row(p, explain=explain) for p in job["history"])
    by_seq: dict[int, list[dict]] = {}
    for c in job["commands"]:
        by_seq.setdefault(c["seq"], []).append(c)
    for seq, cmds in by_seq.items():
        rows.extend(command_rows(seq, cmds))
    rows.extend(divergence_row(d) for d in job["divergences"])
    rows.extend(error_row(e) for e in job.get("errors", []))
    rows.sort(key=lambda r: (r[0], r[1]))
    return [(seq, time, what, phase) for seq, _, time, what, phase in rows]


def print_report(
    report: dict, *, explain: bool, compare: bool, all_actions: bool, timeline: bool = True, note: str = ""
) -> None:
    """The report for a person; `timeline=False` leaves the timelines out (a live replay printed them).

    Written as plain aligned lines (`vcbus.cli.textcols`), ANSI styles only on a terminal: a large log's
    report is thousands of rows, and laying them out as rich tables cost more than the replay itself."""
    color, width = use_color(), width_for()
    lines = [f"{style(str(report['input']['events']), 'bold', color)} records read, {report['input']['ignored']} "
             f"ignored, {report['input']['invalid']} invalid; {len(report['jobs'])} job(s){note}"]
    if len(report["jobs"]) > 1:  # the jobs at a glance first: a large log's timelines run to thousands of lines
        lines.append("")
        lines.extend(table([summary_row(j) for j in report["jobs"]], width=width, color=color,
                           header=("job", "phase", "retryCount", "restarts", "divergences")))
    for job in report["jobs"]:
        lines.append("")
        lines.extend(job_lines(job, explain=explain, compare=compare, all_actions=all_actions, timeline=timeline,
                               color=color, width=width))
        if len(lines) > 4096:  # in pieces: a large report is not held twice
            sys.stdout.write("\n".join(lines) + "\n")
            lines = []
    for kind, entries in (("CronJob", report.get("cronjobs") or ()), ("JobFlow", report.get("jobflows") or ())):
        for owner in entries:
            lines.append("")
            lines.extend(owner_lines(kind, owner, color=color, width=width))
    sys.stdout.write("\n".join(lines) + "\n" if lines else "")
    sys.stdout.flush()


def summary_row(job: dict) -> tuple[str, Text, str, str, str]:
    """A job's line of the summary: its phase, retryCount, restarts and divergences (those Volcano's race explains
    counted apart)."""
    status = job["status"] or {}
    known = sum(1 for d in job["divergences"] if d.get("known"))
    divergences = str(len(job["divergences"]) - known) + (f" (+{known} known race)" if known else "")
    return (f"{job['namespace']}/{job['name']}" + (" (deleted)" if job.get("deleted") else ""),
            _phase((status.get("state") or {}).get("phase", "")), str(status.get("retryCount", 0)),
            str(sum(1 for h in job["history"] if h["to"] == "Restarting")), divergences)


def job_lines(job: dict, *, explain: bool, compare: bool, all_actions: bool, timeline: bool, color: bool,
              width: int) -> Iterator[str]:
    """One job's part of the report: its name, its timeline, its pending timers, its final status."""
    title = style(f"{job['namespace']}/{job['name']}", "bold", color)
    if job.get("adopted"):
        ad = job["adopted"]
        title += f"  (adopted at record {ad['seq']}: {ad['phase']}, retryCount {ad['retryCount']})"
    if job.get("deleted"):
        title += "  " + style("(deleted)", "dim", color)
    yield title
    if timeline:
        rows = [(str(seq), time, what, phase)
                for seq, time, what, phase in timeline_rows(job, explain=explain, all_actions=all_actions)]
        yield from table(rows, header=("seq", "time", "what happened", "phase"), right=(0,), wrap_column=2,
                         styles=("dim", "dim"), width=width, color=color)
    for t in job.get("pendingTimers", []):
        yield f"  pending timer {t['timer']}: {t['action']} due {t['due']} ({t['policy']})"
    status = job["status"] or {}
    state = status.get("state", {})
    fields: list[tuple[str, str | Text]] = [("phase", _phase(state.get("phase", ""))),
                                           ("lastTransitionTime", str(state.get("lastTransitionTime", "")))]
    fields += [(field, str(status[field])) for field in STATUS_FIELDS if field in status]
    fields += [(f"task {task}", ", ".join(f"{k}={v}" for k, v in sorted(counts.get("phase", {}).items())))
               for task, counts in sorted((status.get("taskStatusCount") or {}).items())]
    yield "final status"
    yield from table(fields, styles=("bold",), width=width, color=color)
    if compare:
        n = len(job["divergences"])
        known = sum(1 for d in job["divergences"] if d.get("known"))
        why = f", {known} of them the known Volcano race (docs/fidelity.md)" if known else ""
        yield f"  {style('no divergence' if n == 0 else f'{n} divergence(s)', 'bold', color)} from the recorded status{why}"


def owner_rows(owner: dict) -> list[tuple[int, str, str, str]]:
    """A CronJob's or JobFlow's report as (seq, time, what happened, state it moved to) rows, in record order:
    its machine's moves, its runs or the vcjobs it made and deleted, its failed syncs."""
    rows: list[tuple[int, int, str, str, str]] = []
    for st in owner["states"]:
        rows.append((st["seq"], len(rows), st["time"], f"{st['from']} -> {st['to']}: {st['cause']}", st["to"]))
    for run in owner.get("runs", ()):
        rows.append((run["seq"], len(rows), run["time"],
                     f"run {run['run']} (scheduled {run['scheduled'] or '?'}) {run['from']} -> {run['to']}: {run['cause']}",
                     ""))
    for job in owner.get("jobs", ()):
        what = (f"create vcjob {job['name']} from JobTemplate {job['template']}" if job["op"] == "create"
                else f"delete vcjob {job['name']}")
        rows.append((job["seq"], len(rows), job["time"], what, ""))
    for err in owner.get("errors", ()):
        rows.append((err["seq"], len(rows), "", f"sync failed: {err['message']}", ""))
    rows.sort(key=lambda r: (r[0], r[1]))
    return [(seq, time, what, to) for seq, _, time, what, to in rows]


def owner_lines(kind: str, owner: dict, *, color: bool, width: int) -> Iterator[str]:
    """A CronJob's or JobFlow's part of the report: its rows (`owner_rows`), then its last status written."""
    yield style(f"{kind} {owner['namespace']}/{owner['name']}", "bold", color)
    yield from table([(str(seq), time, what, _phase(to) if to else "") for seq, time, what, to in owner_rows(owner)],
                     header=("seq", "time", "what happened", "state"), right=(0,), wrap_column=2,
                     styles=("dim", "dim"), width=width, color=color)
    status = owner.get("status") or {}
    fields: list[tuple[str, str | Text]]
    if kind == "JobFlow" and status:
        fields = [("phase", _phase((status.get("state") or {}).get("phase", "")))]
        fields += [(key, ", ".join(status[key])) for key in ("pendingJobs", "runningJobs", "completedJobs",
                                                             "failedJobs", "terminatedJobs", "unKnowJobs")
                   if status.get(key)]
    elif status:
        fields = [(key, str(status[key])) for key in ("lastScheduleTime", "lastSuccessfulTime") if status.get(key)]
        fields.append(("active", ", ".join(r["name"] for r in status.get("active") or ()) or "none"))
    else:
        return
    yield "final status"
    yield from table(fields, styles=("bold",), width=width, color=color)
