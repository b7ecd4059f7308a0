"""`python -m vcbus`: the `vcbus` command (vcbus.cli.main)."""

import sys

from vcbus.cli.main import main

sys.exit(main())
