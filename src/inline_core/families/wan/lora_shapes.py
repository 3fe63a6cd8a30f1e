"""A Wan LoRA's shapes against the model it is wired to, from headers alone (torch-free: submit).

Wan's sizes share their layer names (1.3B: dim 1536, 5B: 3072, 14B and A14B's experts: 5120), so
a LoRA trained for one size names layers every size has; its down (A) matrix's input and its up
(B) matrix's output tell the size it was trained on. A file whose layers are not the model's
shapes is refused at submit, naming the file, the first layer that differs and both shapes,
before the render loads it (`LoraWeights.check_against` checks again, on the loaded model).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from inline_core.diffusion.adapters.naming import ROLES, read_layout
from inline_core.diffusion.adapters.stack import LoraUse
from inline_core.diffusion.files.header import HeaderError, TensorInfo, read_header
from inline_core.errors import InvalidRequest
from inline_core.families.wan.lora_naming import WAN_LORAS

_BLOCK = re.compile(r"^blocks\.\d+\.(.+)$")


def linear_shape(module: str, config: Mapping[str, Any]) -> tuple[int, int] | None:
    """(in, out) features of a Wan transformer's linear `module` (diffusers' name) under
    `config`; None for a layer this table does not know (not checked)."""
    dim = int(config["num_attention_heads"]) * int(config["attention_head_dim"])
    ffn = int(config["ffn_dim"])
    image = config.get("image_dim")
    added = config.get("added_kv_proj_dim")
    block = _BLOCK.match(module)
    if block is not None:
        inner = block.group(1)
        if inner.startswith(("attn1.", "attn2.to_")):
            return dim, dim
        if inner in ("attn2.add_k_proj", "attn2.add_v_proj"):
            return (int(added), dim) if added is not None else None
        return {"ffn.net.0.proj": (dim, ffn), "ffn.net.2": (ffn, dim)}.get(inner)
    outputs = int(config["out_channels"]) * math.prod(int(p) for p in config["patch_size"])
    outer: dict[str, tuple[int, int]] = {
        "condition_embedder.time_embedder.linear_1": (int(config["freq_dim"]), dim),
        "condition_embedder.time_embedder.linear_2": (dim, dim),
        "condition_embedder.time_proj": (dim, 6 * dim),
        "condition_embedder.text_embedder.linear_1": (int(config["text_dim"]), dim),
        "condition_embedder.text_embedder.linear_2": (dim, dim),
        "proj_out": (dim, outputs),
    }
    if image is not None:
        outer["condition_embedder.image_embedder.ff.net.0.proj"] = (int(image), int(image))
        outer["condition_embedder.image_embedder.ff.net.2"] = (int(image), dim)
    return outer.get(module)


def check(use: LoraUse, config: Mapping[str, Any], model: str, node_id: str) -> None:
    """Refuse `use`'s file when a layer it adapts has other shapes than `model`'s (`config`)."""
    try:
        header = read_header(Path(use.path))
    except HeaderError as exc:
        raise InvalidRequest(f"loras/{use.name}: {exc.message}", node_id=node_id) from exc
    layout = read_layout(use.name, header, WAN_LORAS)
    for layer, module in layout.layers.items():
        want = linear_shape(module, config)
        got = _shape(header, layer)
        if want is None or got is None or got == want:
            continue
        raise InvalidRequest(
            f"loras/{use.name} adapts {module!r} as {got[0]} -> {got[1]} features; model "
            f"{model!r} has it as {want[0]} -> {want[1]}: the LoRA was trained for another size "
            "of Wan (1.3B: 1536 wide, 5B: 3072, 14B and A14B: 5120)",
            node_id=node_id,
        )


def _shape(header: Mapping[str, TensorInfo], layer: str) -> tuple[int, int] | None:
    """(in, out) of one layer's pair: its down matrix's columns, its up matrix's rows."""
    down = up = None
    for ending, role in ROLES.items():
        info = header.get(layer + ending)
        if info is None or len(info.shape) != 2:
            continue
        if role == "down":
            down = info.shape[1]
        elif role == "up":
            up = info.shape[0]
    return None if down is None or up is None else (down, up)
