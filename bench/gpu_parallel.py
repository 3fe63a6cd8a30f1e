"""One Z-Image render split across the GPUs present: xDiT (xfuser) and cache-dit over NCCL.

    .venv/bin/python bench/gpu_parallel.py [--model DIFFUSERS_DIR] [--size 1024] [--steps 8]

For every split the GPUs allow (Ulysses degrees dividing the heads, Ring, their product = ranks) and
every engine that imports (xfuser, cache-dit), it starts a resident worker group (NCCL ranks, one
GPU each), renders, and compares with the single-GPU in-process render: time per render, speed-up,
and the largest pixel difference. Without `--model` it builds the kit's ~110M "mid" model (random
weights: the timings are real, the pictures are noise). Every configuration that fails is recorded
with its error; the script always writes bench/results/gpu_parallel.json.

With one GPU (or `--share-gpu`), two ranks share GPU 0 and talk over gloo, which stages CUDA
tensors through host memory (NCCL refuses two ranks on one device). That checks the split itself
on CUDA (each rank's attention sees its shard, the picture matches one process); its times are
not a speed-up, and the table says so.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import traceback
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from inline_core.device.split import ParallelSpec
from inline_core.engine.group import GroupPipeline, rank_spec
from inline_core.families.zimage import ZImageFamily
from inline_core.models.catalog import Catalog
from inline_core.parallel.config import GroupConfig
from inline_core.parallel.protocol import Json
from inline_core.parallel.runner import WorkerContext, resolve
from inline_core.parallel.sampler import ParallelSampler
from inline_core.parallel.settings import RankSettings
from inline_core.parallel.step_runner import StepLoopRunner, load_step_runner
from inline_core.sampling import SampleJob, StepLoopSampler

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
OUT = RESULTS / "gpu_parallel.json"
SHARED_GPU_RUNNER = "gpu_parallel:load_shared_gpu_runner"


def load_shared_gpu_runner(context: WorkerContext, args: Mapping[str, Json]) -> StepLoopRunner:
    """The step runner with every rank on GPU 0 (the group's ranks are gloo, hence "cpu")."""
    return load_step_runner(replace(context, device="cuda:0", local_rank=0), args)


def splits_for(gpus: int, heads: int) -> list[ParallelSpec]:
    """Every exact split of `gpus` ranks: Ulysses (degree divides the heads), Ring, and hybrids."""
    out: list[ParallelSpec] = []
    for ulysses in range(1, gpus + 1):
        if gpus % ulysses or heads % ulysses:
            continue
        ring = gpus // ulysses
        degrees = {k: v for k, v in (("ulysses", ulysses), ("ring", ring)) if v > 1}
        out.append(ParallelSpec.of(**degrees))
    return out


def render(run: Any, pipe: Any, kw: dict[str, Any], repeats: int) -> tuple[Any, float]:
    run(SampleJob(pipeline=pipe, state=pipe.request(**kw)))  # warm-up (kernels, allocator)
    times: list[float] = []
    image: Any = None
    for _ in range(repeats):
        torch.cuda.synchronize()
        began = time.perf_counter()
        image = run(SampleJob(pipeline=pipe, state=pipe.request(**kw)))
        torch.cuda.synchronize()
        times.append(time.perf_counter() - began)
    return image, statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description="split one Z-Image render across GPUs")
    parser.add_argument("--model", type=Path, help="a Z-Image diffusers folder (default: mid kit)")
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--start-timeout", type=float, default=900.0)
    parser.add_argument("--share-gpu", action="store_true", help="2 gloo ranks on GPU 0")
    parser.add_argument("--engines", default="xfuser,cache-dit")
    args = parser.parse_args()
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    result: dict[str, Any] = {
        "machine": {
            "platform": platform.platform(),
            "torch": torch.__version__,
            "gpus": [torch.cuda.get_device_name(i) for i in range(gpus)],
            "xfuser": importlib.util.find_spec("xfuser") is not None,
            "cacheDit": importlib.util.find_spec("cache_dit") is not None,
        },
        "size": args.size,
        "steps": args.steps,
        "runs": [],
    }
    RESULTS.mkdir(exist_ok=True)
    args.share_gpu = args.share_gpu or gpus == 1
    result["sharedGpu"] = args.share_gpu
    if gpus == 0:
        result["skipped"] = "no GPU"
        OUT.write_text(json.dumps(result, indent=2) + "\n")
        print(result["skipped"])
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.model
        if folder is None:
            from inline_core.families.zimage.kit import build_kit

            kit = build_kit(Path(tmp), "mid", layouts=("diffusers",), dtype=args.dtype)
            folder = kit.diffusers_dir
        assert folder is not None
        result["model"] = str(args.model or "kit:mid")
        _run_all(result, Path(folder), gpus, args)
    OUT.write_text(json.dumps(result, indent=2) + "\n")
    return 0


