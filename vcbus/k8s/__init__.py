"""Kubernetes adapters: list-then-watch (`watching`) and a kubelet-less pod driver (`podsim`)."""
