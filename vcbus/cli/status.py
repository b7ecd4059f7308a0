"""`vcbus status`: job statuses as the projector keeps them (KV `vcbus_status`), like `kubectl get`."""

from __future__ import annotations

import asyncio
import pathlib
from typing import Any

import click
import msgspec

from vcbus.bus import subjects as s
from vcbus.bus.connecting import open_bus
from vcbus.bus.reading import read_bucket
from vcbus.cli.output import namespace_scope, nothing_on_bus, output_options, print_document, print_names
from vcbus.cli.output import print_table as rows
from vcbus.errors import UserError
from vcbus.settings import BusSettings, bus_options, from_flags

HELP = """Show job statuses from the bus (the KV bucket vcbus_status), like kubectl get vcjob.

\b
Examples:
  vcbus status                                  # every job
  vcbus status default/resnet-dist-train        # one job (NAME alone: namespace default)
  vcbus status -n team-a -o wide                # + each task: worker:Running(Running=2), a finished
                                                # job's worker:Succeeded=2/Failed=0
  vcbus status default/resnet-dist-train -o json | jq .status.retryCount
  vcbus status -o yaml

The statuses are those the projector has folded so far (`vcbus up` keeps them current).
Exit codes: 0 ok; 1 the job has no status; 3 the bus is unreachable.
"""


def register(group: click.Group) -> None:
    group.add_command(status)


def parse_job(value: str, *, what: str = "job") -> str:
    """NS/NAME (or NAME in namespace default) as a job key."""
    if "/" not in value:
        value = f"default/{value}"
    ns, _, name = value.partition("/")
    if not ns or not name or "/" in name:
        raise UserError(f"{what} {value!r}: expected NAMESPACE/NAME (or NAME in namespace default)")
    return value


def job_object(job: str, status: dict[str, Any]) -> dict[str, Any]:
    ns, name = s.split_job(job)
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"namespace": ns, "name": name},
        "status": status,
    }


@click.command(help=HELP)
@click.argument("job", metavar="[NS/NAME]", required=False)
@click.option("-n", "--namespace", help="Only jobs in this namespace.")
@click.option("-A", "--all-namespaces", is_flag=True, help="Every namespace (the default: a bus has no current one).")
@output_options(("table", "wide", "json", "yaml", "name"), json_alias=False, default="table",
                default_help="table; wide: + tasks, counts, times; json or yaml: a v1 List; name: job.batch.volcano.sh/NAME")
@bus_options
def status(
    job: str | None, namespace: str | None, all_namespaces: bool, fmt: str, nats_url: str | None,
    data_dir: pathlib.Path | None,
) -> None:
    key = parse_job(job) if job else None
    namespace = namespace_scope(namespace, all_namespaces)
    settings = from_flags(nats_url, data_dir)
    statuses, tasks, where = asyncio.run(_read(settings, tasks=fmt == "wide"))
    if key is not None:
        if key not in statuses:
            raise UserError(f"job {key} has no status on the bus at {where} (not published, or not decided yet?)",
                            exit_code=1)
        statuses = {key: statuses[key]}
    elif namespace:
        statuses = {k: v for k, v in statuses.items() if s.split_job(k)[0] == namespace}
    if fmt in ("json", "yaml"):
        items = [job_object(k, v) for k, v in sorted(statuses.items())]
        doc: dict[str, Any] = items[0] if key is not None else {"apiVersion": "v1", "kind": "List", "items": items}
        print_document(doc, fmt)
        return
    if not statuses:
        nothing_on_bus("jobs", where, namespace)
        return
    if fmt == "name":
        print_names(f"job.batch.volcano.sh/{s.split_job(k)[1]}" for k in sorted(statuses))
        return
    print_table(statuses, wide=fmt == "wide", tasks=tasks)


