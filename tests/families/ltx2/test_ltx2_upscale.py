"""LTX-2's two-stage path, as the official workflows run it: a first pass at half the size, the
spatial latent upsampler, and a short refining pass (the distilled sigmas, unguided, the
distilled LoRA on its rows) at the full size. Parity on the tiny stack against diffusers' own
chain: `LTX2Pipeline` (latents out) -> `LTX2LatentUpsamplePipeline` -> `LTX2Pipeline` again
with the LoRA set, the distilled sigmas unshifted and the latents renoised."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from ltx2_harness import (
    PROMPT,
    first_frame_image,
    ltx2_rig,
    max_diff,
    node_params,
    render,
    take_audio,
    take_frames,
)

from inline_core.contract.registry import Families
from inline_core.diffusion.adapters.kit import random_lora, write_lora
from inline_core.diffusion.libs import diffusers, module
from inline_core.errors import InvalidRequest
from inline_core.families.ltx2.kit import LTX2Kit
from inline_core.families.ltx2.request import REFINE_SIGMAS
from inline_core.families.nodes.loras import LoraPicker
from inline_core.graph.runner import NodeResult, SubmitFacts
from inline_core.sampling.loop import StepLoopSampler

TOLERANCE = 2  # levels of 255
AUDIO_TOLERANCE = 4.0 / 32767.0
# diffusers takes multiples of 32: the first pass at 32x32, the refining pass at 64x64.
RENDER: dict[str, Any] = {
    "width": 64,
    "height": 64,
    "frames": 5,
    "fps": 25,
    "steps": 3,
    "seed": 5,
    "guidance": 3.0,
    "negative_prompt": "blurry",
}


@pytest.fixture(scope="module")
def upsampler(ltx2_kit: LTX2Kit) -> Any:
    """The kit's latent upsampler (its folder's `latent_upsampler/`)."""
    ltx2: Any = module("diffusers.pipelines.ltx2.latent_upsampler")
    folder = ltx2_kit.diffusers_dir / "latent_upsampler"
    return ltx2.LTX2LatentUpsamplerModel.from_pretrained(str(folder), local_files_only=True).eval()


@pytest.fixture(scope="module")
def distilled_lora(ltx2_kit: LTX2Kit) -> Path:
    """A random LoRA of the kit's transformer (the distilled LoRA's stand-in), diffusers' naming."""
    model: Any = diffusers().LTX2VideoTransformer3DModel.from_pretrained(
        str(ltx2_kit.diffusers_dir / "transformer"), local_files_only=True
    )
    layers = [
        f"transformer_blocks.{i}.{attn}.{p}"
        for i in range(len(model.transformer_blocks))
        for attn in ("attn1", "audio_attn1")
        for p in ("to_q", "to_k", "to_v", "to_out.0")
    ]
    lora = random_lora(model, layers, 4, 33)
    path = ltx2_kit.root / "loras" / "ltx2_distilled_tiny.safetensors"
    down, up = ".lora_A.weight", ".lora_B.weight"
    return write_lora(lora, path, "transformer.".__add__, down=down, up=up, peft_alpha=4.0)


def ours(
    kit: LTX2Kit, sampler: StepLoopSampler, lora: Path, takes: Path, image: Any = None
) -> NodeResult:
    """The node's render with `upscale`, the LoRA on the refining pass (expert `low`), as the
    official workflows load the distilled LoRA on their second sampler's model."""
    rig = ltx2_rig(kit.root, sampler)
    picker = LoraPicker(Families([rig.family]), rig.catalog)
    handle = replace(picker.pick({"name": lora.name, "strength": 1.0}), expert="low")
    params = {k: v for k, v in RENDER.items() if k != "prompt"}
    if image is not None:
        params["image"] = image
    # Euler on both passes, as diffusers' chain steps them (LTX-2.0's templates name others).
    euler = {"sampler": "euler", "refine_sampler": "euler"}
    return render(
        rig,
        takes,
        loras=[handle],
        upscale=True,
        audio_guidance=RENDER["guidance"],
        **euler,
        **params,
    )


