"""A flow image family (Krea 2 or FLUX.2 klein) split across CPU ranks (cache-dit over gloo:
Ulysses, and Ring with the shared masked ring attention) against the same render in process.

Run by hand: `GOMP_SPINCOUNT=0 python bench/flow_split.py [--family krea-2|flux-2]
[--renders 3] [--sizes tiny,mid] [--ranks 2] [--steps 4] [--methods ulysses,ring]`.

The kit's random-weight base models at guidance 4.5 (two rows a forward: Krea 2 with a negative
prompt, FLUX.2 klein base with its empty one), CPU float32: tiny at 64x64; Krea 2's mid, an
8-layer, 768-wide transformer at 256x256 (`build_kit(size="mid")`; FLUX.2's kit has tiny only).
Each method is a row of its own, on a group of its own, in one run (side by side). The split side
is what a server with INLINE_PARALLEL=ulysses=N (or ring=N) sends: the weightless handle
(`engine/group.py`) to a worker group whose ranks rebuild the stack with the shared rank loader;
the in-process side is that loader's pipeline in this process, on the step loop, at this
process's threads and again at one rank's. The sides alternate seed by seed (`paired_renders.py`;
the first render of each, which loads, left out). Prints a table and writes
bench/results/<family>_split.json (krea2_split.json, flux2_split.json).

On CPU the ranks share the machine's cores (each gets cores / ranks threads), so a split is no
speed-up here: the figures are the split's cost (the exchange of every block's attention: Ulysses'
all-to-alls, or Ring's passes of keys and values, its attention in float32 a step at a time;
Krea 2's text fusion run whole on every rank) against the work it divides. GPU figures need a GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from paired_renders import paired  # noqa: E402

RESULTS = ROOT / "bench" / "results"
PROMPT = "a paper boat on a puddle after the rain"
SIZES = {"tiny": 64, "mid": 256}
DTYPES = {"text_encoder": "float32", "denoiser": "float32", "vae": "float32"}


def main() -> int:
    parser = argparse.ArgumentParser(
        description="A flow family split across CPU ranks vs in process"
    )
    parser.add_argument("--family", choices=sorted(SETUPS), default="krea-2")
    parser.add_argument("--renders", type=int, default=3)
    parser.add_argument("--sizes", default="tiny,mid")
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--methods", default="ulysses,ring")
    args = parser.parse_args()
    os.environ.setdefault("INLINE_PROFILE", "cpu")
    load_before = os.getloadavg()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.sizes.split(","):
            rows.extend(side_by_side(Path(tmp) / name, name, args))
    result = {
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "loadAverageBefore": [round(x, 2) for x in load_before],
            "loadAverageAfter": [round(x, 2) for x in os.getloadavg()],
        },
        "family": args.family,
        "ranks": args.ranks,
        "backend": "gloo",
        "engine": "cache-dit",
        "steps": args.steps,
        "guidance": 4.5,
        "rows": rows,
    }
    threads = f"{rows[0]['threads']} / {rows[0]['rank_threads']}" if rows else ""
    print(f"ms (median); in process at this process's threads / one rank's: {threads}")
    print(
        f"{'case':6} {'method':8} {'px':>4} {'split':>9} {'in process':>11} {'ratio':>7} "
        f"{'split':>9} {'in process, rank threads':>25} {'ratio':>7}"
    )
    for row in rows:
        print(
            f"{row['case']:6} {row['method']:8} {row['size']:>4} {row['split_ms']:>9} "
            f"{row['in_process_ms']:>11} {row['ratio']:>7} {row['split_again_ms']:>9} "
            f"{row['in_process_rank_threads_ms']:>25} {row['ratio_rank_threads']:>7}"
        )
    print(f"load average before/after: {load_before} / {os.getloadavg()}")
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"{args.family.replace('-', '')}_split.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


def side_by_side(work: Path, name: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    """One row per split method for the kit of size `name`, each on a group of its own."""
    import torch

    from inline_core.device.split import ParallelSpec
    from inline_core.engine.group import GroupPipeline, rank_spec
    from inline_core.parallel.config import GroupConfig
    from inline_core.parallel.runner import DEFAULT_RUNNER, resolve
    from inline_core.parallel.sampler import ParallelSampler
    from inline_core.parallel.settings import RankSettings
    from inline_core.sampling import SampleJob, StepLoopSampler

    family, node_type, model, extra = SETUPS[args.family](work / "models", name)
    sources = family.resolve(node_type, {"model": model}).require()
    handle = GroupPipeline(family, rank_spec(family, "node", sources, DTYPES), "node", sources)
    spec = handle.remote_spec()
    local: Any = resolve(spec.loader)(device="cpu", **spec.args)
    size = SIZES[name]
    request = {
        "prompt": PROMPT,
        "width": size,
        "height": size,
        "steps": args.steps,
        "guidance": 4.5,
        **extra,
    }
    threads = torch.get_num_threads()
    rows: list[dict[str, Any]] = []
    for method in args.methods.split(","):
        split = ParallelSpec.of(**{method: args.ranks})
        config = GroupConfig(
            RankSettings(split=split, runner=DEFAULT_RUNNER), env={"INLINE_PROFILE": "cpu"}
        )
        group = ParallelSampler(config)

        def split_ms(seed: int, group: ParallelSampler = group) -> float:
            began = time.perf_counter()
            group.run(SampleJob(handle, handle.request(**request, seed=seed)))
            return (time.perf_counter() - began) * 1000

        def against(loop_threads: int, split_ms: Any = split_ms) -> dict[str, Any]:
            """The split against the render in process, on a step loop started at
            `loop_threads` (its thread keeps the count set when it starts)."""
            torch.set_num_threads(loop_threads)
            loop = StepLoopSampler()

            def in_process_ms(seed: int) -> float:
                began = time.perf_counter()
                loop.run(SampleJob(local, local.request(**request, seed=seed)))
                return (time.perf_counter() - began) * 1000

            try:
                return paired(split_ms, in_process_ms, args.renders)
            finally:
                loop.close()
                torch.set_num_threads(threads)

        try:
            whole = against(threads)
            ranked = against(config.rank_threads())
            tokens = {rank: meta.get("attentionTokens") for rank, meta in group.last_meta.items()}
        finally:
            group.close()
        rows.append(
            {
                "case": name,
                "method": str(split),
                "size": size,
                "split_ms": whole["server_ms"],
                "in_process_ms": whole["pipeline_ms"],
                "ratio": whole["ratio"],
                "split_again_ms": ranked["server_ms"],
                "in_process_rank_threads_ms": ranked["pipeline_ms"],
                "ratio_rank_threads": ranked["ratio"],
                "threads": threads,
                "rank_threads": config.rank_threads(),
                "attention_tokens_per_rank": tokens,
            }
        )
    return rows


Setup = tuple[Any, str, str, dict[str, Any]]  # family, node type, model, the request's own fields


def krea2_setup(models: Path, name: str) -> Setup:
    from inline_core.families.krea2 import Krea2Family
    from inline_core.families.krea2.descriptor import NODE_TYPE
    from inline_core.families.krea2.kit import TEXT_LAYERS, build_kit
    from inline_core.models.catalog import Catalog

    kit = build_kit(models, name)
    family = Krea2Family(Catalog(kit.root), {})
    own = {"negative_prompt": "blurry", "text_layers": TEXT_LAYERS}  # the node's kit taps
    return family, NODE_TYPE, kit.diffusers_dir.name, own


def flux2_setup(models: Path, name: str) -> Setup:
    from inline_core.families.flux2 import Flux2Family
    from inline_core.families.flux2.descriptor import NODE_TYPE
    from inline_core.families.flux2.kit import build_kit
    from inline_core.models.catalog import Catalog

    if name != "tiny":
        raise SystemExit(f"FLUX.2's kit has no {name} size: --sizes tiny")
    kit = build_kit(models)
    family = Flux2Family(Catalog(kit.root), {})
    return family, NODE_TYPE, "flux2_klein_base_tiny.safetensors", {}  # guided above 1


SETUPS = {"krea-2": krea2_setup, "flux-2": flux2_setup}


if __name__ == "__main__":
    sys.exit(main())
