"""The job machine and its handlers: Volcano's job phases and the pod work behind each action.

- `machine.py`: the phases and their transitions, declared for `transitions` and
  compiled to a lookup table; one module per phase (`pending.py`, `running.py`,
  ...) says how it handles each action (`handling.py`: `Handling`, the guards);
- `sync.py` (syncJob), `kill.py` (killJob, killTarget) and `writes.py` (status
  function, UpdateJobStatus, plugin and volume bookkeeping, the PodGroup): the
  controller code an action runs (statemachines/worker.py calls it);
- `context.py`: what that code needs from the engine, as a Protocol;
- `causes.py`: why a phase moved, in words; `podnames.py`: a huge task's pod names;
- `diagram.py`: docs/statemachines/job.md, drawn from the machine.
"""
