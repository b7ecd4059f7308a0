"""Delayed actions: Volcano's registry rules (`rules`), the pending timers in due order
(`heap`), and how a job's requests schedule and cancel them (`scheduling`)."""
