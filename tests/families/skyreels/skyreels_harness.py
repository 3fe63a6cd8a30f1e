"""Shared helpers for the SkyReels-V2 tests: render through the real node runner and step loop,
and the same render through diffusers' own pipeline."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from inline_core.config import Config
from inline_core.diffusion.libs import diffusers as load_diffusers
from inline_core.families.skyreels import SkyReelsFamily
from inline_core.families.skyreels.descriptor import SKYREELS_DESCRIPTOR
from inline_core.families.skyreels.kit import FOLDER
from inline_core.families.standalone import FamilyRig, family_rig
from inline_core.graph.runner import NodeCall, NodeResult
from inline_core.runtime.cancel import CancelToken
from inline_core.runtime.progress import RunEvent
from inline_core.runtime.video import Video, decode_apng
from inline_core.sampling.job import BatchedSampler
from tests.families.node_context import node_context
from tests.families.pixels import Pixels as Pixels
from tests.families.pixels import max_diff as max_diff

PROMPT = "a lighthouse in a storm"
# Small enough for the CPU tests: 3 latent frames of 4x6 latents, one chunk.
SMALL: dict[str, Any] = {"width": 48, "height": 32, "frames": 9, "steps": 3, "seed": 5}
# A long video: 6 latent frames in chunks of 3 with 1 of overlap: 3 chunks (3 + 2 + 1 + ...).
LONG: dict[str, Any] = {"frames": 21, "base_frames": 9, "overlap": 5}


def skyreels_rig(models_dir: Path, sampler: BatchedSampler, **overrides: Any) -> FamilyRig:
    settings: dict[str, Any] = {"profile": "cpu", "dtype": "float32", **overrides}
    config = Config(models_dir=models_dir, **settings)
    return family_rig(SkyReelsFamily, models_dir, sampler, config=config)


def node_params(**overrides: Any) -> dict[str, Any]:
    params: dict[str, Any] = {p.name: p.default for p in SKYREELS_DESCRIPTOR.params}
    params.update(SMALL, format="png", model=FOLDER)
    params.update(overrides)
    return params


def render(
    rig: FamilyRig,
    takes_dir: Path,
    prompt: str = PROMPT,
    *,
    on_event: Callable[[RunEvent], None] | None = None,
    cancel: CancelToken | None = None,
    image: Image.Image | None = None,
    video: Video | None = None,
    **params: Any,
) -> NodeResult:
    ctx = node_context(takes_dir, cancel=cancel, on_event=on_event)
    inputs: dict[str, Any] = {"prompt": prompt}
    if image is not None:
        inputs["image"] = image
    if video is not None:
        inputs["video"] = video
    call = NodeCall(ctx=ctx, node_id="s", params=node_params(**params), inputs=inputs)
    return rig.run(call)


def take_frames(result: NodeResult) -> Pixels:
    (take,) = result.takes
    return decode_apng(Path(take.path).read_bytes()).astype(np.int16)


def video_frames(output: object) -> Pixels:
    """A render's frames (the step loop's output), as int16 for differences."""
    assert isinstance(output, Video)
    return output.frames.astype(np.int16)


def reference_pipe(folder: Path) -> Any:
    diffusers = load_diffusers()
    import torch

    pipe: Any = diffusers.SkyReelsV2DiffusionForcingPipeline.from_pretrained(
        str(folder), dtype=torch.float32, local_files_only=True
    )
    pipe.set_progress_bar_config(disable=True)
    return pipe


def first_frame_image(width: int, height: int, seed: int = 0) -> Image.Image:
    """A first frame of random pixels (any size: the node resizes it as diffusers does)."""
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 256, (height, width, 3), dtype=np.uint8))


def source_video(frames: int, width: int, height: int) -> Video:
    """A video to extend, of random frames (any size: the node resizes it as diffusers does)."""
    rng = np.random.default_rng(7)
    return Video(rng.integers(0, 256, (frames, height, width, 3), dtype=np.uint8), 16)


def reference_frames(
    pipe: Any,
    prompt: str = PROMPT,
    image: Image.Image | None = None,
    video: Video | None = None,
    **params: Any,
) -> Pixels:
    """diffusers' frames for the same render (with `image` or `video`: its image-to-video or
    video-to-video pipeline over the same parts). Its prompts come encoded by
    `WanPipeline.encode_prompt` over the same parts: the SkyReels pipelines' prompt cleaning
    calls `ftfy` unconditionally, which this install lacks; WanPipeline's skips it then, and the
    rest of the text path is the same code."""
    diffusers = load_diffusers()
    import torch

    p: Mapping[str, Any] = node_params(**params)
    encoder: Any = diffusers.WanPipeline(
        tokenizer=pipe.tokenizer,
        text_encoder=pipe.text_encoder,
        vae=pipe.vae,
        scheduler=pipe.scheduler,
        transformer=pipe.transformer,
    )
    cfg = p["guidance"] > 1
    positive, negative = encoder.encode_prompt(
        prompt,
        p["negative_prompt"] or None,
        do_classifier_free_guidance=cfg,
        max_sequence_length=512,
        device=torch.device("cpu"),
    )
    pipe.transformer._set_ar_attention(p["causal_block_size"])  # what a request sets
    extra: dict[str, Any] = {}
    if image is not None:
        i2v = diffusers.SkyReelsV2DiffusionForcingImageToVideoPipeline
        pipe = i2v(**pipe.components)
        pipe.set_progress_bar_config(disable=True)
        extra["image"] = image
    if video is not None:
        v2v = diffusers.SkyReelsV2DiffusionForcingVideoToVideoPipeline
        pipe = v2v(**pipe.components)
        pipe.set_progress_bar_config(disable=True)
        extra["video"] = [Image.fromarray(frame) for frame in video.frames]
    video = pipe(
        **extra,
        prompt=None,
        prompt_embeds=positive,
        negative_prompt_embeds=negative,
        width=p["width"],
        height=p["height"],
        num_frames=p["frames"],
        num_inference_steps=p["steps"],
        guidance_scale=p["guidance"],
        generator=torch.Generator("cpu").manual_seed(p["seed"]),
        fps=p["fps"],
        base_num_frames=p["base_frames"] or p["frames"],
        overlap_history=p["overlap"],
        ar_step=p["ar_step"],
        causal_block_size=p["causal_block_size"],
        output_type="np",
    ).frames[0]
    return (np.asarray(video) * 255).round().astype(np.uint8).astype(np.int16)
