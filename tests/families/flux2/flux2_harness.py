"""Shared helpers for the FLUX.2 tests: render through the real runner and sampler."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from inline_core.config import Config
from inline_core.families.flux2 import Flux2Family
from inline_core.families.flux2.build import DEV_TEXT_LAYERS, text_layers
from inline_core.families.flux2.descriptor import FLUX2_DESCRIPTOR
from inline_core.families.flux2.kit import TEXT_LAYERS
from inline_core.families.standalone import FamilyRig, family_rig
from inline_core.graph.runner import NodeCall, NodeResult
from inline_core.sampling.job import BatchedSampler
from tests.families.node_context import node_context
from tests.families.pixels import Pixels as Pixels
from tests.families.pixels import max_diff as max_diff
from tests.families.pixels import pixels as pixels
from tests.families.pixels import take_pixels as take_pixels


def make_rig(models_dir: Path, sampler: BatchedSampler, **overrides: Any) -> FamilyRig:
    """The FLUX.2 node's runner on a runtime of its own, on the CPU profile in float32."""
    settings: dict[str, Any] = {"profile": "cpu", "dtype": "float32", **overrides}
    config = Config(models_dir=models_dir, **settings)
    return family_rig(Flux2Family, models_dir, sampler, config=config)


def node_params(**overrides: Any) -> dict[str, Any]:
    params: dict[str, Any] = {p.name: p.default for p in FLUX2_DESCRIPTOR.params}
    params.update(width=64, height=64, seed=7)
    params.update(overrides)
    return params


def render(
    rig: FamilyRig,
    takes_dir: Path,
    prompt: str = "a red fox in the snow",
    *,
    references: Mapping[str, Image.Image] | None = None,
    loras: list[Any] | None = None,
    **params: Any,
) -> NodeResult:
    inputs: dict[str, Any] = {"prompt": prompt, **(references or {})}
    if loras:
        inputs["loras"] = loras
    return run_node(rig, takes_dir, node_params(**params), inputs)


def run_node(
    rig: FamilyRig, takes_dir: Path, params: Mapping[str, Any], inputs: Mapping[str, Any]
) -> NodeResult:
    """One run of the rig's node with these params and inputs."""
    call = NodeCall(
        ctx=node_context(takes_dir), node_id="f", params=dict(params), inputs=dict(inputs)
    )
    return rig.run(call)


def reference_kwargs(steps: int, guidance: float, **params: Any) -> dict[str, Any]:
    """Flux2KleinPipeline arguments for the same render as `node_params(**params)`."""
    import torch

    p = node_params(**params)
    return {
        "width": p["width"],
        "height": p["height"],
        "num_inference_steps": steps,
        "guidance_scale": guidance,
        "generator": torch.Generator("cpu").manual_seed(p["seed"]),
        "text_encoder_out_layers": text_layers(TEXT_LAYERS),
    }


def dev_kwargs(steps: int, guidance: float, seed: int = 7, size: int = 64) -> dict[str, Any]:
    """Flux2Pipeline (dev) arguments for the same render as `node_params(steps=steps,
    guidance=guidance)` on the dev kit."""
    import torch

    return {
        "width": size,
        "height": size,
        "num_inference_steps": steps,
        "guidance_scale": guidance,
        "generator": torch.Generator("cpu").manual_seed(seed),
        "text_encoder_out_layers": DEV_TEXT_LAYERS,
    }


def picture(width: int, height: int, seed: int = 0) -> Image.Image:
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 256, (height, width, 3), dtype=np.uint8))
