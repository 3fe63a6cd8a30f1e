"""A Z-Image render split over a worker group's CPU ranks, each rank's denoiser computing from
linear weights it packed for oneDNN at load (`engine/packing.py`, the policy's choice in
bfloat16), against the same split render unpacked (a runtime with `no_compile`, as `--no-compile`
sets it), side by side in one run, on the real-size random set of `bench/real_size_cpu.py`.

    .venv/bin/python bench/packed_split.py [--models DIR] [--renders 3] [--px 64] [--steps 4]
        [--ranks 2]

Two server runtimes, each with its own group of `--ranks` gloo ranks (cache-dit Ulysses), reached
through the render target a split render takes (`engine/target.py`). Each group is started and
loads its stack (timed: the packed ranks pack there), renders once to warm up, then `--renders`
rounds alternate the two groups (one computes at a time; the other's ranks only send their
heartbeats): a prompt change (the ranks encode the new prompt, the steps, rank 0 decodes) and a
seed-only render (the ranks keep the prompt's encoding). Each render's wall time from the job's
submission to the decoded take here, and rank 0's compute seconds. The takes of one prompt and
seed are compared pixel by pixel. The compute threads wait at barriers as the server's would
(`server/openmp.choose_wait`). Prints medians, ratios, each rank's packed bytes and `uptime` at
the start and the end; writes bench/results/packed_split.json.

What it can show: the packed weights' effect on a split render's ranks, each computing a shard of
the sequence (half the tokens under a two-way split: where `bench/cpu_matmul.py` measured packing
to pay most). What it cannot: the split's own worth on this CPU (the ranks share its cores, one
thread each, so a split is not faster than one process here), nor ranks on cores of their own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT), str(ROOT / "bench")]
OUT = ROOT / "bench" / "results" / "packed_split.json"

from packed_render import WAYS, print_head, render_parser, table_row  # noqa: E402 (the path)


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def main() -> int:
    parser = render_parser(__doc__)
    parser.add_argument("--ranks", type=int, default=2)
    args = parser.parse_args()

    from inline_core.server.openmp import choose_wait

    choose_wait()  # before torch loads (here and in the ranks, which inherit the environment)
    import numpy as np
    from real_size_cpu import build_set

    from inline_core.config import Config
    from inline_core.engine.runtime import ModelRuntime
    from inline_core.engine.target import RenderTarget, node_target
    from inline_core.families.zimage import ZImageFamily
    from inline_core.models.catalog import Catalog
    from inline_core.sampling import SampleJob, StepLoopSampler

    built = build_set(args.models)
    start_uptime = uptime()
    print(f"{os.cpu_count()} CPUs, {args.ranks} ranks; set built {built or 'kept'}")
    print(f"start: {start_uptime}")
    loop = StepLoopSampler()  # the runtimes' in-process loop: unused, every render is split

    def timed(target: RenderTarget, prompt: str, seed: int) -> dict[str, Any]:
        assert target.group is not None
        began = time.perf_counter()
        state = target.request(
            prompt=prompt, width=args.px, height=args.px, steps=args.steps, seed=seed, guidance=0.0
        )
        image = target.sampler.run(SampleJob(pipeline=target.pipeline, state=state))
        wall = time.perf_counter() - began
        meta = target.group.sampler.last_meta
        compute = meta[0]["computeS"]  # rank 0's compute seconds, as the ranks report them
        assert isinstance(compute, float), compute
        return {
            "wallS": wall,
            "computeS": compute,
            "packedBytes": [meta[rank].get("packedBytes") for rank in sorted(meta)],
            "pixels": np.asarray(image, dtype=np.int16),
        }

    with tempfile.TemporaryDirectory(prefix="packed-split-") as data:
        runtimes = {
            way: ModelRuntime(
                Config(
                    models_dir=args.models,
                    data_dir=Path(data) / way,
                    profile="cpu",
                    dtype="bfloat16",
                    parallel=f"ulysses={args.ranks}",
                    no_compile=way == "eager",
                ),
                loop,
            )
            for way in WAYS
        }
        family = ZImageFamily(Catalog(args.models), {})
        sources = family.files.resolve().require()
        try:
            chosen = {w: r.packed_linear_choice(family).to_json() for w, r in runtimes.items()}
            assert chosen["packed"]["enabled"] and not chosen["eager"]["enabled"], chosen
            targets = {w: node_target(r, family, sources) for w, r in runtimes.items()}
            start_s: dict[str, float] = {}
            for way in WAYS:  # one after the other: a loading group has the cores to itself
                began = time.perf_counter()
                targets[way].start()
                start_s[way] = round(time.perf_counter() - began, 2)
            first = {w: timed(t, "a lighthouse", 1) for w, t in targets.items()}
            prompt_change: dict[str, list[dict[str, Any]]] = {w: [] for w in WAYS}
            seed_only: dict[str, list[dict[str, Any]]] = {w: [] for w in WAYS}
            diffs: list[int] = []
            for i in range(args.renders):
                order = WAYS if i % 2 == 0 else WAYS[::-1]  # neither always goes first
                for way in order:  # the same prompt and seed each way
                    prompt = f"a lighthouse on a cliff at dusk, study {i}"
                    prompt_change[way].append(timed(targets[way], prompt, 100 + i))
                for way in order:
                    seed_only[way].append(timed(targets[way], "a lighthouse", 200 + i))
                for runs in (prompt_change, seed_only):
                    pair = [runs[w][-1]["pixels"] for w in WAYS]
                    diffs.append(int(np.abs(pair[0] - pair[1]).max()))
        finally:
            for runtime in runtimes.values():
                runtime.close()
            loop.close()
    end_uptime = uptime()
    keys = ("wallS", "computeS")
    print_head(keys)
    rows = [
        table_row(name, runs, keys)
        for name, runs in (("prompt change", prompt_change), ("seed only", seed_only))
    ]
    packed = {w: first[w]["packedBytes"] for w in WAYS}
    print(f"group start and load s: {start_s}")
    print(f"packed bytes per rank: {packed}; max pixel diff eager vs packed: {max(diffs)}")
    print(f"start: {start_uptime}\nend:   {end_uptime}")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    body = {
        "command": " ".join(sys.argv),
        "cpus": os.cpu_count(),
        "ranks": args.ranks,
        "px": args.px,
        "steps": args.steps,
        "renders": args.renders,
        "uptime": {"start": start_uptime, "end": end_uptime},
        "ompWaitPolicy": os.environ.get("OMP_WAIT_POLICY"),
        "choices": chosen,
        "groupStartS": start_s,
        "firstRenderS": {w: round(f["wallS"], 2) for w, f in first.items()},
        "packedBytesPerRank": packed,
        "rows": rows,
        "maxPixelDiff": max(diffs),
    }
    OUT.write_text(json.dumps(body, indent=2) + "\n")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
