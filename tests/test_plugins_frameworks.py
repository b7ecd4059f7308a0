"""pytorch, mpi, tensorflow, ray and hcclrank plugins (upstream distributed-framework/*)."""

from __future__ import annotations

import json

import pytest

from statemachines.manifests.pod import build_pod
from statemachines.plugins import PluginError, on_job_add, on_job_delete


def task(name, replicas, containers=("c",), **spec):
    return {"name": name, "replicas": replicas,
            "template": {"spec": {"containers": [{"name": c, "image": "x"} for c in containers], **spec}}}


def make_job(plugins, tasks, name="demo"):
    return {"metadata": {"name": name, "namespace": "ns", "uid": "u"},
            "spec": {"queue": "default", "plugins": plugins, "tasks": tasks}}


def env(pod, container=0):
    return {e["name"]: e.get("value") for e in pod["spec"]["containers"][container].get("env", [])}


def pod(job, task_name, index, **kw):
    return build_pod(job, task_name, index, version=0, retry_count=0, **kw)


# ------------------------------------------------------------------ pytorch

PT = make_job({"pytorch": []}, [task("master", 1), task("worker", 2), task("other", 4)])


@pytest.mark.parametrize(("task_name", "index", "rank"), [("master", 0, "0"), ("worker", 0, "1"), ("worker", 1, "2"), ("other", 3, None)])
def test_pytorch_rank_master_zero_worker_index_plus_one_other_none(task_name, index, rank):
    values = env(pod(PT, task_name, index))
    assert values.get("RANK") == rank
    assert values["MASTER_ADDR"] == "demo-master-0.demo"
    assert values["MASTER_PORT"] == "23456"


def test_pytorch_world_size_counts_only_master_and_worker_replicas():
    assert env(pod(PT, "other", 0))["WORLD_SIZE"] == "3"


def test_pytorch_env_order_and_port():
    container = pod(PT, "worker", 0)["spec"]["containers"][0]
    assert [e["name"] for e in container["env"]] == ["MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK"]
    assert container["ports"] == [{"name": "pytorchjob-port", "containerPort": 23456}]


def test_pytorch_every_master_replica_gets_rank_zero():
    job = make_job({"pytorch": []}, [task("master", 2), task("worker", 1)])
    assert env(pod(job, "master", 1))["RANK"] == "0"


def test_pytorch_without_master_task_changes_nothing():
    job = make_job({"pytorch": []}, [task("worker", 2)])
    assert "env" not in pod(job, "worker", 0)["spec"]["containers"][0]


def test_pytorch_keeps_existing_container_port():
    t = task("master", 1)
    t["template"]["spec"]["containers"][0]["ports"] = [{"containerPort": 23456, "name": "mine"}]
    assert pod(make_job({"pytorch": []}, [t]), "master", 0)["spec"]["containers"][0]["ports"] == [{"containerPort": 23456, "name": "mine"}]


def test_pytorch_custom_names_and_port_and_master_addr_uses_template_hostname():
    job = make_job({"pytorch": ["--master=chief", "--worker=w", "--port=1234"]},
                   [task("chief", 1, hostname="boss", subdomain="net"), task("w", 1)])
    values = env(pod(job, "w", 0))
    assert values == {"MASTER_ADDR": "boss.net", "MASTER_PORT": "1234", "WORLD_SIZE": "2", "RANK": "1"}


def test_pytorch_wait_for_master_init_container_on_workers_only():
    job = make_job({"pytorch": ["--wait-master-enabled", "--wait-master-timeout=60", "--wait-master-image=bb:1"]},
                   [task("master", 1), task("worker", 1)])
    worker = pod(job, "worker", 0)
    init = worker["spec"]["initContainers"][-1]
    assert init["name"] == "wait-for-master" and init["image"] == "bb:1" and init["command"][:2] == ["sh", "-c"]
    assert "Waiting for master node demo-master-0.demo:23456 to be ready..." in init["command"][2]
    assert "TIMEOUT=60" in init["command"][2]
    assert "initContainers" not in pod(job, "master", 0)["spec"]


def test_pytorch_wait_for_master_gets_env_of_later_plugins():
    """vcbus order: pytorch runs before env/svc, so its init container is treated like the others."""
    job = make_job({"pytorch": ["--wait-master-enabled"], "env": [], "svc": []}, [task("master", 1), task("worker", 1)])
    init = pod(job, "worker", 0)["spec"]["initContainers"][0]
    assert [e["name"] for e in init["env"]][:2] == ["VK_TASK_INDEX", "VC_TASK_INDEX"]


