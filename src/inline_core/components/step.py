"""The step-level execution protocol (spec document 003) that the batched sampler drives.

A pipeline splits one request's render into four calls:
- `prepare_encode(state)`: once per request: encode prompts, draw initial latents, set timesteps,
  make a private scheduler copy.
- `denoise_step(states)`: one transformer forward over a batch the sampler assembled; it never
  advances a step. Returns one noise prediction per state, in order.
- `step_scheduler(state, noise_pred)`: the only place a request's step advances.
- `post_decode(state)`: decode the finished latents into the request's output.

Optional capabilities are separate protocols checked at run time (`supports_*` helpers below),
e.g. `post_decode_many`: decode several finished states in one call.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeGuard, runtime_checkable


@runtime_checkable
class StepState(Protocol):
    """Per-request state. Owned by its pipeline; the sampler reads only these fields."""

    @property
    def step_index(self) -> int:
        """Steps completed so far."""
        ...

    @property
    def step_count(self) -> int: ...

    @property
    def done(self) -> bool: ...

    @property
    def batch_key(self) -> Hashable:
        """States with equal keys (same model, dtype, CFG mode) may share one `denoise_step`."""
        ...

    @property
    def tokens(self) -> int:
        """Image tokens this request adds to a forward (its cost in the batch token budget)."""
        ...


@runtime_checkable
class StepPipeline(Protocol):
    def prepare_encode(self, state: Any, /) -> Any: ...

    def denoise_step(self, states: Sequence[Any], /) -> Sequence[Any]: ...

    def step_scheduler(self, state: Any, noise_pred: Any, /) -> None: ...

    def post_decode(self, state: Any, /) -> Any: ...


@runtime_checkable
class SupportsBatchedDecode(Protocol):
    """A pipeline that decodes several finished states in one call (e.g. one VAE forward).

    The sampler groups finished states of one pipeline whose `decode_key` is equal and not None,
    bounded by its max batch and decode pixel budget (the sum of `decode_pixels`), and calls
    `post_decode_many`; its outputs must equal `post_decode`'s, one per state, in order. If the call
    raises, the sampler decodes the group one by one with `post_decode`, so a bad state fails
    alone: `post_decode_many` must leave every state decodable when it raises.
    """

    def decode_key(self, state: Any, /) -> Hashable | None:
        """States with equal keys may be decoded together (e.g. same latent shape); None: alone."""
        ...

    def decode_pixels(self, state: Any, /) -> int:
        """The state's output size in pixels (its cost in the decode pixel budget)."""
        ...

    def post_decode_many(self, states: Sequence[Any], /) -> Sequence[Any]: ...


@runtime_checkable
class SupportsComponentModules(Protocol):
    """Declares which submodules are DiT, encoders, VAE and always-resident (dotted paths)."""

    _dit_modules: list[str]
    _encoder_modules: list[str]
    _vae_modules: list[str]
    _resident_modules: list[str]


@runtime_checkable
class SupportsChunkedVAEDecode(Protocol):
    """A VAE that decodes in chunks and says which value range its floats occupy."""

    chunk_value_range: tuple[float, float]

    def decode_chunks(self, latents: Any, /) -> Any: ...


@runtime_checkable
class StreamsChunks(Protocol):
    """A request state whose decode delivers its frames chunk by chunk: the node runner sets
    `on_chunk`, and the pipeline calls it as each chunk decodes with (the chunk's first frame
    index, its frames as uint8 (frames, height, width, 3), the total frame count), from
    whichever thread decodes. `fps`: how fast they play (the streamed video's rate)."""

    on_chunk: Any
    fps: int


