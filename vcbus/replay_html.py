"""`vcbus replay --html FILE`: the replay as one self-contained HTML page.

The page (template `vcbus/templates/replay.html`: inline CSS and vanilla JS
drawing SVG, nothing fetched from the network) shows per job a band of its
phases with the job version and retry count, a marker per resolved action
(policy and reason on hover), and a lane per pod grouped by task; a click on
any row element shows the raw record it came from. Its data is embedded as
JSON in a `<script type="application/json">`, with every `<` escaped as
`\\u003c` so no record can close the script element.

`write_html` is used by `vcbus replay` after a replay; `html_for_log` replays a
log itself (`vcbus demo`).
"""

from __future__ import annotations

import datetime
import json
import pathlib
from importlib import resources
from typing import Iterable

from vcbus.cli.timeline import owner_rows
from vcbus.errors import UserError
from vcbus.replay_lanes import collect_lanes
from vcbus.replaying import ReplayResult, Until, replay_inputs
from vcbus.watchlog import open_input

MARK = "/*__VCBUS_DATA__*/"


def _template() -> str:
    return resources.files("vcbus").joinpath("templates/replay.html").read_text(encoding="utf-8")


def page_data(report: dict, lanes: dict, *, source: str) -> dict:
    """What the page's script draws: jobs with their history, actions, commands and lanes; raw records."""
    jobs = []
    for j in report["jobs"]:
        key = f"{j['namespace']}/{j['name']}"
        times = [h["time"] for h in j["history"] if h["time"]] + [a["time"] for a in j["actions"] if a["time"]]
        for group in lanes["lanes"].get(key, []):
            for pod in group["pods"]:
                times += [s["start"] for s in pod["segments"] if s["start"]]
                times += [s["end"] for s in pod["segments"] if s["end"]]
        status = j.get("status") or {}
        jobs.append({
            "key": key,
            "uid": j["uid"],
            "phase": (status.get("state") or {}).get("phase", ""),
            "retryCount": status.get("retryCount", 0),
            "version": status.get("version", 0),
            "deleted": j.get("deleted", False),
            "start": min(times) if times else None,
            "end": max(times + ([lanes["end"]] if lanes["end"] else [])) if times else None,
            "history": j["history"],
            "actions": j["actions"],
            "commands": j["commands"],
            "divergences": j["divergences"],
            "pendingTimers": j["pendingTimers"],
            "tasks": lanes["lanes"].get(key, []),
        })
    records = lanes["records"]
    total = len(records) + lanes["dropped"]
    note = (
        f"Raw records: {len(records)} of the {total} records that changed a row are embedded "
        f"(at most {lanes['maxRecords']}, each cut to {lanes['maxBytes']} characters)"
    )
    if lanes["dropped"]:
        note += f"; the {lanes['dropped']} later ones were left out (their rows show no record)"
    if lanes["cut"]:
        note += f"; {lanes['cut']} were cut"
    owners = []  # Volcano's CronJobs and JobFlows: their rows, as the text report has them
    for kind, entries in (("CronJob", report.get("cronjobs") or ()), ("JobFlow", report.get("jobflows") or ())):
        for owner in entries:
            status = owner.get("status") or {}
            owners.append({"kind": kind, "key": f"{owner['namespace']}/{owner['name']}",
                           "state": owner["states"][-1]["to"] if owner["states"] else "",
                           "rows": [{"seq": seq, "time": time, "what": what, "to": to}
                                    for seq, time, what, to in owner_rows(owner)],
                           "jobs": [j["name"] for j in owner.get("jobs", ()) if j["op"] == "create"],
                           "completed": status.get("completedJobs") or [], "failed": status.get("failedJobs") or []})
    return {
        "source": source,
        "owners": owners,
        "generated": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "input": report["input"],
        "jobs": jobs,
        "records": {str(k): v for k, v in records.items()},
        "recordsNote": note + ".",
    }


def render(data: dict) -> str:
    """The page: the template with `data` embedded as JSON that cannot end its script element."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    text = text.replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    template = _template()
    if MARK not in template:
        raise RuntimeError("vcbus/templates/replay.html lacks its data mark")
    return template.replace(MARK, text, 1)


def _write(out: str | pathlib.Path, page: str) -> pathlib.Path:
    path = pathlib.Path(out)
    try:
        path.write_text(page, encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"--html {out}: no such directory {str(path.parent)!r}") from None
    except IsADirectoryError:
        raise UserError(f"--html {out}: is a directory, expected a file name") from None
    except PermissionError:
        raise UserError(f"--html {out}: permission denied") from None
    return path


def write_html(
    out: str | pathlib.Path, files: Iterable[str], result: ReplayResult, report: dict, *, until: Until | None = None
) -> pathlib.Path:
    """Read `files` again for the pod lanes and raw records, and write the page for `report` to `out`."""
    streams = [open_input(f) for f in files]
    try:
        lanes = collect_lanes(streams, report, merged=result.merged, until=until)
    finally:
        for stream, _ in streams:
            stream.close()
    return _write(out, render(page_data(report, lanes, source=", ".join(s for _, s in streams))))


def html_for_log(log: str | pathlib.Path, out: str | pathlib.Path) -> pathlib.Path:
    """Replay `log` and write its page to `out` (`vcbus demo`)."""
    stream, source = open_input(str(log))
    with stream:
        result = replay_inputs([(stream, source)])
    report = result.report()
    return write_html(out, [str(log)], result, report)
