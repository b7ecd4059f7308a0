"""A live timeline: `vcbus replay -` and `--follow` print each row as soon as its record is decided.

The rows are the ones of the per-job timeline tables (`vcbus.cli.timeline`),
one line each with the job in front, written and flushed as each record's
outputs come out of the engine. At the end of the input, or on Ctrl-C, the
caller prints the final status of each job (`print_report(..., timeline=False)`).
"""

from __future__ import annotations

import sys

from rich.console import Console
from rich.text import Text

from projections.history import command_entry
from projections.replay import action_entry, phase_entry
from statemachines import outputs as o
from vcbus.cli.timeline import Row, action_row, command_rows, divergence_row, error_row, phase_row


class LiveTimeline:
    def __init__(self, *, job: str | None, explain: bool, all_actions: bool) -> None:
        self.job = job
        self.explain = explain
        self.all_actions = all_actions
        self.console = Console(highlight=False, soft_wrap=True)
        self.rows = 0

    def on_record(self, seq: int, outs: list) -> None:
        if not outs:
            return
        per_job: dict[str, list[Row]] = {}
        commands: dict[str, list[dict]] = {}
        for out in outs:
            key = out.job
            if self.job is not None and key != self.job:
                continue
            rows = per_job.setdefault(key, [])
            if isinstance(out, o.ActionResolved):
                row = action_row(action_entry(out, explain=self.explain), explain=self.explain,
                                 all_actions=self.all_actions)
                if row is not None:
                    rows.append(row)
            elif isinstance(out, o.PhaseChanged):
                rows.append(phase_row(phase_entry(out), explain=self.explain))
            elif isinstance(out, o.JobObserved) and out.adopted_phase:
                rows.append((out.seq, 0, out.time, f"adopted as recorded: {out.adopted_phase}, retryCount "
                             f"{out.retry_count}, version {out.version}", Text("")))
            elif isinstance(out, o.Divergence):
                rows.append(divergence_row({"seq": out.seq, "time": out.time, "field": out.field,
                                            "recorded": out.recorded, "decided": out.decided}))
            elif isinstance(out, o.SyncFailed):
                rows.append(error_row({"seq": out.seq, "message": out.message}))
            elif isinstance(out, o.COMMANDS) and not isinstance(out, o.UpdateJobStatus):
                commands.setdefault(key, []).append(command_entry(out))
        for key, cmds in commands.items():
            per_job[key].extend(command_rows(cmds[0]["seq"], cmds))
        for key, rows in per_job.items():
            rows.sort(key=lambda r: (r[0], r[1]))
            for row_seq, _, time, what, phase in rows:
                line = Text.assemble((f"{row_seq:>6}  {time or '':20}  ", "dim"), (key, "bold"), "  ", what)
                if phase.plain:
                    line.append("  ")
                    line.append_text(phase)
                self.console.print(line)
                self.rows += 1
        sys.stdout.flush()
