"""Z-Image split across a worker group: how the ranks rebuild it, and the server's side of it.

- `rank_spec` names the stack as plain values (component files, dtypes); every rank rebuilds it
  with `load_for_rank`, through the same loaders as the in-process path, on its own device.
  `denoiser_spec` names the transformer and its schedule alone (`load_denoiser_for_rank`): what
  the `sample` primitive needs, whose prompts come encoded and whose latents go back undecoded.
- `GroupZImagePipeline` is the server's handle on the pipeline resident in the ranks: it holds no
  weights (on a GPU box a second copy in the server would take memory the ranks need), only
  what it takes to validate a request, send it, and say what to send back (image or latents).
- `ZImageGroup` is the split the device policy chose and the `ParallelSampler` that runs it. A
  `sample` primitive on a group already holding the node's stack with the same transformer runs
  there, with no restart.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Hashable, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast
from weakref import WeakSet

from PIL import Image

from inline_core.components.diffusers_zimage.denoiser import ZImageDenoiser
from inline_core.components.diffusers_zimage.placement import OffloadSwap, PlacementLike
from inline_core.components.diffusers_zimage.text_encoder import QwenPromptEncoder
from inline_core.components.diffusers_zimage.vae import FluxVAE
from inline_core.components.interfaces import Latents
from inline_core.device import Placement
from inline_core.device.split import ParallelSpec
from inline_core.errors import InvalidRequest, RunFailed, Unavailable
from inline_core.models.zimage.facts import vae_spatial_factor
from inline_core.models.zimage.loading import (
    load_scheduler_config,
    load_text_encoder,
    load_tokenizer,
    load_transformer,
    load_vae,
)
from inline_core.models.zimage.pipeline import (
    LATENT_FACTOR,
    ZImageDenoisePipeline,
    ZImageRequest,
    ZImageStepPipeline,
    new_request,
)
from inline_core.models.zimage.resolve import Source, ZImageSources
from inline_core.models.zimage.wire import (
    Output,
    request_kwargs,
    request_output,
    request_to_remote,
)
from inline_core.parallel.errors import WorkerGroupError
from inline_core.parallel.protocol import Json
from inline_core.parallel.remote import PipelineSpec, RemoteRequest
from inline_core.parallel.sampler import ParallelSampler
from inline_core.runtime.cancel import CancelToken

LOADER = "inline_core.models.zimage.remote:load_for_rank"
DENOISER_LOADER = "inline_core.models.zimage.remote:load_denoiser_for_rank"
ROLES = ("text_encoder", "denoiser", "vae")
COMPONENTS = ("transformer", "vae", "text_encoder", "tokenizer", "scheduler")
FLUX_VAE_FACTOR = 8  # the FLUX VAE all Z-Image models decode with

# -- the stack as plain values -----------------------------------------------------------------


def rank_spec(sources: ZImageSources, placements: Sequence[PlacementLike]) -> PipelineSpec:
    """How a rank rebuilds this stack: its files and, per role (text encoder, denoiser, VAE),
    the dtype of `placements`. The device is the rank's own."""
    files: dict[str, Json] = {name: _source_json(getattr(sources, name)) for name in COMPONENTS}
    files["modelName"] = sources.model_name
    dtypes: dict[str, Json] = {role: p.dtype for role, p in zip(ROLES, placements, strict=True)}
    return PipelineSpec(LOADER, {"sources": files, "dtypes": dtypes})


def denoiser_spec(
    transformer: Source, scheduler: Source | None, placement: PlacementLike
) -> PipelineSpec:
    """How a rank rebuilds a transformer and its schedule alone (the `sample` primitive's)."""
    files: dict[str, Json] = {
        "transformer": _source_json(transformer),
        "scheduler": _source_json(scheduler),
    }
    return PipelineSpec(
        DENOISER_LOADER, {"sources": files, "dtypes": {"denoiser": placement.dtype}}
    )


def serves_denoiser(
    spec: PipelineSpec, transformer: Source, scheduler: Source | None, dtype: str
) -> bool:
    """Whether the ranks holding `spec` sample with this transformer, schedule and dtype (the
    node's whole stack does when its transformer is the same)."""
    sources, dtypes = spec.args.get("sources"), spec.args.get("dtypes")
    return (
        spec.loader in (LOADER, DENOISER_LOADER)
        and isinstance(sources, dict)
        and isinstance(dtypes, dict)
        and sources.get("transformer") == _source_json(transformer)
        and sources.get("scheduler") == _source_json(scheduler)
        and dtypes.get("denoiser") == dtype
    )


