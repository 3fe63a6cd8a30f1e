"""What a server speaking ComfyUI's API needs of the importer: the ComfyUI node types it reads,
the output nodes among them, and each of our node ids traced back to the prompt node it came from.

Our ids derive from ComfyUI's (`mapper.py`): node 9 becomes `c9`, and a node that maps to several
of ours adds a suffix (`c6_text`, `c6`); a chain collapsed onto a family's own node takes its
sampler's id (`own_node.py`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from inline_core.importer.widgets import WIDGET_ORDER

# Every ComfyUI class the importer reads (the UI reader needs each one's widget order).
COMFY_NODE_TYPES: frozenset[str] = frozenset(WIDGET_ORDER)
# The output nodes among them, in the order the importer picks its target from.
IMAGE_OUTPUTS = ("SaveImage", "PreviewImage")
VIDEO_OUTPUTS = ("SaveVideo", "SaveAnimatedWEBP")
OUTPUT_NODE_TYPES: tuple[str, ...] = (*IMAGE_OUTPUTS, *VIDEO_OUTPUTS)
OUR_PREFIX = "c"


def prompt_node_of(our_id: str, prompt_ids: Collection[str]) -> str | None:
    """The prompt node `our_id` was made from (None: not one made by the importer)."""
    if not our_id.startswith(OUR_PREFIX):
        return None
    rest = our_id[len(OUR_PREFIX) :]
    if rest in prompt_ids:
        return rest
    # `c6_text`: the longest prompt id followed by a suffix (prompt ids may hold "_" too).
    found = [p for p in prompt_ids if rest.startswith(p + "_")]
    return max(found, key=len) if found else None


def prompt_nodes(our_ids: Collection[str], prompt_ids: Collection[str]) -> dict[str, str]:
    """Our node id -> its prompt node, for the ids made from one."""
    out: dict[str, str] = {}
    for our_id in our_ids:
        origin = prompt_node_of(our_id, prompt_ids)
        if origin is not None:
            out[our_id] = origin
    return out


def upstream(prompt: Mapping[str, Mapping[str, object]], start: str) -> set[str]:
    """`start` and every prompt node it reads from, through links `[node_id, slot]`."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        node_id = todo.pop()
        node = prompt.get(node_id)
        if node_id in seen or node is None:
            continue
        seen.add(node_id)
        inputs = node.get("inputs")
        if isinstance(inputs, Mapping):
            for value in inputs.values():  # pyright: ignore[reportUnknownVariableType]
                if isinstance(value, list) and len(value) == 2:  # pyright: ignore[reportUnknownArgumentType]
                    source = value[0]  # pyright: ignore[reportUnknownVariableType]
                    if isinstance(source, str | int) and not isinstance(source, bool):
                        todo.append(str(source))
    return seen
