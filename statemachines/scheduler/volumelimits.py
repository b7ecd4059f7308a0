"""NodeVolumeLimits: kube-scheduler's CSI volume limits (`pkg/scheduler/framework/plugins/nodevolumelimits/csi.go`
in Kubernetes), which Volcano's predicates plugin runs by default (`predicate.NodeVolumeLimitsEnable`,
`pkg/scheduler/plugins/predicates/predicates.go`, between InterPodAffinity and VolumeZone).

A node's CSINode (named as the node) gives per CSI driver the number of volumes it can attach
(`spec.drivers[].allocatable.count`). A node fails a pod (Unschedulable, `node(s) exceed max volume
count`) when, for a driver with a limit, the unique volumes of the pods on it (those placed earlier in
the session included, those being evicted or deleted not), plus the node's VolumeAttachments of CSI PVs
no pod there uses, plus the pod's volumes not already on the node, exceed that count.

A volume's driver and unique name (`<driver>/<handle>`): for a claim bound to a PV, the PV's `spec.csi`
(driver, volumeHandle), or for a PV of an in-tree type that CSI migration translates and kube-scheduler
counts as migrated (`isCSIMigrationOn`: AWS EBS, GCE PD, Azure Disk, Cinder, Portworx, on a node that
has a CSINode) the CSI driver of that plugin; for an unbound claim (or one whose PV does not exist) its
StorageClass's provisioner (an in-tree provisioner's CSI driver, as above), and a handle unique to the
claim; an inline volume of such an in-tree type counts the same way. The handle of an in-tree volume is
not csi-translation-lib's but the plugin and the volume's own identity (its volumeID, pdName or diskURI):
it only has to tell volumes apart. Without a CSINode, or for a driver the CSINode sets no count for,
nothing is limited (volume limit scaling, an alpha feature gate, is off).
"""

from __future__ import annotations

from typing import Any

from statemachines.scheduler import objects as o
from statemachines.scheduler.fiterrors import UNSCHEDULABLE
from statemachines.scheduler.model import RELEASING

MAX_VOLUME_COUNT = "node(s) exceed max volume count"
# (view field, in-tree plugin, its CSI driver, the source's identity key): csi-translation-lib's plugins
# whose migration kube-scheduler's isCSIMigrationOn reports on (vSphere and Azure File: off)
IN_TREE = (
    ("aws_elastic_block_store", "kubernetes.io/aws-ebs", "ebs.csi.aws.com", "volumeID"),
    ("gce_persistent_disk", "kubernetes.io/gce-pd", "pd.csi.storage.gke.io", "pdName"),
    ("azure_disk", "kubernetes.io/azure-disk", "disk.csi.azure.com", "diskURI"),
    ("cinder", "kubernetes.io/cinder", "cinder.csi.openstack.org", "volumeID"),
    ("portworx_volume", "kubernetes.io/portworx-volume", "pxd.portworx.com", "volumeID"),
)
MIGRATED_PROVISIONERS = {plugin: driver for _, plugin, driver, _ in IN_TREE}


def in_tree(source: Any) -> tuple[str, str] | None:
    """(CSI driver, handle) of a PV spec's or a pod volume's migratable in-tree source, or None."""
    for field, plugin, driver, key in IN_TREE:
        value = getattr(source, field, None)
        if value is not None:
            return driver, f"{plugin}:{value.get(key, '')}"
    return None


def inline_volumes(spec: o.PodSpec) -> tuple[tuple[str, str], ...]:
    """(CSI driver, handle) of each of the pod's inline volumes CSI migration translates."""
    found = (in_tree(v) for v in spec.volumes or () if v.persistent_volume_claim is None and v.ephemeral is None)
    return tuple(f for f in found if f is not None)


def csi_source(spec: o.VolumeSpec) -> tuple[str, str, bool] | None:
    """(driver, handle, migrated) of a PV: its CSI source, else its migratable in-tree source."""
    if spec.csi is not None:
        return spec.csi.driver, spec.csi.volume_handle, False
    found = in_tree(spec)
    return None if found is None else (*found, True)


def limits(csinode: o.CSINode) -> dict[str, int]:
    """`getVolumeLimits`: per driver the count its CSINode entry allows (drivers without one: none)."""
    out = {}
    for driver in csinode.spec.drivers or ():
        if driver.allocatable is not None and driver.allocatable.count is not None:
            out[driver.name] = driver.allocatable.count
    return out


