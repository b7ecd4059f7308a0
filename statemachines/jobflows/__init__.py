"""Volcano's JobFlow and JobTemplate controllers (flow.volcano.sh/v1alpha1)."""
