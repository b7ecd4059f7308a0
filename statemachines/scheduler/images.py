"""Container images for nodeorder's ImageLocality score (kube-scheduler's
`pkg/scheduler/framework/plugins/imagelocality/image_locality.go`, as Volcano's nodeorder runs it).

- `pod_images`: the images a pod pulls, normalized (`normalizedImageName`: `:latest` added to a
  name without a tag), init containers, containers, then image volumes; and how many containers
  it has (the score's upper bound is 1000 MB per container).
- `ImageStates`: the scheduler cache's image bookkeeping (Volcano's `pkg/scheduler/cache/event_handlers.go`
  `addNodeImageStates` / `removeNodeImageStates`): per image name the size first seen and the
  nodes that hold it. Folding a node record gives the node its summary, per name (size, number of
  nodes holding it at that moment): as in Volcano, a node's count is not updated when other nodes
  pull the image later, only when the node itself is folded again.
- `image_score`: `sumImageScores` and `calculatePriority` for one node, 0 to 100.
"""

from __future__ import annotations

from statemachines.scheduler import objects as o

MB = 1024 * 1024
MIN_THRESHOLD = 23 * MB
MAX_CONTAINER_THRESHOLD = 1000 * MB
MAX_NODE_SCORE = 100


def normalized_image_name(name: str) -> str:
    """`normalizedImageName`: a name whose last `:` is not after its last `/` gets `:latest`."""
    if name.rfind(":") <= name.rfind("/"):
        return name + ":latest"
    return name


def pod_images(spec: o.PodSpec) -> tuple[tuple[str, ...], int]:
    """The pod's normalized images in `sumImageScores`' order, and its number of containers."""
    containers = [*(spec.init_containers or ()), *(spec.containers or ())]
    images = [normalized_image_name(c.image) for c in containers]
    images.extend(normalized_image_name(v.image.reference) for v in spec.volumes or () if v.image is not None)
    return tuple(images), len(containers)


class ImageStates:
    """Image name -> [size, nodes holding it], over the nodes folded so far."""

    __slots__ = ("states", "of_node")

    def __init__(self) -> None:
        self.states: dict[str, list] = {}
        self.of_node: dict[str, tuple[str, ...]] = {}  # node -> the names it was added under

    def add(self, node: o.Node) -> dict[str, tuple[int, int]]:
        """Fold a node's `status.images` (after `remove` of its last record); its summary."""
        name = node.metadata.name
        summary: dict[str, tuple[int, int]] = {}
        states = self.states
        for image in node.status.images or ():
            for image_name in image.names or ():
                state = states.get(image_name)
                if state is None:
                    state = states[image_name] = [image.size_bytes, {name}]
                else:
                    state[1].add(name)
                if image_name not in summary:
                    summary[image_name] = (state[0], len(state[1]))
        if summary:
            self.of_node[name] = tuple(summary)
        return summary

    def remove(self, name: str) -> None:
        """The node leaves every image entry; an entry no node holds is dropped."""
        for image_name in self.of_node.pop(name, ()):
            state = self.states.get(image_name)
            if state is None:
                continue
            state[1].discard(name)
            if not state[1]:
                del self.states[image_name]


def image_score(images: tuple[str, ...], containers: int, node_images: dict[str, tuple[int, int]],
                total_nodes: int) -> int:
    """ImageLocality's score of a node: each image the node holds counts its size times the share of
    the nodes holding it (`scaledImageScore`), the sum clamped to [23 MB, 1000 MB x containers] and
    scaled to 0-100."""
    total = 0
    for name in images:
        state = node_images.get(name)
        if state is not None:
            total += int(float(state[0]) * (state[1] / total_nodes))
    high = MAX_CONTAINER_THRESHOLD * containers
    if total < MIN_THRESHOLD:
        total = MIN_THRESHOLD
    elif total > high:
        total = high
    return MAX_NODE_SCORE * (total - MIN_THRESHOLD) // (high - MIN_THRESHOLD)