@dataclass(frozen=True)
class ChunkMediaSpec:
    """The media of a chunked render's current chunk (spec 003's `peek_chunk_media`): which of
    the video's frames it adds, and the latent frames it renders (for pacing and backpressure)."""

    chunk: int  # 0-based
    chunks: int
    first_frame: int  # the video's first frame this chunk adds
    frames: int  # video frames it adds
    latent_frames: int  # latent frames it renders (its window, overlap included)
    fps: int

    def to_info(self) -> dict[str, int]:
        return {
            "chunk": self.chunk,
            "chunks": self.chunks,
            "firstFrame": self.first_frame,
            "frames": self.frames,
            "latentFrames": self.latent_frames,
            "fps": self.fps,
        }


@runtime_checkable
class SupportsChunkBoundary(Protocol):
    """A pipeline that renders a request chunk by chunk (spec 003's chunk-boundary protocol).

    After each `step_scheduler`, the loop asks `at_chunk_boundary(state)` (ours: whether the step
    ended a chunk and another follows); there it calls `apply_interaction_at_chunk_boundary`
    (the interactions queued for this boundary change the request), then `prepare_next_chunk`
    (the next chunk's latents and schedule), then reads `peek_chunk_media` (the chunk about to
    render), before it re-reads the state's batch key. A pipeline may also set the class
    attribute `supports_chunk_step_grouping = True`: a request may run every step of its chunk
    without the loop's scheduler in between (a capability; the loop decides whether to)."""

    def at_chunk_boundary(self, state: Any, /) -> bool: ...

    def apply_interaction_at_chunk_boundary(self, state: Any, /) -> None: ...

    def peek_chunk_media(self, state: Any, /) -> ChunkMediaSpec: ...

    def prepare_next_chunk(self, state: Any, /) -> None: ...


@runtime_checkable
class StreamsSound(Protocol):
    """A request state whose video has a soundtrack, handed whole to `on_audio` (set by the node
    runner, like `on_chunk`) before its first chunk: a stream's tracks are set at its start."""

    on_audio: Any


@runtime_checkable
class TakesInteractions(Protocol):
    """A request state of a chunked render that takes interactions: the node runner gives it an
    inbox (`runtime.interactions.InteractionInbox`) for its `chunk_count` chunks, which the
    pipeline's `apply_interaction_at_chunk_boundary` reads."""

    inbox: Any

    @property
    def chunk_count(self) -> int: ...


@runtime_checkable
class SupportsLatentOutput(Protocol):
    """A pipeline that can hand back a finished state's latents undecoded (the `sample` primitive
    on a worker group holding a node's whole stack decodes with its own `vae/decode`)."""

    def post_latents(self, state: Any, /) -> Any: ...


@runtime_checkable
class SupportsXDiTSplit(Protocol):
    """A pipeline whose transformer xDiT can split: xDiT's own class for its model, built over the
    resident transformer's weights, and the diffusers pipeline xDiT reads its runtime state from."""

    xdit_model: str  # xFuserArgs' name for the model

    def xdit_transformer(self, dit: Any, /) -> Any: ...

    def xdit_pipeline(self, transformer: Any, vae: Any, /) -> Any: ...


@runtime_checkable
class SupportsSplitNotice(Protocol):
    """A pipeline that adapts its forward to the engine that splits it (its name, and each split
    method's degree), e.g. to lay a mask out the way that engine orders the sequence: the
    exception that engine forces, kept in the family that knows its model."""

    def split_by(self, engine: str, degrees: Mapping[str, int], /) -> None: ...


@runtime_checkable
class SupportsContextPlan(Protocol):
    """A pipeline that plans its own context-parallel split for cache-dit (which inputs of which
    layers are sharded, which outputs gathered: cache-dit's plan format) in place of the plan
    cache-dit has for its model, e.g. one that pads what cache-dit's shards only evenly."""

    def context_plan(self, degrees: Mapping[str, int], /) -> Mapping[str, Any]: ...


