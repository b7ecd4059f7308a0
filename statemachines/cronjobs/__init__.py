"""Volcano's CronJob (`batch.volcano.sh/v1alpha1`): its schedule (`schedule`, `zones`) and its machine."""
