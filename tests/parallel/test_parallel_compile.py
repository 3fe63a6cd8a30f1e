"""Compiled blocks on a worker group's ranks: where the server compiles, its rank spec carries the
choice and every rank (2 gloo ranks, cache-dit's Ulysses split) compiles its transformer's blocks
(rank 0 would compile its VAE decoder's the same way: left out here for CI's time); the split
take equals the in-process take within a level, and the job says how each block class ran on the
ranks. A rank whose compile failed ran that class eager: the job and the server's log say which
ranks and why.

The ranks compile the split blocks (their shapes are the split's: their own graphs; minutes on a
loaded CPU when inductor's cache is cold, seconds with it kept). One group serves the module
(`compiling_group`): its first render (both ranks compile) is made when it starts; a later test
breaks rank 1's C++ compiler and drops its compiled graphs (`compile_fault_runner`), then renders
the same shape class again: rank 1 compiles again and fails, rank 0 reuses its graphs."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest
from compile_fault_runner import BREAK_FLAG, missing_compiler
from parallel_support import group_config
from PIL import Image
from zimage_support import CPU_DTYPES, kit_family, kit_handle, load_spec, render_in_process

from inline_core.device.compile import CompileChoice
from inline_core.engine.group import GroupPipeline, rank_spec
from inline_core.families.zimage.kit import KitPaths
from inline_core.parallel.sampler import ParallelSampler, ranks_compiled
from inline_core.sampling import SampleJob

pytestmark = pytest.mark.worker_group  # starts a group of its own

KW: dict[str, Any] = {
    "prompt": "a red fox",
    "width": 64,
    "height": 64,
    "steps": 3,
    "seed": 5,
    "guidance": 0.0,
}
COMPILED = {"denoiser": CompileChoice(True, "test"), "vae": CompileChoice(False, "test")}


def compiled_handle(kit: KitPaths) -> GroupPipeline:
    """The server's handle on the kit's stack in the ranks, as a server that compiles sends it."""
    family = kit_family(kit.root)
    sources = family.files.resolve().require()
    spec = rank_spec(family, "node", sources, CPU_DTYPES, COMPILED)
    return GroupPipeline(family, spec, "node", sources)


def pixels(image: Any) -> np.ndarray[Any, np.dtype[np.int16]]:
    assert isinstance(image, Image.Image)
    return np.asarray(image.convert("RGB"), dtype=np.int16)


@dataclass
class CompilingGroup:
    """The module's group and its first split render (both ranks compiling)."""

    kit: KitPaths
    handle: GroupPipeline
    sampler: ParallelSampler
    break_flag: Path  # rank 1 loses its C++ compiler once this file exists
    first: SampleJob
    first_take: Any
    first_meta: dict[int, dict[str, Any]]


@pytest.fixture(scope="module")
def compiling_group(
    kit: KitPaths, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[CompilingGroup]:
    handle = compiled_handle(kit)
    flag = tmp_path_factory.mktemp("compile-fault") / "break-rank-1-compiler"
    config = group_config("compile_fault_runner:load", heartbeat_timeout_s=60.0)
    # A rank busy compiling (dynamo traces in Python) can miss the tests' 3 s heartbeat deadline
    # on a loaded CPU; the server's default is 10 s.
    config = replace(config, env={**config.env, BREAK_FLAG: str(flag)})
    sampler = ParallelSampler(config, retries=0)
    try:
        job = SampleJob(pipeline=handle, state=handle.request(**KW))
        take = sampler.run(job)
        yield CompilingGroup(kit, handle, sampler, flag, job, take, dict(sampler.last_meta))
    finally:
        sampler.close()


def test_the_ranks_compile_and_render_the_in_process_take(compiling_group: CompilingGroup) -> None:
    group = compiling_group
    # Only the roles that compile travel (none: the spec as without compile).
    assert group.handle.remote_spec().args["compile"] == {
        "denoiser": COMPILED["denoiser"].to_json()
    }
    # The in-process take, eager, at the ranks' thread count.
    expected = render_in_process(
        load_spec(kit_handle(group.kit.root).remote_spec()), group_config(), **KW
    )
    assert int(np.abs(pixels(group.first_take) - pixels(expected)).max()) <= 1
    # Both ranks ran the transformer's blocks compiled.
    assert group.first.compiled == [
        {"block": "ZImageTransformerBlock", "ran": "compiled", "ranks": 2}
    ]
    assert all(group.first_meta[rank]["engine"] == "cache-dit" for rank in (0, 1))


def test_a_rank_whose_compiler_is_missing_runs_eager_loudly(
    compiling_group: CompilingGroup, caplog: pytest.LogCaptureFixture
) -> None:
    group = compiling_group
    group.break_flag.touch()
    # Rank 1 has dropped its graphs: it compiles this render's blocks again and the compile
    # fails for real; rank 0 reuses the first render's graphs (same sizes, a new seed).
    kw: dict[str, Any] = {**KW, "seed": 6}
    expected = render_in_process(
        load_spec(kit_handle(group.kit.root).remote_spec()), group_config(), **kw
    )
    job = SampleJob(pipeline=group.handle, state=group.handle.request(**kw))
    with caplog.at_level(logging.WARNING, logger="inline_core.parallel.sampler"):
        got = group.sampler.run(job)
    # The pixels still equal eager: rank 1 ran its blocks eager, rank 0 compiled.
    assert int(np.abs(pixels(got) - pixels(expected)).max()) <= 1
    [note] = job.compiled
    assert note["ran"] == "eager" and note["failedRanks"] == [1] and note["ranks"] == 2, note
    error = str(note["error"])
    assert "InvalidCxxCompiler" in error and missing_compiler(group.break_flag) in error, error
    rank_notes = group.sampler.last_meta[0]["compile"]
    assert rank_notes == [{"block": "ZImageTransformerBlock", "ran": "compiled"}]
    # The server's log and health say so (health's `workerGroup` is the sampler's stats).
    [warning] = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert "rank(s) [1] could not compile ZImageTransformerBlock" in warning.getMessage()
    assert cast(list[dict[str, object]], group.sampler.stats()["compile"]) == [note]


def test_a_rank_whose_compile_failed_is_named_with_its_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # What two ranks send back when rank 1's C++ compiler is missing (`CompileBoard.all_notes`).
    failed = "InductorError: InvalidCxxCompiler: No working C++ compiler found"
    meta: dict[int, dict[str, Any]] = {
        0: {"compile": [{"block": "ZImageTransformerBlock", "ran": "compiled"}]},
        1: {"compile": [{"block": "ZImageTransformerBlock", "ran": "eager", "error": failed}]},
    }
    with caplog.at_level(logging.WARNING, logger="inline_core.parallel.sampler"):
        notes = ranks_compiled(meta)
    assert notes == [
        {
            "block": "ZImageTransformerBlock",
            "ran": "eager",
            "ranks": 2,
            "failedRanks": [1],
            "error": failed,
        }
    ]
    [warning] = caplog.records
    assert "rank(s) [1] could not compile ZImageTransformerBlock" in warning.getMessage()
    assert failed in warning.getMessage()
    assert ranks_compiled({0: {"engine": "cache-dit"}}) == []  # a group that compiles nothing
