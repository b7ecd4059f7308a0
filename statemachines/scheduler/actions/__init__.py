"""The scheduler actions vcbus implements, run in the configured order each session."""
