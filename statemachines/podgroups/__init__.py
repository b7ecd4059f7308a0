"""Volcano's podgroup controller (`pkg/controllers/podgroup/`): PodGroups for pods no vcjob made.

A pod for one of Volcano's scheduler names with no `scheduling.k8s.io/group-name`
annotation (a plain pod, a Deployment's, a StatefulSet's, a batch Job's...) gets a
PodGroup, and the annotation is written back to it; from then on the scheduler
places it like any gang. `manifest.py` names the PodGroup (one per pod, or one per
controlling owner) and builds it as Volcano does; `controller.py` is the fold that
decides when.
"""
