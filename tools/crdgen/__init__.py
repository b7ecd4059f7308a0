"""The CRD generator: deploy/crds/*.yaml and the admission's crd_schemas.json from deploy/crds/src/.

`k8s` inlines Kubernetes' schemas (pod template, PVC spec, ...) from the stored OpenAPI
extract of the pinned version, `describe` turns the declarative description of Volcano's
fields into schemas, `generate` writes or checks the outputs (scripts/gen-crds.py).
"""
