"""Full-size FLUX.2 klein 4B with random weights on a GPU: the server vs a bare
`Flux2KleinPipeline`, bf16.

Run on a GPU machine: `python bench/gpu_flux2.py [--size 1024] [--steps 4] [--renders 2]
[--workdir DIR]`. Needs nothing from the network: it writes its own random-weight model.

The transformer has klein 4B's real shape (5 double and 20 single blocks, 24 heads of 128,
7680-wide text input; about 3.9B parameters; `flux2_vs_diffusers.KLEIN_4B`) and the VAE FLUX.2's
real one. The Qwen3 has the real width (2560) but 4 layers and the kit's byte-level tokenizer (it
runs once a render). Weights are N(0, 0.02) (norms one), written in bf16 as one diffusers folder
that both sides load. A render is 1024x1024, 4 steps, no guidance (the distilled setting):
`Flux2KleinPipeline` in bf16 on the device, and the server (its own process, the device
policy's dtype and placement; `POST /v1/runs` until `run_done`, the PNG take written),
alternating seed by seed, the first of each (it loads) left out (`gpu_common.compare`).

`--variant dev` runs FLUX.2 dev against `Flux2Pipeline` (Mistral text encoder, guidance 4
embedded in the model) on the tiny dev kit only: dev's real shape (32B parameters, 64 GB in bf16)
cannot be held twice, by the server and by the pipeline beside it, on one 141 GB GPU, and its
folder outgrows the GPU machine's 64 GB disk, so `--variant dev --preset full` is refused.

`GOMP_SPINCOUNT=0 ... --size 64 --steps 4 --device cpu --preset tiny` smoke-tests it anywhere
on the family's tiny kits (`families/flux2/kit.py`, `kit_dev.py`). Results:
bench/results/gpu_flux2.json (a smoke run writes gpu_flux2_smoke.json; dev adds `_dev`),
copied to $OUT when it is set.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from flux2_vs_diffusers import FLUX2_VAE, KLEIN_4B  # noqa: E402
from gpu_common import base_parser, measure, node_graph, prepared, randomize  # noqa: E402

from inline_core.diffusion.kit_qwen3 import qwen3_tokenizer, tiny_qwen3_config  # noqa: E402
from inline_core.diffusion.libs import diffusers, manual_seed, transformers  # noqa: E402
from inline_core.families.flux2.build import DEV_TEXT_LAYERS, text_layers  # noqa: E402
from inline_core.families.flux2.descriptor import NODE_TYPE  # noqa: E402
from inline_core.families.flux2.kit import build_kit, build_scheduler  # noqa: E402
from inline_core.families.flux2.kit_dev import build_dev_kit  # noqa: E402

PROMPT = "a lighthouse on a cliff at dusk, oil painting"
TEXT_LAYERS = 4  # the full preset's Qwen3 depth: klein reads layers 1, 2 and 3
DEV_GUIDANCE = 4.0  # FLUX.2 dev's published embedded guidance


def write_klein_4b(folder: Path, device: str) -> None:
    """klein 4B's real transformer and VAE, a real-width Qwen3, random, as a bf16 folder."""
    manual_seed(0)
    tokenizer = qwen3_tokenizer()
    with torch.device(device):
        text_encoder = transformers().Qwen3ForCausalLM(
            tiny_qwen3_config(len(tokenizer), 2560, TEXT_LAYERS)
        )
        transformer = diffusers().Flux2Transformer2DModel(**KLEIN_4B)
        vae = diffusers().AutoencoderKLFlux2(**FLUX2_VAE)
    for module in (text_encoder, transformer, vae):
        randomize(module)
    diffusers().Flux2KleinPipeline(
        scheduler=build_scheduler(),
        vae=vae.to(torch.bfloat16),
        text_encoder=text_encoder.to(torch.bfloat16),
        tokenizer=tokenizer,
        transformer=transformer.to(torch.bfloat16),
        is_distilled=True,
    ).save_pretrained(str(folder))


def build(models: Path, preset: str, device: str, variant: str) -> Path:
    """The diffusers folder both sides load: the family's tiny kit, or klein 4B's real shape."""
    for category in ("diffusion_models", "vae", "text_encoders"):
        (models / category).mkdir(parents=True, exist_ok=True)
    if variant == "dev":
        folder = build_dev_kit(models, layouts=("diffusers",)).diffusers_dir
    elif preset == "tiny":
        folder = build_kit(models, layouts=("diffusers",)).diffusers_dir
    else:
        folder = models / "diffusion_models" / "flux2_klein_4b_random"
        write_klein_4b(folder, device)
    assert folder is not None
    return folder


def main() -> int:
    parser = base_parser(__doc__, steps=4)
    parser.add_argument("--variant", choices=("klein", "dev"), default="klein")
    args = parser.parse_args()
    variant = str(args.variant)
    if variant == "dev" and args.preset == "full":
        raise SystemExit(
            "FLUX.2 dev's real shape (32B, 64 GB in bf16) does not fit twice on one GPU, nor its "
            "folder on the GPU machine's disk: run --variant dev with --preset tiny"
        )
    pipeline_class = "Flux2Pipeline" if variant == "dev" else "Flux2KleinPipeline"
    with prepared(
        args, "flux2-gpu-", functools.partial(build, variant=variant), pipeline_class
    ) as run:
        layers = DEV_TEXT_LAYERS if variant == "dev" else text_layers(TEXT_LAYERS)
        guidance = DEV_GUIDANCE if variant == "dev" else None
        extra: dict[str, Any] = {} if guidance is None else {"guidance_scale": guidance}

        def graph(seed: int) -> dict[str, Any]:
            params = {"width": run.size, "height": run.size, "steps": run.steps}
            params |= {"seed": seed, "model": run.folder.name}
            return node_graph(
                NODE_TYPE, PROMPT, params | ({} if guidance is None else {"guidance": guidance})
            )

        def pipeline(seed: int) -> object:
            return run.pipe(
                prompt=PROMPT,
                width=run.size,
                height=run.size,
                num_inference_steps=run.steps,
                generator=torch.Generator("cpu").manual_seed(seed),
                text_encoder_out_layers=layers,
                **extra,
            )

        measure(
            run,
            "gpu_flux2" + ("_dev" if variant == "dev" else ""),
            graph,
            pipeline,
            variant=variant,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
