"""The volume checks that need no storage driver, as Volcano's predicates plugin runs kube-scheduler's
VolumeZone and VolumeBinding (`pkg/scheduler/framework/plugins/volumezone/volume_zone.go`,
`volumebinding/volume_binding.go`, `binder.go` in Kubernetes):

- the facts: a PVC (`ClaimFact`: its PV, its StorageClass, bound, lost, being deleted, its controller),
  a PV (`VolumeFact`: its zone and region labels, its required node affinity) and a StorageClass's
  `volumeBindingMode`, folded by the scheduler cache;
- PreFilter (`prefilter`), in Volcano's PreFilter order, VolumeZone's then VolumeBinding's: a claim
  that does not exist, is lost or being deleted, or is unbound and not WaitForFirstConsumer fails
  the task on every node with kube-scheduler's words in Volcano's PrePredicate wording
  (`plugin VolumeZone pre-predicates failed PersistentVolume had no name`);
- Filter, per node (`Prepared.zone`, `Prepared.binding`): the PV zone labels against the node's
  (VolumeZone: `node(s) had no available volume zone`), a bound claim's PV node affinity against
  the node's labels (VolumeBinding: `node(s) didn't match PersistentVolume's node affinity`).

An unbound claim of a WaitForFirstConsumer class needs a matching PV or a provisioner (its
driver, its capacity): vcbus does not evaluate it, and the pod waits, saying so.
"""

from __future__ import annotations

from statemachines.scheduler import objects as o
from statemachines.scheduler.fiterrors import UNRESOLVABLE
from statemachines.scheduler.labels import requirement, selector_terms

BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
BETA_CLASS = "volume.beta.kubernetes.io/storage-class"
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"
BETA_ZONE, BETA_REGION = "failure-domain.beta.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/region"
ZONE, REGION = "topology.kubernetes.io/zone", "topology.kubernetes.io/region"
TOPOLOGY_LABELS = (BETA_ZONE, BETA_REGION, ZONE, REGION)
GA_LABEL = {BETA_ZONE: ZONE, BETA_REGION: REGION}
ZONE_CONFLICT = "node(s) had no available volume zone"
NODE_CONFLICT = "node(s) didn't match PersistentVolume's node affinity"
PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"


class ClaimFact:
    """A PersistentVolumeClaim as the volume checks read it."""

    __slots__ = ("key", "name", "volume", "storage_class", "bound", "lost", "deleting", "controller")

    def __init__(self, pvc: o.PersistentVolumeClaim) -> None:
        meta = pvc.metadata
        notes = meta.annotations or {}
        self.key = f"{meta.namespace}/{meta.name}"
        self.name = meta.name
        self.volume = pvc.spec.volume_name
        # GetPersistentVolumeClaimClass: the beta annotation first
        self.storage_class = notes[BETA_CLASS] if BETA_CLASS in notes else (pvc.spec.storage_class_name or "")
        self.bound = bool(self.volume) and BIND_COMPLETED in notes  # isPVCFullyBound
        self.lost = pvc.status.phase == "Lost"
        self.deleting = meta.deletion_timestamp is not None
        self.controller = ""
        for ref in meta.owner_references or ():
            if ref.get("controller") is True:
                self.controller = str(ref.get("uid") or "")
                break


class VolumeFact:
    """A PersistentVolume: its topology labels (VolumeZone) and required node affinity (VolumeBinding)."""

    __slots__ = ("name", "topologies", "terms")

    def __init__(self, pv: o.PersistentVolume) -> None:
        self.name = pv.metadata.name
        labels = pv.metadata.labels or {}
        topologies = []
        for key in TOPOLOGY_LABELS:
            if key in labels:
                zones = frozenset(z.strip() for z in labels[key].split("__"))
                if "" not in zones:  # LabelZonesToSet refuses an empty zone: the label is ignored
                    topologies.append((key, zones))
        self.topologies = tuple(topologies)
        affinity = pv.spec.node_affinity
        required = affinity.required if affinity is not None else None
        self.terms = selector_terms(required) if required is not None else None


def pod_claims(name: str, spec: o.PodSpec) -> tuple[tuple[int, str, bool], ...]:
    """(volume index, claim name, ephemeral) per claim volume; an ephemeral volume's claim is
    `<pod>-<volume>` (`ephemeral.VolumeClaimName`)."""
    out = []
    for i, v in enumerate(spec.volumes or ()):
        if v.persistent_volume_claim is not None:
            out.append((i, v.persistent_volume_claim.claim_name, False))
        elif v.ephemeral is not None:
            out.append((i, f"{name}-{v.name}", True))
    return tuple(out)


def affinity_matches(terms: tuple, labels: dict[str, str]) -> bool:
    """`CheckNodeAffinity`: the terms against a node made of the labels alone (no name, so matchFields
    see an empty `metadata.name`); an empty term matches nothing."""
    fields = {"metadata.name": ""}
    for expressions, field_reqs in terms:
        if not expressions and not field_reqs:
            continue
        if all(requirement(labels, r) for r in expressions) and all(requirement(fields, r) for r in field_reqs):
            return True
    return False


