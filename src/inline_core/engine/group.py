"""The worker group as the families see it: the split the policy chose, and handles on pipelines
that live in the ranks (torch-free: the server holds no weights of its own under a split; on a GPU
box a second copy would take memory the ranks need).

- `GroupPipeline` is the server's handle on one family's pipeline in the ranks: it builds and
  checks request states with the family's own request type, names how the ranks rebuild the
  pipeline (`engine/remote.py`), and says what they send back: the decoded output (a node's
  whole stack) or the final latents (the `sample` primitive).
- `ModelGroup` is the split and the `ParallelSampler` that runs it: the same `BatchedSampler` seam
  as the in-process step loop. A `sample` primitive on a group already holding a node's stack with
  the same transformer runs there, with no restart.
"""

from __future__ import annotations

from collections.abc import Generator, Hashable, Mapping
from contextlib import contextmanager
from typing import Any, Literal, cast

from inline_core.contract.family import Family, Stack
from inline_core.contract.sources import Sources
from inline_core.device.compile import CompileChoice
from inline_core.device.matmul import RankPacking
from inline_core.device.split import ParallelSpec
from inline_core.errors import Unavailable
from inline_core.models.source import Source
from inline_core.parallel.errors import WorkerGroupError
from inline_core.parallel.protocol import Json
from inline_core.parallel.remote import PipelineSpec, RemoteRequest
from inline_core.parallel.sampler import ParallelSampler, SampleJobLike
from inline_core.parallel.wire import encode_fields, state_fields

LOADER = "inline_core.engine.remote:load_for_rank"
Output = Literal["output", "latents"]


def rank_spec(
    family: Family,
    stack: Stack,
    sources: Sources,
    dtypes: Mapping[str, str],
    compiled: Mapping[str, CompileChoice] | None = None,
    packed: RankPacking | None = None,
) -> PipelineSpec:
    """How every rank rebuilds `stack` of `family` from `sources`, each role in its dtype (the
    device is the rank's own), the blocks of the roles `compiled` turns on compiled as in
    process, the denoiser's linear weights packed where `packed` says so."""
    args: dict[str, Json] = {
        "family": family.name,
        "stack": stack,
        "sources": _json(sources.to_json()),
        "dtypes": dict(dtypes),
    }
    chosen = {role: choice for role, choice in (compiled or {}).items() if choice.enabled}
    if chosen:  # absent where nothing compiles: the spec (and the group's key) as before
        args["compile"] = _json({role: choice.to_json() for role, choice in chosen.items()})
    if packed is not None:  # absent where the ranks do not pack, as `compile`
        args["packed"] = _json(packed.to_json())
    return PipelineSpec(LOADER, args)


def _json(value: object) -> Json:
    """`Sources.to_json()` is JSON by construction; this narrows its type for the spec."""
    if isinstance(value, dict):
        return {str(k): _json(v) for k, v in value.items()}  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    raise TypeError(f"a {type(value).__name__} is not JSON")


class GroupPipeline:
    """The server's handle on a pipeline resident in the ranks (a `RemotePipeline`)."""

    def __init__(
        self,
        family: Family,
        spec: PipelineSpec,
        stack: Stack,
        sources: Sources,
        output: Output = "output",
    ) -> None:
        self.family = family
        self.spec = spec
        self.stack: Stack = stack
        self.sources = sources
        self.output: Output = output
        self.model_key: Hashable = spec.key

    def request(self, **kwargs: Any) -> Any:
        """A request state, checked here before any rank is bothered."""
        return self.family.new_request(self.stack, self.sources, self.model_key, **kwargs)

    def remote_spec(self) -> PipelineSpec:
        return self.spec

    def remote_request(self, state: Any, /) -> RemoteRequest:
        return encode_fields(state_fields(state), output=self.output)


class ModelGroup:
    """Renders split across ranks: `split` is the device policy's choice."""

    def __init__(self, split: ParallelSpec, sampler: ParallelSampler) -> None:
        self.split = split
        self.sampler = sampler

    @classmethod
    def for_split(cls, split: ParallelSpec, *, cuda: bool) -> ModelGroup:
        return cls(split, ParallelSampler.for_split(split, cuda=cuda))

    def pipeline_for(
        self,
        family: Family,
        sources: Sources,
        dtypes: Mapping[str, str],
        compiled: Mapping[str, CompileChoice] | None = None,
        packed: RankPacking | None = None,
    ) -> GroupPipeline:
        """A node's whole stack in the ranks (the roles `compiled` turns on, compiled; the
        denoiser packed where `packed` says so)."""
        spec = rank_spec(family, "node", sources, dtypes, compiled, packed)
        return GroupPipeline(family, spec, "node", sources)

    def denoiser_for(
        self,
        family: Family,
        transformer: Source,
        scheduler: Source | None,
        dtype: str,
        compiled: CompileChoice | None = None,
        packed: RankPacking | None = None,
    ) -> GroupPipeline:
        """The `sample` primitive's handle: the stack the group holds when it samples with this
        transformer already (a node's: no restart), else the transformer alone."""
        spec = self.sampler.spec
        if spec is None or not _serves_denoiser(spec, family, transformer, scheduler, dtype):
            sources = Sources.of(
                family.name, "", {"transformer": transformer, "scheduler": scheduler}
            )
            chosen = None if compiled is None else {"denoiser": compiled}
            spec = rank_spec(family, "denoiser", sources, {"denoiser": dtype}, chosen, packed)
        held = Sources.from_json(_args(spec).get("sources") or {})
        return GroupPipeline(family, spec, "denoiser", held, output="latents")

    def start(self, pipeline: GroupPipeline) -> None:
        """Launch the group with this pipeline if it is not already holding it (blocks)."""
        with self._shutdown_is_unavailable():
            self.sampler.start(pipeline.remote_spec())

    def run(self, job: SampleJobLike) -> Any:
        """Run a job in the ranks: the same seam as `StepLoopSampler.run`."""
        with self._shutdown_is_unavailable():
            return self.sampler.run(job)

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


def _args(spec: PipelineSpec) -> dict[str, Any]:
    return dict(spec.args)


def _serves_denoiser(
    spec: PipelineSpec, family: Family, transformer: Source, scheduler: Source | None, dtype: str
) -> bool:
    """Whether the ranks holding `spec` sample with this transformer, schedule and dtype (a node's
    whole stack does when its transformer is the same)."""
    args = _args(spec)
    sources, dtypes = args.get("sources"), args.get("dtypes")
    if spec.loader != LOADER or args.get("family") != family.name:
        return False
    if not isinstance(sources, dict) or not isinstance(dtypes, dict):
        return False
    held = Sources.from_json(cast(dict[str, object], sources))
    return (
        held.get("transformer") == transformer
        and held.get("scheduler") == scheduler
        and cast(dict[str, object], dtypes).get("denoiser") == dtype
    )
