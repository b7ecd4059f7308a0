"""One module per kind of watch record: how it changes its job's aggregate and what it asks for.

The engine routes each record here by kind (`jobs`, `pods`, `podgroups`,
`commands`); each updates the job's `JobEntry` (statemachines/cache.py) and
hands the resulting request to the worker loop (statemachines/worker.py).
"""