@runtime_checkable
class SupportsPreview(Protocol):
    """A pipeline whose renders can be previewed while they step.

    The sampler calls `preview_latents(state, noise_pred)` after a forward and before that state's
    `step_scheduler`, only for a job that asked for previews: it returns the estimate of the
    finished latents (x0) as a new value (never a view the step will change), cheap to compute
    (no sync with the device), or None for a state with nothing to preview. `preview_format`
    names the latents' format in `diffusion/preview/formats.py` (e.g. "flux")."""

    def preview_format(self, state: Any, /) -> str: ...

    def preview_latents(self, state: Any, noise_pred: Any, /) -> Any: ...


@runtime_checkable
class SupportsCacheDiTBackend(Protocol):
    """A pipeline that owns its step cache backend (spec 003's Cache-DiT ownership): it adopts
    an enabled backend once, then hands it each forward's rows with their requests' own cache
    state (`diffusion/stepcache/`), so cached requests still share batched forwards."""

    def adopt_cache_dit_backend(self, backend: Any, /) -> None: ...


@runtime_checkable
class CachesSteps(Protocol):
    """A request state that carries its step cache settings (`runtime.step_cache`; None: off)."""

    step_cache: Any

    @property
    def step_count(self) -> int: ...


@runtime_checkable
class CountsCachedSteps(Protocol):
    """A request's step cache state (`stepcache.rows.RequestCache`, or the counts a worker
    group reported for it): what it computed and skipped (`runtime.step_cache.COUNTS`)."""

    def stats(self) -> dict[str, int]: ...


def step_cache_counts(state: object) -> dict[str, int] | None:
    """What a finished render's step cache did (None: it was not cached)."""
    cache = getattr(state, "cache", None)
    return cache.stats() if isinstance(cache, CountsCachedSteps) else None


def adopt_request_scoped_cache_dit(pipeline: object, backend: object) -> bool:
    """Hand an enabled step cache backend to a pipeline that opted in; False if it did not."""
    if not isinstance(pipeline, SupportsCacheDiTBackend):
        return False
    pipeline.adopt_cache_dit_backend(backend)
    return True


def caches_steps(obj: object) -> TypeGuard[CachesSteps]:
    return isinstance(obj, CachesSteps)


def supports_component_modules(obj: object) -> TypeGuard[SupportsComponentModules]:
    return isinstance(obj, SupportsComponentModules)


def supports_batched_decode(obj: object) -> TypeGuard[SupportsBatchedDecode]:
    return isinstance(obj, SupportsBatchedDecode)


def supports_chunked_vae_decode(obj: object) -> TypeGuard[SupportsChunkedVAEDecode]:
    return isinstance(obj, SupportsChunkedVAEDecode)


def streams_chunks(obj: object) -> TypeGuard[StreamsChunks]:
    return isinstance(obj, StreamsChunks)


def streams_sound(obj: object) -> TypeGuard[StreamsSound]:
    return isinstance(obj, StreamsSound)


def supports_latent_output(obj: object) -> TypeGuard[SupportsLatentOutput]:
    return isinstance(obj, SupportsLatentOutput)


def supports_xdit_split(obj: object) -> TypeGuard[SupportsXDiTSplit]:
    return isinstance(obj, SupportsXDiTSplit)


def supports_chunk_boundary(obj: object) -> TypeGuard[SupportsChunkBoundary]:
    return isinstance(obj, SupportsChunkBoundary)


def supports_chunk_step_grouping(obj: object) -> bool:
    return supports_chunk_boundary(obj) and getattr(obj, "supports_chunk_step_grouping", 0) is True


def takes_interactions(obj: object) -> TypeGuard[TakesInteractions]:
    return isinstance(obj, TakesInteractions)


def supports_preview(obj: object) -> TypeGuard[SupportsPreview]:
    return isinstance(obj, SupportsPreview)


def supports_split_notice(obj: object) -> TypeGuard[SupportsSplitNotice]:
    return isinstance(obj, SupportsSplitNotice)


def supports_context_plan(obj: object) -> TypeGuard[SupportsContextPlan]:
    return isinstance(obj, SupportsContextPlan)
