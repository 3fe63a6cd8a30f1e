"""One SkyReels-V2 render's state, and the checks a request must pass (torch-free).

`SkyReelsStepPipeline` steps it (it implements `components.step.StepState`). A render is a plan of
chunks (`chunks.py`); its steps are every chunk's iterations of diffusers' diffusion-forcing
schedule, one after another, so `step_count` is known once the schedule is (at `prepare_encode`).
Its input fields cross into a worker group as they are (`parallel/wire.py`); the `LOCAL` ones are
made where the request runs.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

from inline_core.components.interfaces import Conditioning
from inline_core.errors import InvalidRequest
from inline_core.families.skyreels import chunks
from inline_core.families.skyreels.chunks import Chunk
from inline_core.families.wan.request import cfg_pp_refusal, sampling_refusal
from inline_core.parallel.wire import LOCAL
from inline_core.runtime.interactions import InteractionInbox

SPATIAL_FACTOR = 8  # the Wan 2.1 VAE: 8x down in space
PATCH = 2  # the transformer patchifies latents 1x2x2
FORMATS = ("mp4", "png")


@dataclass(eq=False)
class SkyReelsRequest:
    prompt: str
    width: int
    height: int
    frames: int
    steps: int
    guidance: float  # diffusers' guidance_scale: classifier-free guidance above 1
    seed: int
    negative_prompt: str = ""
    shift: float | None = None  # the scheduler's flow shift (None: the model's own)
    # ComfyUI's sampler and schedule names, each frame's own (empty: the model's own UniPC on
    # its own table, as diffusers renders).
    sampler: str = ""
    sigma_schedule: str = ""
    fps: int = 24
    format: str = "mp4"
    # Long video: chunks of `base_frames` frames, each after the first starting from the last
    # `overlap` frames so far (None: one chunk of every frame).
    base_frames: int | None = None
    overlap: int | None = None
    ar_step: int = 0  # 0: every frame of a chunk at one level; >0: each block that many behind
    causal_block_size: int = 1  # latent frames per causal block
    # Image to video: the first frame, a PIL image (resized to width x height), as the first
    # chunk's clean prefix.
    image: Any = None
    # Video to video: the frames the render extends, (F, H, W, 3) uint8; the first chunk starts
    # from the latent frames of their last `overlap` (`extend.py`).
    extend: Any = None
    condition: Any = field(default=None, metadata=LOCAL)  # the image's or video's latent frames
    lead: Any = field(default=None, metadata=LOCAL)  # the extended frames, as the video's first
    positive: Conditioning | None = None
    negative: Conditioning | None = None
    model_key: Hashable = field(default="", metadata=LOCAL)
    step_index: int = field(default=0, metadata=LOCAL)
    prepared: bool = field(default=False, metadata=LOCAL)
    plan: tuple[Chunk, ...] = field(default=(), metadata=LOCAL)
    chunk: int = field(default=0, metadata=LOCAL)  # the chunk rendering
    iteration: int = field(default=0, metadata=LOCAL)  # its schedule's row
    # Each chunk's schedule (`schedule.ChunkSchedule`), and its iterations (host ints).
    schedules: list[Any] = field(default_factory=list[Any], metadata=LOCAL)
    iterations: list[int] = field(default_factory=list[int], metadata=LOCAL)
    boundary: bool = field(default=False, metadata=LOCAL)  # a chunk ended, the next not set up
    latents: Any = field(default=None, metadata=LOCAL)  # the chunk's (1, C, F, H, W)
    video_latents: Any = field(default=None, metadata=LOCAL)  # the video's so far
    walk: Any = field(default=None, metadata=LOCAL)  # what every frame's sampler walks
    steppers: Any = field(default=None, metadata=LOCAL)  # the chunk's, one per span of frames
    uncond: Any = field(default=None, metadata=LOCAL)  # a CFG++ step's unconditional output
    generator: Any = field(default=None, metadata=LOCAL)  # the noise of every chunk, in turn
    sampler_noise: Any = field(default=None, metadata=LOCAL)  # an ancestral sampler's, apart
    inbox: InteractionInbox | None = field(default=None, metadata=LOCAL)
    # Called with each decoded chunk's first frame index and frames (the run streams them):
    # then each chunk is decoded as it finishes, the last one in `post_decode`.
    on_chunk: Any = field(default=None, metadata=LOCAL)
    decode: Any = field(default=None, metadata=LOCAL)  # its `DecodeSession`
    video: Any = field(default=None, metadata=LOCAL)  # its frames decoded so far, (F, H, W, 3)
    decoded_frames: int = field(default=0, metadata=LOCAL)

    @property
    def lead_frames(self) -> int:
        """The given frames the video out starts with (video to video), before those rendered."""
        return 0 if self.extend is None else len(self.extend)

    @property
    def chunk_count(self) -> int:
        return len(self.plan)

    @property
    def cfg(self) -> bool:
        return self.guidance > 1

    @property
    def latent_size(self) -> tuple[int, int]:
        return self.height // SPATIAL_FACTOR, self.width // SPATIAL_FACTOR

    @property
    def step_count(self) -> int:
        return sum(self.iterations) if self.iterations else self.steps * len(self.plan or (0,))

    @property
    def done(self) -> bool:
        return self.prepared and self.step_index >= self.step_count

    @property
    def window(self) -> int:
        """Latent frames of this step's forward (the current chunk's window)."""
        if not self.schedules:
            return self.plan[0].frames if self.plan else chunks.latent_frames(self.frames)
        if self.iteration >= self.schedules[self.chunk].iterations:  # its last step is done
            return self.plan[self.chunk].frames
        start, end = self.schedules[self.chunk].interval(self.iteration)
        return end - start

    @property
    def batch_key(self) -> Hashable:
        # One batched tensor: one window shape; one causal mask (the transformer's block size).
        h, w = self.latent_size
        shape = (self.window, h, w)
        return ("skyreels", self.model_key, self.cfg, shape, self.causal_block_size, self.fps == 16)

    @property
    def tokens(self) -> int:
        h, w = self.latent_size
        return self.window * (h // PATCH) * (w // PATCH) * (2 if self.cfg else 1)


def new_request(model_key: Hashable, **kwargs: Any) -> SkyReelsRequest:
    """A request state, checked: sizes, 4k+1 frames, a known format, a chunk plan that renders."""
    state = SkyReelsRequest(**kwargs, model_key=model_key)
    multiple = SPATIAL_FACTOR * PATCH
    if state.width % multiple or state.height % multiple:
        raise InvalidRequest(
            f"width and height must be multiples of {multiple}, not {state.width}x{state.height}"
        )
    if state.frames < 1 or (state.frames - 1) % chunks.TEMPORAL_FACTOR:
        raise InvalidRequest(f"frames must be 4k+1 (1, 5, 9, ..., 97), not {state.frames}")
    if state.format not in FORMATS:
        raise InvalidRequest(f"format must be one of {', '.join(FORMATS)}, not {state.format!r}")
    if state.steps < 1:
        raise InvalidRequest("steps must be at least 1")
    if state.ar_step < 0 or state.causal_block_size < 1:
        raise InvalidRequest("ar_step must be 0 or more, causal_block_size 1 or more")
    why = sampler_refusal(state.sampler, state.sigma_schedule, state.guidance)
    if why is not None:
        raise InvalidRequest(why)
    why = chunks.refusal(state.frames, state.base_frames, state.overlap, state.causal_block_size)
    if why is not None:
        raise InvalidRequest(why)
    state.plan = chunks.plan(
        state.frames,
        state.base_frames,
        state.overlap,
        state.causal_block_size,
        first_prefix=_first_prefix(state),
    )
    return state


def sampler_refusal(sampler: str, schedule: str, guidance: float) -> str | None:
    """Why a sampler or schedule does not run (Wan's names: ComfyUI's, or empty for the model's
    own); every one of them runs per frame, a CFG++ one only where every step is guided."""
    return sampling_refusal(sampler, schedule) or cfg_pp_refusal(sampler, guidance, None)


def _first_prefix(state: SkyReelsRequest) -> int:
    """The clean latent frames the first chunk starts from: the image's one, the given video's
    overlap (whole causal blocks of it), or none."""
    if state.image is not None and state.extend is not None:
        raise InvalidRequest("wire an image (image to video) or a video to extend, not both")
    if state.image is not None:
        return 1
    if state.extend is None:
        return 0
    if state.overlap is None:
        raise InvalidRequest(
            "extending a video needs param 'overlap' (and 'base_frames'): the last frames of "
            "the given video the new ones continue from"
        )
    if len(state.extend) < state.overlap:
        raise InvalidRequest(
            f"the video to extend has {len(state.extend)} frames, fewer than param 'overlap' "
            f"({state.overlap})"
        )
    prefix = chunks.extended_prefix(state.overlap, state.causal_block_size)
    if prefix < 1:
        raise InvalidRequest(
            f"param 'overlap' ({state.overlap}) is shorter than one causal block "
            f"({state.causal_block_size} latent frames): the new frames would continue from none"
        )
    if chunks.latent_frames(state.frames) <= prefix:
        raise InvalidRequest(
            f"param 'frames' ({state.frames}) adds no frame past the overlap ({state.overlap})"
        )
    return prefix
