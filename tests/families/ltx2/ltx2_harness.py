"""Shared helpers for the LTX-2 tests: render through the real node runner and step loop, and
the same render through diffusers' LTX2Pipeline."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from PIL import Image

from inline_core.config import Config
from inline_core.diffusion.libs import diffusers
from inline_core.families.ltx2 import LTX2Family
from inline_core.families.ltx2.descriptor import LTX2_DESCRIPTOR
from inline_core.families.ltx2.kit import FOLDER
from inline_core.families.ltx2.versions import LTX2, ONE_PASS, first_pass
from inline_core.families.standalone import FamilyRig, family_rig
from inline_core.graph.runner import NodeCall, NodeResult
from inline_core.runtime.audio import decode_wav
from inline_core.runtime.cancel import CancelToken
from inline_core.runtime.context import ExecutionContext
from inline_core.runtime.file_store import FileTakeStore
from inline_core.runtime.progress import RunEvent
from inline_core.runtime.video import Audio, Video, decode_apng
from inline_core.sampling.job import BatchedSampler, SampleJob
from inline_core.sampling.loop import StepLoopSampler
from tests.batching_helpers import all_in_loop
from tests.server.server_support import wait_until

Pixels = npt.NDArray[np.int16]
_run_ids = itertools.count()
PROMPT = "a robot dancing in the rain"
# A render small enough for the CPU tests: 3 latent frames of 16x16 latents, 5 soundtrack frames.
SMALL: dict[str, Any] = {"width": 32, "height": 32, "frames": 5, "fps": 25, "steps": 2, "seed": 7}


def ltx2_rig(models_dir: Path, sampler: BatchedSampler) -> FamilyRig:
    config = Config(models_dir=models_dir, profile="cpu", dtype="float32")
    return family_rig(LTX2Family, models_dir, sampler, config=config)


def node_params(**overrides: Any) -> dict[str, Any]:
    params: dict[str, Any] = {p.name: p.default for p in LTX2_DESCRIPTOR.params}
    params.update(SMALL, format="png", audio_format="wav", model=FOLDER)
    params.update(overrides)
    return params


def render(
    rig: FamilyRig,
    takes_dir: Path,
    prompt: str = PROMPT,
    *,
    image: Image.Image | None = None,
    loras: list[Any] | None = None,
    on_event: Callable[[RunEvent], None] | None = None,
    **params: Any,
) -> NodeResult:
    def events(event: RunEvent) -> None:
        if on_event is not None:
            on_event(event)

    ctx = ExecutionContext(
        run_id=f"run{next(_run_ids)}",
        takes=FileTakeStore(takes_dir),
        cancel=CancelToken(),
        events=events,
    )
    inputs: dict[str, Any] = {"prompt": prompt}
    if image is not None:
        inputs["image"] = image
    if loras:
        inputs["loras"] = loras
    call = NodeCall(ctx=ctx, node_id="l", params=node_params(**params), inputs=inputs)
    return rig.run(call)


def first_frame_image(width: int, height: int, seed: int) -> Image.Image:
    """A smooth random picture (a few colour blobs): what an image-to-video render starts at."""
    rng = np.random.default_rng(seed)
    small = rng.integers(0, 256, size=(4, 4, 3), dtype=np.uint8)
    return Image.fromarray(small, "RGB").resize((width, height), Image.Resampling.BICUBIC)


def take_frames(result: NodeResult) -> Pixels:
    return decode_apng(Path(result.takes[0].path).read_bytes()).astype(np.int16)


def take_audio(result: NodeResult) -> Audio:
    return decode_wav(Path(result.takes[1].path).read_bytes())


def reference(
    pipe: Any,
    prompt: str = PROMPT,
    *,
    image: Image.Image | None = None,
    sigmas: Sequence[float] = (),
    **params: Any,
) -> tuple[Pixels, Audio]:
    """LTX2Pipeline's frames (rounded to uint8 as its PIL output rounds them) and soundtrack for
    the same render, its further guidance terms off as the node runs without them; with an
    image, LTX2ImageToVideoPipeline's over the same parts."""
    out = reference_output(pipe, prompt, image=image, sigmas=sigmas, **params)
    samples = out.audio[0].float().cpu().numpy()
    rate = int(pipe.vocoder.config.output_sampling_rate)
    return uint8_frames(out.frames[0]), Audio(samples, rate)