def test_pytorch_bad_worker_index_fails_pod_creation():
    job = make_job({"pytorch": []}, [task("master", 1), task("worker", 1)])
    built = pod(job, "worker", 0, run_plugins=False)
    built["metadata"]["name"] = "x"
    from statemachines.plugins import on_pod_create
    with pytest.raises(PluginError, match='strconv.Atoi: parsing "": invalid syntax'):
        on_pod_create(built, job)


def test_pytorch_bookkeeping():
    assert on_job_add(PT).controlled_resources == {"plugin-pytorch": "pytorch"}


# ------------------------------------------------------------------ mpi

MPI = make_job({"mpi": []}, [task("master", 1), task("worker", 2)], name="mpi-demo")


def test_mpi_master_gets_mpi_host_of_workers():
    assert env(pod(MPI, "master", 0))["MPI_HOST"] == "mpi-demo-worker-0.mpi-demo,mpi-demo-worker-1.mpi-demo"


def test_mpi_worker_gets_port_but_never_mpi_host():
    worker = pod(MPI, "worker", 0)["spec"]["containers"][0]
    assert "env" not in worker and worker["ports"] == [{"name": "mpijob-port", "containerPort": 22}]


def test_mpi_adds_port_and_env_to_init_containers_too():
    job = make_job({"mpi": ["--port=2022"]}, [task("master", 1, initContainers=[{"name": "i", "image": "x"}]), task("worker", 1)])
    init = pod(job, "master", 0)["spec"]["initContainers"][0]
    assert init["ports"] == [{"name": "mpijob-port", "containerPort": 2022}] and init["env"][0]["name"] == "MPI_HOST"


def test_mpi_master_without_worker_task_gets_nothing_not_even_ports():
    job = make_job({"mpi": []}, [task("master", 1)])
    assert pod(job, "master", 0)["spec"]["containers"][0] == {"name": "c", "image": "x"}


def test_mpi_zero_worker_replicas_gives_empty_mpi_host():
    job = make_job({"mpi": []}, [task("master", 1), task("worker", 0)])
    assert env(pod(job, "master", 0))["MPI_HOST"] == ""


def test_mpi_worker_template_hostname_lists_one_host():
    job = make_job({"mpi": []}, [task("master", 1), task("worker", 3, hostname="w")], name="j")
    assert env(pod(job, "master", 0))["MPI_HOST"] == "w.j"


# ------------------------------------------------------------------ tensorflow


def test_tensorflow_tf_config_for_worker():
    job = make_job({"tensorflow": []}, [task("ps", 1), task("worker", 2)], name="tf-demo")
    assert env(pod(job, "worker", 1))["TF_CONFIG"] == (
        '{"cluster":{"ps":["tf-demo-ps-0.tf-demo:2222"],"worker":["tf-demo-worker-0.tf-demo:2222",'
        '"tf-demo-worker-1.tf-demo:2222"]},"task":{"type":"worker","index":1}}')


def test_tensorflow_skips_single_task_single_replica_job():
    job = make_job({"tensorflow": []}, [task("worker", 1)])
    assert "env" not in pod(job, "worker", 0)["spec"]["containers"][0]


def test_tensorflow_role_order_omits_empty_and_raw_name_for_other_tasks():
    job = make_job({"tensorflow": ["--port=1"]}, [task("evaluator", 1), task("chief", 1), task("odd", 2), task("ps", 0)])
    config = json.loads(env(pod(job, "odd", 1))["TF_CONFIG"])
    assert list(config["cluster"]) == ["chief", "evaluator"]
    assert config["task"] == {"type": "odd", "index": 1}


def test_tensorflow_template_hostname_repeats_per_replica():
    job = make_job({"tensorflow": []}, [task("worker", 2, hostname="h")], name="j")
    assert json.loads(env(pod(job, "worker", 0))["TF_CONFIG"])["cluster"]["worker"] == ["h.j:2222", "h.j:2222"]


def test_tensorflow_only_regular_containers_no_ports():
    job = make_job({"tensorflow": []}, [task("ps", 1, initContainers=[{"name": "i", "image": "x"}]), task("worker", 1)])
    built = pod(job, "ps", 0)
    assert "env" not in built["spec"]["initContainers"][0] and "ports" not in built["spec"]["containers"][0]


