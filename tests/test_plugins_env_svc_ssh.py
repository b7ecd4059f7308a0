"""env, svc and ssh plugins: pod mutations, objects and controlledResources bookkeeping (upstream plugins/env, svc, ssh)."""

from __future__ import annotations

import base64

import pytest

from statemachines.manifests.pod import build_pod
from statemachines.plugins import (
    CREATE_IF_ABSENT,
    CREATE_OR_UPDATE_DATA,
    CREATE_OR_UPDATE_SECRET,
    ApplyObject,
    DeleteObject,
    on_job_add,
    on_job_delete,
    on_job_update,
)
from statemachines.plugins.ssh import fill_ssh_keys, ssh_config
from statemachines.plugins.svc import generate_hosts


def make_job(plugins, tasks=None, *, name="demo", status=None):
    tasks = tasks or [
        {"name": "master", "replicas": 1, "template": {"spec": {"containers": [{"name": "m", "image": "x"}]}}},
        {"name": "worker", "replicas": 2, "template": {"spec": {"containers": [{"name": "w", "image": "x"}],
                                                               "initContainers": [{"name": "i", "image": "x"}]}}},
    ]
    job = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
           "metadata": {"name": name, "namespace": "ns", "uid": "u1"},
           "spec": {"queue": "default", "schedulerName": "volcano", "plugins": plugins, "tasks": tasks}}
    if status is not None:
        job["status"] = status
    return job


def pod_of(job, task="worker", index=1):
    return build_pod(job, task, index, version=0, retry_count=0)


def env_names(container):
    return [e["name"] for e in container.get("env", [])]


# ------------------------------------------------------------------ env


def test_env_adds_vk_then_vc_task_index_to_containers_and_init_containers():
    pod = pod_of(make_job({"env": ["ignored", "-x"]}))
    for container in pod["spec"]["containers"] + pod["spec"]["initContainers"]:
        assert container["env"] == [{"name": "VK_TASK_INDEX", "value": "1"}, {"name": "VC_TASK_INDEX", "value": "1"}]


