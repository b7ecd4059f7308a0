"""The Kubernetes objects a vcjob turns into, built offline and deterministically.

- `pod.py`: a task's pod as the job controller creates it (`build_pod`, createJobPod
  plus every plugin's OnPodCreate);
- `podgroup.py`: the job's PodGroup (`build_podgroup`, createOrUpdatePodGroup);
- `renderer.py`: `Renderer`, the full manifests for the engine's CreatePod and
  CreatePodGroup commands (the cluster side needs them; replay does not);
- `job.py`: `render_job`, every object a vcjob turns into, for `vcbus render`.
"""
