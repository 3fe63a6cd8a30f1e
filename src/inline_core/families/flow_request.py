"""A flow-matching image render's state, shared by the families whose transformer sees a grid of
tokens of 16x16 pixels and takes one batched tensor with one set of positions (torch-free).

Its input fields cross into a worker group as they are (`parallel/wire.py`); the fields marked
`LOCAL` are made where the request runs. A family subclasses it with its own inputs (all with
defaults) and its own `batch_key`.

What the `sample` primitive asks of a family's denoiser is here too, for every family on it:
ComfyUI's `denoise`, the latents to start from (img2img), a noise mask (inpainting) and
KSamplerAdvanced's window (`families/nodes/ops.py` says what each is).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

from inline_core.components.interfaces import Conditioning, Latents
from inline_core.diffusion.adapters.stack import LoraStack
from inline_core.diffusion.flow.steps import denoise_window
from inline_core.diffusion.sigma.shift import ModelShift
from inline_core.diffusion.sigma.window import ALL_STEPS, StepWindow
from inline_core.errors import InvalidRequest
from inline_core.graph.sampler_names import CFG_PP_SAMPLERS, cfg_pp_unguided
from inline_core.parallel.wire import LOCAL
from inline_core.runtime.step_cache import StepCacheSettings

# Pixels per transformer token along a side: the VAE's 8, then the 2x2 patch.
PIXELS_PER_TOKEN = 16


class FlowSteps:
    """A flow render's steps and token grid, from its fields: `FlowImageRequest`'s, and those of a
    family's own state on the same grid (Qwen-Image's)."""

    width: int
    height: int
    steps: int
    step_index: int
    schedule: Any  # its private FlowMatchSchedule, once prepared

    @property
    def step_count(self) -> int:
        return self.steps if self.schedule is None else int(self.schedule.step_count)

    @property
    def done(self) -> bool:
        return self.schedule is not None and self.step_index >= self.step_count

    @property
    def latent_size(self) -> tuple[int, int]:
        """The transformer's token grid (rows, columns)."""
        return self.height // PIXELS_PER_TOKEN, self.width // PIXELS_PER_TOKEN


@dataclass(eq=False)
class FlowImageRequest(FlowSteps):
    prompt: str
    width: int
    height: int
    steps: int
    guidance: float
    seed: int
    sampler: str = "euler"
    sigma_schedule: str = "simple"
    # The request's own flow shift in place of the model's (`diffusion/sigma/shift.py`).
    shift: float | None = None
    mu: float | None = None
    batch_size: int = 1  # a latent batch's noise is drawn at once, as diffusers draws it
    batch_index: int = 0
    positive: Conditioning | None = None
    negative: Conditioning | None = None
    loras: LoraStack = ()  # applied to this request's rows of each forward, never merged
    step_cache: StepCacheSettings | None = None
    # The `sample` primitive's (the defaults are a whole render from noise):
    denoise: float = 1.0  # ComfyUI's: run the last `steps` of a `steps / denoise` schedule
    start: Latents | None = None  # `(1, C, H, W)` as the VAE takes them, noised to the first sigma
    # ComfyUI's KSamplerAdvanced window (`diffusion/sigma/window.py`).
    start_step: int = 0
    end_step: int = ALL_STEPS
    add_noise: bool = True
    leftover_noise: bool = False
    # A noise mask (repaints where 1, at every model call), `(1, 1, H, W)` at its own size.
    noise_mask: Any = None
    masked: Any = field(default=None, metadata=LOCAL)  # its `NoiseMask`, made at prepare
    model_key: Hashable = field(default="", metadata=LOCAL)
    step_index: int = field(default=0, metadata=LOCAL)
    schedule: Any = field(default=None, metadata=LOCAL)  # its private FlowMatchSchedule
    latents: Latents | None = field(default=None, metadata=LOCAL)  # packed (1, tokens, C)
    cache: Any = field(default=None, metadata=LOCAL)  # its `stepcache.rows.RequestCache`
    # This step's unconditional prediction, for a CFG++ sampler (None: not one, or unguided).
    uncond: Any = field(default=None, metadata=LOCAL)

    @property
    def cfg(self) -> bool:
        """Whether a forward runs the negative prompt too."""
        return False

    @property
    def model_shift(self) -> ModelShift | None:
        return ModelShift.of(self.shift, self.mu)

    @property
    def window(self) -> StepWindow | None:
        """ComfyUI's KSamplerAdvanced window, where the request runs one."""
        window = StepWindow(self.start_step, self.end_step, self.add_noise, self.leftover_noise)
        return None if window.whole else window

    @property
    def schedule_steps(self) -> int:
        """The length of the schedule its steps are taken from (`steps / denoise`)."""
        return denoise_window(self.steps, self.denoise)[0]

    @property
    def step_count(self) -> int:
        if self.schedule is not None:
            return int(self.schedule.step_count)
        return min(self.end_step, self.steps) - self.start_step

    @property
    def cfg_pp(self) -> bool:
        """Whether its sampler steps along the unconditional prediction (CFG++)."""
        return self.sampler in CFG_PP_SAMPLERS

    @property
    def tokens(self) -> int:
        # Image tokens, as the batch budget counts them.
        h, w = self.latent_size
        return h * w * (2 if self.cfg else 1)

    def check(self) -> None:
        """The checks every such request passes (a family's `new_request` adds its own)."""
        if self.width % PIXELS_PER_TOKEN or self.height % PIXELS_PER_TOKEN:
            raise InvalidRequest(f"width and height must be multiples of {PIXELS_PER_TOKEN}")
        if not 0 <= self.batch_index < self.batch_size:
            raise InvalidRequest(
                f"batch index {self.batch_index} is outside 0..{self.batch_size - 1}"
            )
        try:
            ModelShift.of(self.shift, self.mu)  # one of the two, and a shift above 0
        except ValueError as exc:
            raise InvalidRequest(str(exc)) from None
        if self.cfg_pp and not self.cfg:
            raise InvalidRequest(cfg_pp_unguided(self.sampler))
        if not 0 < self.denoise <= 1:
            raise InvalidRequest(f"denoise {self.denoise:g} is outside (0, 1]")
        if self.step_count < 1:
            raise InvalidRequest(
                f"steps {self.start_step}..{min(self.end_step, self.steps)} of {self.steps} "
                "hold no step to run"
            )
