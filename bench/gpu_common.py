"""What the full-size random-weight GPU scripts share: the weights they draw, the pairing of
server renders (`server_process.server_ms`, over HTTP) with bare-pipeline ones, and where results
go.

`gpu_flux2.py` and `gpu_krea2.py` run on it from end to end (`prepared` builds the model and
loads the bare pipeline, `measure` pairs the renders and reports them); `gpu_sdxl.py`,
`gpu_qwen_image.py` and `gpu_zimage.py` take their weights from `randomize`.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Generator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from server_process import server_ms, start_server

RESULTS = Path(__file__).resolve().parent / "results"


def base_parser(doc: str | None, steps: int) -> argparse.ArgumentParser:
    """The options every full-size GPU script takes: `--preset tiny --device cpu --size 64` is
    its smoke run on any machine."""
    parser = argparse.ArgumentParser(description=(doc or "").split("\n")[0])
    parser.add_argument("--preset", choices=("full", "tiny"), default="full")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=steps)
    parser.add_argument("--renders", type=int, default=2)
    parser.add_argument("--workdir", type=Path, default=None, help="keep the model folder here")
    return parser


def randomize(module: torch.nn.Module) -> None:
    """N(0, 0.02) for weight matrices and convolutions, norms left at one: activations stay
    finite in half precision through every layer of a full-size model."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            if p.ndim >= 2 or "pad_token" in name:
                p.normal_(0.0, 0.02)


def node_graph(node_type: str, prompt: str, params: dict[str, Any]) -> dict[str, Any]:
    """One prompt wired into one generator node `x` (the run's target)."""
    return {
        "schemaVersion": 1,
        "nodes": [
            {"id": "p", "type": "input/text", "params": {"text": prompt}},
            {
                "id": "x",
                "type": node_type,
                "params": params,
                "inputs": {"prompt": {"from": "p", "output": "text"}},
            },
        ],
    }


def timed_ms(call: Callable[[], object], device: str) -> float:
    """Wall time of `call`, waiting for the device's queue to drain."""
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    call()
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1000


def compare(
    work: Path,
    device: str,
    renders: int,
    graph: Callable[[int], dict[str, Any]],
    pipeline: Callable[[int], object],
) -> dict[str, Any]:
    """The server (its own process on `work/models`, the device policy's dtype and placement)
    and the bare pipeline render seed by seed, alternating; the first of each (it loads and
    warms) is reported apart and left out of the medians.

    On a CPU both processes share the cores and libgomp's threads spin at their barriers: run
    with GOMP_SPINCOUNT=0 in the environment (the server inherits it), or the pipeline's turn
    is starved (tiny FLUX.2 on 2 busy cores: 2.5 s a render against 0.05 s)."""
    env = {"INLINE_PROFILE": "" if device.startswith("cuda") else "cpu"}
    server = start_server(
        work / "models", work / "data", work / "server.log", env=env, timeout_s=600
    )
    ours: list[float] = []
    theirs: list[float] = []
    try:
        for seed in range(renders + 1):
            ours.append(server_ms(server, graph(seed)))
            theirs.append(timed_ms(functools.partial(pipeline, seed), device))
    finally:
        server.stop()
    server_med, pipeline_med = statistics.median(ours[1:]), statistics.median(theirs[1:])
    return {
        "server_ms": round(server_med, 1),
        "pipeline_ms": round(pipeline_med, 1),
        "ratio": round(server_med / pipeline_med, 3),
        "first_server_ms": round(ours[0], 1),
        "first_pipeline_ms": round(theirs[0], 1),
    } | (
        {"pipeline_peak_gb": round(torch.cuda.max_memory_allocated() / 2**30, 1)}
        if device.startswith("cuda")
        else {}
    )


@dataclass(frozen=True)
class Prepared:
    """A full-size script's run once its model is built and the bare pipeline loaded."""

    device: str
    preset: str
    size: int
    steps: int
    renders: int
    work: Path
    folder: Path  # the diffusers folder both sides load, in `work/models`
    built_s: float
    pipe: Any  # the bare diffusers pipeline on the device (bf16 on CUDA, else float32)


@contextmanager
def prepared(
    args: argparse.Namespace,
    prefix: str,
    build: Callable[[Path, str, str], Path],
    pipeline_class: str,
) -> Generator[Prepared]:
    """`base_parser`'s options put to work: the device checked, `build(models, preset, device)`
    timed in `--workdir` (else a temp folder named `prefix`, removed at the end), and diffusers'
    `pipeline_class` loaded from the folder it returns."""
    from inline_core.diffusion.libs import diffusers

    device, preset = str(args.device), str(args.preset)
    require_device(device)
    with workdir(args.workdir, prefix) as work:
        started = time.perf_counter()
        folder = build(work / "models", preset, device)
        built_s = time.perf_counter() - started
        dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
        pipe: Any = (
            getattr(diffusers(), pipeline_class)
            .from_pretrained(str(folder), dtype=dtype, local_files_only=True)
            .to(device)
        )
        pipe.set_progress_bar_config(disable=True)
        size, steps, renders = int(args.size), int(args.steps), int(args.renders)
        yield Prepared(device, preset, size, steps, renders, work, folder, built_s, pipe)


def measure(
    run: Prepared,
    stem: str,
    graph: Callable[[int], dict[str, Any]],
    pipeline: Callable[[int], object],
    **settings: object,
) -> Path:
    """`compare` on `run`, reported with its settings (`settings`: the script's own, after the
    size and steps) to bench/results/`stem`.json (`stem`_smoke.json for the tiny preset)."""
    row = {
        "preset": run.preset,
        "device": device_name(run.device),
        "size": run.size,
        "steps": run.steps,
        **settings,
        "build_s": round(run.built_s, 1),
        **compare(run.work, run.device, run.renders, graph, pipeline),
    }
    return report(stem + ("_smoke" if run.preset == "tiny" else ""), row)


@contextmanager
def workdir(given: Path | None, prefix: str) -> Generator[Path]:
    """`given`, or a temp folder removed at the end (a full-size model's folder is tens of GB)."""
    if given is not None:
        yield given
        return
    made = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield made
    finally:
        shutil.rmtree(made, ignore_errors=True)


def device_name(device: str) -> str:
    return torch.cuda.get_device_name() if device.startswith("cuda") else device


def report(stem: str, row: dict[str, Any]) -> Path:
    """Print `row` as a two-column table and write it to bench/results/`stem`.json (copied to
    $OUT when it is set)."""
    width = max(len(k) for k in row)
    for key, value in row.items():
        print(f"{key:<{width}}  {value}")
    return write_json(stem, row)


def write_json(stem: str, body: dict[str, Any]) -> Path:
    """Write `body` to bench/results/`stem`.json (copied to $OUT when it is set)."""
    path = RESULTS / f"{stem}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(body, indent=2) + "\n")
    if out := os.environ.get("OUT"):
        shutil.copy(path, Path(out) / path.name)
    return path


def require_device(device: str) -> None:
    """Refuse a CUDA run on a machine without one, with the smoke command to use instead."""
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit("no CUDA device: run on a GPU machine, or use --preset tiny --device cpu")
