"""Developer tooling beside the product, not shipped in the wheel (pyproject.toml's packages are
vcbus, statemachines and projections; import-linter forbids them to import this).

- `tools.simulate`: vcbus's simulated cluster (API server, scheduler and kubelets in one process),
  which recorded `examples/*.json*` and drives the replay and system benchmarks and some tests;
- `tools.crdgen`: deploy/crds/*.yaml and statemachines/admission/crd_schemas.json from
  deploy/crds/src/ (`scripts/gen-crds.py`; tests/test_crdgen.py fails when they are not current).
- `tools.replay_schema`: docs/schemas/replay/report.json, the JSON Schema of `vcbus replay --json`, from
  typed descriptions of the report (`make docs`; tests/test_replay_why.py fails when it is not current).
- `tools.schemas` and `tools.asyncapi`: docs/schemas/ (a JSON Schema per event and command) and
  docs/asyncapi.yaml from statemachines/outputs.py (`make docs`; tests/test_bus_contract.py and
  tests/test_docs_current.py fail when they are not current). The running product serves neither: they
  are the bus contract's documents, generated from the types the product encodes with.
"""
