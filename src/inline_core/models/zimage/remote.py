"""Z-Image split across a worker group: how the ranks rebuild it, and the server's side of it.

- `rank_spec` names the stack as plain values (component files, dtypes); every rank rebuilds it
  with `load_for_rank`, through the same loaders as the in-process path, on its own device.
- `GroupZImagePipeline` is the server's handle on the pipeline resident in the ranks: it holds no
  weights (on a GPU box a second copy in the server would take memory the ranks need), only
  what it takes to validate a request and send it.
- `ZImageGroup` is the split the device policy chose and the `ParallelSampler` that runs it.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Hashable, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from PIL import Image

from inline_core.components.diffusers_zimage.denoiser import ZImageDenoiser
from inline_core.components.diffusers_zimage.placement import OffloadSwap, PlacementLike
from inline_core.components.diffusers_zimage.text_encoder import QwenPromptEncoder
from inline_core.components.diffusers_zimage.vae import FluxVAE
from inline_core.device import Placement
from inline_core.device.split import ParallelSpec
from inline_core.errors import RunFailed, Unavailable
from inline_core.models.zimage.facts import vae_spatial_factor
from inline_core.models.zimage.loading import (
    load_scheduler_config,
    load_text_encoder,
    load_tokenizer,
    load_transformer,
    load_vae,
)
from inline_core.models.zimage.pipeline import ZImageRequest, ZImageStepPipeline, new_request
from inline_core.models.zimage.resolve import Source, ZImageSources
from inline_core.models.zimage.wire import request_kwargs, request_to_remote
from inline_core.parallel.errors import WorkerGroupError
from inline_core.parallel.protocol import Json
from inline_core.parallel.remote import PipelineSpec, RemoteRequest
from inline_core.parallel.sampler import ParallelSampler
from inline_core.runtime.cancel import CancelToken

LOADER = "inline_core.models.zimage.remote:load_for_rank"
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
) -> ZImageStepPipeline:
    """The rank's resident pipeline (the `PipelineSpec` loader): the stack on `device`."""
    found = sources_from_json(sources)
    te_place, dit_place, vae_place = (Placement(device, str(dtypes[role])) for role in ROLES)
    swap = OffloadSwap()
    spec = rank_spec(found, (te_place, dit_place, vae_place))
    return ZImageStepPipeline(
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


# -- the server's side -------------------------------------------------------------------------


class GroupZImagePipeline:
    """The server's handle on a Z-Image pipeline that lives in the worker group's ranks
    (implements `parallel.remote.RemotePipeline`; no weights are loaded here)."""

    def __init__(self, spec: PipelineSpec, spatial_factor: int) -> None:
        self.spec = spec
        self.spatial_factor = spatial_factor
        self.model_key: Hashable = spec.key

    def request(self, **kwargs: Any) -> ZImageRequest:
        return new_request(self.model_key, self.spatial_factor, **kwargs)

    def remote_spec(self) -> PipelineSpec:
        return self.spec

    def remote_request(self, state: ZImageRequest, /) -> RemoteRequest:
        return request_to_remote(state)

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
        with self._shutdown_is_unavailable():
            output: object = self.sampler.run(_GroupJob(pipeline, state, cancel, on_phase, on_step))
        if not isinstance(output, Image.Image):
            raise RunFailed(f"the worker group returned a {type(output).__name__}, not an image")
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