def test_env_index_comes_from_pod_name_last_dash_part():
    pod = pod_of(make_job({"env": []}, [{"name": "a-b", "replicas": 12,
                                          "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}]), "a-b", 11)
    assert pod["spec"]["containers"][0]["env"][0]["value"] == "11"


def test_env_bookkeeping_only_no_objects():
    added = on_job_add(make_job({"env": []}))
    assert added.effects == () and added.controlled_resources == {"plugin-env": "env"}
    deleted = on_job_delete(make_job({"env": []}, status={"controlledResources": {"plugin-env": "env"}}))
    assert deleted.controlled_resources == {}


# ------------------------------------------------------------------ svc


def test_svc_sets_hostname_and_subdomain_when_empty():
    spec = pod_of(make_job({"svc": []}))["spec"]
    assert (spec["hostname"], spec["subdomain"]) == ("demo-worker-1", "demo")


def test_svc_keeps_template_hostname_and_subdomain():
    tasks = [{"name": "w", "replicas": 1, "template": {"spec": {"hostname": "h", "subdomain": "s",
                                                                 "containers": [{"name": "c", "image": "x"}]}}}]
    spec = pod_of(make_job({"svc": []}, tasks), "w", 0)["spec"]
    assert (spec["hostname"], spec["subdomain"]) == ("h", "s")


def test_svc_injects_hosts_env_from_configmap_for_every_task_in_spec_order():
    pod = pod_of(make_job({"svc": []}))
    for container in pod["spec"]["containers"] + pod["spec"]["initContainers"]:
        assert env_names(container) == ["VC_MASTER_HOSTS", "VC_MASTER_NUM", "VC_WORKER_HOSTS", "VC_WORKER_NUM"]
        assert container["env"][0]["valueFrom"] == {"configMapKeyRef": {"name": "demo-svc", "key": "VC_MASTER_HOSTS"}}


def test_svc_env_key_uppercases_and_replaces_dashes():
    tasks = [{"name": "my-task", "replicas": 1, "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}]
    assert env_names(pod_of(make_job({"svc": []}, tasks), "my-task", 0)["spec"]["containers"][0]) == [
        "VC_MY_TASK_HOSTS", "VC_MY_TASK_NUM"]


def test_svc_inject_hosts_env_false_skips_env_but_still_mounts():
    pod = pod_of(make_job({"svc": ["--inject-hosts-env=false"]}))
    assert "env" not in pod["spec"]["containers"][0]
    assert pod["spec"]["containers"][0]["volumeMounts"] == [{"name": "demo-svc", "mountPath": "/etc/volcano"}]


def test_svc_mounts_configmap_at_etc_volcano_without_subpath_in_all_containers():
    pod = pod_of(make_job({"svc": []}))
    assert {"name": "demo-svc", "configMap": {"name": "demo-svc"}} in pod["spec"]["volumes"]
    for container in pod["spec"]["containers"] + pod["spec"]["initContainers"]:
        assert container["volumeMounts"] == [{"name": "demo-svc", "mountPath": "/etc/volcano"}]


def test_svc_hosts_configmap_data():
    assert generate_hosts(make_job({"svc": []})) == {
        "master.host": "demo-master-0.demo",
        "VC_MASTER_HOSTS": "demo-master-0.demo",
        "VC_MASTER_NUM": "1",
        "worker.host": "demo-worker-0.demo\ndemo-worker-1.demo",
        "VC_WORKER_HOSTS": "demo-worker-0.demo,demo-worker-1.demo",
        "VC_WORKER_NUM": "2",
    }


def test_svc_hosts_file_key_is_not_uppercased_and_zero_replicas_give_empty_lists():
    tasks = [{"name": "my-t", "replicas": 0, "template": {"spec": {}}}]
    assert generate_hosts(make_job({"svc": []}, tasks)) == {"my_t.host": "", "VC_MY_T_HOSTS": "", "VC_MY_T_NUM": "0"}


def test_svc_template_hostname_lists_only_one_host():
    tasks = [{"name": "t", "replicas": 3, "template": {"spec": {"hostname": "h", "containers": []}}}]
    assert generate_hosts(make_job({"svc": []}, tasks))["VC_T_HOSTS"] == "h.demo"


def test_svc_on_job_add_creates_configmap_headless_service_and_networkpolicy():
    added = on_job_add(make_job({"svc": []}))
    kinds = [(e.manifest["kind"], e.manifest["metadata"]["name"], e.mode) for e in added.effects]
    assert kinds == [("ConfigMap", "demo-svc", CREATE_OR_UPDATE_DATA), ("Service", "demo", CREATE_IF_ABSENT),
                     ("NetworkPolicy", "demo", CREATE_IF_ABSENT)]
    service = added.effects[1].manifest
    assert service["spec"] == {"clusterIP": "None", "publishNotReadyAddresses": False,
                               "selector": {"volcano.sh/job-name": "demo", "volcano.sh/job-namespace": "ns"}}
    policy = added.effects[2].manifest["spec"]
    labels = {"volcano.sh/job-name": "demo", "volcano.sh/job-namespace": "ns"}
    assert policy == {"podSelector": {"matchLabels": labels}, "ingress": [{"from": [{"podSelector": {"matchLabels": labels}}]}],
                      "policyTypes": ["Ingress"]}
    assert added.controlled_resources == {"plugin-svc": "svc"}
    assert service["metadata"]["ownerReferences"] == [{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "demo",
                                                       "uid": "u1", "controller": True, "blockOwnerDeletion": True}]


def test_svc_publish_not_ready_and_disable_network_policy_flags():
    added = on_job_add(make_job({"svc": ["--publish-not-ready-addresses", "--disable-network-policy=true"]}))
    assert [e.manifest["kind"] for e in added.effects] == ["ConfigMap", "Service"]
    assert added.effects[1].manifest["spec"]["publishNotReadyAddresses"] is True


def test_svc_on_job_add_is_skipped_when_already_recorded():
    added = on_job_add(make_job({"svc": []}, status={"controlledResources": {"plugin-svc": "svc"}}))
    assert added.effects == ()


def test_svc_on_job_update_refreshes_only_the_configmap():
    updated = on_job_update(make_job({"svc": []}, status={"controlledResources": {"plugin-svc": "svc"}}))
    assert [e.manifest["kind"] for e in updated.effects] == ["ConfigMap"]


def test_svc_on_job_delete_deletes_configmap_service_networkpolicy_and_key():
    deleted = on_job_delete(make_job({"svc": []}, status={"controlledResources": {"plugin-svc": "svc", "x": "y"}}))
    assert [(e.kind, e.name) for e in deleted.effects] == [("ConfigMap", "demo-svc"), ("Service", "demo"),
                                                           ("NetworkPolicy", "demo")]
    assert all(isinstance(e, DeleteObject) for e in deleted.effects)
    assert deleted.controlled_resources == {"x": "y"}


def test_svc_on_job_delete_does_nothing_without_key():
    assert on_job_delete(make_job({"svc": []})).effects == ()


# ------------------------------------------------------------------ ssh


def test_ssh_mounts_secret_with_subpath_in_all_containers_mode_0600():
    pod = pod_of(make_job({"ssh": []}))
    volume = next(v for v in pod["spec"]["volumes"] if v["name"] == "demo-ssh")
    assert volume["secret"]["defaultMode"] == 0o600 == 384
    assert [i["path"] for i in volume["secret"]["items"]] == [".ssh/id_rsa", ".ssh/id_rsa.pub", ".ssh/authorized_keys", ".ssh/config"]
    for container in pod["spec"]["containers"] + pod["spec"]["initContainers"]:
        assert container["volumeMounts"] == [{"name": "demo-ssh", "mountPath": "/root/.ssh", "subPath": ".ssh"}]


def test_ssh_other_key_path_uses_mode_0644():
    pod = pod_of(make_job({"ssh": ["--ssh-key-file-path=/home/u/.ssh"]}))
    volume = next(v for v in pod["spec"]["volumes"] if v["name"] == "demo-ssh")
    assert volume["secret"]["defaultMode"] == 420
    assert pod["spec"]["containers"][0]["volumeMounts"][0]["mountPath"] == "/home/u/.ssh"


def test_ssh_config_lists_every_pod_with_port():
    assert ssh_config(make_job({"ssh": []}), 22) == (
        "StrictHostKeyChecking no\nUserKnownHostsFile /dev/null\n"
        "Host demo-master-0\n  HostName demo-master-0.demo\n  Port 22\n"
        "Host demo-worker-0\n  HostName demo-worker-0.demo\n  Port 22\n"
        "Host demo-worker-1\n  HostName demo-worker-1.demo\n  Port 22\n")


@pytest.mark.parametrize(("arg", "port"), [("-ssh-port=2222", 2222), ("-ssh-port=0", 22), ("-ssh-port=70000", 22)])
def test_ssh_port_out_of_range_falls_back_to_22(arg, port):
    secret = on_job_add(make_job({"ssh": [arg]})).effects[0].manifest
    assert f"Port {port}\n" in base64.b64decode(secret["data"]["config"]).decode()


def test_ssh_without_user_key_asks_the_adapter_to_fill_generated_keys():
    effect = on_job_add(make_job({"ssh": []})).effects[0]
    assert isinstance(effect, ApplyObject) and effect.mode == CREATE_OR_UPDATE_SECRET and effect.fill_ssh_keys
    assert set(effect.manifest["data"]) == {"config"}
    filled = fill_ssh_keys(effect.manifest, "PRIV", "ssh-rsa AAA\n")
    assert base64.b64decode(filled["data"]["authorized_keys"]) == base64.b64decode(filled["data"]["id_rsa.pub"]) == b"ssh-rsa AAA\n"


def test_ssh_user_private_key_is_stored_verbatim_without_unescaping():
    effect = on_job_add(make_job({"ssh": ["--ssh-private-key=a\\nb"]})).effects[0]
    data = {k: base64.b64decode(v).decode() for k, v in effect.manifest["data"].items()}
    assert not effect.fill_ssh_keys
    assert data["id_rsa"] == "a\\nb" and data["id_rsa.pub"] == "" and data["authorized_keys"] == ""


def test_ssh_on_job_delete_deletes_secret():
    deleted = on_job_delete(make_job({"ssh": []}, status={"controlledResources": {"plugin-ssh": "ssh"}}))
    assert [(e.kind, e.name) for e in deleted.effects] == [("Secret", "demo-ssh")]
    assert deleted.controlled_resources == {}
