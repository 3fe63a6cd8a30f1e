"""One LTX-2 render's state, and the checks a request must pass (torch-free).

The state is what `LTX2StepPipeline` steps (`components.step.StepState`): a video and a
soundtrack denoised together, one forward for both. Its input fields cross into a worker group as
they are (`parallel/wire.py`); the `LOCAL` ones are made where the request runs.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

from inline_core.diffusion.adapters.stack import LoraStack
from inline_core.errors import InvalidRequest
from inline_core.families.ltx2.cfg_pp import cfg_pp_refusal
from inline_core.graph.sampler_names import CFG_PP_SAMPLERS, GUIDED_SAMPLERS, SCHEDULES
from inline_core.parallel.wire import LOCAL
from inline_core.runtime.step_cache import StepCacheSettings

# LTX-2's video VAE: 32x down in space, 8x in time after the first frame (a VAE's own config may
# say otherwise: the kit's is 2x and 2x; `vae_factors` reads it).
SPATIAL_FACTOR = 32
TEMPORAL_FACTOR = 8
MAX_PROMPT_TOKENS = 1024  # LTX2Pipeline's max_sequence_length
FORMATS = ("mp4", "png")
# The refining pass's sigmas after the latent upsampler: Lightricks' and diffusers'
# (`STAGE_2_DISTILLED_SIGMA_VALUES`), which ComfyUI's templates set by ManualSigmas.
REFINE_SIGMAS = (0.909375, 0.725, 0.421875)
UPSCALE = 2  # the spatial latent upsampler's factor


@dataclass(eq=False)
class LTX2Request:
    prompt: str
    width: int
    height: int
    frames: int
    steps: int
    guidance: float  # diffusers' guidance_scale: the video's classifier-free guidance above 1
    seed: int
    audio_guidance: float | None = None  # the soundtrack's (None: `guidance`)
    negative_prompt: str = ""
    fps: int = 24
    format: str = "mp4"
    sampler: str = "euler"  # the sigma library's, by ComfyUI's name (LTX2Pipeline's is euler)
    sigma_schedule: str = "simple"  # "simple": LTX2Pipeline's own sigmas
    first_sigmas: tuple[float, ...] = ()  # the first pass's own levels (ManualSigmas'), unshifted
    # Image-to-video: the first frame (a PIL image, stretched to width x height), kept clean.
    image: Any = None
    loras: LoraStack = ()  # applied to this request's rows of each forward, never merged
    spatial_factor: int = SPATIAL_FACTOR  # the video VAE's, set by the pipeline
    temporal_factor: int = TEMPORAL_FACTOR
    max_prompt_tokens: int = MAX_PROMPT_TOKENS  # the text encoder's padded prompt length
    step_cache: StepCacheSettings | None = None
    # The two-stage path: the first pass at half width and height, the latent upsampler, then
    # a short refining pass (`refine_sigmas`, guided by `refine_guidance`, `refine_loras` on
    # its rows: the distilled LoRA) at width x height.
    upscale: bool = False
    upsampler: str = ""  # the latent upsampler: a diffusers folder or Lightricks' file
    refine_sigmas: tuple[float, ...] = REFINE_SIGMAS
    refine_guidance: float = 1.0
    refine_loras: LoraStack = ()
    refine_sampler: str = ""  # the refining pass's sampler ("": `sampler`)
    diffusion_decoder: str = ""  # LTX-2.5's video decoder's folder (ltx25.py; "": the VAE)
    model_key: Hashable = field(default="", metadata=LOCAL)
    refining: bool = field(default=False, metadata=LOCAL)  # the upsampled latents' pass
    refine_start: int = field(default=0, metadata=LOCAL)  # its first model call's index
    step_index: int = field(default=0, metadata=LOCAL)
    # This step's unconditional outputs (video, audio), for a CFG++ sampler (None: not one).
    uncond: Any = field(default=None, metadata=LOCAL)
    prepared: bool = field(default=False, metadata=LOCAL)  # prepare_encode has run
    schedule: Any = field(default=None, metadata=LOCAL)  # the video's `FlowMatchSchedule`
    audio_schedule: Any = field(default=None, metadata=LOCAL)  # the soundtrack's (own history)
    latents: Any = field(default=None, metadata=LOCAL)  # packed video tokens (1, S, C)
    audio_latents: Any = field(default=None, metadata=LOCAL)  # packed audio tokens (1, L, C*M)
    audio_frames: int = field(default=0, metadata=LOCAL)  # the soundtrack's latent length
    condition: Any = field(default=None, metadata=LOCAL)  # the image's first-frame tokens
    positive: Any = field(default=None, metadata=LOCAL)  # `Prompt`: connector outputs
    negative: Any = field(default=None, metadata=LOCAL)
    on_chunk: Any = field(default=None, metadata=LOCAL)
    on_audio: Any = field(default=None, metadata=LOCAL)  # the soundtrack, before the first chunk
    cache: Any = field(default=None, metadata=LOCAL)
    # LTX-2.5's decoder draws its noise from the render's generator, after the latents' noise:
    # the generator's state there (each decode starts from it).
    decode_noise: Any = field(default=None, metadata=LOCAL)

    @property
    def video_scale(self) -> float:
        """The video's guidance in the pass running (the refining pass's its own)."""
        return self.refine_guidance if self.refining else self.guidance

    @property
    def audio_scale(self) -> float:
        if self.refining:
            return self.refine_guidance
        return self.guidance if self.audio_guidance is None else self.audio_guidance

    @property
    def pass_sampler(self) -> str:
        """The sampler of the pass running (the refining pass's its own, or the first's)."""
        return (self.refine_sampler or self.sampler) if self.refining else self.sampler

    @property
    def cfg_pp(self) -> bool:
        """The pass's sampler steps along the unconditional prediction (CFG++)."""
        return self.pass_sampler in CFG_PP_SAMPLERS

    @property
    def cfg(self) -> bool:
        """The forward carries the negative prompt (either stream guides)."""
        return self.video_scale > 1 or self.audio_scale > 1

    @property
    def latent_shape(self) -> tuple[int, int, int]:
        """(frames, height, width) of the video latents (the first pass's, before the
        upsampler, at half the size)."""
        shrink = UPSCALE if self.upscale and not self.refining else 1
        return (
            (self.frames - 1) // self.temporal_factor + 1,
            self.height // self.spatial_factor // shrink,
            self.width // self.spatial_factor // shrink,
        )

    @property
    def first_pass_steps(self) -> int:
        # Model calls: a two-call sampler (heun, dpm_2, ...) makes more than `steps`.
        if self.refining:
            return self.refine_start
        return int(self.schedule.step_count) if self.schedule is not None else self.steps

    @property
    def step_count(self) -> int:
        return self.first_pass_steps + (len(self.refine_sigmas) if self.upscale else 0)

    @property
    def schedule_index(self) -> int:
        """The model call's index in the running pass's schedule."""
        return self.step_index - self.refine_start

    @property
    def done(self) -> bool:
        return self.prepared and self.step_index >= self.step_count

    @property
    def batch_key(self) -> Hashable:
        # One batched tensor per stream: requests of one video shape (and so one soundtrack
        # length, frames and fps fixing it) share a forward.
        return ("ltx2", self.model_key, self.cfg, self.latent_shape, self.fps)

    @property
    def tokens(self) -> int:
        f, h, w = self.latent_shape
        return f * h * w * (2 if self.cfg else 1)


