"""Record the seed job's history under real Volcano: examples/volcano/resnet-dist-train.jsonl.

    .venv/bin/python scripts/record-volcano-seed.py                      # writes examples/volcano/resnet-dist-train.jsonl
    .venv/bin/python scripts/record-volcano-seed.py -o /tmp/seed.jsonl --volcano-bin ~/.cache/vcbus/volcano/bin
    .venv/bin/python scripts/record-volcano-seed.py --controller vcbus -o /tmp/seed.jsonl   # the same story, vcbus's controller

What runs, all on this machine (the parts of benchmarks/cluster.py):

- the test suite's etcd + kube-apiserver (tests/k8s_env.py) with Volcano's own CRDs (its source's
  config/crd/*/bases, from VOLCANO_SRC or the cache build-volcano.sh fills), and a Queue "default";
- KWOK (tests/kwok_env.py) as the kubelets of 3 fake nodes (32 cpu / 256Gi): a bound pod becomes
  Running, a deleted one goes;
- Volcano's vc-controller-manager and vc-scheduler from `--volcano-bin` (build-volcano.sh builds them),
  with the scheduler configuration of Volcano's benchmark;
- `vcbus record -A` from before Volcano starts to after the job has settled (Completed, its pods
  ended or gone, and nothing recorded for 3 s).

`--controller vcbus` plays the same story with `vcbus up --kubeconfig` (bridge, decider, scheduler,
actuator) in Volcano's place, on vcbus's CRDs (deploy/crds): no Volcano binaries are needed, so
tests/test_record_volcano_script.py runs the whole script so on every test run; only starting
Volcano's two binaries and copying its CRDs are left to a run with Volcano.

The story, as in examples/resnet-dist-train.json (the simulated one): the seed job of
examples/resnet-dist-train.yaml is created; once its 3 pods run, worker-1's container exits 1 (its
pod's status written Failed through the pods/status subresource, as a kubelet writes it); the job
policy PodFailed -> RestartJob restarts the job; once the new pods run, the master's container
exits 0 (Succeeded), and the master task's TaskCompleted -> CompleteJob completes the job.

Two changes to the seed job, both what a Volcano cluster does to it: Volcano's admission webhook does
not run here, so the job is created as that webhook mutates it (statemachines/admission/mutate.py,
after pkg/webhooks/admission/jobs/mutate/mutate_job.go: the queue, maxRetry, task minAvailable, the
svc plugin pytorch needs); and the vendor plugin status-mounter is left out, since Volcano's
controller knows no such plugin (pluginOnJobAdd in pkg/controllers/job/job_controller_plugins.go
fails the job's sync with "failed to get plugin status-mounter").
"""

from __future__ import annotations

import argparse
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.cluster import Cluster, Vcbus, Volcano, volcano_crds, wait_for  # noqa: E402
from statemachines.admission.mutate import mutate_job  # noqa: E402
from tests import k8s_env, kwok_env  # noqa: E402
from vcbus.k8s.watching import api_request  # noqa: E402

NS, NAME = "default", "resnet-dist-train"
SEED = ROOT / "examples" / "resnet-dist-train.yaml"
OUT = ROOT / "examples" / "volcano" / "resnet-dist-train.jsonl"
DEADLINE = 180.0  # seconds each step may take


def seed_job() -> dict:
    """The seed job as a Volcano cluster stores it (module docstring): mutated, status-mounter left out."""
    job = yaml.safe_load(SEED.read_text())
    job["metadata"]["namespace"] = NS
    job["spec"]["plugins"].pop("status-mounter", None)
    return mutate_job(job)


def job_status(api: Any) -> dict:
    return api_request(api, "GET", f"/apis/batch.volcano.sh/v1alpha1/namespaces/{NS}/jobs/{NAME}").get("status") or {}


def job_pods(api: Any) -> list[dict]:
    return api_request(api, "GET", f"/api/v1/namespaces/{NS}/pods",
                       query={"labelSelector": f"volcano.sh/job-name={NAME}"})["items"]


def running(api: Any, besides: set[str] = frozenset()) -> dict[str, str] | None:
    """name -> uid of the job's 3 pods once all three run (none of `besides`), else None."""
    got = {p["metadata"]["name"]: p["metadata"]["uid"] for p in job_pods(api)
           if (p.get("status") or {}).get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")
           and p["metadata"]["uid"] not in besides}
    return got if len(got) == 3 else None


def settled(api: Any) -> bool:
    """Completed, and every pod of the job ended or gone."""
    phase = (job_status(api).get("state") or {}).get("phase")
    return phase == "Completed" and all((p.get("status") or {}).get("phase") in ("Succeeded", "Failed")
                                        for p in job_pods(api) if not p["metadata"].get("deletionTimestamp"))


def quiet(log: pathlib.Path, seconds: float) -> bool:
    """The log has not grown for `seconds` (nothing more is happening in the cluster)."""
    return time.time() - log.stat().st_mtime >= seconds


