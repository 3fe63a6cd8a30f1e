"""The step pipeline every flow image family on `FlowImageRequest` shares (torch, spec 003).

A family supplies its forward (`_forward`: one batched call for rows of one shape), how its
guidance combines a row with its negative (`_guide`), how its latents pack (`_pack`/`_unpack`)
and its request; this class holds the rest as the diffusers pipelines do it: the noise drawn for
the whole latent batch at once in the prompt's dtype, each request's private `FlowMatchSchedule`,
each row's LoRA stack and step cache, the scheduler step, previews, the final latents, the
decode; and what the `sample` primitive asks (`flow_request.py`): the start latents noised to
the first sigma, ComfyUI's noise mask at every model call, the latents a window hands on.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Generator, Hashable, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Generic, Protocol, TypeVar, cast

import torch
from PIL import Image
from torch import nn

from inline_core.components.interfaces import Conditioning, Latents
from inline_core.diffusion.adapters.bank import AdapterBank, Fetch, Reader
from inline_core.diffusion.adapters.fusing import CopyStore
from inline_core.diffusion.flow.noise_mask import NoiseMask
from inline_core.diffusion.flow.samplers import numpy_flow_spacing
from inline_core.diffusion.flow.schedule import FlowMatchSchedule
from inline_core.diffusion.flow.start import starting_latents
from inline_core.diffusion.placement import OffloadSwap, PlacementLike, torch_dtype
from inline_core.diffusion.stepcache import rows as step_rows
from inline_core.diffusion.stepcache.backend import StepCacheBackend, cached_forward
from inline_core.errors import InvalidRequest
from inline_core.families.flow_request import FlowImageRequest


class ImageDecoder(Protocol):
    def decode(self, latents: Latents, /) -> Image.Image: ...


R = TypeVar("R", bound=FlowImageRequest)


class FlowImagePipeline(ABC, Generic[R]):
    """The transformer and its schedule: requests come with their conditioning and leave as
    latents (or, with a VAE, as images)."""

    _dit_modules = ["transformer"]
    _encoder_modules: list[str] = []
    _vae_modules: list[str] = []
    _resident_modules: list[str] = []
    # Its latents' preview factors (`diffusion/preview/formats.py`), as `_preview` shapes them.
    preview_name: str = ""

    def __init__(
        self,
        *,
        transformer: nn.Module,
        placement: PlacementLike,
        swap: OffloadSwap,
        scheduler_config: Mapping[str, Any],
        model_key: Hashable,
        read_lora: Reader,
        serial_phases: bool = False,
        adapter_cache: Fetch | None = None,
        fused_copies: CopyStore | None = None,
    ) -> None:
        self.transformer = transformer
        self.placement = placement
        self.swap = swap
        self.device = torch.device(placement.device)
        self.dtype = torch_dtype(placement.dtype)
        self.scheduler_config = dict(scheduler_config)
        self.model_key = model_key
        self.serial_phases = serial_phases
        # Each request's LoRA stack, added to its own rows of every forward (`read_lora`: the
        # family's reader of its namings).
        self.adapters = AdapterBank.placed(
            transformer, read_lora, placement, adapter_cache, model_key, fused_copies
        )
        self.step_cache: StepCacheBackend | None = None  # adopted by `engine/assemble.py`

    # -- what a family supplies ------------------------------------------------------------------

    @abstractmethod
    def request(self, **kwargs: Any) -> R:
        """A new request on this pipeline's model."""

    @abstractmethod
    def _forward(self, rows: list[tuple[R, Conditioning]]) -> torch.Tensor:
        """One batched forward: a prediction per row, in the rows' order."""

    @abstractmethod
    def _guide(self, pred: torch.Tensor, negative: torch.Tensor, guidance: float) -> torch.Tensor:
        """A row's prediction guided by its negative prompt's."""

    @abstractmethod
    def _pack(self, latents: torch.Tensor) -> torch.Tensor:
        """(1, C, H, W) drawn noise -> the transformer's (1, tokens, C')."""

    @abstractmethod
    def _unpack(self, packed: torch.Tensor, h: int, w: int) -> torch.Tensor:
        """(1, tokens, C') on an h x w token grid -> the latents the VAE takes."""

    @abstractmethod
    def _preview(self, packed: torch.Tensor, h: int, w: int) -> torch.Tensor:
        """(1, tokens, C') on an h x w token grid -> the latents `preview_name` previews."""

    def _decoder(self) -> ImageDecoder | None:
        """The VAE the final latents decode with (None: the pipeline ends at latents)."""
        return None

    def _release(self, state: R) -> None:
        """Drop the request's tensors once it is done: the state object may outlive the render."""
        state.latents = state.positive = state.negative = state.uncond = None
        state.start = state.masked = None
        step_rows.release(state.cache)

    # -- step cache (components.step.SupportsCacheDiTBackend) -----------------------------------

    def adopt_cache_dit_backend(self, backend: StepCacheBackend, /) -> None:
        """The per-request step cache on its transformer's blocks (the family's layout)."""
        self.step_cache = backend
        backend.add_row_scope(self.adapters.rows)  # a sub-batch's rows keep their own LoRAs

    # -- shared steps ----------------------------------------------------------------------------

    @contextmanager
    def _on_device(self, rows: Sequence[tuple[R, Conditioning]]) -> Generator[None]:
        """The transformer on its device, with each row's LoRA stack and step cache (its
        request's, for the row's branch), for one forward."""
        caches = [
            step_rows.branch_row(s.cache, "positive" if c is s.positive else "negative")
            for s, c in rows
        ]
        with (
            self.swap.use(self.transformer, self.placement),
            self.adapters.forward([s.loras for s, _c in rows]),
            cached_forward(self.step_cache, self.transformer, caches),
        ):
            yield

    def _start(
        self, state: R, noise_shape: tuple[int, int, int], dtype: torch.dtype, mu: float
    ) -> None:
        """The request's LoRA files checked (they load here, off the step loop, and a bad one
        fails this request alone), its noise drawn (`(batch, *noise_shape)` at once, its row
        packed), its private schedule made and its start put at the schedule's first sigma
        (with its noise mask, where it has one)."""
        self.adapters.check(state.loras)
        state.cache = step_rows.request_cache(state.step_cache)
        generator = torch.Generator("cpu").manual_seed(state.seed)
        drawn = torch.randn((state.batch_size, *noise_shape), generator=generator, dtype=dtype)
        row = drawn[state.batch_index : state.batch_index + 1].to(self.device, torch.float32)
        noise = self._pack(row)
        h, w = state.latent_size
        state.schedule = FlowMatchSchedule.create(
            self.scheduler_config,
            state.steps,
            h * w,
            self.device,
            sampler=state.sampler,
            schedule=state.sigma_schedule,
            spacing=numpy_flow_spacing,
            seed=state.seed,
            row=state.batch_index,
            mu=mu,
            shift=state.model_shift,
            denoise=state.denoise,
            window=state.window,
        )
        start = None
        if state.start is not None:
            start = cast(torch.Tensor, state.start.value).to(self.device, torch.float32)
            if tuple(start.shape) != tuple(row.shape):
                raise InvalidRequest(
                    f"the latent to start from is {tuple(start.shape)}; a {state.width}x"
                    f"{state.height} render samples {tuple(row.shape)}"
                )
        first = starting_latents(
            state.schedule,
            noise,
            None if start is None else self._pack(start),
            add_noise=state.add_noise,
            start_step=state.start_step,
        )
        state.latents = Latents(first, tuple(first.shape))
        if state.noise_mask is not None:
            kept = torch.zeros_like(row) if start is None else start
            at_latents = NoiseMask.at_latents(cast(torch.Tensor, state.noise_mask), kept, row)
            # Packed as the latents are (the mask over every channel, whatever the packing).
            mask = self._pack(at_latents.mask.expand_as(row).contiguous())
            state.masked = NoiseMask(mask, self._pack(kept), noise)

    def _latents_in(self, state: R) -> Latents:
        """The latents the model sees for `state` this step: a noise mask's kept part noised
        to the step's level (ComfyUI's), else the latents themselves."""
        schedule, lat = prepared(state)
        if state.masked is None:
            return lat
        return cast(NoiseMask, state.masked).model_input(schedule, state.step_index, lat)

    def denoise_step(self, states: Sequence[R], /) -> list[torch.Tensor]:
        with torch.inference_mode():
            rows: list[tuple[R, Conditioning]] = [
                (s, cast(Conditioning, s.positive)) for s in states
            ]
            rows += [(s, cast(Conditioning, s.negative)) for s in states if s.cfg]
            out = self._forward(rows)
            negatives = iter(out[len(states) :])
            preds: list[torch.Tensor] = []
            for i, s in enumerate(states):
                pred = out[i : i + 1].float()
                s.uncond = None
                if s.cfg:
                    negative = next(negatives).unsqueeze(0).float()
                    pred = self._guide(pred, negative, s.guidance)
                    # A CFG++ sampler steps along the unconditional prediction too.
                    s.uncond = negative if s.cfg_pp else None
                if s.masked is not None:
                    pred = self._masked(s, pred)
                preds.append(pred)
            return preds

    def _masked(self, state: R, pred: torch.Tensor) -> torch.Tensor:
        """The prediction (and a CFG++ step's unconditional one) made at the masked input, as
        the sampler steps the latents with it (`NoiseMask`)."""
        schedule, lat = prepared(state)
        masked, seen = cast(NoiseMask, state.masked), self._latents_in(state)
        if state.uncond is not None:
            uncond = cast(torch.Tensor, state.uncond)
            state.uncond = masked.unconditional(schedule, state.step_index, lat, seen, uncond)
        return masked.prediction(schedule, state.step_index, lat, seen, pred)

    def step_scheduler(self, state: R, noise_pred: Any, /) -> None:
        schedule, lat = prepared(state)
        with torch.inference_mode():
            state.latents = schedule.step(state.step_index, noise_pred, lat, state.uncond)
        state.uncond = None
        state.step_index += 1

    # -- previews (components.step.SupportsPreview) ------------------------------------------------

    def preview_format(self, state: R, /) -> str:
        return self.preview_name

    def preview_latents(self, state: R, noise_pred: Any, /) -> torch.Tensor:
        """The step's x0 estimate, shaped as its preview format takes it."""
        schedule, lat = prepared(state)
        h, w = state.latent_size
        with torch.inference_mode():
            return self._preview(schedule.x0_estimate(state.step_index, noise_pred, lat), h, w)

    def post_latents(self, state: R, /) -> Latents:
        """The final latents as the family's VAE takes them (a window that keeps its leftover
        noise hands them on with it, as ComfyUI does)."""
        schedule, lat = prepared(state)
        h, w = state.latent_size
        packed = cast(torch.Tensor, lat.value)
        if state.leftover_noise:
            packed = schedule.handed_on(packed)
        value = self._unpack(packed, h, w)
        self._release(state)
        return Latents(value, tuple(value.shape))

    def post_decode(self, state: R, /) -> Image.Image | Latents:
        latents = self.post_latents(state)
        vae = self._decoder()
        if vae is None:
            return latents
        with torch.inference_mode():
            return vae.decode(latents)


def prepared(state: FlowImageRequest) -> tuple[FlowMatchSchedule, Latents]:
    if state.schedule is None or state.latents is None:
        raise RuntimeError("prepare_encode has not run for this request")
    return cast(FlowMatchSchedule, state.schedule), state.latents