def sources_from_json(files: Mapping[str, Json]) -> ZImageSources:
    found = {name: _source(files.get(name)) for name in COMPONENTS}
    required = {name: source for name, source in found.items() if name != "scheduler"}
    missing = [name for name, source in required.items() if source is None]
    if missing:
        raise ValueError(f"the rank spec names no {', '.join(missing)}")
    return ZImageSources(
        transformer=cast(Source, found["transformer"]),
        vae=cast(Source, found["vae"]),
        text_encoder=cast(Source, found["text_encoder"]),
        tokenizer=cast(Source, found["tokenizer"]),
        scheduler=found["scheduler"],
        model_name=str(files.get("modelName") or ""),
    )


def _source_json(source: Source | None) -> Json:
    if source is None:
        return None
    return {"path": str(source.path), "subfolder": source.subfolder}


def _source(value: Json | None) -> Source | None:
    if not isinstance(value, dict):
        return None
    subfolder = value.get("subfolder")
    return Source(Path(str(value["path"])), str(subfolder) if subfolder else None)


def load_for_rank(
    *, device: str, sources: Mapping[str, Json], dtypes: Mapping[str, Json]
) -> RankZImagePipeline:
    """The rank's resident pipeline (the `PipelineSpec` loader): the stack on `device`."""
    found = sources_from_json(sources)
    te_place, dit_place, vae_place = (Placement(device, str(dtypes[role])) for role in ROLES)
    swap = OffloadSwap()
    spec = rank_spec(found, (te_place, dit_place, vae_place))
    return RankZImagePipeline(
        text_encoder=QwenPromptEncoder(
            load_tokenizer(found.tokenizer),
            load_text_encoder(found.text_encoder, te_place),
            te_place,
            swap,
        ),
        denoiser=ZImageDenoiser(load_transformer(found.transformer, dit_place), dit_place, swap),
        vae=FluxVAE(load_vae(found.vae, vae_place), vae_place, swap),
        scheduler_config=load_scheduler_config(found.scheduler),
        model_key=spec.key,
        remote=spec,
    )


def load_denoiser_for_rank(
    *, device: str, sources: Mapping[str, Json], dtypes: Mapping[str, Json]
) -> RankDenoisePipeline:
    """The `denoiser_spec` loader: the transformer and its schedule on `device`."""
    transformer, scheduler = _source(sources.get("transformer")), _source(sources.get("scheduler"))
    if transformer is None:
        raise ValueError("the rank spec names no transformer")
    place = Placement(device, str(dtypes["denoiser"]))
    spec = denoiser_spec(transformer, scheduler, place)
    return RankDenoisePipeline(
        denoiser=ZImageDenoiser(load_transformer(transformer, place), place, OffloadSwap()),
        scheduler_config=load_scheduler_config(scheduler),
        model_key=spec.key,
        remote=spec,
    )


class RankZImagePipeline(ZImageStepPipeline):
    """The node's stack in a rank. A request sent for its latents (a `sample` primitive on a
    group that holds this stack) comes back undecoded, as the denoiser alone returns it."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._undecoded: WeakSet[ZImageRequest] = WeakSet()

    def state_from_remote(self, request: RemoteRequest, /) -> ZImageRequest:
        state = super().state_from_remote(request)
        if request_output(request) == "latents":
            self._undecoded.add(state)
        return state

    def post_decode(self, state: ZImageRequest, /) -> Any:
        if state in self._undecoded:
            return _latents_out(ZImageDenoisePipeline.post_decode(self, state))
        return super().post_decode(state)


class RankDenoisePipeline(ZImageDenoisePipeline):
    """The transformer and its schedule in a rank (implements `RemotePipeline`): requests come
    with their prompts encoded and leave as latents."""

    def __init__(self, *, remote: PipelineSpec, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.remote = remote

    def remote_spec(self) -> PipelineSpec:
        return self.remote

    def remote_request(self, state: ZImageRequest, /) -> RemoteRequest:
        return request_to_remote(state, "latents")

    def state_from_remote(self, request: RemoteRequest, /) -> ZImageRequest:
        if request_output(request) != "latents":
            raise InvalidRequest("the ranks hold a denoiser without a VAE: they return latents")
        return self.request(**request_kwargs(request))

    def post_decode(self, state: ZImageRequest, /) -> Any:
        return _latents_out(super().post_decode(state))


def _latents_out(latents: object) -> object:
    """The latents' tensor: what crosses back (the server wraps it again)."""
    if not isinstance(latents, Latents):
        raise TypeError(f"expected latents, got a {type(latents).__name__}")
    return latents.value


# -- the server's side -------------------------------------------------------------------------


