"""What the machines read and speak: Kubernetes object views, Volcano's vocabulary, time.

- `records.py`: one watch record's bytes decoded into typed input (`Observed`,
  `Ignored`, `TimerRecord`) or a `RecordError`;
- `objects.py`: the views of Job, Pod, PodGroup, Queue and Command the
  controllers read (only the fields they look at);
- `status.py`: the vcjob `status` exactly as Volcano writes it;
- `vocabulary.py`: job phases, bus events and actions, spelled as Volcano does;
- `timestamps.py`: which times in a record are RFC 3339 (the others are dropped);
- `record_time.py`: when a record happened, from its object (the replay clock);
- `timefmt.py`, `durations.py`: RFC 3339 times and Go durations, the only clock
  the machines know is the records' own.
"""
