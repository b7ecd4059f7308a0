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

- and for an unbound claim of a WaitForFirstConsumer class whose StorageClass provisions nothing
  (no provisioner, or `kubernetes.io/no-provisioner`: static PVs only), VolumeBinding's static
  binding (`FindPodVolumes` / `findMatchingVolumes`, component-helpers' `FindMatchingVolume`): per
  node the smallest Available PV of the claim's class that fits it (capacity, access modes, volume
  mode, attributes class, the claim's selector, the PV's node affinity on that node), none already
  claimed by another claim, none chosen for another claim of the same pod (`node(s) didn't find
  available persistent volumes to bind`). `VolumeBinder` holds the session's assumed claims (Reserve
  on allocate, Unreserve on deallocate), so two claims never get one PV in a session, and the
  bindings chosen per task, which its BindPod carries (the actuator writes the PVs' claimRef first).

An unbound WaitForFirstConsumer claim that a provisioner would serve (its driver, its capacity, the
class's allowedTopologies), or one already given a node to provision on (`volume.kubernetes.io/
selected-node`), is not evaluated: the pod waits, saying so.
"""

from __future__ import annotations

from fractions import Fraction

from statemachines.scheduler import objects as o
from statemachines.scheduler.fiterrors import UNRESOLVABLE
from statemachines.scheduler.labels import Selector, compile_selector, matches, requirement, selector_terms
from statemachines.scheduler.resources import parse_quantity
from statemachines.scheduler.volumelimits import csi_source

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
BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
SELECTED_NODE = "volume.kubernetes.io/selected-node"
BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
NO_PROVISIONER = "kubernetes.io/no-provisioner"  # volume.NotSupportedProvisioner
FILESYSTEM = "Filesystem"


def _storage(quantities: dict | None, where: str) -> Fraction:
    """The `storage` quantity of a resource list, exactly (a missing one is zero, as Go's zero Quantity)."""
    raw = (quantities or {}).get("storage")
    return Fraction(0) if raw is None else parse_quantity(raw, where).value


class ClaimFact:
    """A PersistentVolumeClaim as the volume checks read it."""

    __slots__ = ("key", "namespace", "name", "uid", "volume", "storage_class", "bound", "lost", "deleting", "controller",
                 "request", "access_modes", "volume_mode", "selector", "attributes_class", "selected_node")

    def __init__(self, pvc: o.PersistentVolumeClaim) -> None:
        meta = pvc.metadata
        notes = meta.annotations or {}
        spec = pvc.spec
        self.key = f"{meta.namespace}/{meta.name}"
        self.namespace = meta.namespace
        self.name = meta.name
        self.uid = meta.uid
        # what FindMatchingVolume asks of a PV
        self.request = _storage(spec.resources.requests,
                                f"PersistentVolumeClaim {self.key} spec.resources.requests.storage")
        self.access_modes = tuple(spec.access_modes or ())
        self.volume_mode = spec.volume_mode or FILESYSTEM
        self.selector: Selector | None = compile_selector(spec.selector)  # None: no selector (any PV)
        self.attributes_class = spec.volume_attributes_class_name or ""
        self.selected_node = notes.get(SELECTED_NODE, "")
        self.volume = pvc.spec.volume_name
        # GetPersistentVolumeClaimClass: the beta annotation first
        self.storage_class = notes.get(BETA_CLASS, pvc.spec.storage_class_name or "")
        self.bound = bool(self.volume) and BIND_COMPLETED in notes  # isPVCFullyBound
        self.lost = pvc.status.phase == "Lost"
        self.deleting = meta.deletion_timestamp is not None
        self.controller = ""
        for ref in meta.owner_references or ():
            if ref.get("controller") is True:
                self.controller = str(ref.get("uid") or "")
                break


class VolumeFact:
    """A PersistentVolume: its topology labels (VolumeZone), required node affinity (VolumeBinding), and
    what a claim is matched against (capacity, access modes, class, volume mode, labels, phase, claimRef)."""

    __slots__ = ("name", "topologies", "terms", "capacity", "access_modes", "storage_class", "volume_mode",
                 "attributes_class", "labels", "available", "deleting", "claim_ref", "csi")

    def __init__(self, pv: o.PersistentVolume) -> None:
        meta, spec = pv.metadata, pv.spec
        self.name = meta.name
        labels = meta.labels or {}
        self.capacity = _storage(spec.capacity, f"PersistentVolume {meta.name} spec.capacity.storage")
        self.access_modes = frozenset(spec.access_modes or ())
        notes = meta.annotations or {}
        self.storage_class = notes.get(BETA_CLASS, spec.storage_class_name)  # GetPersistentVolumeClass
        self.volume_mode = spec.volume_mode or FILESYSTEM
        self.attributes_class = spec.volume_attributes_class_name or ""
        self.labels = dict(labels)
        self.available = pv.status.phase == "Available"
        self.deleting = meta.deletion_timestamp is not None
        ref = spec.claim_ref
        self.claim_ref: tuple[str, str, str] | None = None if ref is None else (ref.namespace, ref.name, ref.uid)
        self.csi = csi_source(spec)  # NodeVolumeLimits: (driver, handle, migrated from in-tree)

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

    def claimed(self, ref: tuple[str, str, str]) -> VolumeFact:
        """A copy whose claimRef is `ref` (namespace, name, uid): the bind the scheduler assumes."""
        copy = object.__new__(VolumeFact)
        for slot in VolumeFact.__slots__:
            setattr(copy, slot, getattr(self, slot))
        copy.claim_ref = ref
        return copy


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


def bound_to(ref: tuple[str, str, str], claim: ClaimFact) -> bool:
    """`IsVolumeBoundToClaim`: the claimRef names the claim (and its uid, if the ref has one)."""
    namespace, name, uid = ref
    return namespace == claim.namespace and name == claim.name and (not uid or uid == claim.uid)


class VolumeBinder:
    """VolumeBinding's static binding in one session: the PVs by class (by name: ties in size go to the
    smallest name), the claims the session assumed on PVs (`taken`: Reserve's `AssumePodVolumes`, undone
    by Unreserve), and per task the (claim, PV) bindings chosen on its node, which its BindPod carries."""

    def __init__(self, volumes: dict[str, VolumeFact]) -> None:
        self.volumes = volumes
        self._by_class: dict[str, list[VolumeFact]] | None = None
        self.taken: dict[str, tuple[tuple[str, str, str], set[str]]] = {}  # PV -> (claimRef, task uids)
        self.bindings: dict[str, tuple[tuple[ClaimFact, VolumeFact], ...]] = {}  # task uid -> bindings

    def by_class(self, storage_class: str) -> list[VolumeFact]:
        if self._by_class is None:  # made on first use: most sessions have no such claim
            self._by_class = {}
            for name in sorted(self.volumes):
                pv = self.volumes[name]
                self._by_class.setdefault(pv.storage_class, []).append(pv)
        return self._by_class.get(storage_class, [])

    def claim_ref(self, pv: VolumeFact) -> tuple[str, str, str] | None:
        if pv.claim_ref is not None:
            return pv.claim_ref
        taken = self.taken.get(pv.name)
        return None if taken is None else taken[0]

    def choose(self, claims: list[ClaimFact], labels: dict[str, str]) -> tuple[tuple[ClaimFact, VolumeFact], ...] | None:
        """`findMatchingVolumes` on a node: a PV per claim, smallest requests first, or None if one has none
        (then kube-scheduler would provision it; these claims' classes provision nothing)."""
        chosen: set[str] = set()
        bindings = []
        for claim in sorted(claims, key=lambda c: c.request):  # byPVCSize
            pv = None if claim.selected_node else self.matching(claim, labels, chosen)
            if pv is None:
                return None
            chosen.add(pv.name)
            bindings.append((claim, pv))
        return tuple(bindings)

    def matching(self, claim: ClaimFact, labels: dict[str, str], excluded: set[str]) -> VolumeFact | None:
        """component-helpers' `FindMatchingVolume` on the scheduler's path (a node, delayed binding)."""
        smallest: VolumeFact | None = None
        for pv in self.by_class(claim.storage_class):
            if pv.name in excluded:
                continue
            ref = self.claim_ref(pv)
            prebound = ref is not None and bound_to(ref, claim)
            if ref is not None and not prebound:
                continue
            if pv.capacity < claim.request or pv.volume_mode != claim.volume_mode:
                continue
            if pv.attributes_class != claim.attributes_class or pv.deleting:
                continue
            fits_node = pv.terms is None or affinity_matches(pv.terms, labels)
            if prebound:
                return pv if fits_node else None
            if not pv.available or (claim.selector is not None and not matches(claim.selector, pv.labels)):
                continue
            if pv.storage_class != claim.storage_class or not fits_node:
                continue
            if not pv.access_modes.issuperset(claim.access_modes):
                continue
            if smallest is None or smallest.capacity > pv.capacity:
                smallest = pv
        return smallest

    def reserve(self, uid: str, claims: list[ClaimFact], labels: dict[str, str]) -> None:
        """The task is placed on a node with these labels: its bindings there, assumed."""
        bindings = self.choose(claims, labels)
        if bindings is None:
            return
        self.bindings[uid] = bindings
        for claim, pv in bindings:
            taken = self.taken.get(pv.name)
            if taken is not None:
                taken[1].add(uid)
            elif pv.claim_ref is None:
                self.taken[pv.name] = ((claim.namespace, claim.name, claim.uid), {uid})

    def unreserve(self, uid: str) -> None:
        for _, pv in self.bindings.pop(uid, ()):
            taken = self.taken.get(pv.name)
            if taken is not None:
                taken[1].discard(uid)
                if not taken[1]:
                    del self.taken[pv.name]


class Prepared:
    """One task's volume checks for a session: the PreFilter's failure ("" if none), the PV
    topologies (VolumeZone), the bound claims' PVs and the unbound WaitForFirstConsumer claims to
    find static PVs for (VolumeBinding) the nodes are checked against."""

    __slots__ = ("error", "unevaluated", "topologies", "bound", "unbound", "binder")

    def __init__(self) -> None:
        self.error = ""
        self.unevaluated = ""  # the first WaitForFirstConsumer claim to be provisioned: spec.volumes[i]...
        self.topologies: list[tuple[str, frozenset[str]]] = []
        self.bound: list[VolumeFact | None] = []  # None: the PV does not exist
        self.unbound: list[ClaimFact] = []  # WaitForFirstConsumer claims of classes that provision nothing
        self.binder: VolumeBinder | None = None

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
        """VolumeBinding's Filter (`FindPodVolumes`): the bound claims' PVs (`checkBoundClaims`), then a
        static PV for each unbound claim; one status, its reasons joined as `Status.Message()` joins them."""
        affinity, found = True, True
        for pv in self.bound:
            if pv is None:
                found = False
                break
            if pv.terms is not None and not affinity_matches(pv.terms, labels):
                affinity = False
                break
        static = not self.unbound or self.binder is None or self.binder.choose(self.unbound, labels) is not None
        if affinity and found and static:
            return None
        reasons = [r for r, failed in ((NODE_CONFLICT, not affinity), (BIND_CONFLICT, not static),
                                       (PV_NOT_EXIST, not found)) if failed]
        return (UNRESOLVABLE, ", ".join(reasons))


def prefilter(snapshot, fact, *, zone: bool = True, binding: bool = True, binder: VolumeBinder | None = None) -> Prepared:
    """The task's volume PreFilters over the snapshot's claims, volumes and classes (`binder`: the session's,
    for the static binding of unbound WaitForFirstConsumer claims)."""
    prepared = Prepared()
    prepared.binder = binder
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
    provisioners = snapshot.provisioners
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
            if provisioners.get(claim.storage_class, "") in ("", NO_PROVISIONER):
                prepared.unbound.append(claim)  # static PVs only: matched per node
            elif not prepared.unevaluated:
                kind = "ephemeral" if ephemeral else "persistentVolumeClaim"
                prepared.unevaluated = f"spec.volumes[{index}].{kind} (an unbound WaitForFirstConsumer claim to provision)"
        else:
            immediate = True
    if immediate:
        return _failed("VolumeBinding", UNBOUND_IMMEDIATE)
    return ""


def _failed(plugin: str, message: str) -> str:
    """Volcano's PrePredicate error for a PreFilter failure (`handleSkipPrePredicatePlugin`)."""
    return f"plugin {plugin} pre-predicates failed {message}"
