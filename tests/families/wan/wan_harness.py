"""Shared helpers for the Wan tests: render through the real node runner and step loop."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from inline_core.config import Config
from inline_core.contract.family import Family
from inline_core.contract.submit import Submit
from inline_core.families.standalone import FamilyRig, family_rig
from inline_core.families.wan import WanFamily
from inline_core.families.wan.descriptor import NODE_TYPE, WAN_DESCRIPTOR
from inline_core.graph.runner import NodeCall, NodeResult
from inline_core.runtime.cancel import CancelToken
from inline_core.runtime.progress import RunEvent
from inline_core.runtime.video import decode_apng
from inline_core.runtime.video_stream import LiveVideos
from inline_core.sampling.job import BatchedSampler
from tests.families.node_context import node_context
from tests.families.pixels import Pixels as Pixels
from tests.families.pixels import max_diff as max_diff

PROMPT = "a paper boat on a rainy street"
# A render small enough for the CPU tests: 3 latent frames of 4x6 latents.
SMALL: dict[str, Any] = {"width": 48, "height": 32, "frames": 9, "steps": 3, "seed": 11}


def wan_rig(models_dir: Path, sampler: BatchedSampler, **overrides: Any) -> FamilyRig:
    settings: dict[str, Any] = {"profile": "cpu", "dtype": "float32", **overrides}
    config = Config(models_dir=models_dir, **settings)
    return family_rig(WanFamily, models_dir, sampler, config=config)


def submit_check(family: Family, params: Mapping[str, Any], wired: set[str]) -> None:
    """The Wan node's one submit check, alone: its files resolved, `wired` connected."""
    resolution = family.resolve(NODE_TYPE, params)
    family.check(Submit(NODE_TYPE, params, "w", resolution, frozenset(wired), {}, {}))


def node_params(**overrides: Any) -> dict[str, Any]:
    params: dict[str, Any] = {p.name: p.default for p in WAN_DESCRIPTOR.params}
    params.update(SMALL, format="png")
    params.update(overrides)
    return params


def render(
    rig: FamilyRig,
    takes_dir: Path,
    prompt: str = PROMPT,
    *,
    image: Image.Image | None = None,
    on_event: Callable[[RunEvent], None] | None = None,
    loras: Sequence[object] = (),
    cancel: CancelToken | None = None,
    videos: LiveVideos | None = None,
    **params: Any,
) -> NodeResult:
    ctx = node_context(takes_dir, cancel=cancel, on_event=on_event, videos=videos)
    inputs: dict[str, Any] = {"prompt": prompt}
    if image is not None:
        inputs["image"] = image
    if loras:  # `input/lora` handles, one per edge
        inputs["loras"] = list(loras)
    call = NodeCall(ctx=ctx, node_id="w", params=node_params(**params), inputs=inputs)
    return rig.run(call)


def take_frames(result: NodeResult) -> Pixels:
    (take,) = result.takes
    return decode_apng(Path(take.path).read_bytes()).astype(np.int16)


def reference_pipe(class_name: str, folder: Path | None) -> Any:
    """A diffusers Wan pipeline (`WanPipeline`, `WanImageToVideoPipeline`) over a kit folder,
    float32, quiet: a pixel reference."""
    import diffusers
    import torch

    assert folder is not None
    pipe: Any = getattr(diffusers, class_name).from_pretrained(
        str(folder), dtype=torch.float32, local_files_only=True
    )
    pipe.set_progress_bar_config(disable=True)
    return pipe


def reference_kwargs(params: Mapping[str, Any]) -> dict[str, Any]:
    """WanPipeline arguments for the same render as `node_params(**params)`."""
    import torch

    p = node_params(**params)
    pair = {} if p["guidance_2"] is None else {"guidance_scale_2": p["guidance_2"]}
    return {
        **pair,
        "width": p["width"],
        "height": p["height"],
        "num_frames": p["frames"],
        "num_inference_steps": p["steps"],
        "guidance_scale": p["guidance"],
        "negative_prompt": p["negative_prompt"] or None,
        "generator": torch.Generator("cpu").manual_seed(p["seed"]),
        "output_type": "np",
    }


def reference_frames(pipe: Any, prompt: str = PROMPT, **params: Any) -> Pixels:
    """diffusers' frames for the same render, rounded to uint8 as its PIL output rounds them."""
    video = pipe(prompt=prompt, **reference_kwargs(params)).frames[0]
    return (np.asarray(video) * 255).round().astype(np.uint8).astype(np.int16)


def reference_i2v_frames(
    pipe: Any, encoder: Any, image: Image.Image, prompt: str = PROMPT, **params: Any
) -> Pixels:
    """`WanImageToVideoPipeline`'s frames for the same render. Its prompts come encoded by
    `WanPipeline.encode_prompt` (`encoder`) at `__call__`'s 512 tokens: the i2v pipeline's own
    prompt cleaning calls `ftfy` unconditionally, which this install lacks; WanPipeline's skips
    it then, and the rest of the text path is the same code."""
    import torch

    kwargs = reference_kwargs(params)
    negative = kwargs.pop("negative_prompt")
    positive, negative_embeds = encoder.encode_prompt(
        prompt,
        negative,
        do_classifier_free_guidance=kwargs["guidance_scale"] > 1,
        max_sequence_length=512,
        device=torch.device("cpu"),
    )
    video = pipe(
        image=image, prompt_embeds=positive, negative_prompt_embeds=negative_embeds, **kwargs
    ).frames[0]
    return (np.asarray(video) * 255).round().astype(np.uint8).astype(np.int16)


def first_frame_image(width: int, height: int, seed: int = 0) -> Image.Image:
    """A first frame of random pixels (any size: the node resizes it as diffusers does)."""
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 256, (height, width, 3), dtype=np.uint8))
