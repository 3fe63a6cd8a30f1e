"""A ComfyUI class a served node declares it stands in for (`extra["comfy"]`, as pack nodes
carry it): links onto ports and widget values onto params, by name or as declared."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from inline_core.graph.descriptor import NodeDescriptor
from inline_core.importer.mapper import Handler, Mapper
from inline_core.importer.values import Port, Value, describe
from inline_core.importer.workflow import ComfyNode


def stand_in(m: Mapper, node: ComfyNode, slot: int, descriptor: NodeDescriptor) -> Value | None:
    """Map `node` onto the served node declaring its class: links onto ports and widget
    values onto params, by name (or as the declaration renames them), outputs by slot."""
    where = describe(node)
    if slot >= len(descriptor.outputs):
        m.warn(f"{where}: output {slot} has no equivalent on {descriptor.type}")
        return None
    declared = cast(Mapping[str, Any], descriptor.extra["comfy"])
    ours_to_comfy = {
        ours: comfy
        for key in ("inputs", "params")
        for comfy, ours in cast(Mapping[str, str], declared.get(key, {})).items()
    }
    inputs: dict[str, Port | None] = {}
    for port in descriptor.inputs:
        value = m.input_value(
            node, ours_to_comfy.get(port.name, port.name), port.kind, optional=port.optional
        )
        inputs[port.name] = value.port if value is not None else None
    params = {
        spec.name: m.literal(node, ours_to_comfy.get(spec.name, spec.name))
        for spec in descriptor.params
    }
    m.add(f"c{node.id}", descriptor.type, params, inputs, where)
    output = descriptor.outputs[slot]
    return Value(output.kind, Port(f"c{node.id}", output.name), node.id)


def stand_in_for(descriptor: NodeDescriptor) -> Handler:
    """The handler of the class `descriptor` declares."""

    def handler(m: Mapper, node: ComfyNode, slot: int) -> Value | None:
        return stand_in(m, node, slot, descriptor)

    return handler
