"""Wan video through the server, measured side by side in one run, each figure as a ratio.

    .venv/bin/python bench/wan_video.py [--sections overhead,rss,first-bytes,batching]
                                        [--rounds 2] [--renders 6] [--models DIR] [--threads N]

Models (CPU, float32, random weights, written once into `--models` or a temporary folder): the
kit's tiny Wan 2.1 and Wan 2.2 TI2V diffusers folders, and a mid-size Wan 2.1 (`gpu_wan.py`'s
`mid` preset: a transformer of about 100M parameters on the kit's tiny UMT5, and the Wan 2.1
VAE at a third of its width). Each server is the real one; sections:

- `rss`: the server process's peak RSS over a render of the tiny Wan 2.1 at 256x256 (its frames
  weigh something beside a chunk's decode; one step, no guidance, MP4 take) at 17, 33 and 65
  frames: per frame count and round a fresh server, a
  one-frame render first (the model loaded, the heap warm), then its peak reset
  (`/proc/PID/clear_refs`) and the F-frame render. Beside each peak's growth over the 17-frame
  one, the frames' own growth (F x H x W x 3 bytes of uint8): the decode holds one chunk's
  activations at a time, so what grows with F should be the frames (and the take) only.
- `first-bytes`: a 65-frame render as `rss`'s (two steps), `GET /v1/runs/{id}/media/w` read from its
  submission beside the run's socket: when the first MP4 bytes came, when the stream ended (the
  take written), when the decode began (its first `decode` progress, else the last step) and when
  its last chunk was decoded: the share of the decode run before the first bytes (target: below a
  quarter) and first bytes over the finished take.
- `batching`: 8 concurrent tiny video renders (9 frames, 4 steps, guidance 4), batching on against
  off (`batching.compare`: two servers in this process, the off one with INLINE_MAX_BATCH=1,
  waves taking turns), for Wan 2.1 (48 px) and Wan 2.2 TI2V (64 px): throughput on / off.
- `overhead`: the server (its own process) against a bare `WanPipeline` call, renders alternating
  (`wan_tiny.bench_case`; run first, before anything else computes in this process), the tiny
  Wan 2.1 (48x32) and the mid model (64x64), 9 frames, 4 steps, guidance 4: server / bare
  medians (target: at most 1.05).

Run it at autogroup nice -15 on a shared machine (`echo -15 > /proc/self/autogroup` in its shell:
plain `nice` does not reach other sessions' processes). With other work on the cores, two
intra-op threads stall at OpenMP's barriers whenever one is descheduled, and that hit the bare
calls far more than the server's here (bare 0.5-8.5 s for one tiny render); `--threads 1` gives
every side one thread, so the comparison measures the server's own costs. Prints one table and
writes bench/results/wan_video.json, with the load average at the start and the end.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import batching  # noqa: E402
from video_probes import first_bytes, rss_rows, sample_rss  # noqa: E402
from video_report import report  # noqa: E402
from wan_tiny import CASES, Case, Server, bench_case  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "wan_video.json"
# The overhead's bare pipeline runs in this process, so it goes first: once the batching
# section's in-process servers have computed here, libgomp manages more threads than cores and
# every team in the process stops spinning (diffusion/threads.py), the bare calls with them.
SECTIONS = ("overhead", "rss", "first-bytes", "batching")
MID = "wan21_mid_random"
RSS_FRAMES = (17, 33, 65)
RSS_SIDE = 256  # the tiny Wan 2.1 at 256 px: its frames weigh something beside a chunk's decode
MID_SIDE = 64
BATCH_N = 8
BATCH_CASES: tuple[dict[str, Any], ...] = tuple(
    {
        "name": name,
        "node": "alibaba/wan",
        "model": model,
        "shapes": [(side, 4)],
        "params": {"frames": 9, "guidance": 4.0, "format": "png"},
        "maxN": BATCH_N,
    }
    for name, model, side in (
        ("wan2.1", "wan2.1_t2v_tiny_diffusers", 48),
        ("ti2v", "wan2.2_ti2v_tiny_diffusers", 64),
    )
)
WARM_SEED = 1_000_000  # never one of batching.compare's own seeds


def build_models(models: Path) -> None:
    from gpu_wan import build_model

    from inline_core.families.wan.kit import build_kit

    if not (models / "diffusion_models" / "wan2.1_t2v_tiny_diffusers").is_dir():
        build_kit(models, layouts=("diffusers",), variants=("t2v", "ti2v"))
    folder = models / "diffusion_models" / MID
    if not (folder / "model_index.json").is_file():
        print(json.dumps({"built": MID, **build_model(folder, "wan21", "mid", "cpu")}), flush=True)


def rss_case(frames: int) -> Case:
    """The tiny Wan 2.1 at RSS_SIDE, one step, no guidance, an MP4 take."""
    return Case(
        f"wan2.1-tiny-{frames}f", CASES[0].model, RSS_SIDE, RSS_SIDE, frames=frames, steps=1,
        guidance=1.0, format="mp4",
    )  # fmt: skip


def mid_case(frames: int, steps: int, guidance: float, fmt: str = "png") -> Case:
    return Case(
        f"wan2.1-mid-{frames}f", MID, MID_SIDE, MID_SIDE, frames=frames, steps=steps,
        guidance=guidance, format=fmt,
    )  # fmt: skip


# -- rss ------------------------------------------------------------------------------------------


def bench_rss(models: Path, rounds: int) -> dict[str, Any]:
    """Per frame count and round, a fresh server: a one-frame render loads the model and warms
    the heap, the peak is reset, then the render of F frames; its peak RSS against F."""
    samples = sample_rss(lambda: Server(models), rss_case(1), rss_case, RSS_FRAMES, rounds)
    chunks = {frames: (frames - 1) // 4 + 1 for frames in RSS_FRAMES}
    return {"size": f"{RSS_SIDE}x{RSS_SIDE}", "rows": rss_rows(samples, RSS_SIDE, chunks)}


# -- first bytes ----------------------------------------------------------------------------------


def bench_first_bytes(models: Path, rounds: int) -> dict[str, Any]:
    case = replace(rss_case(RSS_FRAMES[-1]), steps=2)
    return first_bytes(Server(models), case, case, rounds)  # the first render loads the model


# -- batching -------------------------------------------------------------------------------------


def bench_batching(models: Path, rounds: int) -> dict[str, Any]:
    servers = [
        batching.start_server("on", models, None, BATCH_N),
        batching.start_server("off", models, 1, BATCH_N),
    ]
    on, off = (batching.server_render(s) for s in servers)
    rows: list[dict[str, Any]] = []
    try:
        for case in BATCH_CASES:
            on(case, WARM_SEED)  # the model loaded and the kernels warm on both servers
            off(case, WARM_SEED)
            rows.append(batching.compare("server", case, BATCH_N, on, off, rounds, BATCH_N * 2))
        stats = {s.name: s.sampler_stats() for s in servers}
    finally:
        for server in servers:
            server.stop()
    return {"n": BATCH_N, "rows": rows, "samplerStats": stats}


# -- overhead -------------------------------------------------------------------------------------


def bench_overhead(models: Path, renders: int) -> dict[str, Any]:
    cases = [CASES[0], mid_case(9, 4, 4.0)]
    server = Server(models)
    try:
        rows = [bench_case(case, models, server, renders) for case in cases]
    finally:
        server.close()
    return {"rows": rows}


# -- the run --------------------------------------------------------------------------------------


def table(results: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(measure, figures, ratio) lines."""
    lines: list[tuple[str, str, str]] = []
    for r in results.get("overhead", {}).get("rows", []):
        figures = f"{r['serverMedianMs']:.1f} vs {r['pipelineMedianMs']:.1f} ms"
        lines.append((f"server vs bare: {r['case']}", figures, f"x{r['ratio']:.3f}"))
    for r in results.get("rss", {}).get("rows", []):
        measure = f"peak RSS, {r['frames']} frames ({r['chunks']} chunks)"
        growth = f"{r['growthMb']:+} MB over 17f; frames +{r['framesGrowthMb']} MB"
        lines.append((measure, f"{r['peakMb']} MB (before {r['beforeMb']})", growth))
    if "first-bytes" in results:
        m, frames = results["first-bytes"]["median"], results["first-bytes"]["frames"]
        figures = f"{m['firstByteS']:.2f} s vs take {m['streamEndS']:.2f} s"
        share = f"x{m['firstByteOverTake']:.3f}; decode share {m['decodeShareAtFirstByte']:.3f}"
        lines.append((f"first MP4 bytes, {frames} frames", figures, share))
    for r in results.get("batching", {}).get("rows", []):
        figures = f"img/s on {r['on']['imagesPerS']} off {r['off']['imagesPerS']}"
        ratio = f"on/off x{r['throughputRatio']}"
        lines.append((f"batching x{r['n']}: {r['case']}", figures, ratio))
    return lines


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sections", default=",".join(SECTIONS))
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--renders", type=int, default=6, help="per side, overhead section")
    parser.add_argument("--models", type=Path, default=None, help="reuse a models folder")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="intra-op threads on every side (this process's bare pipeline and in-process "
        "servers; OMP_NUM_THREADS for the server processes); default: torch's own",
    )
    args = parser.parse_args()
    if args.threads is not None:
        import torch

        os.environ["OMP_NUM_THREADS"] = str(args.threads)  # the servers started from here
        torch.set_num_threads(cast(int, args.threads))
    chosen = [s for s in cast(str, args.sections).split(",") if s]
    if unknown := sorted(set(chosen) - set(SECTIONS)):
        parser.error(f"unknown sections {unknown}; choose from {', '.join(SECTIONS)}")
    models = cast(Path | None, args.models) or Path(tempfile.mkdtemp(prefix="wan-video-"))
    build_models(models)
    load_start = os.getloadavg()
    rounds = cast(int, args.rounds)
    results: dict[str, Any] = {}
    runners = {
        "rss": lambda: bench_rss(models, rounds),
        "first-bytes": lambda: bench_first_bytes(models, rounds),
        "batching": lambda: bench_batching(models, rounds),
        "overhead": lambda: bench_overhead(models, cast(int, args.renders)),
    }
    for section in (s for s in SECTIONS if s in chosen):  # in their own order
        started = time.perf_counter()
        results[section] = runners[section]()
        print(f"{section}: {time.perf_counter() - started:.0f} s", flush=True)
    report(table(results), results, cast(Path, args.out), load_start, 36, threads=args.threads)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
