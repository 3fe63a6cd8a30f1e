"""One Wan render's state, and the checks a request must pass (torch-free).

The state is what `WanStepPipeline` steps (it implements `components.step.StepState`). Its input
fields cross into a worker group as they are (`parallel/wire.py`); the `LOCAL` ones are made where
the request runs.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

from inline_core.components.interfaces import Conditioning, Latents
from inline_core.diffusion.adapters.stack import LoraStack
from inline_core.errors import InvalidRequest
from inline_core.families.wan.descriptor import MODEL_OWN
from inline_core.graph.sampler_names import CFG_PP_SAMPLERS, GUIDED_SAMPLERS, SCHEDULES
from inline_core.parallel.wire import LOCAL
from inline_core.runtime.step_cache import StepCacheSettings

SPATIAL_FACTOR = 8  # the Wan 2.1 VAE: 8x down in space (Wan 2.2's: 16)
TEMPORAL_FACTOR = 4  # and 4x in time, after the first frame
PATCH = 2  # the transformer patchifies latents 1x2x2
MAX_PROMPT_TOKENS = 512  # WanPipeline's max_sequence_length
FORMATS = ("mp4", "png")


@dataclass(eq=False)
class WanRequest:
    prompt: str
    width: int
    height: int
    frames: int
    steps: int
    guidance: float  # diffusers' guidance_scale: classifier-free guidance above 1
    seed: int
    # Two experts (Wan 2.2 A14B): the low-noise expert's guidance (diffusers' guidance_scale_2;
    # None: `guidance`), and where the experts switch, a share of the training timesteps.
    guidance_2: float | None = None
    boundary_ratio: float | None = None
    # The first step on the low-noise expert, as ComfyUI's two stages split the steps (None:
    # where `boundary_ratio` falls in the request's schedule, found at `prepare_encode`).
    switch_step: int | None = None
    negative_prompt: str = ""
    shift: float | None = None  # the scheduler's flow shift (None: the model's own)
    # ComfyUI's names; MODEL_OWN (empty): the model's own UniPC, or its own table (`schedule.py`).
    sampler: str = MODEL_OWN
    sigma_schedule: str = MODEL_OWN
    fps: int = 16
    format: str = "mp4"
    # Image-to-video (TI2V models): the first frame, a PIL image resized to width x height.
    image: Any = None
    loras: LoraStack = ()  # applied to this request's rows of each forward, never merged
    loras_2: LoraStack = ()  # the low-noise expert's stack (a pair; `loras`: the high-noise one)
    spatial_factor: int = SPATIAL_FACTOR  # the VAE's, set by the pipeline
    positive: Conditioning | None = None
    negative: Conditioning | None = None
    step_cache: StepCacheSettings | None = None  # DBCache on its own rows of each forward
    model_key: Hashable = field(default="", metadata=LOCAL)
    step_index: int = field(default=0, metadata=LOCAL)
    prepared: bool = field(default=False, metadata=LOCAL)  # prepare_encode has run
    schedule: Any = field(default=None, metadata=LOCAL)  # its FlowMatchSchedule (`schedule.py`)
    # The first model call on the low-noise expert (a pair; from `switch_step` or the boundary).
    switch_call: int | None = field(default=None, metadata=LOCAL)
    # This call's unconditional prediction, for a CFG++ sampler (None: not one, or unguided).
    uncond: Any = field(default=None, metadata=LOCAL)
    latents: Latents | None = field(default=None, metadata=LOCAL)
    condition: Any = field(default=None, metadata=LOCAL)  # the image's latent frame (i2v)
    image_embeds: Any = field(default=None, metadata=LOCAL)  # its CLIP vision view (Wan 2.1 i2v)
    # Called with each decoded chunk's first frame index and frames (the run streams them).
    on_chunk: Any = field(default=None, metadata=LOCAL)
    cache: Any = field(default=None, metadata=LOCAL)  # its `stepcache.rows.RequestCache`

    @property
    def expert(self) -> int:
        """The expert this step runs on: 0 (the only one, or the high-noise), 1 (low-noise)."""
        low = self.switch_call is not None and self.step_index >= self.switch_call
        return 1 if low else 0

    @property
    def current_guidance(self) -> float:
        if self.expert == 1 and self.guidance_2 is not None:
            return self.guidance_2
        return self.guidance

    @property
    def cfg(self) -> bool:
        """This step's forward carries the negative prompt."""
        return self.current_guidance > 1

    @property
    def cfg_pp(self) -> bool:
        """Its sampler steps along the unconditional prediction (CFG++)."""
        return self.sampler in CFG_PP_SAMPLERS

    @property
    def needs_negative(self) -> bool:
        """Some step guides (the negative prompt is encoded)."""
        return self.guidance > 1 or (self.guidance_2 is not None and self.guidance_2 > 1)

    @property
    def latent_shape(self) -> tuple[int, int, int]:
        """(frames, height, width) of the latents."""
        return (
            (self.frames - 1) // TEMPORAL_FACTOR + 1,
            self.height // self.spatial_factor,
            self.width // self.spatial_factor,
        )

    @property
    def step_count(self) -> int:
        """Model calls: a sampler may make more than one a step."""
        return self.steps if self.schedule is None else int(self.schedule.step_count)

    @property
    def done(self) -> bool:
        return self.prepared and self.step_index >= self.step_count

    @property
    def batch_key(self) -> Hashable:
        # The transformer takes one batched tensor: only requests of one latent shape share it;
        # with two experts, only requests on the same expert at this step (the loop re-reads it).
        return ("wan", self.model_key, self.cfg, self.latent_shape, self.expert)

    @property
    def tokens(self) -> int:
        f, h, w = self.latent_shape
        return f * (h // PATCH) * (w // PATCH) * (2 if self.cfg else 1)


def switch_step_refusal(value: int, steps: int, pair: bool) -> str:
    """Why a `switch_step` cannot be: on a one-model stack, or outside 1..steps-1."""
    if not pair:
        return (
            "param 'switch_step' is the first step on Wan 2.2 A14B's low-noise expert, and this "
            "model has one expert: leave it empty, or pick a Wan 2.2 A14B expert"
        )
    return (
        f"param 'switch_step' must be between 1 and steps - 1 ({steps - 1}), got {value}: each "
        "expert runs at least one step"
    )


def cfg_pp_refusal(sampler: str, guidance: float, guidance_2: float | None) -> str | None:
    """Why a CFG++ `sampler` cannot run at these guidances: every model call must be guided, as
    only a guided one computes the unconditional prediction it steps along."""
    if sampler not in CFG_PP_SAMPLERS:
        return None
    unguided = [
        name
        for name, value in (("guidance", guidance), ("guidance_2", guidance_2))
        if value is not None and value <= 1
    ]
    if not unguided:
        return None
    return (
        f"sampler {sampler!r} (CFG++) steps along the unconditional prediction, which only a "
        f"guided step computes, and {' and '.join(unguided)} leave steps unguided: set "
        f"{' and '.join(unguided)} above 1, or pick {sampler.removesuffix('_cfg_pp')!r}"
    )


def sampling_refusal(sampler: str, schedule: str) -> str | None:
    """Why a sampler or schedule name is not Wan's (the node's choices: ComfyUI's, or empty)."""
    if sampler != MODEL_OWN and sampler not in GUIDED_SAMPLERS:
        return f"unknown sampler {sampler!r}; choose one of {', '.join(GUIDED_SAMPLERS)} or none"
    if schedule != MODEL_OWN and schedule not in SCHEDULES:
        return f"unknown schedule {schedule!r}; choose one of {', '.join(SCHEDULES)} or none"
    return None


def new_request(model_key: Hashable, **kwargs: Any) -> WanRequest:
    """A request state, checked: sizes the VAE and patches allow, 4k+1 frames, a known format."""
    state = WanRequest(**kwargs, model_key=model_key)
    multiple = state.spatial_factor * PATCH
    if state.width % multiple or state.height % multiple:
        raise InvalidRequest(
            f"width and height must be multiples of {multiple} for this model, not "
            f"{state.width}x{state.height}"
        )
    if state.frames < 1 or (state.frames - 1) % TEMPORAL_FACTOR:
        raise InvalidRequest(
            f"frames must be 4k+1 (1, 5, 9, ..., 81), not {state.frames}: the VAE decodes the "
            "first frame alone and four frames per latent frame after it"
        )
    if state.format not in FORMATS:
        raise InvalidRequest(f"format must be one of {', '.join(FORMATS)}, not {state.format!r}")
    if state.steps < 1:
        raise InvalidRequest("steps must be at least 1")
    if state.guidance_2 is not None and state.boundary_ratio is None:
        raise InvalidRequest(
            "guidance_2 is the low-noise expert's guidance: only two-expert models (Wan 2.2 "
            "A14B) take it"
        )
    if state.boundary_ratio is not None and not 0 < state.boundary_ratio < 1:
        raise InvalidRequest(f"boundary_ratio must be between 0 and 1, not {state.boundary_ratio}")
    pair = state.boundary_ratio is not None
    if state.switch_step is not None and not (pair and 1 <= state.switch_step < state.steps):
        raise InvalidRequest(switch_step_refusal(state.switch_step, state.steps, pair))
    refusal = sampling_refusal(state.sampler, state.sigma_schedule) or cfg_pp_refusal(
        state.sampler, state.guidance, state.guidance_2 if pair else None
    )
    if refusal is not None:
        raise InvalidRequest(refusal)
    if state.loras_2 and not pair:
        raise InvalidRequest(
            "loras_2 is the low-noise expert's stack: only two-expert models take it"
        )
    return state
