"""The bus: vcbus on NATS JetStream.

Three streams (docs/events.md): `VCBUS_K8S` holds the watch records the state
machines read (the log), `VCBUS_JOBS` the domain events they emit (CloudEvents)
and `VCBUS_CMDS` the commands for the cluster side. The decider folds the log
into events and commands; the projector folds the events into KV views. Both
are restartable folds: their state is a function of the streams alone.
"""
