"""The primitives' work on the engine (imports torch; loaded on a primitive's first run).

Each op takes the engine's components under the same resident keys as the Z-Image node, and
`sample` submits to the same batched sampler through `ZImageDenoisePipeline`, the node pipeline's
denoise half, so a primitive graph renders what the node renders.

Where the device policy splits the model across ranks, `load/diffusion-model` starts the node's
worker group with the transformer (no weights in this process) and `sample` denoises there: the
encoded prompts and starting latents go to the ranks as raw tensors, the latents come back, and
progress and cancel cross as for the node. Every sampler and schedule runs there: they live in
each request's private schedule, which the ranks build from the same settings.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, cast

import torch
from PIL import Image

from inline_core.components.interfaces import Latents
from inline_core.errors import InvalidRequest
from inline_core.models.zimage.facts import transformer_config
from inline_core.models.zimage.pipeline import ZImageDenoisePipeline, ZImageRequest
from inline_core.models.zimage.placements import zimage_placements
from inline_core.models.zimage.primitives.handles import (
    ConditioningHandle,
    LatentHandle,
    ModelHandle,
    TextEncoderHandle,
    VAEHandle,
)
from inline_core.models.zimage.primitives.owner import EngineOwner
from inline_core.models.zimage.primitives.settings import SampleSettings
from inline_core.models.zimage.remote import GroupZImagePipeline, ZImageGroup
from inline_core.runtime.context import ExecutionContext
from inline_core.runtime.progress import NodeReporter
from inline_core.sampling.job import BatchedSampler, SampleJob

# Z-Image patchifies 8x-downsampled latents 2x2: an encoded image's sides are multiples of 16.
PIXEL_MULTIPLE = 16


# -- loaders: bring the weights into the resident cache ------------------------------------------


def load_model(owner: EngineOwner, handle: ModelHandle, node_id: str | None = None) -> None:
    split = _group_denoiser(owner, handle, node_id)
    if split is not None:
        group, pipeline = split
        group.start(pipeline)  # the ranks load the transformer
        return
    engine = owner.engine()
    engine.transformer(handle.transformer)
    engine.scheduler_config(handle.scheduler)


def load_vae(owner: EngineOwner, handle: VAEHandle) -> None:
    owner.engine().vae(handle.source)


def load_text_encoder(owner: EngineOwner, handle: TextEncoderHandle) -> None:
    engine = owner.engine()
    engine.text_encoder(handle.encoder)
    engine.tokenizer(handle.tokenizer)


# -- text ----------------------------------------------------------------------------------------


def encode_text(owner: EngineOwner, handle: TextEncoderHandle, prompt: str) -> ConditioningHandle:
    encoder = owner.engine().prompt_encoder(handle.encoder, handle.tokenizer)
    conditioning = encoder.encode(prompt)
    width = int(cast(torch.Tensor, conditioning.value).shape[-1])
    return ConditioningHandle(conditioning, width, handle.name)


# -- VAE -----------------------------------------------------------------------------------------


def decode(owner: EngineOwner, handle: VAEHandle, latent: LatentHandle) -> list[Image.Image]:
    vae = owner.engine().flux_vae(handle.source)
    factor = vae.spatial_factor
    shape = (1, vae.latent_channels, latent.height // factor, latent.width // factor)
    items = latent.samples or tuple(
        Latents(torch.zeros(shape, device=vae.device), shape) for _ in range(latent.batch)
    )
    images: list[Image.Image] = []
    with torch.inference_mode():
        for item in items:
            value = cast(torch.Tensor, item.value)
            if value.shape[1] != vae.latent_channels:
                raise InvalidRequest(
                    f"the latent has {value.shape[1]} channels; vae {handle.name!r} decodes "
                    f"{vae.latent_channels}"
                )
            images.append(cast(Image.Image, vae.decode(Latents(value.to(vae.device), item.shape))))
    return images


def encode_image(owner: EngineOwner, handle: VAEHandle, image: Image.Image) -> LatentHandle:
    """Encode an image (its posterior's mode: the same image always gives the same latents),
    centre-cropped to multiples of 16 pixels as ComfyUI's VAEEncode crops to its multiple."""
    vae = owner.engine().flux_vae(handle.source)
    cropped = _crop(image.convert("RGB"))
    with torch.inference_mode():
        latents = vae.encode(cropped, None)
    return LatentHandle(
        width=cropped.width,
        height=cropped.height,
        batch=1,
        samples=(latents,),
        info={"vae": handle.name, "width": cropped.width, "height": cropped.height},
    )


def _crop(image: Image.Image) -> Image.Image:
    width, height = (side // PIXEL_MULTIPLE * PIXEL_MULTIPLE for side in image.size)
    if width == 0 or height == 0:
        raise InvalidRequest(
            f"the image is {image.width}x{image.height}; it must be at least "
            f"{PIXEL_MULTIPLE}x{PIXEL_MULTIPLE} pixels"
        )
    if (width, height) == image.size:
        return image
    left, top = (image.width - width) // 2, (image.height - height) // 2
    return image.crop((left, top, left + width, top + height))


# -- sampling ------------------------------------------------------------------------------------


def sample(
    owner: EngineOwner,
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
    split = _group_denoiser(owner, model, node_id)
    if split is None:
        pipeline = owner.engine().denoise_pipeline_for(model.transformer, model.scheduler)
        caption_width = int(cast(Any, pipeline.denoiser.transformer).config.cap_feat_dim)
        fit: tuple[int, int] | None = (caption_width, pipeline.denoiser.in_channels)
        request: Callable[..., ZImageRequest] = pipeline.request
        run: _BatchRun = partial(_sample_in_process, pipeline, owner.sampler)
    else:
        group, handle = split
        fit = _fit_from_files(model)
        request = handle.request
        run = partial(_sample_in_group, group, handle)
        group.start(handle)  # the ranks load the transformer: part of the loading phase
    reporter.phase("loading", 1.0)
    ctx.cancel.raise_if_cancelled()
    if fit is not None:
        _check_fit(*fit, model, positive, negative, latent)
    guidance = settings.guidance
    states = [
        request(
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
            negative=negative.conditioning if guidance > 0 and negative is not None else None,
        )
        for index in range(latent.batch)
    ]
    samples = run(states, ctx, reporter)
    info = settings.to_info() | {
        "model": model.name,
        "width": latent.width,
        "height": latent.height,
    }
    return LatentHandle(latent.width, latent.height, latent.batch, tuple(samples), info)


_BatchRun = Callable[[Sequence[ZImageRequest], ExecutionContext, NodeReporter], list[Latents]]


def _sample_in_process(
    pipeline: ZImageDenoisePipeline,
    sampler: BatchedSampler,
    states: Sequence[ZImageRequest],
    ctx: ExecutionContext,
    reporter: NodeReporter,
) -> list[Latents]:
    """The batch's items at once, so the sampler can batch their forwards."""
    progress = _BatchProgress(len(states), reporter.step)
    jobs = [
        SampleJob(
            pipeline=pipeline,
            state=state,
            cancel=ctx.cancel,
            on_phase=reporter.phase,
            on_step=progress.callback(index),
            label=f"{ctx.run_id}/{reporter.node_id}#{index}",
        )
        for index, state in enumerate(states)
    ]
    return [cast(Latents, out) for out in _run_all(sampler, jobs)]


def _group_denoiser(
    owner: EngineOwner, model: ModelHandle, node_id: str | None
) -> tuple[ZImageGroup, GroupZImagePipeline] | None:
    """The worker group and the handle to sample with in it, where the policy splits this
    model; None: sample in process."""
    split = owner.split_for_transformer(model.transformer, node_id)
    if split is None:
        return None
    group = owner.group_for(split)
    placement = zimage_placements(owner.policy())[1]
    return group, group.denoiser_for(model.transformer, model.scheduler, placement)


def _sample_in_group(
    group: ZImageGroup,
    handle: GroupZImagePipeline,
    states: Sequence[ZImageRequest],
    ctx: ExecutionContext,
    reporter: NodeReporter,
) -> list[Latents]:
    """The batch's items one after the other (the group runs one job at a time), reported as
    one count over all of them."""
    progress = _BatchProgress(len(states), reporter.step, [s.step_count for s in states])
    return [
        group.sample(
            handle,
            state,
            cancel=ctx.cancel,
            on_phase=reporter.phase,
            on_step=progress.callback(index),
        )
        for index, state in enumerate(states)
    ]


def _fit_from_files(model: ModelHandle) -> tuple[int, int] | None:
    """The caption width and latent channels the transformer takes, read from its files (the
    server holds no weights under a split); None when unreadable (the ranks will say why)."""
    config = transformer_config(model.transformer)
    if config is None:
        return None
    width, channels = config.get("cap_feat_dim"), config.get("in_channels")
    if not isinstance(width, int) or not isinstance(channels, int):
        return None
    return width, channels


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


def _run_all(sampler: BatchedSampler, jobs: Sequence[SampleJob]) -> list[Any]:
    """Run the jobs at once so the sampler can batch their forwards (one thread waits on each)."""
    if len(jobs) == 1:
        return [sampler.run(jobs[0])]
    with ThreadPoolExecutor(len(jobs), thread_name_prefix="inline-sample-batch") as pool:
        return list(pool.map(sampler.run, jobs))


class _BatchProgress:
    """A latent batch's steps, reported as one count over all of its items."""

    def __init__(
        self,
        size: int,
        report: Callable[[int, int], None],
        expected: Sequence[int] | None = None,
    ) -> None:
        self._lock = threading.Lock()
        self._done = [0] * size
        # Each item's step count: known once it steps; `expected` for the items yet to start.
        self._counts = list(expected) if expected is not None else [0] * size
        self._report = report

    def callback(self, index: int) -> Callable[[int, int], None]:
        def on_step(step: int, count: int) -> None:
            with self._lock:
                self._done[index], self._counts[index] = step, count
                done, total = sum(self._done), sum(self._counts)
            self._report(done, total)

        return on_step
