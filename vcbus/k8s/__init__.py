"""Kubernetes adapters: the watch bridge (`watching`, `bridge`), the actuator (`actuating`, `actuator`, `lanes`), the client (`cluster`, `throttle`, `rawcalls`)."""
