"""vcbus's scheduler: Volcano's scheduler (`pkg/scheduler/`) as a pure function of a snapshot.

`run_session(snapshot, config, seq=, number=, time=)` runs one session (enqueue, allocate,
backfill, preempt, reclaim with Volcano's plugins) and returns its decisions as bus outputs.
The snapshot comes from the scheduler projection (`projections.scheduler.SchedulerCache`),
a fold of the watch log. See docs/scheduler.md.
"""
