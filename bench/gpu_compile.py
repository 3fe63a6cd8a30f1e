"""Compiled blocks against eager on one GPU at 1024 px, per family whose transformer blocks
compile (Z-Image, Wan), random weights at real size: two servers side by side, one compiling.

Run on a GPU machine: `python bench/gpu_compile.py [--families zimage,wan] [--size 1024]
[--steps 8] [--renders 3] [--frames 17] [--bare] [--fp8] [--fa3] [--workdir DIR]`. Needs nothing
from the network: it writes its own random-weight models (`gpu_zimage.build_model`: Z-Image
Turbo's 6.2B transformer, the FLUX VAE, a real-width 2-layer Qwen3; `gpu_wan.build_model`: Wan
2.1 1.3B's transformer and VAE, a real-width 2-layer UMT5), bf16, one diffusers folder each.

Per family, two servers on the same folder, resident side by side: one eager (`INLINE_NO_COMPILE`),
one compiling (`INLINE_COMPILE`: the transformer's blocks, and the VAE decoder's for Z-Image),
each with its own data folder, inductor's and Triton's caches empty in it. Renders go to one then
the other (never both at once; the order swaps each round), so both see the same machine:
- first render: the compiling server's pays its compile with nothing cached (cold), the eager
  one's its load and first kernels;
- seed only (`--renders` each way): the prompt of the first render, a new seed (its encode
  cached: the steps, the decode and the take);
- prompt change: a new prompt each render (its encode too);
- restart: both servers start again on their data folders (the compile cache kept) and render
  once more: the compiling server's first render with its cache kept.
The takes of one seed and prompt are compared pixel by pixel (every frame of a video), and the
compiling server's health says how its blocks ran (graphs, compile seconds, state).

`--bare` adds one transformer forward at the render's size in this process (after the servers
stop): bf16 eager against its blocks compiled (float32 on a CPU). `--fp8` adds torchao's dynamic
FP8 linear layers (eager and compiled; quality: max and relative RMS difference from bf16),
`--fa3` flash-attention 3 (diffusers' `_flash_3` backend; difference from torch's SDPA): both
opt-in, both refused with the device policy's reason where the GPU cannot run them
(`device/kernels.py`); a kernel the model itself refuses (FA3 takes no attention mask) gives a
row with its error, the others still run.

What does not fit is refused before anything starts: the full preset on a CPU, a size not a
multiple of 16, a Wan frame count not 4k+1, two servers' weights and activations beyond the GPU's
free memory. `GOMP_SPINCOUNT=0 ... --device cpu --preset tiny --size 64 --steps 2 --renders 1`
smoke-tests it anywhere on the families' tiny shapes. Prints a table per family; results:
bench/results/gpu_compile.json (`_zimage` or `_wan` added for one family; a smoke run adds
`_smoke`), copied to $OUT. On a lent GPU with a 10-minute limit a call, run one family a call on
one `--workdir` (`--families zimage --bare --fp8`, then `--families wan --bare --fp8 --fa3`).
"""

from __future__ import annotations

import io
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image, ImageSequence

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import gpu_wan  # noqa: E402
import gpu_zimage  # noqa: E402
from gpu_common import (  # noqa: E402
    base_parser,
    device_name,
    node_graph,
    require_device,
    timed_ms,
    workdir,
    write_json,
)
from server_process import ServerProcess, server_run, start_server, take_bytes  # noqa: E402

from inline_core.device.detect import detect_hardware  # noqa: E402
from inline_core.device.kernels import (  # noqa: E402
    FA3_MODULE,
    fa3_choice,
    fp8_choice,
    installed,
)

FAMILIES = ("zimage", "wan")
NODE_TYPES = {"zimage": "alibaba/z-image-turbo", "wan": "alibaba/wan"}
PROMPT = "a lighthouse on a cliff at dusk, oil painting"
GIB = 2**30
# What one server holds beyond its weights at 1024 px in bf16 (the activations of a forward, the
# VAE decode's peak, the allocator's slack), by family: a bound for the fit check, not a figure.
MARGIN_GIB = {"zimage": 12.0, "wan": 4.0}
WAN_MARGIN_PER_LATENT_FRAME_GIB = 3.0  # Wan's causal VAE decode grows with the frames