# ------------------------------------------------------------------ ray

RAY = make_job({"ray": []}, [task("head", 1, containers=("head", "side")), task("worker", 2, containers=("worker",))], name="ray-demo")


def test_ray_head_container_gets_ports_and_head_command():
    head = pod(RAY, "head", 0)["spec"]["containers"]
    assert head[0]["command"] == ["sh", "-c", "ray start --head --block --dashboard-host=0.0.0.0 --port=6379 "
                                  "--dashboard-port=8265 --ray-client-server-port=10001"]
    assert head[0]["ports"] == [{"name": "gcs", "containerPort": 6379}, {"name": "dashboard", "containerPort": 8265},
                                {"name": "client-server", "containerPort": 10001}]
    assert head[1] == {"name": "side", "image": "x"}


def test_ray_worker_command_points_at_head_replica_zero():
    assert pod(RAY, "worker", 1)["spec"]["containers"][0]["command"] == [
        "sh", "-c", "ray start --block --address=ray-demo-head-0.ray-demo:6379"]


def test_ray_without_head_task_fails_every_pod():
    job = make_job({"ray": []}, [task("worker", 1)], name="r")
    with pytest.raises(PluginError, match="job r doesn't have head task head"):
        pod(job, "worker", 0)


def test_ray_head_service_is_clusterip_with_three_named_ports():
    added = on_job_add(RAY)
    service = added.effects[0].manifest
    assert service["metadata"]["name"] == "ray-demo-head-svc" and "clusterIP" not in service["spec"]
    assert service["spec"]["selector"] == {"volcano.sh/job-name": "ray-demo", "volcano.sh/job-namespace": "ns",
                                           "volcano.sh/task-spec": "head"}
    assert [(p["name"], p["port"], p["targetPort"]) for p in service["spec"]["ports"]] == [
        ("gcs", 6379, "gcs"), ("dashboard", 8265, "dashboard"), ("client-server", 10001, "client-server")]
    deleted = on_job_delete({**RAY, "status": {"controlledResources": added.controlled_resources}})
    assert [(e.kind, e.name) for e in deleted.effects] == [("Service", "ray-demo-head-svc")]


# ------------------------------------------------------------------ hcclrank


def annotation(built):
    return built["metadata"]["annotations"].get("hccl/rankIndex")


def test_hcclrank_master_index_and_worker_offset_by_master_replicas():
    job = make_job({"hcclrank": []}, [task("master", 2), task("worker", 2)])
    assert [annotation(pod(job, t, i)) for t, i in [("master", 1), ("worker", 0), ("worker", 1)]] == ["1", "2", "3"]


def test_hcclrank_other_task_gets_no_annotation():
    job = make_job({"hcclrank": []}, [task("other", 1)])
    assert annotation(pod(job, "other", 0)) is None


def test_hcclrank_uses_rank_env_set_by_pytorch_in_vcbus_order():
    job = make_job({"hcclrank": [], "pytorch": []}, [task("master", 2), task("worker", 2)])
    assert [annotation(pod(job, t, i)) for t, i in [("master", 1), ("worker", 0)]] == ["0", "1"]


def test_hcclrank_keeps_existing_annotation():
    t = task("master", 1)
    t["template"]["metadata"] = {"annotations": {"hccl/rankIndex": "7"}}
    assert annotation(pod(make_job({"hcclrank": []}, [t]), "master", 0)) == "7"


def test_hcclrank_valuefrom_rank_falls_back_to_label():
    t = task("worker", 1)
    t["template"]["spec"]["containers"][0]["env"] = [{"name": "RANK", "valueFrom": {"fieldRef": {"fieldPath": "x"}}}]
    assert annotation(pod(make_job({"hcclrank": []}, [task("master", 3), t]), "worker", 0)) == "3"


def test_hcclrank_missing_label_is_an_error():
    from statemachines.plugins import on_pod_create
    job = make_job({"hcclrank": []}, [task("master", 1)])
    built = pod(job, "master", 0, run_plugins=False)
    del built["metadata"]["labels"]["volcano.sh/task-index"]
    with pytest.raises(PluginError, match="pod demo-master-0 doesn't have volcano.sh/task-index label"):
        on_pod_create(built, job)


def test_hcclrank_has_no_bookkeeping():
    assert on_job_add(make_job({"hcclrank": []}, [task("master", 1)])).controlled_resources == {}
