"""Operations: Prometheus metrics, health and readiness probes, one structured log format.

`metrics` holds every metric vcbus exports (docs/operations.md lists them with
alerts), `probes` the small HTTP server behind `--metrics-addr` (`/metrics`,
`/healthz`, `/readyz`) and the readiness state it reports, `logging` the single
`configure()` every long-running command calls (`--log-format text|json`).
"""