def refuse_what_does_not_fit(args: Any) -> None:
    """Stop before building anything the machine or the models cannot take, saying why."""
    device, preset, size = str(args.device), str(args.preset), int(args.size)
    if not device.startswith("cuda") and preset == "full":
        raise SystemExit(
            "the full preset is real-size models (Z-Image 6.2B, Wan 1.3B) at 1024 px: GPU work. "
            "On a CPU run --preset tiny (bench/compile_render.py measures the real-size set on a "
            "CPU)"
        )
    if size % 16:
        raise SystemExit(f"--size {size}: both families need a multiple of 16 (VAE 8 x patch 2)")
    if (int(args.frames) - 1) % 4:
        raise SystemExit(f"--frames {args.frames}: Wan's VAE takes 4k+1 frames (5, 9, 17, 81)")
    unknown = sorted(set(args.families) - set(FAMILIES))
    if unknown:
        raise SystemExit(f"--families: {unknown} unknown; the block compile applies to {FAMILIES}")
    kind = "cuda" if device.startswith("cuda") else "cpu"
    hardware = detect_hardware()
    for flag, choice in (
        ("--fp8", fp8_choice(hardware, kind, torchao=installed("torchao"))),
        ("--fa3", fa3_choice(hardware, kind, module=installed(FA3_MODULE))),
    ):
        if getattr(args, flag[2:]) and not choice.available:
            raise SystemExit(f"{flag} cannot run here: {choice.reason}")


def weights_gib(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.rglob("*.safetensors")) / GIB


