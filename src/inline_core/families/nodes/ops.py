"""The primitives' work (imports torch; loaded on a primitive's first run).

Each op works on the family its handle names, with that family's parts under the same resident
keys as its own node, and `sample` submits to the same seam through the family's denoiser (its
node pipeline's denoise half), so a primitive graph renders what the node renders.

The denoiser's `request()` takes the `sample` arguments a family serving the primitives accepts:
`prompt` (unused, ""), `width`, `height`, `steps`, `guidance`, `seed`, `sampler`,
`sigma_schedule`, `denoise`, `start` (latents to start from), `batch_size`, `batch_index`,
`positive` and `negative` (encoded prompts), `loras` (the model handle's LoRA stack, a
tuple of `diffusion.adapters.stack.LoraUse`), for a latent with a noise mask `noise_mask` (the
mask as a `(1, 1, H, W)` tensor, white repaints, at its own size) and, for a model with a control
(`load/controlnet`), `control` (the family's record of it) and `control_latents` (its image,
encoded here), with `control_inpaint` and `control_mask` where it inpaints (`masks.py`).

Where the device policy splits the model across ranks, `load/diffusion-model` starts the worker
group with the transformer (no weights in this process) and `sample` denoises there: the encoded
prompts and starting latents go to the ranks as raw tensors, the latents come back, and progress
and cancel cross as for the node. Every sampler and schedule runs there: they live in each
request's private schedule, which the ranks build from the same settings.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, cast

import torch
from PIL import Image

from inline_core.components.interfaces import Latents
from inline_core.components.step import caches_steps, step_cache_counts
from inline_core.contract.family import Family
from inline_core.contract.handles import (
    ConditioningHandle,
    ControlHandle,
    LatentHandle,
    ModelHandle,
    TextEncoderHandle,
    VAEHandle,
)
from inline_core.contract.settings import SampleSettings
from inline_core.contract.supports import supports_control_inpaint
from inline_core.diffusion import masks
from inline_core.diffusion.adapters.stack import stack_info
from inline_core.engine.runtime import ModelRuntime
from inline_core.engine.target import RenderTarget, denoiser_target
from inline_core.errors import InvalidRequest, RunFailed
from inline_core.runtime.context import ExecutionContext
from inline_core.runtime.progress import NodeReporter
from inline_core.runtime.step_cache import StepCacheSettings, sum_counts
from inline_core.sampling.job import PREVIEW_FLUSH_S, SampleJob

# -- loaders: bring the weights into the resident cache ------------------------------------------


def load_model(
    runtime: ModelRuntime,
    family: Family,
    handle: ModelHandle,
    node_id: str | None = None,
    render: Hashable = None,
) -> None:
    # In process its denoiser is assembled over the loaded parts; a worker group's ranks load it.
    _denoiser(runtime, family, handle, node_id, render).start()


def load_vae(
    runtime: ModelRuntime, family: Family, handle: VAEHandle, render: Hashable = None
) -> None:
    runtime.compute(lambda: runtime.stacks().part(family, "vae", handle.source, render))


def load_text_encoder(
    runtime: ModelRuntime, family: Family, handle: TextEncoderHandle, render: Hashable = None
) -> None:
    def load() -> None:
        stacks = runtime.stacks()
        stacks.part(family, "text_encoder", handle.encoder, render)
        stacks.part(family, "tokenizer", handle.tokenizer, render)

    runtime.compute(load)


# -- text ----------------------------------------------------------------------------------------


def encode_text(
    runtime: ModelRuntime,
    family: Family,
    handle: TextEncoderHandle,
    prompt: str,
    render: Hashable = None,
) -> ConditioningHandle:
    def encode() -> Any:
        encoder = runtime.stacks().text_encoder(family, handle.encoder, handle.tokenizer, render)
        return encoder.encode(prompt)

    conditioning = runtime.compute(encode)
    width = int(cast(torch.Tensor, conditioning.value).shape[-1])
    return ConditioningHandle(family.name, conditioning, width, handle.name)


# -- VAE -----------------------------------------------------------------------------------------


def decode(
    runtime: ModelRuntime,
    family: Family,
    handle: VAEHandle,
    latent: LatentHandle,
    render: Hashable = None,
) -> list[Image.Image]:
    return runtime.compute(lambda: _decode(runtime, family, handle, latent, render))


def _decode(
    runtime: ModelRuntime,
    family: Family,
    handle: VAEHandle,
    latent: LatentHandle,
    render: Hashable,
) -> list[Image.Image]:
    vae: Any = runtime.stacks().vae(family, handle.source, render)
    factor = int(vae.spatial_factor)
    channels = int(vae.latent_channels)
    shape = (1, channels, latent.height // factor, latent.width // factor)
    items = latent.samples or tuple(
        Latents(torch.zeros(shape, device=vae.device), shape) for _ in range(latent.batch)
    )
    images: list[Image.Image] = []
    with torch.inference_mode():
        for item in items:
            value = cast(torch.Tensor, item.value)
            if value.shape[1] != channels:
                raise InvalidRequest(
                    f"the latent has {value.shape[1]} channels; vae {handle.name!r} decodes "
                    f"{channels}"
                )
            images.append(cast(Image.Image, vae.decode(Latents(value.to(vae.device), item.shape))))
    return images


def encode_image(
    runtime: ModelRuntime,
    family: Family,
    handle: VAEHandle,
    image: Image.Image,
    render: Hashable = None,
) -> LatentHandle:
    """Encode an image (its posterior's mode: the same image always gives the same latents),
    centre-cropped to the pixel multiple its model takes, as ComfyUI's VAEEncode crops."""

    def encode() -> tuple[Image.Image, Latents]:
        vae: Any = runtime.stacks().vae(family, handle.source, render)
        cropped = _crop(image.convert("RGB"), int(vae.pixel_multiple))
        with torch.inference_mode():
            return cropped, cast(Latents, vae.encode(cropped, None))

    cropped, latents = runtime.compute(encode)
    return LatentHandle(
        width=cropped.width,
        height=cropped.height,
        batch=1,
        samples=(latents,),
        info={"vae": handle.name, "width": cropped.width, "height": cropped.height},
        encoded_from=image.size,
    )


def _crop(image: Image.Image, multiple: int) -> Image.Image:
    left, top, width, height = masks.crop_box(image.width, image.height, multiple)
    if width == 0 or height == 0:
        raise InvalidRequest(
            f"the image is {image.width}x{image.height}; it must be at least "
            f"{multiple}x{multiple} pixels"
        )
    if (width, height) == image.size:
        return image
    return image.crop((left, top, left + width, top + height))


def encode_for_inpaint(
    runtime: ModelRuntime,
    family: Family,
    handle: VAEHandle,
    image: Image.Image,
    mask: Image.Image,
    grow: int,
    render: Hashable = None,
) -> LatentHandle:
    """`vae/encode-inpaint`: the image cropped as `encode_image` crops it, its masked part
    encoded as mid-gray, and the grown mask as the latent's noise mask (`masks.py`)."""

    def encode() -> tuple[tuple[int, int], Latents, Image.Image]:
        vae: Any = runtime.stacks().vae(family, handle.source, render)
        with torch.inference_mode():
            return masks.encode_for_inpaint(vae, image, mask, grow)

    (width, height), latents, noise_mask = runtime.compute(encode)
    return LatentHandle(
        width=width,
        height=height,
        batch=1,
        samples=(latents,),
        info={"vae": handle.name, "width": width, "height": height},
        noise_mask=noise_mask,
    )


# -- sampling ------------------------------------------------------------------------------------


def sample(
    runtime: ModelRuntime,
    family: Family,
    settings: SampleSettings,
    model: ModelHandle,
    positive: ConditioningHandle,
    negative: ConditioningHandle | None,
    latent: LatentHandle,
    ctx: ExecutionContext,
    node_id: str,
) -> LatentHandle:
    reporter = ctx.reporter(node_id)
    reporter.phase("loading")
    target = _denoiser(runtime, family, model, node_id, ctx.run_id)
    pipeline: Any = target.pipeline
    run = _jobs(pipeline, target.sampler.run, runtime)
    target.start()  # a worker group's ranks load the transformer: part of the loading phase
    reporter.phase("loading", 1.0)
    ctx.cancel.raise_if_cancelled()
    fit = family.denoiser_fit(model.transformer)
    if fit is not None:
        _check_fit(*fit, model, positive, negative, latent)
    # The control image's encode and each request's noise are model work too (on the loop on
    # a CPU: one thread computes, so the primitives' pixels are the node's).
    states = runtime.compute(
        lambda: _requests(
            runtime, family, settings, model, positive, negative, latent, ctx, pipeline
        )
    )
    cache = _step_cache(runtime, family, ctx, states)
    samples = run(states, ctx, reporter)
    info = settings.to_info() | {
        **({"loras": stack_info(model.loras)} if model.loras else {}),
        # Cached steps are an approximation: the decoded take says how, and what it skipped.
        **(_cache_info(runtime, cache, states) if cache is not None else {}),
        **(_control_info(model) if model.control else {}),
        **({"noise_mask": True} if latent.noise_mask is not None else {}),
        "model": model.name,
        "width": latent.width,
        "height": latent.height,
    }
    # The noise mask stays with the latents, as ComfyUI's sampled latent keeps it.
    return dataclasses.replace(latent, samples=tuple(samples), info=info)


def _requests(
    runtime: ModelRuntime,
    family: Family,
    settings: SampleSettings,
    model: ModelHandle,
    positive: ConditioningHandle,
    negative: ConditioningHandle | None,
    latent: LatentHandle,
    ctx: ExecutionContext,
    pipeline: Any,
) -> list[Any]:
    guidance = family.guidance_for_cfg(settings.cfg, model.transformer)
    if positive.guidance is not None:  # a conditioning/guidance: the guidance it embeds
        guidance = family.embedded_guidance(positive.guidance, model.transformer)
    fields = _control_fields(runtime, family, model, latent, ctx.run_id)
    if latent.noise_mask is not None:  # at its own size: the denoiser resizes it to the latent
        mask = masks.mask_tensor(latent.noise_mask)
        if latent.noise_mask_on is not None:  # over the image before the encode's crop
            mask = masks.cropped_with(mask, latent.noise_mask_on, (latent.width, latent.height))
        fields["noise_mask"] = mask
    return [
        pipeline.request(
            prompt="",
            width=latent.width,
            height=latent.height,
            steps=settings.steps,
            guidance=guidance,
            seed=settings.seed,
            sampler=settings.sampler,
            sigma_schedule=settings.scheduler,
            denoise=settings.denoise,
            start=None if latent.samples is None else latent.samples[index],
            batch_size=latent.batch,
            batch_index=index,
            positive=positive.conditioning,
            negative=negative.conditioning if settings.guided and negative is not None else None,
            # A family that takes no LoRAs gets no stack (load/lora refused one for it).
            **({"loras": model.loras} if model.loras else {}),
            **settings.window_fields(),  # a KSamplerAdvanced window (runs_step_windows)
            **settings.shift_fields(),  # a ModelSampling* shift (runs_model_shift)
            **fields,
        )
        for index in range(latent.batch)
    ]


def _step_cache(
    runtime: ModelRuntime, family: Family, ctx: ExecutionContext, states: Sequence[Any]
) -> StepCacheSettings | None:
    """The run's step caching (else the policy's for this step count) on every item."""
    if not states or not caches_steps(states[0]):
        return None
    cache = runtime.step_cache_for(family, ctx.step_cache, int(states[0].step_count))
    for state in states:
        state.step_cache = cache
    return cache


def _cache_info(
    runtime: ModelRuntime, cache: StepCacheSettings, states: Sequence[Any]
) -> dict[str, Any]:
    info: dict[str, Any] = {"cache": cache.to_json()}
    counted = [c for c in (step_cache_counts(s) for s in states) if c is not None]
    for counts in counted:
        runtime.step_cache_totals.add(counts)
    if counted:
        info["cacheCounts"] = sum_counts(counted)
    return info


def _control_fields(
    runtime: ModelRuntime,
    family: Family,
    model: ModelHandle,
    latent: LatentHandle,
    render: Hashable,
) -> dict[str, Any]:
    """A controlled model's request fields: its family's control record, and the control image
    encoded (the posterior's mode) at the latent's size, resized as the high-level nodes do;
    with a mask or an image to inpaint, or a control model that takes them, those too
    (`masks.control_inpaint`)."""
    control = model.control
    if control is None:
        return {}
    vae: Any = runtime.stacks().vae(family, control.vae.source, render)
    inpaints = supports_control_inpaint(family) and family.control_inpaints(control.name) is True
    with torch.inference_mode():
        fields = masks.control_inpaint(
            vae,
            control.image,
            control.inpaint_image,
            control.mask,
            latent.width,
            latent.height,
            inpaints=inpaints,
        )
    return {"control": control.use, **fields}


def _control_info(model: ModelHandle) -> dict[str, Any]:
    control = cast(ControlHandle, model.control)
    return {"controlnet": control.name, "control_strength": getattr(control.use, "strength", None)}


_BatchRun = Callable[[Sequence[Any], ExecutionContext, NodeReporter], list[Latents]]


def _jobs(pipeline: Any, run_job: Callable[[SampleJob], Any], runtime: ModelRuntime) -> _BatchRun:
    def run(states: Sequence[Any], ctx: ExecutionContext, reporter: NodeReporter) -> list[Latents]:
        """The batch's items at once, so their forwards can be batched, reported as one count
        over all of them (each item's count is known once it steps). The first item is the
        node's preview, as in ComfyUI (items need not step in lockstep)."""
        progress = _BatchProgress(len(states), reporter.step, [int(s.step_count) for s in states])
        preview = runtime.preview_sink(ctx.preview, ctx.run_id, reporter.node_id)
        jobs = [
            SampleJob(
                pipeline=pipeline,
                state=state,
                cancel=ctx.cancel,
                on_phase=reporter.phase,
                on_step=progress.callback(index),
                on_wait=reporter.waiting,
                label=f"{ctx.run_id}/{reporter.node_id}#{index}",
                preview=preview if index == 0 else None,
            )
            for index, state in enumerate(states)
        ]
        outputs = _run_all(run_job, jobs)
        if preview is not None:  # the last preview out before the run can end
            preview.flush(PREVIEW_FLUSH_S)
        return [_latents(out) for out in outputs]

    return run


def _latents(value: object) -> Latents:
    """The sampled latents: in process they come as `Latents`, from the ranks as a tensor."""
    if isinstance(value, Latents):
        return value
    shape = getattr(value, "shape", None)
    if shape is None:
        raise RunFailed(f"sampling returned a {type(value).__name__}, not latents")
    return Latents(value, tuple(int(n) for n in shape))


def _denoiser(
    runtime: ModelRuntime,
    family: Family,
    model: ModelHandle,
    node_id: str | None,
    render: Hashable,
) -> RenderTarget:
    return denoiser_target(runtime, family, model.transformer, model.scheduler, render, node_id)


def _check_fit(
    caption_width: int,
    channels: int,
    model: ModelHandle,
    positive: ConditioningHandle,
    negative: ConditioningHandle | None,
    latent: LatentHandle,
) -> None:
    """Refuse handles from another model's encoder or latent space with a message, not a shape
    error from inside the transformer."""
    for conditioning in (positive, negative):
        if conditioning is not None and conditioning.width != caption_width:
            raise InvalidRequest(
                f"the conditioning comes from text encoder {conditioning.encoder!r} "
                f"({conditioning.width} wide); model {model.name!r} takes {caption_width}"
            )
    for item in latent.samples or ():
        if item.shape[1] != channels:
            raise InvalidRequest(
                f"the latent has {item.shape[1]} channels; model {model.name!r} samples {channels}"
            )


def _run_all(run: Callable[[SampleJob], Any], jobs: Sequence[SampleJob]) -> list[Any]:
    """Run the jobs at once so the sampler can batch their forwards (one thread waits on each)."""
    if len(jobs) == 1:
        return [run(jobs[0])]
    with ThreadPoolExecutor(len(jobs), thread_name_prefix="inline-sample-batch") as pool:
        return list(pool.map(run, jobs))


class _BatchProgress:
    """A latent batch's steps, reported as one count over all of its items."""

    def __init__(
        self,
        size: int,
        report: Callable[[int, int], None],
        expected: Sequence[int],
    ) -> None:
        self._lock = threading.Lock()
        self._done = [0] * size
        # Each item's step count: known once it steps; `expected` for the items yet to start.
        self._counts = list(expected)
        self._report = report

    def callback(self, index: int) -> Callable[[int, int], None]:
        def on_step(step: int, count: int) -> None:
            with self._lock:
                self._done[index], self._counts[index] = step, count
                done, total = sum(self._done), sum(self._counts)
            self._report(done, total)

        return on_step
