"""Shared helpers for the Qwen-Image tests: render through the real node runner and step loop."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from inline_core.config import Config
from inline_core.contract.submit import Submit
from inline_core.families.qwen_image import QwenImageFamily
from inline_core.families.qwen_image.descriptor import (
    IMAGE_INPUTS,
    NODE_TYPE,
    QWEN_IMAGE_DESCRIPTOR,
)
from inline_core.families.standalone import FamilyRig, family_rig
from inline_core.graph.runner import NodeCall, NodeResult
from inline_core.sampling.job import BatchedSampler
from tests.families.node_context import node_context
from tests.families.pixels import Pixels as Pixels
from tests.families.pixels import max_diff as max_diff
from tests.families.pixels import pixels as pixels
from tests.families.pixels import take_pixels as take_pixels
from tests.parallel.qwen_small_references import SMALL_CONDITION, SMALL_REFERENCE

PROMPT = "a red paper lantern over a quiet street"
SMALL: dict[str, Any] = {"width": 64, "height": 64, "steps": 3, "seed": 7, "guidance": 1.0}
TEXT_MODEL = "qwen_image_tiny.safetensors"
EDIT_MODEL = "qwen_image_edit_2509_tiny.safetensors"
TEXT_FOLDER = "qwen_image_tiny_diffusers"
EDIT_FOLDER = "qwen_image_edit_tiny_diffusers"
EDIT_2511_MODEL = "qwen_image_edit_2511_tiny.safetensors"  # Comfy-Org's layout, its marker
EDIT_2511_FOLDER = "qwen_image_edit_2511_tiny_diffusers"


def qwen_rig(models_dir: Path, sampler: BatchedSampler, **overrides: Any) -> FamilyRig:
    settings: dict[str, Any] = {"profile": "cpu", "dtype": "float32", **overrides}
    config = Config(models_dir=models_dir, **settings)
    return family_rig(QwenImageFamily, models_dir, sampler, config=config)


def node_params(**overrides: Any) -> dict[str, Any]:
    params: dict[str, Any] = {p.name: p.default for p in QWEN_IMAGE_DESCRIPTOR.params}
    params.update(SMALL)
    params.update(overrides)
    return params


def submit(family: QwenImageFamily, params: Mapping[str, Any], wired: set[str]) -> None:
    """The node's one submit check, alone: its files resolved, `wired` connected."""
    resolution = family.resolve(NODE_TYPE, params)
    family.check(Submit(NODE_TYPE, params, "q", resolution, frozenset(wired), {}, {}))


def render(
    rig: FamilyRig,
    takes_dir: Path,
    prompt: str = PROMPT,
    *,
    images: Sequence[Image.Image] = (),
    loras: Sequence[object] = (),
    **params: Any,
) -> NodeResult:
    ctx = node_context(takes_dir)
    inputs: dict[str, Any] = {"prompt": prompt}
    for port, image in zip(IMAGE_INPUTS, images, strict=False):
        inputs[port] = image
    if loras:
        inputs["loras"] = list(loras)
    call = NodeCall(ctx=ctx, node_id="q", params=node_params(**params), inputs=inputs)
    return rig.run(call)


def reference_pipe(class_name: str, folder: Path | None) -> Any:
    """A diffusers Qwen-Image pipeline over a kit folder, float32, quiet: a pixel reference."""
    import diffusers
    import torch
    import transformers

    from inline_core.families.qwen_image import processor

    assert folder is not None
    extra: dict[str, Any] = {}
    if (folder / "processor").is_dir():  # built from its parts: its video half needs torchvision
        auto: Any = transformers.AutoTokenizer
        tokenizer = auto.from_pretrained(str(folder / "tokenizer"))
        extra["processor"] = processor.load(folder / "processor", tokenizer)
    pipe: Any = getattr(diffusers, class_name).from_pretrained(
        str(folder), dtype=torch.float32, local_files_only=True, **extra
    )
    pipe.set_progress_bar_config(disable=True)
    return pipe


def reference_image(pipe: Any, prompt: str = PROMPT, **params: Any) -> Pixels:
    """What diffusers renders for the node's `params` (guidance as `true_cfg_scale`)."""
    import torch

    p = {**SMALL, **params}
    kwargs: dict[str, Any] = {
        "prompt": prompt,
        "width": p["width"],
        "height": p["height"],
        "num_inference_steps": p["steps"],
        "true_cfg_scale": p["guidance"],
        "generator": torch.Generator("cpu").manual_seed(p["seed"]),
    }
    if p["guidance"] > 1:
        kwargs["negative_prompt"] = p.get("negative_prompt", "")
    if "images" in p:
        kwargs["image"] = list(p["images"])
    return pixels(pipe(**kwargs).images[0])


def small_references(monkeypatch: Any) -> None:
    """Reference images encoded at 64x64 pixels' area instead of a megapixel, and shown to the
    vision tower at 56x56's, here and in diffusers alike: the CPU tests' edits stay small."""
    from diffusers.pipelines.qwenimage import pipeline_qwenimage_edit_plus as edit_plus

    from inline_core.families.qwen_image import request

    monkeypatch.setattr(request, "REFERENCE_AREA", SMALL_REFERENCE)
    monkeypatch.setattr(edit_plus, "VAE_IMAGE_SIZE", SMALL_REFERENCE)
    monkeypatch.setattr(request, "CONDITION_AREA", SMALL_CONDITION)
    monkeypatch.setattr(edit_plus, "CONDITION_IMAGE_SIZE", SMALL_CONDITION)


def source_image(width: int, height: int, seed: int = 0) -> Image.Image:
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 256, (height, width, 3), dtype=np.uint8))