class VolumeLimits:
    """The session's NodeVolumeLimits: the CSINodes' limits, the nodes' attachments, and per pod its
    volumes (cached per pod and whether its node has a CSINode, which in-tree volumes depend on)."""

    def __init__(self, snapshot) -> None:
        self.snapshot = snapshot
        self.csinodes: dict[str, dict[str, int]] = snapshot.csinodes
        self._attached: dict[str, dict[str, str]] | None = None
        self._volumes: dict[tuple[str, bool], dict[str, str]] = {}

    def attached(self, node: str) -> dict[str, str]:
        """`getNodeVolumeAttachmentInfo`: the unique names of the CSI PVs attached to the node, by attacher."""
        if self._attached is None:
            self._attached = {}
            volumes = self.snapshot.volumes
            for name, pv_name, attacher in self.snapshot.attachments.values():
                pv = volumes.get(pv_name) if pv_name else None
                if not attacher or pv is None or pv.csi is None or pv.csi[2]:
                    continue  # no attacher, no PV, or not a CSI PV
                self._attached.setdefault(name, {})[f"{attacher}/{pv.csi[1]}"] = attacher
        return self._attached.get(node, {})

    def volumes(self, fact, has_csinode: bool) -> dict[str, str]:
        """`filterAttachableVolumes`: the pod's counted volumes, unique name -> driver."""
        key = (fact.uid, has_csinode)
        found = self._volumes.get(key)
        if found is not None:
            return found
        found = {}
        snapshot = self.snapshot
        for _, name, _ in fact.claims:
            claim = snapshot.claims.get(f"{fact.namespace}/{name}")
            if claim is None:
                continue  # the PreFilters refuse a new pod for it; an existing pod's is not counted
            driver, handle = self._claim_driver(claim, has_csinode)
            if driver and handle:
                found[f"{driver}/{handle}"] = driver
        if has_csinode:
            for driver, handle in fact.inline_volumes:
                found[f"{driver}/{handle}"] = driver
        self._volumes[key] = found
        return found

    def _claim_driver(self, claim, has_csinode: bool) -> tuple[str, str]:
        """`getCSIDriverInfo`: from the claim's PV, else (unbound, or the PV gone) from its StorageClass."""
        pv = self.snapshot.volumes.get(claim.volume) if claim.volume else None
        if pv is not None:
            if pv.csi is None:
                return "", ""
            driver, handle, migrated = pv.csi
            return ("", "") if migrated and not has_csinode else (driver, handle)
        if not claim.storage_class or claim.storage_class not in self.snapshot.provisioners:
            return "", ""  # an immediate claim, bound before scheduling: not counted
        provisioner = self.snapshot.provisioners[claim.storage_class]
        handle = f"claim-{claim.key}"  # kube-scheduler: a random prefix and the claim's key
        if provisioner in MIGRATED_PROVISIONERS:
            return (MIGRATED_PROVISIONERS[provisioner], handle) if has_csinode else ("", "")
        return provisioner, handle

    def prepare(self, fact):
        """The task's per-node check, or None when it has no volume this filter counts (PreFilter's Skip)."""
        if not fact.claims and not fact.inline_volumes:
            return None

        def check(node) -> tuple[int, str] | None:
            node_limits = self.csinodes.get(node.name)
            new = dict(self.volumes(fact, node_limits is not None))
            if not new or not node_limits:
                return None
            on_node: dict[str, str] = {}
            for task in node.tasks.values():
                if task.status != RELEASING and task.fact.uid != fact.uid:
                    on_node.update(self.volumes(task.fact, True))
            counts: dict[str, int] = {}
            for unique, driver in on_node.items():
                new.pop(unique, None)  # a volume the node has already counts once
                counts[driver] = counts.get(driver, 0) + 1
            for unique, driver in self.attached(node.name).items():
                if unique not in on_node:
                    counts[driver] = counts.get(driver, 0) + 1
            wanted: dict[str, int] = {}
            for driver in new.values():
                wanted[driver] = wanted.get(driver, 0) + 1
            for driver, count in wanted.items():
                limit = node_limits.get(driver)
                if limit is not None and counts.get(driver, 0) + count > limit:
                    return (UNSCHEDULABLE, MAX_VOLUME_COUNT)
            return None

        return check
