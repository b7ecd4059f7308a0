#!/usr/bin/env python3
"""Generate deploy/crds/*.yaml and statemachines/admission/crd_schemas.json (see tools/crdgen/generate.py).

    .venv/bin/python scripts/gen-crds.py            # write what is stale
    .venv/bin/python scripts/gen-crds.py --check    # exit 1 if anything is stale
"""

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from tools.crdgen.generate import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
