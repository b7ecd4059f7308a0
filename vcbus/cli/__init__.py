"""The `vcbus` command line: one module per command family, registered in `main`."""
