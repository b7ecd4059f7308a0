"""The task state machine: one role of a vcjob (master, worker, ...) and its phase.

Volcano has no stored task phase, but its job controller does decide things
per task, from the pods of the task in its cache and the task's spec:
`TaskCompleted` (every replica succeeded) and `TaskFailed` (the container
restarts of the task's live pods reached the task's maxRetry) in
`pkg/controllers/cache/cache.go`, raised by `updatePod` in
`pkg/controllers/job/job_controller_handler.go`. This package makes those
decisions one explicit machine:

- `phases.py`: the phases, what a guard sees (`TaskCheck`) and the guards;
- `counts.py`: per-task pod counts, kept up to date on every pod change of a
  job (`TaskBook`, one per job), so no decision recounts the pods;
- `machine.py`: the transitions, declared for `transitions` and compiled to
  a lookup table at import, as the job machine is;
- `stepping.py`: one step of a task of a job, on its book;
- `handlers.py`: that step inside the job controller, its move emitted as
  `task.phase.changed` (what the intake and syncJob call);
- `diagram.py`: docs/statemachines/task.md, drawn from the machine.
"""
