"""Shared helpers for the SDXL tests: render through the real node runner and step loop, and
the same render through diffusers."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from inline_core.config import Config
from inline_core.contract.handles import LoraHandle
from inline_core.diffusion.adapters.stack import LoraUse
from inline_core.diffusion.libs import load_safetensors, save_safetensors
from inline_core.families.sdxl import SDXLFamily
from inline_core.families.sdxl.descriptor import SDXL_DESCRIPTOR
from inline_core.families.sdxl.kit import SDXLKit
from inline_core.families.standalone import FamilyRig, family_rig
from inline_core.graph.descriptor import NodeDescriptor
from inline_core.graph.runner import NodeCall, NodeResult
from inline_core.sampling.job import BatchedSampler
from tests.families.node_context import node_context
from tests.families.pixels import Pixels as Pixels
from tests.families.pixels import max_diff as max_diff
from tests.families.pixels import take_pixels as take_pixels

PROMPT = "a lighthouse on a cliff at dusk"
SMALL: dict[str, Any] = {"width": 64, "height": 64, "steps": 4, "seed": 7, "guidance": 5.0}


def sdxl_rig(models_dir: Path, sampler: BatchedSampler, **overrides: Any) -> FamilyRig:
    settings: dict[str, Any] = {"profile": "cpu", "dtype": "float32", **overrides}
    config = Config(models_dir=models_dir, **settings)
    return family_rig(SDXLFamily, models_dir, sampler, config=config)


def node_params(descriptor: NodeDescriptor = SDXL_DESCRIPTOR, **overrides: Any) -> dict[str, Any]:
    params: dict[str, Any] = {p.name: p.default for p in descriptor.params}
    params.update(SMALL)
    params.update(overrides)
    return params


def kit_lora(
    rig: FamilyRig, path: Path, strength: float = 1.0, clip: float | None = None
) -> LoraHandle:
    """A kit LoRA as `input/lora` hands it to the node."""
    entry = rig.catalog.entry("loras", path.name)
    return LoraHandle("sdxl", LoraUse(path.name, str(entry.path), entry.identity, strength, clip))


def render(
    rig: FamilyRig,
    takes_dir: Path,
    prompt: str = PROMPT,
    loras: Sequence[LoraHandle] = (),
    descriptor: NodeDescriptor = SDXL_DESCRIPTOR,
    **params: Any,
) -> NodeResult:
    ctx = node_context(takes_dir)
    inputs: dict[str, Any] = {"prompt": prompt}
    if loras:
        inputs["loras"] = list(loras)
    call = NodeCall(ctx=ctx, node_id="x", params=node_params(descriptor, **params), inputs=inputs)
    return rig.run(call)


def start_noise(seed: int, width: int, height: int) -> Any:
    """The node's starting noise (KSampler's: the seed's CPU generator, one draw)."""
    import torch

    generator = torch.Generator("cpu").manual_seed(seed)
    return torch.randn((1, 4, height // 8, width // 8), generator=generator)


def reference_pixels(
    pipe: Any, scheduler: Any, prompt: str = PROMPT, *, latents_scale: float, **params: Any
) -> Pixels:
    """diffusers' pixels for the same render, from the node's noise times `latents_scale`."""
    p = node_params(**params)
    latents = start_noise(p["seed"], p["width"], p["height"]) * latents_scale
    # ComfyUI's layer -k is diffusers' clip_skip k - 2 (its -2, SDXL's own, is None).
    clip_skip = None if p["clip_skip"] == -2 else -p["clip_skip"] - 2
    negative: dict[str, Any] = {"negative_prompt": p["negative_prompt"]}
    if clip_skip is not None:
        # diffusers reads a negative prompt at its default layer whatever clip_skip says, where
        # CLIPSetLastLayer sets both: its own encode_prompt reads it at the same layer here.
        embeds, _, pooled, _ = pipe.encode_prompt(
            p["negative_prompt"], do_classifier_free_guidance=False, clip_skip=clip_skip
        )
        negative = {"negative_prompt_embeds": embeds, "negative_pooled_prompt_embeds": pooled}
    own = pipe.scheduler
    pipe.scheduler = scheduler
    try:
        image = _call(pipe, prompt, negative, latents, clip_skip, p)
    finally:
        pipe.scheduler = own  # the next test's scheduler is made from the pipeline's own config
    return (np.asarray(image) * 255).round().astype(np.uint8).astype(np.int16)


def _call(
    pipe: Any,
    prompt: str,
    negative: dict[str, Any],
    latents: Any,
    clip_skip: int | None,
    p: dict[str, Any],
) -> Any:
    return pipe(
        prompt=prompt,
        **negative,
        width=p["width"],
        height=p["height"],
        num_inference_steps=p["steps"],
        guidance_scale=p["guidance"],
        latents=latents,
        clip_skip=clip_skip,
        output_type="np",
    ).images[0]


def rekeyed_checkpoint(
    kit: SDXLKit, models: Path, name: str, rekey: Callable[[str], str | None]
) -> None:
    """The kit's models (its diffusers folders left out) copied to `models`, with its checkpoint
    in `models/checkpoints/<name>` under keys `rekey` gives (a key it maps to None: cut)."""
    assert kit.checkpoint is not None
    shutil.copytree(kit.root, models, ignore=shutil.ignore_patterns("*diffusers*"))
    state = load_safetensors(kit.checkpoint)
    rekeyed = {new: v for k, v in state.items() if (new := rekey(k)) is not None}
    save_safetensors(rekeyed, models / "checkpoints" / name)


def sd15_like(kit: SDXLKit, models: Path, name: str) -> None:
    """An SD 1.x/2.x-like checkpoint's keys: a UNet in the original naming without SDXL's size
    embedding (the kit's checkpoint, its `label_emb` cut; its linear projections are SD 2.x's,
    so `stability/sd15` does not take it either), in `models/checkpoints/<name>`."""
    rekeyed_checkpoint(kit, models, name, lambda k: None if ".label_emb." in k else k)