def frames_refusal(frames: int, temporal_factor: int) -> str | None:
    """Why a frame count cannot be: the VAE decodes the first frame alone, then
    `temporal_factor` frames per latent frame."""
    if frames >= 1 and (frames - 1) % temporal_factor == 0:
        return None
    examples = ", ".join(str(1 + temporal_factor * k) for k in range(4))
    return (
        f"param 'frames' must be {temporal_factor}k+1 ({examples}, ...), got {frames}: the LTX-2 "
        f"VAE decodes the first frame alone and {temporal_factor} frames per latent frame after it"
    )


def new_request(model_key: Hashable, **kwargs: Any) -> LTX2Request:
    """A request state, checked: sizes the VAE allows, frames it decodes, a known format."""
    state = LTX2Request(**kwargs, model_key=model_key)
    multiple = state.spatial_factor * (UPSCALE if state.upscale else 1)
    if state.width % multiple or state.height % multiple:
        raise InvalidRequest(
            f"width and height must be multiples of {multiple} for this model, not "
            f"{state.width}x{state.height}"
        )
    refusal = frames_refusal(state.frames, state.temporal_factor)
    if refusal is not None:
        raise InvalidRequest(refusal)
    if state.format not in FORMATS:
        raise InvalidRequest(f"format must be one of {', '.join(FORMATS)}, not {state.format!r}")
    for name in ("sampler", "refine_sampler"):
        value = getattr(state, name)
        if value not in GUIDED_SAMPLERS and (value or name == "sampler"):
            choices = ", ".join(GUIDED_SAMPLERS)
            raise InvalidRequest(f"{name} must be one of {choices}, not {value!r}")
    audio_guidance = state.guidance if state.audio_guidance is None else state.audio_guidance
    refine_sampler = state.refine_sampler if state.upscale else None
    refusal = cfg_pp_refusal(
        state.sampler, state.guidance, audio_guidance, refine_sampler, state.refine_guidance
    )
    if refusal is not None:
        raise InvalidRequest(refusal.message)
    if state.sigma_schedule not in SCHEDULES:
        raise InvalidRequest(
            f"schedule must be one of {', '.join(SCHEDULES)}, not {state.sigma_schedule!r}"
        )
    if state.steps < 1:
        raise InvalidRequest("steps must be at least 1")
    if state.fps < 1:
        raise InvalidRequest("fps must be at least 1")
    return state
