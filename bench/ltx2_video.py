"""LTX-2 through the real server, side by side in one run, each figure as a ratio.

    GOMP_SPINCOUNT=0 .venv/bin/python bench/ltx2_video.py [--sections overhead,first-bytes,rss]
                                     [--sizes tiny,mid] [--renders 4] [--rounds 2] [--threads N]

`bench/ltx2_tiny.py` times the node in this process (the runner and step loop, no HTTP) against
bare `LTX2Pipeline`; this one starts the server as a user does (`python -m inline_core.server`,
its own process: `wan_tiny.Server` with an `lightricks/ltx-2` node as `w`) and measures what
only a server shows. Models: the kit's random-weight LTX-2 folders (`inline-core kit --family
ltx2 --size tiny|mid`), written to a temporary folder, CPU float32. Sections:

- `overhead`: the server against bare `LTX2Pipeline` (diffusers' further guidance terms off, as
  the node runs without them: `ltx2_harness.reference`), `ltx2_tiny.RENDER` (32x32, 9 frames,
  4 steps, CFG on both streams), renders alternating seed by seed, first renders (loads) left
  out: server / bare medians per size (target: at most 1.05). The server writes an APNG and a
  WAV take; the bare call returns arrays.
- `first-bytes`: a 65-frame 64x64 render (2 steps, no guidance, MP4 with AAC), the stream
  `GET /v1/runs/{id}/media/w` read from submission beside the run's socket
  (`video_probes.first_bytes_once`): first MP4 bytes against the finished take.
- `rss`: the server process's peak RSS over a render at 64x64 (2 steps, no guidance, MP4) at 17,
  33 and 65 frames, each on a fresh server warmed by a 9-frame render and its peak reset
  (`/proc/PID/clear_refs`), beside the frames' own bytes (the decode holds one chunk's window)
  and the peak when the decode began (`samplingPeakMb`: what the sampling itself took).

GOMP_SPINCOUNT=0: with other work on the machine's cores, OpenMP threads spinning at barriers
steal from each other; the setting reaches this process's bare pipeline only if set before it
starts, and the server inherits it. Prints a table, writes bench/results/ltx2_video.json with the
load average at the start and the end.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))  # the tests' harness: the bare call the parity tests make
sys.path.insert(0, str(Path(__file__).resolve().parent))

from ltx2_tiny import RENDER, SIZES  # noqa: E402
from video_probes import first_bytes, rss_rows, sample_rss  # noqa: E402
from video_report import report  # noqa: E402
from wan_tiny import Case, Server  # noqa: E402
from wan_video import table  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "ltx2_video.json"
SECTIONS = ("overhead", "first-bytes", "rss")
SIDE = 64
RSS_FRAMES = (17, 33, 65)
FPS = RENDER["fps"]


class LTX2Server(Server):
    """The server with the case as a `lightricks/ltx-2` node `w` (its sound at `fps`)."""

    def graph(self, case: Case, seed: int) -> dict[str, Any]:
        params = {**case.render, "seed": seed, "model": case.model, "format": case.format}
        sound = RENDER["audio_guidance"] if case.guidance > 1 else 1.0
        params.update(fps=FPS, audio_guidance=sound)
        node = {
            "id": "w",
            "type": "lightricks/ltx-2",
            "params": params,
            "inputs": {"prompt": {"from": "p", "output": "text"}},
        }
        from tests.families.ltx2.ltx2_harness import PROMPT  # the bare call's

        text = {"id": "p", "type": "input/text", "params": {"text": PROMPT}}
        return {"schemaVersion": 1, "nodes": [text, node]}


def kit_models(sizes: list[str]) -> Path:
    from inline_core.families.ltx2.kit import write_kit

    models = Path(tempfile.mkdtemp(prefix="ltx2-video-")) / "models"
    for size in sizes:
        write_kit(models, size)
    return models


def overhead_case(size: str) -> Case:
    from inline_core.families.ltx2.kit import folder_name

    return Case(
        f"ltx2-{size}", folder_name(size), RENDER["width"], RENDER["height"],
        frames=RENDER["frames"], steps=RENDER["steps"], guidance=RENDER["guidance"],
    )  # fmt: skip


def video_case(frames: int, steps: int) -> Case:
    from inline_core.families.ltx2.kit import folder_name

    return Case(
        f"ltx2-tiny-{frames}f", folder_name("tiny"), SIDE, SIDE, frames=frames, steps=steps,
        guidance=1.0, format="mp4",
    )  # fmt: skip


# -- overhead -------------------------------------------------------------------------------------


def bench_overhead(models: Path, sizes: list[str], renders: int) -> dict[str, Any]:
    import torch

    from inline_core.diffusion.libs import diffusers
    from tests.families.ltx2.ltx2_harness import reference

    rows: list[dict[str, Any]] = []
    server = LTX2Server(models)
    try:
        for size in sizes:
            case = overhead_case(size)
            pipe: Any = diffusers().LTX2Pipeline.from_pretrained(
                str(models / "diffusion_models" / case.model),
                dtype=torch.float32,
                local_files_only=True,
            )
            pipe.set_progress_bar_config(disable=True)
            spec = {**RENDER, "model": case.model}

            def bare(seed: int, pipe: Any = pipe, spec: dict[str, Any] = spec) -> float:
                t0 = time.perf_counter()
                reference(pipe, seed=seed, **spec)
                return (time.perf_counter() - t0) * 1000

            def served(seed: int, case: Case = case) -> float:
                return server.render(case, seed)

            first = {"pipeline": bare(0), "server": served(0)}  # loads
            times: dict[str, list[float]] = {"pipeline": [], "server": []}
            for seed in range(1, renders + 1):
                sides = [("pipeline", bare), ("server", served)]
                for name, run in sides if seed % 2 else sides[::-1]:
                    times[name].append(run(seed))
            bare_ms, server_ms = (statistics.median(times[k]) for k in ("pipeline", "server"))
            rows.append(
                {
                    "case": case.name,
                    **case.render,
                    "pipelineMedianMs": round(bare_ms, 1),
                    "serverMedianMs": round(server_ms, 1),
                    "ratio": round(server_ms / bare_ms, 4),
                    "firstMs": {k: round(v, 1) for k, v in first.items()},
                    "ms": {k: [round(x, 1) for x in v] for k, v in times.items()},
                    "load": os.getloadavg()[0],
                }
            )
            del pipe
    finally:
        server.close()
    return {"rows": rows}


# -- first bytes and rss --------------------------------------------------------------------------


def bench_first_bytes(models: Path, rounds: int) -> dict[str, Any]:
    case = video_case(RSS_FRAMES[-1], steps=2)
    return first_bytes(LTX2Server(models), replace(case, frames=9), case, rounds)


def chunk_counts(models: Path) -> dict[int, int]:
    """How many chunks the kit's video VAE decodes each RSS frame count in (`decode.plan`)."""
    from inline_core.diffusion.libs import diffusers
    from inline_core.families.ltx2.decode import plan, receptive_reach
    from inline_core.families.ltx2.kit import folder_name

    folder = models / "diffusion_models" / folder_name("tiny") / "vae"
    vae: Any = diffusers().AutoencoderKLLTX2Video.from_pretrained(
        str(folder), local_files_only=True
    )
    reach, temporal = receptive_reach(vae), int(vae.temporal_compression_ratio)
    return {f: len(plan((f - 1) // temporal + 1, reach)) for f in RSS_FRAMES}


def bench_rss(models: Path, rounds: int) -> dict[str, Any]:
    samples = sample_rss(
        lambda: LTX2Server(models),
        video_case(9, 2),  # the model loaded, the heap warm
        lambda frames: video_case(frames, 2),
        RSS_FRAMES,
        rounds,
        at_decode=True,
    )
    rows = rss_rows(samples, SIDE, chunk_counts(models))
    return {"size": f"{SIDE}x{SIDE}", "rows": rows}


# -- the run --------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sections", default=",".join(SECTIONS))
    parser.add_argument("--sizes", default=",".join(SIZES))
    parser.add_argument("--renders", type=int, default=4, help="per side, overhead section")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="intra-op threads on both sides (this process's bare pipeline; OMP_NUM_THREADS "
        "for the servers); default: torch's own",
    )
    args = parser.parse_args()
    if args.threads is not None:  # as wan_video.py: equal threads, the server's own costs
        import torch

        os.environ["OMP_NUM_THREADS"] = str(args.threads)
        torch.set_num_threads(cast(int, args.threads))
    chosen = [s for s in cast(str, args.sections).split(",") if s]
    sizes = [s for s in cast(str, args.sizes).split(",") if s]
    if unknown := sorted(set(chosen) - set(SECTIONS)) + sorted(set(sizes) - set(SIZES)):
        parser.error(f"unknown {unknown}: sections {SECTIONS}, sizes {SIZES}")
    if os.environ.get("GOMP_SPINCOUNT") != "0":
        print("note: GOMP_SPINCOUNT is not 0 (see the docstring)", flush=True)
    models = kit_models(sorted(set(sizes) | {"tiny"}))
    load_start = os.getloadavg()
    rounds = cast(int, args.rounds)
    runners = {
        "overhead": lambda: bench_overhead(models, sizes, cast(int, args.renders)),
        "first-bytes": lambda: bench_first_bytes(models, rounds),
        "rss": lambda: bench_rss(models, rounds),
    }
    results: dict[str, Any] = {}
    for section in (s for s in SECTIONS if s in chosen):
        started = time.perf_counter()
        results[section] = runners[section]()
        print(f"{section}: {time.perf_counter() - started:.0f} s", flush=True)
    gomp, threads = os.environ.get("GOMP_SPINCOUNT"), args.threads
    report(
        table(results),
        results,
        cast(Path, args.out),
        load_start,
        30,
        gompSpincount=gomp,
        threads=threads,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
