"""ComfyUI's switch node, resolved as the workflow is read (both formats).

`ComfySwitchNode` passes on its `on_true` or its `on_false` input, by its `switch`. The official
Wan 2.2 14B templates toggle their 4-step LoRAs with it (one boolean picks the models, the steps,
the switch step and the cfg together). A switch set by a value, or by a constant node
(PrimitiveBoolean and the like), is decided before anything runs: every link out of it is rewired
to the input it picks, and the switch is listed as skipped saying which. A switch that another
kind of node decides is left as it is, and what it feeds is refused naming it.
"""

from __future__ import annotations

from collections.abc import Mapping

from inline_core.importer.widgets import CONSTANT_TYPES
from inline_core.importer.workflow import ComfyNode, Link, Skipped, Workflow

SWITCH = "ComfySwitchNode"


def constant(nodes: Mapping[str, ComfyNode], value: object) -> object:
    """A literal, or the value of the constant nodes a link leads through; None otherwise."""
    seen: set[str] = set()
    while isinstance(value, Link):
        source = nodes.get(value.node)
        if source is None or source.id in seen or source.class_type not in CONSTANT_TYPES:
            return None
        seen.add(source.id)
        value = source.inputs.get("value")
    return value


def resolve_switches(workflow: Workflow) -> Workflow:
    """`workflow` with each decided switch's outputs rewired to the input it picks."""
    nodes = workflow.nodes
    picked: dict[str, object] = {}
    for node in nodes.values():
        if node.class_type != SWITCH:
            continue
        flag = constant(nodes, node.inputs.get("switch"))
        if not isinstance(flag, bool):
            continue
        name = "on_true" if flag else "on_false"
        picked[node.id] = node.inputs.get(name)
        reason = f"its switch is {str(flag).lower()}: its {name} input is read in its place"
        workflow.skipped.append(Skipped(node.id, SWITCH, reason))
    for node in nodes.values():
        for name, value in list(node.inputs.items()):
            seen: set[str] = set()
            while isinstance(value, Link) and value.node in picked and value.node not in seen:
                seen.add(value.node)
                value = picked[value.node]
            node.inputs[name] = value
    return workflow