def record(volcano_bin: pathlib.Path | None, out: pathlib.Path, hold: float, say: Any) -> None:
    """The story (module doc) under Volcano's binaries in `volcano_bin`, or under vcbus's controller (None)."""
    with tempfile.TemporaryDirectory(prefix="vcbus-volcano-seed-") as tmp:
        work = pathlib.Path(tmp)
        crds = volcano_crds(volcano_bin, work / "crds") if volcano_bin is not None else k8s_env.CRD_DIR
        cluster = Cluster(work, 3, crds)
        controller: Vcbus | Volcano = Volcano(work) if volcano_bin is not None else Vcbus(work)
        recorder = None
        log = work / "watch.jsonl"
        try:
            vcbus = pathlib.Path(sys.executable).with_name("vcbus")
            recorder = subprocess.Popen([str(vcbus), "record", "-A", "-o", str(log), "--kubeconfig",
                                         str(cluster.env.kubeconfig)], stdin=subprocess.DEVNULL)
            wait_for("the recording's initial list", lambda: log.exists() and b"initial-events-end" in log.read_bytes(),
                     deadline=DEADLINE)
            if isinstance(controller, Volcano):
                say("recording; starting Volcano")
                controller.start(cluster.env.kubeconfig, volcano_bin)
            else:
                say("recording; starting vcbus up")
                controller.start(cluster.env.kubeconfig, [])
                wait_for("vcbus up ready", controller.ready, deadline=DEADLINE, check=controller.check)
            api_request(cluster.api, "POST", f"/apis/batch.volcano.sh/v1alpha1/namespaces/{NS}/jobs", body=seed_job())
            first = wait_for("the job's 3 pods Running", lambda: running(cluster.api), deadline=DEADLINE,
                             check=controller.check)
            say(f"running: {sorted(first)}; worker-1 exits 1 in {hold:g} s")
            time.sleep(hold)  # the story's pace (the pods run a while), not a wait for something
            kwok_env.fail_pod(cluster.api, NS, f"{NAME}-worker-1", exit_code=1)
            wait_for("the job restarted (retryCount 1)", lambda: int(job_status(cluster.api).get("retryCount") or 0) >= 1,
                     deadline=DEADLINE, check=controller.check)
            again = wait_for("3 new pods Running", lambda: running(cluster.api, set(first.values())), deadline=DEADLINE,
                             check=controller.check)
            say(f"running again: {sorted(again)}; master-0 exits 0 in {hold:g} s")
            time.sleep(hold)
            kwok_env.succeed_pod(cluster.api, NS, f"{NAME}-master-0")
            wait_for("the job Completed, its pods ended", lambda: settled(cluster.api), deadline=DEADLINE,
                     check=controller.check)
            wait_for("the log quiet for 3 s", lambda: quiet(log, 3.0), deadline=DEADLINE)
            recorder.send_signal(signal.SIGINT)
            if recorder.wait(timeout=60) != 0:
                raise RuntimeError(f"vcbus record exited {recorder.returncode}")
            recorder = None
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(log, out)
            status = job_status(cluster.api)
            say(f"wrote {out} ({sum(1 for _ in out.open())} records); {controller.name}'s final status: phase "
                f"{status['state']['phase']}, retryCount {status.get('retryCount', 0)}")
        finally:
            if recorder is not None:
                recorder.kill()
                recorder.wait()
            controller.stop()
            cluster.stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-o", "--output", type=pathlib.Path, default=OUT, help=f"the log (default {OUT.relative_to(ROOT)})")
    ap.add_argument("--volcano-bin", type=pathlib.Path, default=pathlib.Path.home() / ".cache/vcbus/volcano/bin",
                    metavar="DIR", help="vc-controller-manager and vc-scheduler (default ~/.cache/vcbus/volcano/bin)")
    ap.add_argument("--controller", choices=("volcano", "vcbus"), default="volcano",
                    help="whose controller and scheduler run the job (default volcano; vcbus: `vcbus up`)")
    ap.add_argument("--hold", type=float, default=5.0, metavar="SECONDS",
                    help="how long the pods run before each exit (default 5)")
    args = ap.parse_args(argv)
    if not args.hold >= 0:
        print(f"record-volcano-seed: --hold {args.hold:g}: expected seconds, 0 or more", file=sys.stderr)
        return 2
    if args.controller == "vcbus":
        args.volcano_bin = None
    missing = [b for b in ("vc-controller-manager", "vc-scheduler")
               if args.volcano_bin is not None and not os.access(args.volcano_bin / b, os.X_OK)]
    if missing:
        print(f"record-volcano-seed: --volcano-bin {args.volcano_bin}: no executable {', '.join(missing)} there "
              "(build-volcano.sh builds them)", file=sys.stderr)
        return 2
    record(args.volcano_bin, args.output, args.hold, lambda msg: print(f"record-volcano-seed: {msg}", file=sys.stderr))
    return 0


if __name__ == "__main__":
    sys.exit(main())