class GroupZImagePipeline:
    """The server's handle on a Z-Image pipeline that lives in the worker group's ranks
    (implements `parallel.remote.RemotePipeline`; no weights are loaded here). `output` is what
    its requests come back as: decoded images (the node) or latents (the `sample` primitive)."""

    def __init__(self, spec: PipelineSpec, spatial_factor: int, output: Output = "image") -> None:
        self.spec = spec
        self.spatial_factor = spatial_factor
        self.output: Output = output
        self.model_key: Hashable = spec.key

    def request(self, **kwargs: Any) -> ZImageRequest:
        return new_request(self.model_key, self.spatial_factor, **kwargs)

    def remote_spec(self) -> PipelineSpec:
        return self.spec

    def remote_request(self, state: ZImageRequest, /) -> RemoteRequest:
        return request_to_remote(state, self.output)

    def state_from_remote(self, request: RemoteRequest, /) -> ZImageRequest:
        return self.request(**request_kwargs(request))


@dataclass(frozen=True)
class _GroupJob:
    """What `ParallelSampler.run` reads of a job (`SampleJob` needs a local step pipeline)."""

    pipeline: GroupZImagePipeline
    state: ZImageRequest
    cancel: CancelToken
    on_phase: Callable[[str], None]
    on_step: Callable[[int, int], None]


class ZImageGroup:
    """Z-Image renders split across ranks: `split` is the device policy's choice."""

    def __init__(self, split: ParallelSpec, sampler: ParallelSampler) -> None:
        self.split = split
        self.sampler = sampler

    @classmethod
    def for_split(cls, split: ParallelSpec, *, cuda: bool) -> ZImageGroup:
        return cls(split, ParallelSampler.for_split(split, cuda=cuda))

    def pipeline_for(
        self, sources: ZImageSources, placements: Sequence[PlacementLike]
    ) -> GroupZImagePipeline:
        factor = vae_spatial_factor(sources.vae) or FLUX_VAE_FACTOR
        return GroupZImagePipeline(rank_spec(sources, placements), factor)

    def denoiser_for(
        self, transformer: Source, scheduler: Source | None, placement: PlacementLike
    ) -> GroupZImagePipeline:
        """The `sample` primitive's handle: the pipeline the group holds when it samples with
        this transformer already (the node's stack: no restart), else the transformer alone."""
        spec = self.sampler.spec
        if spec is None or not serves_denoiser(spec, transformer, scheduler, placement.dtype):
            spec = denoiser_spec(transformer, scheduler, placement)
        return GroupZImagePipeline(spec, LATENT_FACTOR, output="latents")

    def start(self, pipeline: GroupZImagePipeline) -> None:
        """Launch the group with this pipeline if it is not already holding it (blocks)."""
        with self._shutdown_is_unavailable():
            self.sampler.start(pipeline.remote_spec())

    def run(
        self,
        pipeline: GroupZImagePipeline,
        state: ZImageRequest,
        *,
        cancel: CancelToken,
        on_phase: Callable[[str], None],
        on_step: Callable[[int, int], None],
    ) -> Image.Image:
        output = self._run(_GroupJob(pipeline, state, cancel, on_phase, on_step))
        if not isinstance(output, Image.Image):
            raise RunFailed(f"the worker group returned a {type(output).__name__}, not an image")
        return output

    def sample(
        self,
        pipeline: GroupZImagePipeline,
        state: ZImageRequest,
        *,
        cancel: CancelToken,
        on_phase: Callable[[str], None],
        on_step: Callable[[int, int], None],
    ) -> Latents:
        """Denoise `state` (prompts encoded) in the ranks; its final latents come back."""
        if pipeline.output != "latents":
            raise ValueError("sample() needs a handle whose requests come back as latents")
        value = self._run(_GroupJob(pipeline, state, cancel, on_phase, on_step))
        shape = getattr(value, "shape", None)
        if shape is None:
            raise RunFailed(f"the worker group returned a {type(value).__name__}, not latents")
        return Latents(value, tuple(int(n) for n in shape))

    def _run(self, job: _GroupJob) -> object:
        with self._shutdown_is_unavailable():
            output: object = self.sampler.run(job)
        return output

    def stats(self) -> dict[str, Any]:
        return {"split": str(self.split), **self.sampler.stats()}

    @contextmanager
    def _shutdown_is_unavailable(self) -> Generator[None]:
        """A group closed under a render (server shutdown) is `Unavailable`, which the run
        manager puts back in the queue, rather than a failure of the render."""
        try:
            yield
        except WorkerGroupError as exc:
            if self.sampler.closed:
                raise Unavailable("the worker group was shut down under this render") from exc
            raise

    def close(self) -> None:
        self.sampler.close()