def zimage_handle(folder: Path, dtype: str) -> GroupPipeline:
    """The server's handle on the Z-Image stack in `folder` in the ranks (its spec says how every
    rank rebuilds it)."""
    family = ZImageFamily(Catalog(folder.parent), {"INLINE_ZIMAGE_MODEL": str(folder)})
    sources = family.files.resolve().require()
    dtypes = {role: dtype for role in ("text_encoder", "denoiser", "vae")}
    return GroupPipeline(family, rank_spec(family, "node", sources, dtypes), "node", sources)


def _run_all(result: dict[str, Any], folder: Path, gpus: int, args: argparse.Namespace) -> None:
    handle = zimage_handle(folder, args.dtype)
    spec = handle.remote_spec()
    # The single-GPU reference, built by the loader the ranks use.
    pipe: Any = resolve(spec.loader)(device="cuda:0", **spec.args)
    heads = int(pipe.denoiser.transformer.config.n_heads)
    kw: dict[str, Any] = {
        "prompt": "a lighthouse on a cliff at dusk",
        "width": args.size,
        "height": args.size,
        "steps": args.steps,
        "guidance": 0.0,
        "seed": 42,
    }
    loop = StepLoopSampler(device="cuda")
    try:
        reference, single_s = render(loop.run, pipe, kw, args.repeats)
    finally:
        loop.close()
    result["singleGpuS"] = round(single_s, 4)
    print(f"single GPU: {single_s * 1000:.1f} ms per {args.size}px x {args.steps} steps")
    wanted = args.engines.split(",")
    engines = [e for e in wanted if importlib.util.find_spec(e.replace("-", "_"))]
    for ranks in [2] if args.share_gpu else range(2, gpus + 1):
        for split in splits_for(ranks, heads):
            for engine in engines:
                run = _one(handle, kw, reference, single_s, split, engine, args)
                result["runs"].append(run)
                OUT.write_text(json.dumps(result, indent=2) + "\n")  # keep what we have so far
                print(json.dumps(run))


def _one(
    pipe: GroupPipeline,
    kw: dict[str, Any],
    reference: Any,
    single_s: float,
    split: ParallelSpec,
    engine: str,
    args: argparse.Namespace,
) -> dict[str, Any]:
    run: dict[str, Any] = {"split": str(split), "engine": engine, "ranks": split.world_size}
    if args.share_gpu:  # gloo ranks on GPU 0, loading through this file's runner
        ranks = RankSettings(split=split, backend="gloo", engine=engine, runner=SHARED_GPU_RUNNER)
        path = os.pathsep.join(p for p in (str(HERE), os.environ.get("PYTHONPATH")) if p)
        env = {"CUDA_VISIBLE_DEVICES": "0", "PYTHONPATH": path}
    else:
        ranks = RankSettings(split=split, backend="nccl", engine=engine)
        env = {"CUDA_VISIBLE_DEVICES": ",".join(str(i) for i in range(split.world_size))}
    config = GroupConfig(
        ranks, start_timeout_s=args.start_timeout, heartbeat_timeout_s=60.0, env=env
    )
    sampler = ParallelSampler(config, retries=0)
    try:
        began = time.perf_counter()
        sampler.start(pipe.remote_spec())
        run["startS"] = round(time.perf_counter() - began, 2)
        times: list[float] = []
        image: Any = None
        sampler.run(SampleJob(pipeline=pipe, state=pipe.request(**kw)))  # warm-up
        for _ in range(args.repeats):
            began = time.perf_counter()
            image = sampler.run(SampleJob(pipeline=pipe, state=pipe.request(**kw)))
            times.append(time.perf_counter() - began)
        seconds = statistics.median(times)
        diff = np.abs(np.asarray(image).astype(int) - np.asarray(reference).astype(int))
        meta = sampler.last_meta
        run.update(
            {
                "renderS": round(seconds, 4),
                "speedup": None if args.share_gpu else round(single_s / seconds, 3),
                "rank0ComputeS": meta[0].get("computeS"),
                "maxPixelDiff": int(diff.max()),
                "meanPixelDiff": round(float(diff.mean()), 4),
                "attentionTokens": {str(r): m.get("attentionTokens") for r, m in meta.items()},
            }
        )
    except Exception as exc:  # record and go on to the next configuration
        run["error"] = f"{type(exc).__name__}: {exc}"
        run["trace"] = traceback.format_exc(limit=5)
    finally:
        sampler.close()
    return run


if __name__ == "__main__":
    os.environ.setdefault("INLINE_PROFILE", "gpu-max")
    sys.exit(main())
