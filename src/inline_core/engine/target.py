"""Where a stack renders, decided in one place: in process (the resident stacks, the step loop) or
on the worker group, where the device policy splits its model (the ranks load it; this process
loads no weights of its own). A family node and the `sample` primitive each ask for their target
and get a pipeline and the sampler that runs its jobs (torch-free: the stacks import torch on the
first render in process).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from inline_core.contract.family import Family
from inline_core.contract.sources import Sources
from inline_core.device.matmul import RankPacking, rank_packing
from inline_core.engine.group import GroupPipeline, ModelGroup
from inline_core.engine.runtime import ModelRuntime
from inline_core.models.source import Source

if TYPE_CHECKING:
    from inline_core.engine.stacks import Stacks

T = TypeVar("T")


class RunsJobs(Protocol):
    """The seam a target's jobs go through: the step loop, or the worker group."""

    def run(self, job: Any) -> Any: ...


@dataclass(frozen=True)
class RenderTarget:
    """A stack where it renders: its pipeline (in process, or the group's handle to the ranks'),
    the sampler its jobs go to, and where its model work (a request's encode) runs."""

    pipeline: Any
    sampler: RunsJobs
    compute: Callable[[Callable[[], Any]], Any]
    group: ModelGroup | None = None

    @property
    def in_process(self) -> bool:
        return self.group is None

    def request(self, **arguments: Any) -> Any:
        """The pipeline's request state (a group's is checked here, before any rank is
        bothered)."""
        return self.compute(lambda: self.pipeline.request(**arguments))

    def start(self) -> None:
        """Where the model renders on the worker group, its ranks load it (blocks: part of the
        loading phase); in process it is loaded already."""
        if self.group is not None and isinstance(self.pipeline, GroupPipeline):
            self.group.start(self.pipeline)


def node_target(
    runtime: ModelRuntime,
    family: Family,
    sources: Sources,
    render: Hashable = None,
    node_id: str | None = None,
) -> RenderTarget:
    """A high-level node's whole stack over `sources`."""

    def in_group(group: ModelGroup) -> GroupPipeline:
        roles = ("text_encoder", "denoiser", "vae")
        dtypes = {role: runtime.placement(family, role).dtype for role in roles}
        compiled = {role: runtime.compile_choice(family, role) for role in ("denoiser", "vae")}
        return group.pipeline_for(
            family, sources, dtypes, compiled, _packing(runtime, family, group)
        )

    return _target(
        runtime,
        family,
        sources.get("transformer"),
        node_id,
        lambda stacks: stacks.pipeline(family, sources, render),
        in_group,
    )


def denoiser_target(
    runtime: ModelRuntime,
    family: Family,
    transformer: Source,
    scheduler: Source | None,
    render: Hashable = None,
    node_id: str | None = None,
) -> RenderTarget:
    """The transformer and its schedule alone (the `sample` primitive's stack)."""

    def in_group(group: ModelGroup) -> GroupPipeline:
        dtype = runtime.placement(family, "denoiser").dtype
        compiled = runtime.compile_choice(family)
        packed = _packing(runtime, family, group)
        return group.denoiser_for(family, transformer, scheduler, dtype, compiled, packed)

    return _target(
        runtime,
        family,
        transformer,
        node_id,
        lambda stacks: stacks.denoiser(family, transformer, scheduler, render),
        in_group,
    )


def _target(
    runtime: ModelRuntime,
    family: Family,
    transformer: Source | None,
    node_id: str | None,
    in_process: Callable[[Stacks], Any],
    in_group: Callable[[ModelGroup], GroupPipeline],
) -> RenderTarget:
    split = runtime.split_for(family, transformer, node_id)
    if split is None:
        pipeline = runtime.compute(lambda: in_process(runtime.stacks()))
        return RenderTarget(pipeline, runtime.sampler, runtime.compute)
    group = runtime.group(split)
    return RenderTarget(in_group(group), group, _here, group)


def _packing(runtime: ModelRuntime, family: Family, group: ModelGroup) -> RankPacking | None:
    """The ranks' packed linear weights: the policy's choice for the family's denoiser, as in
    process, each rank's copy within its share of the memory budget."""
    choice = runtime.packed_linear_choice(family)
    return rank_packing(choice, runtime.residency.budget_bytes, group.split.world_size)


def _here(fn: Callable[[], T]) -> T:
    return fn()
