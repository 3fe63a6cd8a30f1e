from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from inline_core.engine.group import GroupPipeline, rank_spec
from inline_core.families.krea2 import Krea2Family
from inline_core.families.krea2.descriptor import NODE_TYPE
from inline_core.families.krea2.kit import Krea2Kit, build_kit
from inline_core.families.krea2.pipeline import Krea2StepPipeline
from inline_core.models.catalog import Catalog
from inline_core.parallel.runner import resolve
from inline_core.parallel.sampler import ParallelSampler
from inline_core.sampling.loop import StepLoopSampler
from tests.parallel.zimage_support import CPU_DTYPES, rank_threads

SPLIT_MODEL = "krea2_tiny.safetensors"  # Krea's naming, as ComfyUI's file


@pytest.fixture(scope="session")
def krea2_kit(tmp_path_factory: pytest.TempPathFactory) -> Krea2Kit:
    return build_kit(tmp_path_factory.mktemp("krea2") / "models")


@pytest.fixture(scope="session")
def krea_sampler() -> Iterator[StepLoopSampler]:
    s = StepLoopSampler()
    yield s
    s.close()


@pytest.fixture(scope="session")
def krea_pipe(krea2_kit: Krea2Kit) -> Any:
    """diffusers' own Krea2Pipeline over the kit's folder: the pixel reference."""
    import torch
    from diffusers import Krea2Pipeline  # pyright: ignore[reportPrivateImportUsage]

    pipe: Any = Krea2Pipeline.from_pretrained(  # pyright: ignore[reportUnknownMemberType]
        str(krea2_kit.diffusers_dir), dtype=torch.float32, local_files_only=True
    )
    pipe.set_progress_bar_config(disable=True)
    return pipe


@pytest.fixture(scope="module")
def handle(krea2_kit: Krea2Kit) -> GroupPipeline:
    """The server's handle on the kit's model in a worker group's ranks, on CPU."""
    family = Krea2Family(Catalog(krea2_kit.root), {})
    sources = family.resolve(NODE_TYPE, {"model": SPLIT_MODEL}).require()
    return GroupPipeline(family, rank_spec(family, "node", sources, CPU_DTYPES), "node", sources)


@pytest.fixture(scope="module")
def local(handle: GroupPipeline, group: ParallelSampler) -> Iterator[Krea2StepPipeline]:
    """The pipeline in this process, built by the loader (and spec) the ranks of the module's
    `group` use, stepped at a rank's thread count (oneDNN's float reductions depend on it)."""
    import torch

    spec = handle.remote_spec()
    pipeline = resolve(spec.loader)(device="cpu", **spec.args)
    assert isinstance(pipeline, Krea2StepPipeline)
    threads = torch.get_num_threads()
    torch.set_num_threads(rank_threads(group.config))
    yield pipeline
    torch.set_num_threads(threads)
