#!/usr/bin/env python3
"""Copy the NATS users (auth.conf) and encryption.conf of the kustomize base into the Helm chart.

deploy/vcbus/base/nats.yaml's ConfigMap is the one source of the NATS authorization; Helm
cannot read files outside its chart, so deploy/helm/vcbus/files/ holds copies (nats.conf there
is a template: routes and names depend on the values). tests/test_helm_chart.py fails when the
copies drift; run this after changing the base:  .venv/bin/python scripts/helm-nats-files.py
"""

from __future__ import annotations

import pathlib

import yaml

REPO = pathlib.Path(__file__).resolve().parents[1]
BASE = REPO / "deploy" / "vcbus" / "base" / "nats.yaml"
FILES = REPO / "deploy" / "helm" / "vcbus" / "files"


def main() -> None:
    config = next(d for d in yaml.safe_load_all(BASE.read_text()) if d and d["kind"] == "ConfigMap")
    for name in ("auth.conf", "encryption.conf"):
        target = FILES / name
        if target.read_text() != config["data"][name]:
            target.write_text(config["data"][name])
            print(f"updated {target.relative_to(REPO)}")


if __name__ == "__main__":
    main()
