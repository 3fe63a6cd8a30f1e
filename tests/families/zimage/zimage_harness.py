"""Shared helpers for the Z-Image tests: render through the real runner and sampler."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from PIL import Image

from inline_core.config import Config
from inline_core.families.standalone import FamilyRig, family_rig
from inline_core.families.zimage import ZIMAGE_DESCRIPTOR, ZImageFamily
from inline_core.families.zimage.kit import KitPaths
from inline_core.graph.runner import NodeCall, NodeResult
from inline_core.runtime.cancel import CancelToken
from inline_core.runtime.progress import RunEvent
from inline_core.sampling.job import BatchedSampler
from tests.families.node_context import node_context
from tests.families.pixels import Pixels as Pixels
from tests.families.pixels import max_diff as max_diff
from tests.families.pixels import pixels as pixels
from tests.families.pixels import take_pixels as take_pixels


def cpu_config(models_dir: Path, **overrides: Any) -> Config:
    """The CPU profile in float32 (the parity tests' dtype) unless `overrides` say otherwise."""
    settings: dict[str, Any] = {"profile": "cpu", "dtype": "float32", **overrides}
    return Config(models_dir=models_dir, **settings)


def make_runner(models_dir: Path, sampler: BatchedSampler, **overrides: Any) -> FamilyRig:
    """The Z-Image node's runner on a runtime of its own, on the CPU profile."""
    config = cpu_config(models_dir, **overrides)
    return family_rig(ZImageFamily, models_dir, sampler, config=config)


def node_params(**overrides: Any) -> dict[str, Any]:
    params: dict[str, Any] = {p.name: p.default for p in ZIMAGE_DESCRIPTOR.params}
    params.update(width=64, height=64, steps=4, seed=7)
    params.update(overrides)
    return params


def render(
    runner: FamilyRig,
    takes_dir: Path,
    prompt: str = "a red fox in the snow",
    *,
    image: Image.Image | None = None,
    loras: list[Any] | None = None,
    control_image: Image.Image | None = None,
    mask: Image.Image | None = None,
    cancel: CancelToken | None = None,
    on_event: Callable[[RunEvent], None] | None = None,
    **params: Any,
) -> NodeResult:
    ctx = node_context(takes_dir, cancel=cancel, on_event=on_event)
    inputs: dict[str, Any] = {"prompt": prompt}
    if image is not None:
        inputs["image"] = image
    if loras:
        inputs["loras"] = loras  # `input/lora` handles, one per edge
    if control_image is not None:
        inputs["control_image"] = control_image
    if mask is not None:
        inputs["mask"] = mask
    call = NodeCall(ctx=ctx, node_id="z", params=node_params(**params), inputs=inputs)
    return runner.run(call)


def reference_kwargs(params: Mapping[str, Any]) -> dict[str, Any]:
    """ZImagePipeline arguments for the same render as `node_params(**params)`."""
    import torch

    p = node_params(**params)
    return {
        "width": p["width"],
        "height": p["height"],
        "num_inference_steps": p["steps"],
        "guidance_scale": p["guidance"],
        "negative_prompt": p["negative_prompt"] or None,
        "generator": torch.Generator("cpu").manual_seed(p["seed"]),
    }


def models_without_diffusion(kit: KitPaths, root: Path) -> Path:
    """A ComfyUI-style models folder with the kit's VAE and text encoder, its
    `diffusion_models/` still empty for the test to fill."""
    assert kit.vae_file is not None and kit.text_encoder_dir is not None
    (root / "diffusion_models").mkdir(parents=True)
    (root / "vae").mkdir()
    shutil.copy(kit.vae_file, root / "vae" / kit.vae_file.name)
    shutil.copytree(kit.text_encoder_dir, root / "text_encoders" / kit.text_encoder_dir.name)
    return root