def uint8_frames(frames: Any) -> Pixels:
    return (np.asarray(frames) * 255).round().astype(np.uint8).astype(np.int16)


def pipeline_decodes(pipe: Any, latents: Any, audio_latents: Any) -> tuple[Pixels, Audio]:
    """What `LTX2Pipeline`'s own decode makes of its `output_type="latent"` output (the
    denormalized video and soundtrack latents): the VAE's frames, as `reference` rounds them
    (the kit's VAE takes no decode timestep), and the vocoder's soundtrack. One denoising run
    then serves both a diffusion decoder and these (LTX-2.5's parity)."""
    import torch

    assert not pipe.vae.config.timestep_conditioning
    with torch.inference_mode():
        video = pipe.vae.decode(latents, None, return_dict=False)[0]
        frames = pipe.video_processor.postprocess_video(video, output_type="np")
        sound = pipe.vocoder(pipe.audio_vae.decode(audio_latents, return_dict=False)[0])
    rate = int(pipe.vocoder.config.output_sampling_rate)
    return uint8_frames(frames[0]), Audio(sound[0].float().cpu().numpy(), rate)


def reference_output(
    pipe: Any,
    prompt: str = PROMPT,
    *,
    image: Image.Image | None = None,
    sigmas: Sequence[float] = (),
    output_type: str = "np",
    generator: Any = None,
    **params: Any,
) -> Any:
    """`reference`'s pipeline call, its output as it is (`output_type="latent"`: the
    denormalized latents), drawing from `generator` (None: one seeded with the render's)."""
    import torch

    p: dict[str, Any] = node_params(**params)
    resolved = first_pass(p, LTX2)  # one pass: LTX2Pipeline's defaults where params leave them
    p.update({name: resolved[name] for name in ONE_PASS})
    extra: dict[str, Any] = {}
    if image is not None:
        pipe = diffusers().LTX2ImageToVideoPipeline.from_pipe(pipe)
        extra["image"] = image
    if sigmas:  # explicit levels, stepped unshifted (ComfyUI's ManualSigmas)
        config = pipe.scheduler.config
        unshifted = diffusers().FlowMatchEulerDiscreteScheduler.from_config(
            config, use_dynamic_shifting=False, shift_terminal=None
        )
        chosen: Any = pipe  # LTX2Pipeline or its image-to-video one
        pipe = chosen.__class__.from_pipe(chosen, scheduler=unshifted)
        extra["sigmas"] = list(sigmas)
    return pipe(
        **extra,
        prompt=prompt,
        negative_prompt=p["negative_prompt"] or None,
        width=p["width"],
        height=p["height"],
        num_frames=p["frames"],
        frame_rate=float(p["fps"]),
        num_inference_steps=p["steps"],
        guidance_scale=p["guidance"],
        audio_guidance_scale=p["audio_guidance"],
        stg_scale=0.0,
        audio_stg_scale=0.0,
        modality_scale=1.0,
        audio_modality_scale=1.0,
        guidance_rescale=0.0,
        audio_guidance_rescale=0.0,
        spatio_temporal_guidance_blocks=None,
        use_cross_timestep=bool(getattr(pipe.transformer, "prompt_modulation", False)),
        max_sequence_length=int(pipe.tokenizer.model_max_length),
        generator=generator or torch.Generator("cpu").manual_seed(p["seed"]),
        output_type=output_type,
    )


def max_diff(a: Pixels, b: Pixels) -> int:
    return int(np.abs(a - b).max())


def solo_and_together(
    sampler: StepLoopSampler, pipeline: Any, requests: Sequence[dict[str, Any]]
) -> tuple[list[Video], list[Video]]:
    """Each request rendered alone, then all together (the loop held in its first forward
    until every request is in it, so which meet does not depend on this machine's speed)."""
    solo: list[Video] = [sampler.run(SampleJob(pipeline, pipeline.request(**r))) for r in requests]
    release = threading.Event()
    forward = pipeline.denoise_step

    def held(states: Sequence[Any], /) -> Any:
        release.wait()
        return forward(states)

    pipeline.denoise_step = held
    try:
        futures = [sampler.submit(SampleJob(pipeline, pipeline.request(**r))) for r in requests]
        wait_until(lambda: all_in_loop(sampler, len(requests)), "all of them in the loop")
        release.set()
        together: list[Video] = [f.result(timeout=300) for f in futures]
    finally:
        release.set()
        del pipeline.denoise_step
    return solo, together