def diffusers_chain(
    pipe: Any, upsampler: Any, lora: Path | None, image: Any = None, **recipe: Any
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """diffusers' chain's frames and sound (`recipe`: `chained`'s keywords)."""
    frames, sound = chained(pipe, upsampler, lora, image, **recipe)
    pixels = (np.asarray(frames[0]) * 255).round().astype(np.int16)
    samples: np.ndarray[Any, Any] = sound[0].float().cpu().numpy()
    return pixels, samples


def chained(
    pipe: Any,
    upsampler: Any,
    lora: Path | None,
    image: Any = None,
    generator: torch.Generator | None = None,
    output_type: str = "np",
    *,
    first: Mapping[str, Any] | None = None,
    num_frames: int = RENDER["frames"],
    refine_sigmas: Sequence[float] = REFINE_SIGMAS,
    scheduler_for: Callable[[Any], Any] | None = None,
) -> tuple[Any, Any]:
    """diffusers' chain, the refining pass's output as `output_type` (its `generator`: a fresh
    one from the seed unless given); with `image`, `LTX2ImageToVideoPipeline` for both passes;
    without `lora`, none on the refining pass. `first`: the first call's steps (or sigmas) and
    guidance (None: RENDER's); `num_frames`: the video's; `scheduler_for`: each pass's
    scheduler from the pipeline's config (None: the first pass on the pipeline's own, the
    refining one on its Euler unshifted)."""
    lib: Any = diffusers()
    scheduler = pipe.scheduler
    if scheduler_for is None:
        unshifted = {"use_dynamic_shifting": False, "shift_terminal": None}
        euler = lib.FlowMatchEulerDiscreteScheduler
        scheduler_for = lambda config: euler.from_config(config, **unshifted)  # noqa: E731
    first = first or {
        "num_inference_steps": RENDER["steps"],
        "guidance_scale": RENDER["guidance"],
        "audio_guidance_scale": RENDER["guidance"],
    }
    if image is not None:
        pipe = lib.LTX2ImageToVideoPipeline.from_pipe(pipe)
    common: dict[str, Any] = {
        "prompt": PROMPT,
        "negative_prompt": RENDER["negative_prompt"],
        "num_frames": num_frames,
        "frame_rate": float(RENDER["fps"]),
        # diffusers' further guidance terms off, as the node runs without them.
        "stg_scale": 0.0,
        "audio_stg_scale": 0.0,
        "modality_scale": 1.0,
        "audio_modality_scale": 1.0,
        "guidance_rescale": 0.0,
        "audio_guidance_rescale": 0.0,
        "spatio_temporal_guidance_blocks": None,
        "use_cross_timestep": bool(getattr(pipe.transformer, "prompt_modulation", False)),
        "max_sequence_length": int(pipe.tokenizer.model_max_length),
        "return_dict": False,
        **({} if image is None else {"image": image}),
    }
    if "sigmas" in first:  # levels as given: the first pass on the pass's own scheduler
        first = {**first, "num_inference_steps": len(first["sigmas"])}
        pipe.scheduler = scheduler_for(scheduler.config)
    try:
        video, audio = pipe(
            **common,
            **first,
            width=RENDER["width"] // 2,
            height=RENDER["height"] // 2,
            generator=torch.Generator("cpu").manual_seed(RENDER["seed"]),
            output_type="latent",
        )
    finally:
        pipe.scheduler = scheduler
    upsample = lib.LTX2LatentUpsamplePipeline(vae=pipe.vae, latent_upsampler=upsampler)
    larger: Any = upsample(latents=video, output_type="latent", return_dict=False)[0]
    if lora is not None:
        pipe.load_lora_weights(str(lora), adapter_name="distilled")
        pipe.set_adapters(["distilled"], adapter_weights=[1.0])
    pipe.scheduler = scheduler_for(scheduler.config)
    try:
        frames, sound = pipe(
            **common,
            latents=larger,
            audio_latents=audio,
            width=RENDER["width"],
            height=RENDER["height"],
            num_inference_steps=len(refine_sigmas),
            sigmas=list(refine_sigmas),
            noise_scale=refine_sigmas[0],
            guidance_scale=1.0,
            audio_guidance_scale=1.0,
            generator=generator or torch.Generator("cpu").manual_seed(RENDER["seed"]),
            output_type=output_type,
        )
    finally:
        pipe.scheduler = scheduler
        if lora is not None:
            pipe.unload_lora_weights()
    return frames, sound


@pytest.mark.parametrize("from_image", [False, True], ids=["text", "image"])
def test_the_two_stage_render_equals_diffusers_chained_pipelines(
    ltx2_kit: LTX2Kit,
    ltx2_sampler: StepLoopSampler,
    ltx2_reference: Any,
    upsampler: Any,
    distilled_lora: Path,
    tmp_path: Path,
    from_image: bool,
) -> None:
    """With an image, its first frame conditions both passes: encoded at the first pass's size,
    then the upsampled first frame kept clean through the refining pass (diffusers' chain)."""
    image = first_frame_image(48, 40, seed=5) if from_image else None
    result = ours(ltx2_kit, ltx2_sampler, distilled_lora, tmp_path, image)
    frames, sound = take_frames(result), take_audio(result)
    want, want_sound = diffusers_chain(ltx2_reference, upsampler, distilled_lora, image)
    assert frames.shape == want.shape == (5, 64, 64, 3)
    assert max_diff(frames, want) <= TOLERANCE
    assert frames.std() > 1.0
    reference_16 = np.round(np.clip(want_sound, -1, 1) * 32767.0) / 32767.0
    assert float(np.abs(sound.samples - reference_16).max()) <= AUDIO_TOLERANCE
    assert result.takes[0].params["upscale"] is True


def test_the_refining_pass_runs_its_own_sampler(
    ltx2_kit: LTX2Kit, ltx2_sampler: StepLoopSampler, tmp_path: Path
) -> None:
    """`refine_sampler` steps the refining pass alone: the template's (LTX-2.0's text to video:
    euler_ancestral) named renders what leaving it empty does; gradient_estimation renders
    otherwise; neither without `upscale`."""
    rig = ltx2_rig(ltx2_kit.root, ltx2_sampler)
    params = {k: v for k, v in RENDER.items() if k != "prompt"}

    def frames(refine_sampler: str) -> np.ndarray[Any, Any]:
        result = render(rig, tmp_path, upscale=True, refine_sampler=refine_sampler, **params)
        ran = result.takes[0].params["refine_sampler"]
        assert ran == (refine_sampler or "euler_ancestral")
        return take_frames(result)

    template = frames("")
    assert np.array_equal(template, frames("euler_ancestral"))
    assert max_diff(frames("gradient_estimation"), template) > 0
    with pytest.raises(InvalidRequest, match="refine_sampler"):
        rig.check("l", node_params(refine_sampler="gradient_estimation"), SubmitFacts.bare([]))


def test_a_pass_lora_without_upscale_is_refused(
    ltx2_kit: LTX2Kit, ltx2_sampler: StepLoopSampler, distilled_lora: Path, tmp_path: Path
) -> None:
    rig = ltx2_rig(ltx2_kit.root, ltx2_sampler)
    picker = LoraPicker(Families([rig.family]), rig.catalog)
    handle = replace(picker.pick({"name": distilled_lora.name, "strength": 1.0}), expert="low")
    with pytest.raises(InvalidRequest, match="without param 'upscale'"):
        render(rig, tmp_path, loras=[handle])


def test_an_upsampler_named_without_upscale_is_refused(
    ltx2_kit: LTX2Kit, ltx2_sampler: StepLoopSampler, tmp_path: Path
) -> None:
    """Named, it would be left unused: the render would not be the one asked for."""
    rig = ltx2_rig(ltx2_kit.root, ltx2_sampler)
    with pytest.raises(InvalidRequest, match="runs only with param 'upscale'"):
        render(rig, tmp_path, upscale_model="ltx-2-spatial-upscaler")
