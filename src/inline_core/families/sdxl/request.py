"""One SDXL render's state, and the checks a request must pass (torch-free).

The state is what `SDXLStepPipeline` steps (`components.step.StepState`). Its input fields cross
into a worker group as they are (`parallel/wire.py`); the fields marked `LOCAL` are made where
the request runs.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

from inline_core.components.interfaces import Conditioning, Latents
from inline_core.diffusion.adapters.stack import LoraStack
from inline_core.diffusion.flow.steps import denoise_window
from inline_core.errors import InvalidRequest
from inline_core.families.sdxl.descriptor import DEFAULT_SCHEDULE, PREDICTION_OVERRIDES
from inline_core.families.sdxl.embeddings import EmbeddingFile
from inline_core.families.sdxl.hires import HiresPass, hires_refusal
from inline_core.families.sdxl.refiner import switch_refusal
from inline_core.graph.sampler_names import (
    CFG_PP_SAMPLERS,
    GUIDED_SAMPLERS,
    SCHEDULES,
    cfg_pp_unguided,
)
from inline_core.parallel.wire import LOCAL

LATENT_FACTOR = 8  # pixels per latent cell along a side
DEFAULT_CLIP_SKIP = -2  # SDXL reads its encoders' penultimate layer (CLIPSetLastLayer -2)
ZSNR_ALONE = (
    "zsnr rescales the prediction it is set with (ModelSamplingDiscrete sets both): pick eps or "
    "v_prediction too"
)


@dataclass(eq=False)
class SDXLRequest:
    prompt: str
    width: int
    height: int
    steps: int
    guidance: float  # ComfyUI's cfg: 1 is no guidance
    seed: int
    negative_prompt: str = ""
    sampler: str = "euler"
    schedule: str = DEFAULT_SCHEDULE
    clip_skip: int = DEFAULT_CLIP_SKIP
    # ComfyUI's ModelSamplingDiscrete for this render ("eps" or "v_prediction", and its zero
    # terminal SNR) in place of the checkpoint's own; None: the checkpoint's.
    prediction: str | None = None
    zsnr: bool = False
    denoise: float = 1.0  # ComfyUI's: run the last `steps` of a `steps / denoise` schedule
    start: Latents | None = None  # latents to start from (noised to the first sigma), else noise
    image: Any = None  # img2img source (a PIL image); resized to width x height
    strength: float = 0.6  # img2img: the share of the steps that run, as diffusers counts it
    mask: Any = None  # inpaint: an `L` image over `image` (white repaints)
    batch_size: int = 1  # a latent batch's noise is drawn at once, as KSampler draws it
    batch_index: int = 0
    loras: LoraStack = ()  # applied to this request's rows and prompts, never merged
    embeddings: tuple[EmbeddingFile, ...] = ()  # the prompts' `embedding:name` files
    refiner_switch: float | None = None  # diffusers' denoising_end (None: no refiner)
    # A second pass at a larger size over the upscaled latents (None: none). At its first step
    # `width` and `height` become its size (`hires_stage.py`).
    hires: HiresPass | None = None
    positive: Conditioning | None = None
    negative: Conditioning | None = None
    model_key: Hashable = field(default="", metadata=LOCAL)
    step_index: int = field(default=0, metadata=LOCAL)
    schedule_state: Any = field(default=None, metadata=LOCAL)  # its `DiscreteSchedule`
    latents: Latents | None = field(default=None, metadata=LOCAL)
    inpaint: Any = field(default=None, metadata=LOCAL)  # its `InpaintBlend`, made at prepare
    # This step's unconditional prediction, for a CFG++ sampler (None: not one).
    uncond: Any = field(default=None, metadata=LOCAL)
    # The refiner's prompts (its own encoder's, scored) and the first model call it makes.
    refiner_positive: Conditioning | None = field(default=None, metadata=LOCAL)
    refiner_negative: Conditioning | None = field(default=None, metadata=LOCAL)
    refiner_from: int | None = field(default=None, metadata=LOCAL)

    @property
    def cfg(self) -> bool:
        return self.guidance != 1.0

    @property
    def cfg_pp(self) -> bool:
        """Whether its sampler steps along the unconditional prediction (CFG++)."""
        return self.sampler in CFG_PP_SAMPLERS

    @property
    def step_count(self) -> int:
        if self.schedule_state is not None:
            return int(self.schedule_state.step_count)
        second = 0 if self.hires is None else self.hires.steps
        if self.image is None:
            return self.steps + second
        return self.steps - img2img_start(self.steps, self.strength) + second

    @property
    def done(self) -> bool:
        return self.schedule_state is not None and self.step_index >= self.step_count

    @property
    def on_refiner(self) -> bool:
        return self.refiner_from is not None and self.step_index >= self.refiner_from

    @property
    def batch_key(self) -> Hashable:
        # A UNet takes one batched tensor: requests of one latent size on one UNet (the base,
        # or the refiner past the switch) share a forward.
        return ("sdxl", self.model_key, self.height, self.width, self.on_refiner)

    @property
    def tokens(self) -> int:
        cells = (self.height // LATENT_FACTOR) * (self.width // LATENT_FACTOR)
        return cells * (2 if self.cfg else 1)


def img2img_start(steps: int, strength: float) -> int:
    """The first step an img2img render runs: `StableDiffusionXLImg2ImgPipeline.get_timesteps`
    (which rounds the steps that run down, where the flow pipelines round the skipped ones)."""
    return steps - min(int(steps * strength), steps)


def new_request(model_key: Hashable, **kwargs: Any) -> SDXLRequest:
    """A request state (validates size, sampler, schedule and the layer it reads)."""
    state = SDXLRequest(**kwargs, model_key=model_key)
    if state.width % LATENT_FACTOR or state.height % LATENT_FACTOR:
        raise InvalidRequest(f"width and height must be multiples of {LATENT_FACTOR}")
    if state.sampler not in GUIDED_SAMPLERS:
        raise InvalidRequest(f"unknown sampler {state.sampler!r}; choose one of {GUIDED_SAMPLERS}")
    if state.cfg_pp and not state.cfg:
        raise InvalidRequest(cfg_pp_unguided(state.sampler))
    if state.schedule not in SCHEDULES:
        raise InvalidRequest(f"unknown schedule {state.schedule!r}; choose one of {SCHEDULES}")
    if state.prediction is not None and state.prediction not in PREDICTION_OVERRIDES:
        raise InvalidRequest(
            f"prediction {state.prediction!r} is not run here; choose one of "
            f"{', '.join(PREDICTION_OVERRIDES)} (or the checkpoint's own)"
        )
    if state.zsnr and state.prediction is None:
        raise InvalidRequest(ZSNR_ALONE)
    if state.clip_skip >= 0:
        raise InvalidRequest(f"clip_skip {state.clip_skip} must be -1 (the last layer) or lower")
    if not 0 <= state.batch_index < state.batch_size:
        raise InvalidRequest(
            f"batch index {state.batch_index} is outside 0..{state.batch_size - 1}"
        )
    if state.steps < 1 or denoise_window(state.steps, state.denoise)[0] < 1:
        raise InvalidRequest("a render needs at least one step")
    if state.mask is not None and state.image is None:
        raise InvalidRequest("a mask needs the image it masks: wire the image to inpaint")
    if state.image is not None and state.start is not None:
        raise InvalidRequest("an img2img image and starting latents are two starts: pass one")
    if state.refiner_switch is not None and (refusal := switch_refusal(state.refiner_switch)):
        raise InvalidRequest(refusal)
    if state.refiner_switch is not None and state.mask is not None:
        raise InvalidRequest("a refiner with a mask: inpainting runs on the base model alone")
    if state.hires is not None:
        _check_hires(state, state.hires)
    if state.step_count - (0 if state.hires is None else state.hires.steps) < 1:
        raise InvalidRequest(
            f"strength {state.strength:g} leaves no step to run out of {state.steps}; "
            "raise the strength or the steps"
        )
    return state


def _check_hires(state: SDXLRequest, hires: HiresPass) -> None:
    refusal = hires_refusal(hires)
    if refusal is None and state.refiner_switch is not None:
        refusal = "a hires pass with a refiner: the second pass samples the base model alone"
    if refusal is None and state.mask is not None:
        refusal = "a hires pass with a mask: inpainting runs at the mask's own size"
    if refusal is not None:
        raise InvalidRequest(refusal)
