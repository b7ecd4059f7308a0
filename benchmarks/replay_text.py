"""What the text report of a large replay costs against `--json`: the whole command, and the rendering alone.

    .venv/bin/python benchmarks/replay_text.py            # the 10,000-job log of benchmarks/replay.py
    .venv/bin/python benchmarks/replay_text.py --quick    # its 600-job log
    .venv/bin/python benchmarks/replay_text.py --json     # one JSON object; headline under "ratio"

The log is benchmarks/replay.py's (made once, cached in benchmarks/out/). Each
round runs `vcbus replay LOG` and `vcbus replay --json LOG` as a user does, in
fresh processes, standard output to /dev/null, and takes the CPU each used (user
+ system, from the kernel's accounting of the child: the work, not the wall clock
of a shared machine); the rounds are interleaved and the best of each counts.
One more process replays the log once and times the two renderings of the same
report (`vcbus.cli.timeline.print_report`, `vcbus.cli.output.print_document`),
the part the two commands differ in.

`ratio` is the text command's CPU over the `--json` command's (target <= 2: the
text report costs no more than twice `--json`; laid out as rich tables it cost
3.4 times, 17.7 against 5.2 s on the quick log). What the design guarantees, that
the text is laid out in one pass over the rows and written in pieces, is tested
in tests/test_replay_text_cost.py; this measures what that buys.
"""

from __future__ import annotations

import json
import os
import pathlib
import resource
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.replay import generate, options  # noqa: E402

RENDER = """
import contextlib, json, os, sys, time
from vcbus.cli.output import print_document
from vcbus.cli.timeline import print_report
from vcbus.replaying import replay_inputs
from vcbus.watchlog import open_input

stream, source = open_input(sys.argv[1])
with stream:
    report = replay_inputs([(stream, source)]).report()
times = {}
with open(os.devnull, "w") as null, contextlib.redirect_stdout(null):
    for name, render in (("text", lambda: print_report(report, explain=False, compare=False, all_actions=False)),
                         ("json", lambda: print_document(report, "json"))):
        start = time.process_time()
        render()
        times[name] = time.process_time() - start
rows = sum(len(j["actions"]) + len(j["history"]) + len(j["commands"]) for j in report["jobs"])
print(json.dumps({"render_text_s": times["text"], "render_json_s": times["json"], "jobs": len(report["jobs"]),
                  "rows": rows}))
"""


def cpu_of(args: list[str]) -> float:
    """User + system CPU seconds of one `vcbus` process (standard output to /dev/null)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(os.devnull, "wb") as null:
        subprocess.run([sys.executable, "-m", "vcbus.cli.main", *args], stdout=null, stderr=subprocess.DEVNULL,
                       check=True, cwd=ROOT)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    args, jobs, path = options(__doc__ or "")
    if not path.exists():
        generate(path, jobs)
    text_runs, json_runs = [], []
    for _ in range(args.rounds):
        text_runs.append(cpu_of(["replay", str(path)]))
        json_runs.append(cpu_of(["replay", "--json", str(path)]))
    out = subprocess.run([sys.executable, "-c", RENDER, str(path)], check=True, capture_output=True, text=True,
                         cwd=ROOT)
    render = json.loads(out.stdout.strip().splitlines()[-1])
    text_s, json_s = min(text_runs), min(json_runs)
    figures = {
        "jobs": jobs,
        "file_mb": round(path.stat().st_size / 2**20, 1),
        "rounds": args.rounds,
        "text_cpu_s": round(text_s, 2),
        "json_cpu_s": round(json_s, 2),
        "ratio": round(text_s / json_s, 3),
        "target_ratio": 2.0,
        "text_cpu_s_per_round": [round(t, 2) for t in text_runs],
        "json_cpu_s_per_round": [round(t, 2) for t in json_runs],
        "render_text_s": round(render["render_text_s"], 3),
        "render_json_s": round(render["render_json_s"], 3),
        "report_rows": render["rows"],
    }
    if args.json:
        print(json.dumps(figures))
        return
    print(f"log: {jobs} jobs, {figures['file_mb']} MiB; best of {args.rounds} round(s), CPU of the whole command")
    print(f"vcbus replay LOG          {text_s:8.2f} s")
    print(f"vcbus replay --json LOG   {json_s:8.2f} s   ratio {figures['ratio']:.3f} (target <= 2)")
    print(f"rendering the report of {render['rows']:,} rows: text {figures['render_text_s']:.3f} s, "
          f"json {figures['render_json_s']:.3f} s")


if __name__ == "__main__":
    main()
