"""A server's runtime given a split, for the tests of what a family's split chooses and refuses
(no worker group starts until a render, and these tests send none)."""

from __future__ import annotations

from collections.abc import Generator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from inline_core.config import Config
from inline_core.contract.family import Family
from inline_core.contract.registry import Families
from inline_core.engine.runtime import ModelRuntime
from inline_core.families.nodes.register import register_families
from inline_core.graph.registry import Registry
from inline_core.graph.runner import NodeRunner
from inline_core.models.catalog import Catalog
from inline_core.sampling.loop import StepLoopSampler

F = TypeVar("F", bound=Family)


@contextmanager
def split_server(
    family_class: type[F], models_dir: Path, split: str = "ulysses=2"
) -> Generator[tuple[ModelRuntime, F, Registry]]:
    """A runtime given INLINE_PARALLEL=`split` on the CPU profile with its family (of
    `family_class`, over `models_dir`) registered as a server starts: a split the family's model
    cannot run raises here."""
    config = Config(models_dir=models_dir, profile="cpu", dtype="float32", parallel=split)
    sampler = StepLoopSampler()
    runtime = ModelRuntime(config, sampler)
    try:
        family = family_class(Catalog(models_dir), {})
        registry = Registry()
        register_families(registry, Families([family]), family.catalog, runtime)
        yield runtime, family, registry
    finally:
        runtime.close()
        sampler.close()


def node_runner(registry: Registry, node_type: str) -> NodeRunner:
    runner = registry.runner(node_type)
    assert runner is not None, node_type
    return runner
