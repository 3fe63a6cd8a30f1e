"""A node's LoRA stack, read from its `loras` input (torch-free): the `input/lora` handles, each
on the models of a two-model stack its `expert` picks; a LoRA of another family is refused."""

from __future__ import annotations

from typing import cast

from inline_core.contract.handles import LoraHandle
from inline_core.diffusion.adapters.stack import LoraStack
from inline_core.errors import InvalidRequest

BOTH, HIGH, LOW = "both", "high", "low"  # `input/lora`'s expert: the models of a pair it adapts


def lora_handles(value: object, family: str, title: str, node_id: str) -> list[LoraHandle]:
    """A high-level node's `loras` input: its `input/lora` handles, in edge order; a LoRA of
    another family is refused, naming it."""
    if value is None:
        return []
    items: list[object] = list(cast(list[object], value)) if isinstance(value, list) else [value]
    handles: list[LoraHandle] = []
    for item in items:
        if not isinstance(item, LoraHandle):
            raise InvalidRequest("the loras input takes input/lora nodes", node_id=node_id)
        if item.family != family:
            raise InvalidRequest(
                f"loras/{item.use.name} is a LoRA for {item.family}, not {title}", node_id=node_id
            )
        handles.append(item)
    return handles


def lora_stack(value: object, family: str, title: str, node_id: str) -> LoraStack:
    """The stack a one-model request carries; a LoRA that picks one expert of a two-model stack
    is refused, naming the param."""
    handles = lora_handles(value, family, title, node_id)
    for handle in handles:
        if handle.expert != BOTH:
            raise InvalidRequest(one_model_expert(handle, f"this {title} model"), node_id=node_id)
    return tuple(h.use for h in handles)


def expert_stacks(
    value: object, family: str, title: str, node_id: str
) -> tuple[LoraStack, LoraStack]:
    """The stacks of a two-model stack's first (high-noise) and second (low-noise) models: each
    LoRA on the models its `expert` picks, in edge order."""
    handles = lora_handles(value, family, title, node_id)
    first = tuple(h.use for h in handles if h.expert in (BOTH, HIGH))
    second = tuple(h.use for h in handles if h.expert in (BOTH, LOW))
    return first, second


def one_model_expert(handle: LoraHandle, model: str) -> str:
    return (
        f"loras/{handle.use.name}: param 'expert' is {handle.expert!r}, which picks one model of "
        f"a two-model stack, and {model} has one: set it to 'both'"
    )