def check_gpu_fits(family: str, folder: Path, args: Any) -> dict[str, float]:
    """Two servers' weights and margins against the GPU's free memory (a CPU is not checked:
    the tiny preset is all it runs)."""
    weights = weights_gib(folder)
    margin = MARGIN_GIB[family]
    if family == "wan":
        margin += WAN_MARGIN_PER_LATENT_FRAME_GIB * ((int(args.frames) - 1) // 4 + 1)
    need = 2 * (weights + margin)
    if not str(args.device).startswith("cuda"):
        return {"weightsGib": round(weights, 2), "needGib": round(need, 1)}
    free, total = torch.cuda.mem_get_info()
    if need > free / GIB:
        raise SystemExit(
            f"{family} at {args.size} px does not fit: two servers need about {need:.0f} GiB "
            f"({weights:.1f} GiB of weights and {margin:.0f} GiB of activations each), the GPU has "
            f"{free / GIB:.0f} of {total / GIB:.0f} GiB free; lower --size or --frames"
        )
    return {"weightsGib": round(weights, 2), "needGib": round(need, 1), "freeGib": free / GIB}


def build(family: str, models: Path, preset: str, device: str) -> Path:
    """The family's random-weight diffusers folder (kept in `--workdir` between runs)."""
    for category in ("diffusion_models", "vae", "text_encoders"):
        (models / category).mkdir(parents=True, exist_ok=True)
    folder = models / "diffusion_models" / f"{family}_{preset}_compile_random"
    if not (folder / "model_index.json").is_file():
        if family == "zimage":
            gpu_zimage.build_model(folder, preset, device)
        else:
            gpu_wan.build_model(folder, "wan21", preset, device)
    return folder


def graph(family: str, folder: Path, args: Any, prompt: str, seed: int) -> dict[str, Any]:
    size = int(args.size)
    params: dict[str, Any] = {"width": size, "height": size, "steps": int(args.steps)}
    params |= {"seed": seed, "model": folder.name}
    if family == "wan":  # a lossless APNG take, every frame compared
        params |= {"frames": int(args.frames), "format": "png"}
    else:
        params |= {"guidance": 0.0}  # Turbo's distilled setting
    return node_graph(NODE_TYPES[family], prompt, params)


def frames(data: bytes) -> np.ndarray[Any, np.dtype[np.int16]]:
    with Image.open(io.BytesIO(data)) as image:
        return np.stack(
            [np.asarray(f.convert("RGB"), dtype=np.int16) for f in ImageSequence.Iterator(image)]
        )


class Side:
    """One server (eager or compiling) on its own data folder."""

    def __init__(self, way: str, work: Path, family: str, device: str) -> None:
        self.way, self.work, self.family, self.device = way, work, family, device
        self.data = work / f"data-{family}-{way}"
        self.server: ServerProcess | None = None
        self.starts = 0

    def start(self) -> None:
        cuda = self.device.startswith("cuda")
        env = {
            "INLINE_PROFILE": "" if cuda else "cpu",  # the policy decides on a GPU
            "TORCHINDUCTOR_CACHE_DIR": str(self.data / "compile-cache"),  # empty at first
            "TRITON_CACHE_DIR": str(self.data / "triton-cache"),
            ("INLINE_COMPILE" if self.way == "compiled" else "INLINE_NO_COMPILE"): "1",
        }
        self.starts += 1
        log = self.work / f"{self.family}-{self.way}-{self.starts}.log"
        models = self.work / "models"
        self.server = start_server(models, self.data, log, env=env, clean_env=True, timeout_s=900)

    def render(self, body: dict[str, Any]) -> tuple[float, str]:
        assert self.server is not None
        return server_run(self.server, body)

    def take(self, run_id: str) -> np.ndarray[Any, np.dtype[np.int16]]:
        assert self.server is not None
        return frames(take_bytes(self.server, run_id))

    def health(self) -> dict[str, Any]:
        import httpx

        assert self.server is not None
        return httpx.get(self.server.base + "/v1/health", timeout=30).json()

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None


def side_by_side(family: str, folder: Path, work: Path, args: Any) -> dict[str, Any]:
    """The render rows of one family (see the module docstring)."""
    device = str(args.device)
    sides = {way: Side(way, work, family, device) for way in ("eager", "compiled")}
    ms: dict[str, dict[str, list[float]]] = {
        way: {"seedOnly": [], "promptChange": []} for way in sides
    }
    first: dict[str, float] = {}
    diffs: list[int] = []
    try:
        for side in sides.values():
            side.start()
        for way in ("compiled", "eager"):  # the compile's cold cost, then eager's first
            first[way] = sides[way].render(graph(family, folder, args, PROMPT, 0))[0]
        for i in range(int(args.renders)):
            order = ("eager", "compiled") if i % 2 == 0 else ("compiled", "eager")
            runs = {
                way: sides[way].render(graph(family, folder, args, PROMPT, 1 + i)) for way in order
            }
            for way, (took, _) in runs.items():
                ms[way]["seedOnly"].append(took)
            takes = {way: sides[way].take(run_id) for way, (_, run_id) in runs.items()}
            diffs.append(int(np.abs(takes["eager"] - takes["compiled"]).max()))
            new_prompt = f"{PROMPT}, study {i}"
            for way in order:
                body = graph(family, folder, args, new_prompt, 100 + i)
                ms[way]["promptChange"].append(sides[way].render(body)[0])
        health = sides["compiled"].health()
    finally:
        for side in sides.values():
            side.stop()
    kept: dict[str, float] = {}
    try:  # a restart: the compile cache kept in the data folder
        for way in ("compiled", "eager"):
            sides[way].start()
            kept[way] = sides[way].render(graph(family, folder, args, PROMPT, 9999))[0]
            sides[way].stop()
    finally:
        for side in sides.values():
            side.stop()
    row: dict[str, Any] = {"family": family}
    for case in ("seedOnly", "promptChange"):
        eager, compiled = (statistics.median(ms[way][case]) for way in ("eager", "compiled"))
        row[case] = {
            "eagerMs": round(eager, 1),
            "compiledMs": round(compiled, 1),
            "speedup": round(eager / compiled, 3),
        }
    row["firstRender"] = {
        "coldCompiledMs": round(first["compiled"], 1),
        "coldEagerMs": round(first["eager"], 1),
        "keptCompiledMs": round(kept["compiled"], 1),
        "keptEagerMs": round(kept["eager"], 1),
    }
    row["maxPixelDiff"] = max(diffs)
    residency = health.get("models", {}).get("residency", {})
    row["compile"] = residency.get("compile")
    device_health = health.get("device", {})
    row["policy"] = {key: device_health.get(key) for key in ("compile", "attention", "fp8", "fa3")}
    return row


def bare_forward(family: str, folder: Path, args: Any) -> tuple[Any, Callable[[], Any]]:
    """The family's transformer from `folder` in bf16 (float32 on a CPU) and one forward of the
    render's size (Z-Image: a 48-token prompt; Wan: `--frames`, the prompt padded to 512)."""
    from inline_core.diffusion.libs import diffusers

    device, size = torch.device(str(args.device)), int(args.size)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    generator = torch.Generator().manual_seed(0)
    side = size // 8
    name = "ZImageTransformer2DModel" if family == "zimage" else "WanTransformer3DModel"
    model: Any = getattr(diffusers(), name).from_pretrained(
        str(folder), subfolder="transformer", torch_dtype=dtype, local_files_only=True
    )
    model = model.to(device).eval()
    if family == "zimage":
        latents = [torch.randn(16, 1, side, side, generator=generator).to(device, dtype)]
        width = int(model.config.cap_feat_dim)
        prompt = [
            torch.randn(gpu_zimage.CAPTION_TOKENS, width, generator=generator).to(device, dtype)
        ]
        t = torch.full((1,), 0.5, device=device, dtype=dtype)

        def call() -> Any:
            return torch.stack(model(latents, t, prompt, return_dict=False)[0])

        return model, call
    from inline_core.families.wan.request import MAX_PROMPT_TOKENS

    latent_frames = (int(args.frames) - 1) // 4 + 1
    video = torch.randn(1, 16, latent_frames, side, side, generator=generator).to(device, dtype)
    text = int(model.config.text_dim)
    words = torch.randn(1, MAX_PROMPT_TOKENS, text, generator=generator).to(device, dtype)
    step = torch.full((1,), 500.0, device=device, dtype=dtype)

    def call_wan() -> Any:
        return model(video, step, words, return_dict=False)[0]

    return model, call_wan


def kernel_rows(family: str, folder: Path, args: Any) -> list[dict[str, Any]]:
    """One forward each way (`--bare`, `--fa3`, `--fp8`): median ms of `--renders` + 1 calls
    (the first, which compiles, apart), and each output's difference from bf16 eager."""
    from inline_core.device.compile import CompileChoice
    from inline_core.diffusion.compile.regional import compile_blocks

    device = str(args.device)
    model, call = bare_forward(family, folder, args)
    calls = int(args.renders) + 1

    def measure(label: str, compiled: bool, reference: Any | None) -> tuple[dict[str, Any], Any]:
        out: list[Any] = []
        stance = "default" if compiled else "force_eager"

        def once() -> None:
            with torch.inference_mode(), torch.compiler.set_stance(stance):
                out.append(call().float())

        times = [timed_ms(once, device) for _ in range(calls)]
        row: dict[str, Any] = {
            "family": family,
            "forward": label,
            "firstMs": round(times[0], 1),
            "ms": round(statistics.median(times[1:]), 1),
        }
        if reference is not None:
            delta = out[-1] - reference
            row["maxAbsDiff"] = float(delta.abs().max())
            row["relRmsDiff"] = float(delta.pow(2).mean().sqrt() / reference.pow(2).mean().sqrt())
        return row, out[-1]

    rows: list[dict[str, Any]] = []
    base = "bf16" if device.startswith("cuda") else "fp32"  # bare_forward's dtype
    eager_row, reference = measure(f"{base} eager", False, None)
    rows.append(eager_row)
    compile_blocks(model, f"{family} bare", CompileChoice(True, "bench"))
    rows.append(measure(f"{base} compiled", True, reference)[0])

    def attempt(kernel: str, prepare: Callable[[], None], undo: Callable[[], None]) -> None:
        """Both rows of `kernel`, or one row with the error where this model or GPU refuses it
        (FA3 takes no attention mask, which Z-Image passes): the other rows still count."""
        try:
            prepare()
            rows.append(measure(f"{kernel} eager", False, reference)[0])
            rows.append(measure(f"{kernel} compiled", True, reference)[0])
        except Exception as exc:  # noqa: BLE001 - said in the table and the JSON, not hidden
            rows.append({"family": family, "forward": kernel, "error": f"{exc!r}"[:400]})
        finally:
            undo()

    if args.fa3:
        attempt(
            "fa3", lambda: model.set_attention_backend("_flash_3"), model.reset_attention_backend
        )
    if args.fp8:

        def to_fp8() -> None:
            from torchao.quantization import (  # pyright: ignore[reportMissingImports]
                Float8DynamicActivationFloat8WeightConfig,
                PerRow,
                quantize_,
            )

            quantize_(model, Float8DynamicActivationFloat8WeightConfig(granularity=PerRow()))

        attempt("fp8", to_fp8, lambda: None)  # the last rows: the model stays quantized
    return rows


def print_tables(rows: list[dict[str, Any]], kernels: list[dict[str, Any]]) -> None:
    print(f"{'family':8s} {'render':14s} {'eager ms':>10s} {'compiled ms':>12s} {'speed-up':>9s}")
    for row in rows:
        for case, label in (("seedOnly", "seed only"), ("promptChange", "prompt change")):
            c = row[case]
            print(
                f"{row['family']:8s} {label:14s} {c['eagerMs']:10.1f} {c['compiledMs']:12.1f}"
                f" {c['speedup']:8.2f}x"
            )
        f = row["firstRender"]
        print(
            f"{row['family']:8s} {'first, cold':14s} {f['coldEagerMs']:10.1f}"
            f" {f['coldCompiledMs']:12.1f}"
        )
        print(
            f"{row['family']:8s} {'first, kept':14s} {f['keptEagerMs']:10.1f}"
            f" {f['keptCompiledMs']:12.1f}   max pixel diff {row['maxPixelDiff']}"
        )
    if kernels:
        print(f"{'family':8s} {'forward':14s} {'ms':>10s} {'first ms':>10s} {'rel rms diff':>13s}")
    for k in kernels:
        if "error" in k:
            print(f"{k['family']:8s} {k['forward']:14s} refused: {k['error']}")
            continue
        diff = f"{k['relRmsDiff']:13.2e}" if "relRmsDiff" in k else f"{'-':>13s}"
        print(f"{k['family']:8s} {k['forward']:14s} {k['ms']:10.1f} {k['firstMs']:10.1f} {diff}")


def main() -> int:
    parser = base_parser(__doc__, steps=8)
    parser.set_defaults(renders=3)
    parser.add_argument("--families", default=",".join(FAMILIES), type=lambda s: s.split(","))
    parser.add_argument("--frames", type=int, default=17, help="Wan's video length (4k+1)")
    parser.add_argument("--bare", action="store_true", help="a bare forward, eager vs compiled")
    parser.add_argument("--fp8", action="store_true", help="torchao's FP8 linear layers too")
    parser.add_argument("--fa3", action="store_true", help="flash-attention 3 too")
    args = parser.parse_args()
    device, preset = str(args.device), str(args.preset)
    require_device(device)
    refuse_what_does_not_fit(args)
    load = os.getloadavg()[0]
    rows: list[dict[str, Any]] = []
    kernels: list[dict[str, Any]] = []
    built: dict[str, Any] = {}
    with workdir(args.workdir, "compile-gpu-") as work:
        for family in args.families:
            began = time.perf_counter()
            folder = build(family, work / "models", preset, device)
            built[family] = {"buildS": round(time.perf_counter() - began, 1)}
            built[family] |= check_gpu_fits(family, folder, args)
            print(f"{family}: {built[family]}", flush=True)
            rows.append(side_by_side(family, folder, work, args))
            if args.bare or args.fp8 or args.fa3:
                kernels += kernel_rows(family, folder, args)
                if device.startswith("cuda"):
                    torch.cuda.empty_cache()  # the bare model went with kernel_rows
    print_tables(rows, kernels)
    body: dict[str, Any] = {
        "preset": preset,
        "device": device_name(device),
        "cpus": os.cpu_count(),
        "size": int(args.size),
        "steps": int(args.steps),
        "frames": int(args.frames),
        "renders": int(args.renders),
        "loadAverage": {"start": round(load, 2), "end": round(os.getloadavg()[0], 2)},
        "models": built,
        "rows": rows,
        "kernels": kernels,
    }
    families = "" if tuple(args.families) == FAMILIES else "_" + "_".join(args.families)
    path = write_json("gpu_compile" + families + ("_smoke" if preset == "tiny" else ""), body)
    print(f"load {body['loadAverage']}; wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
