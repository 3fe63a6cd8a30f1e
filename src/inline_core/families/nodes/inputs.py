"""Reading a primitive's handles off its input sockets (torch-free)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from PIL import Image

from inline_core.contract.lora_stacks import lora_stack
from inline_core.diffusion.adapters.stack import LoraStack
from inline_core.errors import InvalidRequest
from inline_core.graph.runner import NodeCall

H = TypeVar("H")


def handle_input(call: NodeCall, port: str, kind: type[H]) -> H:
    """The value on `port`, which must be a handle of `kind` (the validator checked the socket
    kinds, so anything else came from a node that is not a model primitive)."""
    value = call.inputs.get(port)
    if not isinstance(value, kind):
        got = "nothing" if value is None else type(value).__name__
        raise InvalidRequest(
            f"input {port!r} needs a {kind.__name__}, got {got}", node_id=call.node_id
        )
    return value


def optional_handle(call: NodeCall, port: str, kind: type[H]) -> H | None:
    return None if call.inputs.get(port) is None else handle_input(call, port, kind)


def prompt_text(value: object, node_id: str) -> str:
    """A high-level node's `prompt` input: text, or several text edges joined by spaces."""
    if isinstance(value, list):
        parts = cast(list[object], value)
        value = " ".join(str(v) for v in parts)
    if not isinstance(value, str):
        raise InvalidRequest("the prompt input must be text", node_id=node_id)
    return value


def image_input(inputs: Mapping[str, Any], port: str, node_id: str) -> Image.Image | None:
    """A high-level node's optional image input `port`: an image, the first of several, or
    none."""
    value = inputs.get(port)
    if isinstance(value, list):
        items = cast(list[object], value)
        value = items[0] if items else None
    if value is None:
        return None
    if not isinstance(value, Image.Image):
        raise InvalidRequest(f"the {port} input must be an image", node_id=node_id)
    return value


def wired_loras(inputs: Mapping[str, Any], family: str, title: str, node_id: str) -> LoraStack:
    """The LoRA stack on a one-model node's `loras` input (`contract/lora_stacks.py`). With none
    wired it is empty, without that machinery: the common render's walk stays short."""
    value = inputs.get("loras")
    return () if value is None else lora_stack(value, family, title, node_id)
