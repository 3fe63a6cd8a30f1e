"""One Z-Image render's state, and the checks a request must pass (torch-free).

The state is what `ZImageDenoisePipeline` steps (it implements `components.step.StepState`). Its
input fields cross into the worker group as they are (`parallel/wire.py`); the fields marked
`LOCAL` are made where the request runs.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

from inline_core.components.interfaces import Conditioning, Latents
from inline_core.diffusion.adapters.stack import LoraStack
from inline_core.diffusion.flow.steps import img2img_start
from inline_core.diffusion.sigma.shift import ModelShift
from inline_core.diffusion.sigma.window import ALL_STEPS, StepWindow
from inline_core.errors import InvalidRequest
from inline_core.families.zimage.controlnet import ControlUse
from inline_core.graph.sampler_names import CFG_PP_SAMPLERS, cfg_pp_unguided
from inline_core.parallel.wire import LOCAL
from inline_core.runtime.step_cache import StepCacheSettings

# Pixels per latent cell along a side: Z-Image's FLUX VAE downsamples by 8, and the transformer
# patchifies latents 2x2.
LATENT_FACTOR = 8
PATCH = 2


@dataclass(eq=False)
class ZImageRequest:
    prompt: str
    width: int
    height: int
    steps: int
    guidance: float
    seed: int
    negative_prompt: str = ""
    image: Any = None  # img2img source (a PIL image); resized to width x height
    strength: float = 0.6
    cfg_truncation: float = 1.0
    cfg_normalization: float = 0.0
    # How the `sample` node renders (the defaults are the Z-Image node's own render):
    sampler: str = "euler"
    sigma_schedule: str = "simple"
    denoise: float = 1.0  # ComfyUI's: run the last `steps` of a `steps / denoise` schedule
    start: Latents | None = None  # latents to start from (noised to the first sigma), else noise
    # ComfyUI's KSamplerAdvanced window (`diffusion/sigma/window.py`).
    start_step: int = 0
    end_step: int = ALL_STEPS
    add_noise: bool = True
    leftover_noise: bool = False
    # The request's own flow shift in place of the model's (`diffusion/sigma/shift.py`).
    shift: float | None = None
    mu: float | None = None
    batch_size: int = 1  # a latent batch's noise is drawn at once, as diffusers draws it
    batch_index: int = 0
    positive: Conditioning | None = None
    negative: Conditioning | None = None
    loras: LoraStack = ()  # applied to this request's rows of each forward, never merged
    step_cache: StepCacheSettings | None = None  # DBCache on its own rows of each forward
    # Control (`control.py`): the control model, and its image (resized to width x height).
    control: ControlUse | None = None
    control_image: Any = None
    control_latents: Latents | None = None  # the control image encoded (the `sample` primitive)
    # A 2.x control's inpaint inputs from `sample`: the masked image's latents, and the repaint
    # mask at latent size (None: nothing kept).
    control_inpaint: Latents | None = None
    control_mask: Any = None
    # Inpainting: white repaints, black keeps. With `image` (img2img) the kept part is blended
    # back after each step (ZImageInpaintPipeline); with `control_source` instead, the mask and
    # the masked image feed a control model that takes them (ZImageControlNetInpaintPipeline).
    mask: Any = None
    control_source: Any = None
    # `sample`'s noise mask (ComfyUI's: repaints where 1, at every model call), `(1, 1, H, W)`
    # at its own size, over the `start` latents.
    noise_mask: Any = None
    control_context: Any = field(default=None, metadata=LOCAL)  # (C, 1, h, w), made at prepare
    inpaint: Any = field(default=None, metadata=LOCAL)  # its `InpaintBlend`, made at prepare
    masked: Any = field(default=None, metadata=LOCAL)  # its `NoiseMask`, made at prepare
    model_key: Hashable = field(default="", metadata=LOCAL)  # which weights, dtype and device
    step_index: int = field(default=0, metadata=LOCAL)
    schedule: Any = field(default=None, metadata=LOCAL)  # its private FlowMatchSchedule
    latents: Latents | None = field(default=None, metadata=LOCAL)
    cache: Any = field(default=None, metadata=LOCAL)  # its `stepcache.rows.RequestCache`
    # This step's unconditional prediction, for a CFG++ sampler (None: not one, or unguided).
    uncond: Any = field(default=None, metadata=LOCAL)

    @property
    def cfg(self) -> bool:
        return self.guidance > 0

    @property
    def step_count(self) -> int:
        if self.schedule is not None:
            return int(self.schedule.step_count)
        if self.image is None:
            return min(self.end_step, self.steps) - self.start_step
        return self.steps - img2img_start(self.steps, self.strength)

    @property
    def window(self) -> StepWindow | None:
        """ComfyUI's KSamplerAdvanced window, where the request runs one."""
        window = StepWindow(self.start_step, self.end_step, self.add_noise, self.leftover_noise)
        return None if window.whole else window

    @property
    def model_shift(self) -> ModelShift | None:
        return ModelShift.of(self.shift, self.mu)

    @property
    def done(self) -> bool:
        return self.schedule is not None and self.step_index >= self.step_count

    @property
    def batch_key(self) -> Hashable:
        return ("z-image", self.model_key, self.cfg)

    @property
    def image_tokens(self) -> int:
        return (self.height // 16) * (self.width // 16)

    @property
    def tokens(self) -> int:
        # With guidance a request puts two sequences (positive and negative) into the forward.
        return self.image_tokens * (2 if self.cfg else 1)

    def guidance_at(self, index: int) -> float:
        """The guidance scale of step `index` (0 past the CFG truncation point)."""
        if not self.cfg or self.schedule is None:
            return 0.0
        if self.cfg_truncation <= 1 and self.schedule.t_norms[index] > self.cfg_truncation:
            return 0.0
        return self.guidance


def new_request(model_key: Hashable, spatial_factor: int, **kwargs: Any) -> ZImageRequest:
    """A request state for a model whose VAE has `spatial_factor` (validates size and strength)."""
    state = ZImageRequest(**kwargs, model_key=model_key)
    try:
        ModelShift.of(state.shift, state.mu)  # one of the two, and a shift above 0
    except ValueError as exc:
        raise InvalidRequest(str(exc)) from None
    if state.sampler in CFG_PP_SAMPLERS and not state.cfg:
        raise InvalidRequest(cfg_pp_unguided(state.sampler))
    multiple = spatial_factor * PATCH
    if state.width % multiple or state.height % multiple:
        raise InvalidRequest(f"width and height must be multiples of {multiple}")
    if not 0 <= state.batch_index < state.batch_size:
        raise InvalidRequest(
            f"batch index {state.batch_index} is outside 0..{state.batch_size - 1}"
        )
    if state.mask is not None and state.image is None and state.control_source is None:
        raise InvalidRequest("a mask needs the image it masks")
    if state.noise_mask is not None and state.image is not None:
        raise InvalidRequest("a noise mask masks the latents sampled from, not an img2img image")
    has_image = state.control_image is not None or state.control_latents is not None
    if has_image and state.control is None:
        raise InvalidRequest("a control image needs a control model")
    if state.control is not None and not has_image:
        raise InvalidRequest(f"controlnet/{state.control.name} needs a control image")
    if state.window is not None and state.image is not None:
        raise InvalidRequest("a window of the schedule samples latents, not an img2img image")
    if state.step_count < 1 and state.window is not None:
        raise InvalidRequest(
            f"steps {state.start_step}..{min(state.end_step, state.steps)} of {state.steps} "
            "hold no step to run"
        )
    if state.step_count < 1:
        raise InvalidRequest(
            f"strength {state.strength} leaves no step to run out of {state.steps}; "
            "raise the strength or the steps"
        )
    return state