async def _read(settings: BusSettings, *, tasks: bool = False) -> tuple[dict[str, dict[str, Any]], dict[str, str], str]:
    """The statuses by job; with `tasks`, each job's task phases too (from the history bucket's `tasks`);
    and which bus they were read from."""
    async with open_bus(settings, name="vcbus-status") as bus:
        where = bus.describe()
        raw = await read_bucket(bus.js, s.STATUS_BUCKET)
        history = await read_bucket(bus.js, s.HISTORY_BUCKET) if tasks else {}
    out = {}
    for key, value in raw.items():
        if key.startswith("_"):
            continue
        out[s.job_of_key(key)] = msgspec.json.decode(value)
    phases = {}
    for key, value in history.items():
        if key.startswith("_"):
            continue
        job, entry = s.job_of_key(key), msgspec.json.decode(value)
        st = out.get(job) or {}
        phases[job] = task_column(entry.get("tasks") or {}, st.get("taskStatusCount") or {},
                                  entry.get("taskPods") or {}, (st.get("state") or {}).get("phase"))
    return out, phases, where


FINISHED = {"Completed", "Failed", "Terminated", "Aborted"}  # phases Volcano's kill enters: no active pods are left


def task_column(tasks: dict[str, str], status_counts: dict[str, dict], finished_pods: dict[str, dict[str, int]],
                job_phase: str | None = None) -> str:
    """Each task of the job, `-` when none is known.

    A live job's task is `NAME:PHASE(POD-PHASE=N,...)`: the task machine's phase and the status's
    `taskStatusCount` (Volcano's, current). A finished job's is `NAME:Succeeded=N/Failed=M`: its pods that
    ran to an end, as they were when the task last moved (`finished_pods`, the history's `taskPods`). Its
    status counts none (Volcano's killPods counts only the pods it failed to delete) and its tasks derive
    Pending once the kill deleted their pods, which says nothing of how they ended."""
    parts = []
    for name in sorted(set(tasks) | set(status_counts)):
        if job_phase in FINISHED:
            pods = finished_pods.get(name) or {}
            parts.append(f"{name}:Succeeded={pods.get('Succeeded', 0)}/Failed={pods.get('Failed', 0)}")
            continue
        counts = ",".join(f"{phase}={n}" for phase, n in ((status_counts.get(name) or {}).get("phase") or {}).items() if n)
        parts.append(f"{name}:{tasks.get(name, '-')}" + (f"({counts})" if counts else ""))
    return ",".join(parts) or "-"


def _row(job: str, st: dict[str, Any], wide: bool, tasks: str = "-") -> list[str]:
    ns, name = s.split_job(job)
    state = st.get("state") or {}
    row = [
        ns,
        name,
        state.get("phase", "") or "-",
        str(st.get("minAvailable", 0)),
        str(st.get("running", 0)),
        str(st.get("retryCount", 0)),
    ]
    if wide:
        row += [
            tasks,
            str(st.get("pending", 0)),
            str(st.get("succeeded", 0)),
            str(st.get("failed", 0)),
            str(st.get("version", 0)),
            st.get("runningDuration") or "-",
            state.get("lastTransitionTime") or "-",
            _poisoned(st),
        ]
    return row


def _poisoned(st: dict[str, Any]) -> str:
    """`True` when a record of the job was set aside (see `vcbus poison list`), else `-`."""
    for cond in st.get("conditions") or ():
        if isinstance(cond, dict) and cond.get("type") == "Poisoned" and cond.get("status") == "True":
            return "True"
    return "-"


def print_table(statuses: dict[str, dict[str, Any]], *, wide: bool, tasks: dict[str, str] | None = None) -> None:
    header = ["NAMESPACE", "NAME", "STATUS", "MINAVAILABLE", "RUNNINGS", "RETRIES"]
    if wide:
        header += ["TASKS", "PENDING", "SUCCEEDED", "FAILED", "VERSION", "RUNNING-DURATION", "LAST-TRANSITION", "POISONED"]
    if not statuses:
        click.echo("No jobs on the bus.", err=True)
        return
    rows([header] + [_row(k, v, wide, (tasks or {}).get(k, "-")) for k, v in sorted(statuses.items())])
