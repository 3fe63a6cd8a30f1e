"""Real-size Qwen-Image (the 20B transformer) on a CPU: the server's peak memory over renders.

    .venv/bin/python bench/qwen_image_real_size_cpu.py [--renders 2] [--size 64] [--steps 1]
        [--models DIR] [--keep] [--dtype auto]

Builds the set ComfyUI's Qwen-Image template loads, at the published shapes, in ComfyUI's layout:
- `diffusion_models/qwen_image_fp8_e4m3fn.safetensors`: the transformer, 60 blocks of width 3072
  (24 heads of 128), text width 3584: 20.4B parameters, its layers' weights float8_e4m3fn, the
  rest bfloat16 (20.4 GB);
- `text_encoders/qwen_2.5_vl_7b_fp8_scaled.safetensors`: Qwen2.5-VL-7B (28 layers of 3584 and
  its 32-block vision tower), ComfyUI's fp8_scaled layout: each linear layer's weight fp8 with its
  `scale_weight` (9 GB), and the kit's byte-level tokenizer and image processor beside it;
- `vae/qwen_image_vae.safetensors`: the Qwen-Image VAE (base width 96), bfloat16.
The files are sparse: a real safetensors header, its data region left unwritten (zeros). They
take next to no disk and are written in seconds; every page the server maps is a real page of the
page cache all the same, so the memory is what the real files' would be (zeros compute as slowly
as real weights; the image is flat). The transformer alone is as large as this machine's RAM.

Then a real server (uvicorn, the CPU profile, the dtype its policy picks; INLINE_DTYPE=--dtype)
renders `alibaba/qwen-image` --renders times with new seeds (the first loads the models), at
--size pixels, --steps steps, guidance off; polled from /proc (`real_size_cpu.RssPeaks`): the
peak anonymous RSS (what the memory budget holds: copies, activations) and file-backed RSS (the
mapped weights, evictable pages), the pages read from disk; health's residency counters (loads,
reloads: must stay 0 after the first render) and its kept weights. Prints a table; writes
bench/results/qwen_image_real_size_cpu.json.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, cast

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT), str(Path(__file__).resolve().parent)]
RESULTS = ROOT / "bench" / "results" / "qwen_image_real_size_cpu.json"

from real_size_cpu import HTTP, RssPeaks, residency, run_graph, server  # noqa: E402

from tests.server.server_support import prompt_graph  # noqa: E402

MODEL = "qwen_image_fp8_e4m3fn.safetensors"
ENCODER = "qwen_2.5_vl_7b_fp8_scaled.safetensors"
VAE = "qwen_image_vae.safetensors"
PROMPT = "a red paper lantern over a quiet street at night"
GIB = 1024**3
TRANSFORMER: dict[str, Any] = {
    "patch_size": 2,
    "in_channels": 64,
    "out_channels": 16,
    "num_layers": 60,
    "attention_head_dim": 128,
    "num_attention_heads": 24,
    "joint_attention_dim": 3584,
    "guidance_embeds": False,
    "axes_dims_rope": (16, 56, 56),
}
QWEN25_VL_7B_TEXT: dict[str, Any] = {
    "vocab_size": 152064,
    "hidden_size": 3584,
    "intermediate_size": 18944,
    "num_hidden_layers": 28,
    "num_attention_heads": 28,
    "num_key_value_heads": 4,
    "rms_norm_eps": 1e-6,
    "max_position_embeddings": 128_000,
    "tie_word_embeddings": False,
}
QWEN25_VL_7B_VISION: dict[str, Any] = {
    "depth": 32,
    "hidden_size": 1280,
    "intermediate_size": 3420,
    "num_heads": 16,
    "in_channels": 3,
    "patch_size": 14,
    "temporal_patch_size": 2,
    "spatial_merge_size": 2,
    "window_size": 112,
    "out_hidden_size": 3584,
    "fullatt_block_indexes": [7, 15, 23, 31],
}

# -- the set ---------------------------------------------------------------------------------------

Tensors = Mapping[str, tuple[tuple[int, ...], str]]  # name -> (shape, safetensors dtype)
ITEM_BYTES = {"F8_E4M3": 1, "BF16": 2, "F16": 2, "F32": 4}


def write_sparse_safetensors(path: Path, tensors: Tensors) -> None:
    """A safetensors file of `tensors`, all zeros: the header written, the data region a hole of
    its full length."""
    header: dict[str, Any] = {}
    offset = 0
    for name in sorted(tensors):
        shape, dtype = tensors[name]
        size = ITEM_BYTES[dtype] * math.prod(shape)
        header[name] = {
            "dtype": dtype,
            "shape": list(shape),
            "data_offsets": [offset, offset + size],
        }
        offset += size
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % 8)  # the data starts 8-byte aligned
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as out:
        out.write(len(encoded).to_bytes(8, "little") + encoded)
        out.truncate(8 + len(encoded) + offset)


def fp8_layers(shapes: Mapping[str, tuple[int, ...]], *, scaled: bool) -> dict[str, Any]:
    """ComfyUI's fp8 layout: each linear layer's weight float8_e4m3fn (scaled: with its
    `scale_weight` and `scale_input`, and the file's `scaled_fp8` marker), the rest bfloat16.
    The token embedding is not a linear layer's: it stays bfloat16."""
    tensors: dict[str, Any] = {}
    for name, shape in shapes.items():
        layer = name.endswith(".weight") and len(shape) == 2 and "embed_tokens" not in name
        tensors[name] = (shape, "F8_E4M3" if layer else "BF16")
        if layer and scaled:
            stem = name.removesuffix(".weight")
            tensors[f"{stem}.scale_weight"] = ((), "F32")
            tensors[f"{stem}.scale_input"] = ((), "F32")
    if scaled:
        tensors["scaled_fp8"] = ((0,), "F8_E4M3")
    return tensors


def build_set(models: Path) -> dict[str, float]:
    """The three files and the tokenizer folder (skipping files present); each file's bytes."""
    import torch

    from inline_core.diffusion.formats import qwen_image_vae
    from inline_core.diffusion.libs import diffusers, transformers
    from inline_core.families.qwen_image import kit
    from inline_core.families.qwen_image.files import TOKENIZER_DIR
    from inline_core.families.qwen_image.text_encoder import mrope_section

    tokenizer = kit.build_tokenizer()
    kit.save_processor(
        tokenizer, kit.build_image_processor(), models / "text_encoders" / TOKENIZER_DIR
    )
    dit = models / "diffusion_models" / MODEL
    if not dit.exists():
        with torch.device("meta"):
            model = diffusers().QwenImageTransformer2DModel(**TRANSFORMER)
        shapes = {k: tuple(v.shape) for k, v in model.state_dict().items()}
        write_sparse_safetensors(dit, fp8_layers(shapes, scaled=False))
    encoder = models / "text_encoders" / ENCODER
    if not encoder.exists():
        text = {
            **QWEN25_VL_7B_TEXT,
            "rope_parameters": {
                "rope_type": "default",
                "rope_theta": 1_000_000.0,
                "mrope_section": mrope_section(128),
            },
        }
        ids = {
            name: tokenizer.convert_tokens_to_ids(token)
            for name, token in (
                ("image_token_id", "<|image_pad|>"),
                ("video_token_id", "<|video_pad|>"),
                ("vision_start_token_id", "<|vision_start|>"),
                ("vision_end_token_id", "<|vision_end|>"),
            )
        }
        lib = transformers()
        config = lib.Qwen2_5_VLConfig(text_config=text, vision_config=QWEN25_VL_7B_VISION, **ids)
        with torch.device("meta"):
            model = lib.Qwen2_5_VLForConditionalGeneration(config)
        named = kit.original_text_encoder(dict(model.state_dict()))
        shapes = {k: tuple(v.shape) for k, v in named.items() if not k.startswith("lm_head.")}
        write_sparse_safetensors(encoder, fp8_layers(shapes, scaled=True))
    vae = models / "vae" / VAE
    if not vae.exists():
        with torch.device("meta"):
            model = diffusers().AutoencoderKLQwenImage()  # its defaults are the published VAE's
        named = qwen_image_vae.to_original(dict(model.state_dict()))
        tensors = {k: (tuple(v.shape), "BF16") for k, v in named.items()}
        write_sparse_safetensors(vae, tensors)
    return {
        part: float(path.stat().st_size)
        for part, path in (("transformer", dit), ("text_encoder", encoder), ("vae", vae))
    }


# -- the renders -----------------------------------------------------------------------------------


def health(base: str) -> dict[str, Any]:
    return cast(dict[str, Any], HTTP.get(f"http://{base}/v1/health", timeout=30).json())


def measure(
    models: Path, renders: int, size: int, steps: int, env: dict[str, str]
) -> dict[str, Any]:
    def graph(seed: int) -> dict[str, Any]:
        params: dict[str, Any] = {"model": MODEL, "width": size, "height": size}
        params.update({"steps": steps, "guidance": 1.0, "seed": seed})
        return prompt_graph("alibaba/qwen-image", "q", params, PROMPT)

    return measure_renders(models, renders, env, graph, "q")


def measure_renders(
    models: Path,
    renders: int,
    env: dict[str, str],
    graph: Callable[[int], dict[str, Any]],
    target: str,
) -> dict[str, Any]:
    """A real server's memory over `renders` renders of `graph(seed)` (any family's)."""
    times: list[float] = []
    with server(models, env) as (base, proc):
        peaks = RssPeaks(proc.pid)
        after_first: dict[str, Any] = {}
        faults_after_first = 0
        for seed in range(renders):
            times.append(run_graph(base, graph(seed), target, wait_s=3600))
            if seed == 0:
                after_first = residency(base)
                faults_after_first = peaks.major_faults()
        counters = residency(base)
        device = health(base)["device"]
        steady_faults = peaks.major_faults() - faults_after_first
        peaks.close()
    return {
        "env": env,
        "dtype": device.get("dtype"),
        "memoryBudgetMb": device.get("memoryBudgetMb"),
        "renderS": [round(t, 1) for t in times],
        "peakAnonGiB": round(peaks.anon / GIB, 2),
        "peakFileGiB": round(peaks.file / GIB, 2),
        "residencyAfterFirst": after_first,
        "residency": counters,
        "steadyReloads": counters["reloads"] - after_first.get("reloads", 0),
        "steadyMajorFaults": steady_faults,
    }


def memory_rows(result: dict[str, Any]) -> list[tuple[str, object]]:
    """`measure_renders`' figures as the table's rows."""
    counters = result["residency"]
    return [
        ("compute dtype", result["dtype"]),
        ("memory budget MB", result["memoryBudgetMb"]),
        ("render s (first loads)", " / ".join(str(t) for t in result["renderS"])),
        ("peak anonymous RSS GiB", result["peakAnonGiB"]),
        ("peak file-backed RSS GiB", result["peakFileGiB"]),
        ("mapped GiB", round(int(counters.get("mappedBytes", 0)) / GIB, 2)),
        ("resident (copied) GiB", round(int(counters.get("residentBytes", 0)) / GIB, 2)),
        ("kept weights", counters.get("keptWeights")),
        ("loads / reloads", f"{counters.get('loads')} / {counters.get('reloads')}"),
        ("reloads after the first render", result["steadyReloads"]),
        ("pages read from disk after the first render", result["steadyMajorFaults"]),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description="real-size Qwen-Image's memory on a CPU")
    parser.add_argument("--renders", type=int, default=2)
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--steps", type=int, default=1)
    parser.add_argument("--models", type=Path, default=None, help="build into / reuse this folder")
    parser.add_argument("--keep", action="store_true", help="keep the built set")
    parser.add_argument("--dtype", default="auto", help="INLINE_DTYPE for the server")
    args = parser.parse_args()
    given = cast(Path | None, args.models)
    models = given or Path(tempfile.mkdtemp(prefix="qwen-real-size-"))
    start_load = os.getloadavg()
    try:
        started = time.perf_counter()
        built = build_set(models)
        build_s = time.perf_counter() - started
        result = measure(
            models, int(args.renders), int(args.size), int(args.steps), {"INLINE_DTYPE": args.dtype}
        )
    finally:
        if given is None and not args.keep:
            shutil.rmtree(models, ignore_errors=True)
    rows: list[tuple[str, object]] = [
        ("files (GB): transformer / text encoder / VAE", _sizes(built)),
        ("files built in s", round(build_s, 1)),
        *memory_rows(result),
    ]
    print(f"{'measure':46} value")
    for name, value in rows:
        print(f"{name:46} {value}")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    machine = {
        "cpus": os.cpu_count(),
        "memTotalGiB": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / GIB, 1),
        "loadAverageStart": start_load,
        "loadAverageEnd": os.getloadavg(),
    }
    settings = {"size": args.size, "steps": args.steps, "renders": args.renders}
    out = {"machine": machine, "settings": settings, "filesBytes": built, "server": result}
    RESULTS.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {RESULTS}")
    if result["steadyReloads"]:
        print("FAIL: a render after the first reloaded a model", file=sys.stderr)
        return 1
    return 0


def _sizes(built: dict[str, float]) -> str:
    return " / ".join(f"{built[p] / 1e9:.2f}" for p in ("transformer", "text_encoder", "vae"))


if __name__ == "__main__":
    raise SystemExit(main())
