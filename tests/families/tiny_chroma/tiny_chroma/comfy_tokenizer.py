"""ComfyUI's `T5TokenizerOptions` for Chroma: the text encoder it is given, handed on.

Chroma attends its prompt's tokens and the first padding token (`encoder.transformer_mask`),
which is what ComfyUI's Chroma template asks with min_padding 1 and min_length 0. Other options
pad the prompt otherwise in ComfyUI, so the import lists the node as changing the picture.
"""

from __future__ import annotations

from inline_core.graph.schema import PortKind
from inline_core.importer.mapper import Handler, Mapper
from inline_core.importer.values import Value
from inline_core.importer.workflow import ComfyNode
from tiny_chroma.comfy import TOKENIZER_OPTIONS

PADDING, LENGTH = 1, 0  # how Chroma pads its prompt here, in the node's terms


def tokenizer_options(m: Mapper, node: ComfyNode, slot: int) -> Value | None:
    padding = m.whole(node, "min_padding", 0)
    length = m.whole(node, "min_length", 0)
    if (padding, length) != (PADDING, LENGTH):
        m.substituted(
            node,
            f"Chroma pads its prompt as min_padding {PADDING} and min_length {LENGTH} do, "
            f"not as min_padding {padding} and min_length {length}",
        )
    return m.input_value(node, "clip", PortKind.TEXT_ENCODER)


HANDLERS: dict[str, Handler] = {TOKENIZER_OPTIONS: tokenizer_options}