class Prepared:
    """One task's volume checks for a session: the PreFilter's failure ("" if none), the PV
    topologies (VolumeZone) and the bound claims' PVs (VolumeBinding) the nodes are checked against."""

    __slots__ = ("error", "unevaluated", "topologies", "bound")

    def __init__(self) -> None:
        self.error = ""
        self.unevaluated = ""  # the first WaitForFirstConsumer claim still unbound: spec.volumes[i]...
        self.topologies: list[tuple[str, frozenset[str]]] = []
        self.bound: list[VolumeFact | None] = []  # None: the PV does not exist

    def zone(self, labels: dict[str, str]) -> tuple[int, str] | None:
        """VolumeZone's Filter: every PV topology label the node must match (if it has any)."""
        if not self.topologies or not any(k in labels for k in TOPOLOGY_LABELS):
            return None
        for key, values in self.topologies:
            value = labels.get(key)
            if value is None:
                value = labels.get(GA_LABEL.get(key, key))
            if value is None or value not in values:
                return (UNRESOLVABLE, ZONE_CONFLICT)
        return None

    def binding(self, labels: dict[str, str]) -> tuple[int, str] | None:
        """VolumeBinding's Filter for the bound claims (`checkBoundClaims`)."""
        for pv in self.bound:
            if pv is None:
                return (UNRESOLVABLE, PV_NOT_EXIST)
            if pv.terms is not None and not affinity_matches(pv.terms, labels):
                return (UNRESOLVABLE, NODE_CONFLICT)
        return None


def prefilter(snapshot, fact, *, zone: bool = True, binding: bool = True) -> Prepared:
    """The task's volume PreFilters over the snapshot's claims, volumes and classes."""
    prepared = Prepared()
    if zone:
        prepared.error = _zone_prefilter(snapshot, fact, prepared)
    if binding and not prepared.error:
        prepared.error = _binding_prefilter(snapshot, fact, prepared)
    return prepared


def _zone_prefilter(snapshot, fact, prepared: Prepared) -> str:
    claims, volumes, classes = snapshot.claims, snapshot.volumes, snapshot.storage_classes
    for _, name, ephemeral in fact.claims:
        if ephemeral:
            continue  # VolumeZone reads persistentVolumeClaim volumes only
        if not name:
            return _failed("VolumeZone", "PersistentVolumeClaim had no name")
        claim = claims.get(f"{fact.namespace}/{name}")
        if claim is None:
            return _failed("VolumeZone", f'persistentvolumeclaim "{name}" not found')
        if not claim.volume:
            if not claim.storage_class:
                return _failed("VolumeZone", "PersistentVolumeClaim had no pv name and storageClass name")
            if claim.storage_class not in classes:
                return _failed("VolumeZone", f'storageclass.storage.k8s.io "{claim.storage_class}" not found')
            mode = classes[claim.storage_class]
            if mode is None:
                return _failed("VolumeZone", f'VolumeBindingMode not set for StorageClass "{claim.storage_class}"')
            if mode == WAIT_FOR_FIRST_CONSUMER:
                continue
            return _failed("VolumeZone", "PersistentVolume had no name")
        pv = volumes.get(claim.volume)
        if pv is None:
            return _failed("VolumeZone", f'persistentvolume "{claim.volume}" not found')
        prepared.topologies.extend(pv.topologies)
    return ""


def _binding_prefilter(snapshot, fact, prepared: Prepared) -> str:
    claims, volumes, classes = snapshot.claims, snapshot.volumes, snapshot.storage_classes
    found = []
    for index, name, ephemeral in fact.claims:  # podHasPVCs
        claim = claims.get(f"{fact.namespace}/{name}")
        if claim is None:
            if ephemeral:
                return _failed("VolumeBinding",
                               f'waiting for ephemeral volume controller to create the persistentvolumeclaim "{name}"')
            return _failed("VolumeBinding", f'persistentvolumeclaim "{name}" not found')
        if claim.lost:
            return _failed("VolumeBinding",
                           f'persistentvolumeclaim "{name}" bound to non-existent persistentvolume "{claim.volume}"')
        if claim.deleting:
            return _failed("VolumeBinding", f'persistentvolumeclaim "{name}" is being deleted')
        if ephemeral and claim.controller != fact.uid:  # ephemeral.VolumeIsForPod
            return _failed("VolumeBinding", f"PVC {fact.namespace}/{name} was not created for pod "
                                            f"{fact.namespace}/{fact.name} (pod is not owner)")
        found.append((index, ephemeral, claim))
    immediate = False
    for index, ephemeral, claim in found:  # GetPodVolumeClaims
        if claim.bound:
            prepared.bound.append(volumes.get(claim.volume))
            continue
        mode = classes.get(claim.storage_class, "") if claim.storage_class else ""  # IsDelayBindingMode
        if mode is None:
            return _failed("VolumeBinding", f'VolumeBindingMode not set for StorageClass "{claim.storage_class}"')
        if mode == WAIT_FOR_FIRST_CONSUMER and not claim.volume:
            if not prepared.unevaluated:
                kind = "ephemeral" if ephemeral else "persistentVolumeClaim"
                prepared.unevaluated = f"spec.volumes[{index}].{kind} (an unbound WaitForFirstConsumer claim)"
        else:
            immediate = True
    if immediate:
        return _failed("VolumeBinding", UNBOUND_IMMEDIATE)
    return ""


def _failed(plugin: str, message: str) -> str:
    """Volcano's PrePredicate error for a PreFilter failure (`handleSkipPrePredicatePlugin`)."""
    return f"plugin {plugin} pre-predicates failed {message}"
