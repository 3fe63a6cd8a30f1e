"""FLUX.2 klein (or dev) through Inline Core against a bare `Flux2KleinPipeline` (or
`Flux2Pipeline`), on the same files.

    python bench/flux2_vs_diffusers.py --preset tiny [--renders 5] [--size 64]
    python bench/flux2_vs_diffusers.py --preset dev-tiny [--renders 5] [--size 64]
    python bench/flux2_vs_diffusers.py --preset 4b --device cuda --size 1024   # GPU, random weights

`tiny` is the kit's model on the CPU in float32; `dev-tiny` the dev kit's (its Mistral, guidance
embedded at 4, 4 steps). `4b` has klein 4B's real transformer shape (5
double and 20 single blocks, 24 heads of 128, 7680-wide text input; about 3.9B parameters) and
FLUX.2's real VAE, in bf16 with weights drawn N(0, 0.02); its Qwen3 has the real width (2560) but
4 layers and the kit's byte-level tokenizer (it runs once per prompt; a full encoder adds load
time, not step time). Both sides load one diffusers folder written once; renders alternate
between the bare pipeline and the family's node runner (its resident pipeline, the step loop,
the take written), same prompt and seed, distilled: 4 steps, no guidance. It prints a table and
writes bench/results/flux2_vs_diffusers.json (copied to $OUT when set). The node runner is what a
server runs per render; HTTP is left out (bench/zimage_server_vs_pipeline.py measures it).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from inline_core.config import Config  # noqa: E402
from inline_core.diffusion.kit_qwen3 import qwen3_tokenizer, tiny_qwen3_config  # noqa: E402
from inline_core.diffusion.libs import diffusers, manual_seed, transformers  # noqa: E402
from inline_core.families.flux2 import Flux2Family  # noqa: E402
from inline_core.families.flux2.build import DEV_TEXT_LAYERS, text_layers  # noqa: E402
from inline_core.families.flux2.descriptor import FLUX2_DESCRIPTOR  # noqa: E402
from inline_core.families.flux2.kit import build_kit, build_scheduler  # noqa: E402
from inline_core.families.flux2.kit_dev import build_dev_kit  # noqa: E402
from inline_core.families.standalone import family_rig  # noqa: E402
from inline_core.graph.runner import NodeCall  # noqa: E402
from inline_core.runtime.cancel import CancelToken  # noqa: E402
from inline_core.runtime.context import ExecutionContext  # noqa: E402
from inline_core.runtime.file_store import FileTakeStore  # noqa: E402
from inline_core.sampling.loop import StepLoopSampler  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "flux2_vs_diffusers.json"
PROMPT = "a lighthouse on a cliff at dusk, oil painting"
KLEIN_4B: dict[str, Any] = {
    "patch_size": 1,
    "in_channels": 128,
    "num_layers": 5,
    "num_single_layers": 20,
    "attention_head_dim": 128,
    "num_attention_heads": 24,
    "joint_attention_dim": 7680,
    "timestep_guidance_channels": 256,
    "mlp_ratio": 3.0,
    "axes_dims_rope": (32, 32, 32, 32),
    "rope_theta": 2000,
    "guidance_embeds": False,
}
FLUX2_VAE: dict[str, Any] = {
    "block_out_channels": [128, 256, 512, 512],
    "layers_per_block": 2,
    "latent_channels": 32,
}


def write_4b(folder: Path, device: str) -> Path:
    """A klein-4B-shaped diffusers folder of random weights (bf16)."""
    manual_seed(0)
    tokenizer = qwen3_tokenizer()
    config = tiny_qwen3_config(len(tokenizer), 2560, 4)
    with torch.device(device):
        text_encoder = transformers().Qwen3ForCausalLM(config).to(torch.bfloat16)
        transformer = diffusers().Flux2Transformer2DModel(**KLEIN_4B).to(torch.bfloat16)
        with torch.no_grad():
            for p in transformer.parameters():
                if p.ndim > 1:
                    p.normal_(0.0, 0.02)
        vae = diffusers().AutoencoderKLFlux2(**FLUX2_VAE).to(torch.bfloat16)
    diffusers().Flux2KleinPipeline(
        scheduler=build_scheduler(),
        vae=vae,
        text_encoder=text_encoder,
        tokenizer=tokenizer,
        transformer=transformer,
        is_distilled=True,
    ).save_pretrained(str(folder))
    return folder


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--preset", choices=("tiny", "dev-tiny", "4b"), default="tiny")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--size", type=int, default=None)
    parser.add_argument("--renders", type=int, default=5)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    tiny = args.preset in ("tiny", "dev-tiny")
    pipeline_class = "Flux2Pipeline" if args.preset == "dev-tiny" else "Flux2KleinPipeline"
    size = args.size or (64 if tiny else 1024)
    dtype = "float32" if tiny else "bfloat16"
    work = args.workdir or Path(tempfile.mkdtemp(prefix="flux2_bench_"))
    models = work / "models"
    if args.preset == "dev-tiny":
        folder = build_dev_kit(models, layouts=("diffusers",)).diffusers_dir
        assert folder is not None
        layers = DEV_TEXT_LAYERS
    elif tiny:
        folder = build_kit(models, layouts=("diffusers",)).diffusers_dir
        assert folder is not None
        layers = text_layers(4)
    else:
        for category in ("diffusion_models", "vae", "text_encoders"):
            (models / category).mkdir(parents=True, exist_ok=True)
        folder = write_4b(models / "diffusion_models" / "flux2_klein_4b_random", args.device)
        layers = text_layers(4)
    torch_dtype = getattr(torch, dtype)
    bare: Any = (
        getattr(diffusers(), pipeline_class)
        .from_pretrained(str(folder), dtype=torch_dtype, local_files_only=True)
        .to(args.device)
    )
    bare.set_progress_bar_config(disable=True)
    sampler = StepLoopSampler()
    profile = "cpu" if args.device == "cpu" else "auto"
    config = Config(models_dir=models, profile=profile, dtype=dtype)
    rig = family_rig(Flux2Family, models, sampler, config=config)
    params = {p.name: p.default for p in FLUX2_DESCRIPTOR.params}
    params.update(width=size, height=size, seed=3, model=folder.name, steps=4)
    takes = work / "takes"

    def sync() -> None:
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()

    def ours(i: int) -> float:
        ctx = ExecutionContext(
            run_id=f"b{i}", takes=FileTakeStore(takes), cancel=CancelToken(), events=lambda _e: None
        )
        start = time.perf_counter()
        rig.run(NodeCall(ctx=ctx, node_id="f", params=dict(params), inputs={"prompt": PROMPT}))
        sync()
        return time.perf_counter() - start

    def theirs() -> float:
        start = time.perf_counter()
        bare(
            prompt=PROMPT,
            width=size,
            height=size,
            num_inference_steps=4,
            generator=torch.Generator("cpu").manual_seed(3),
            text_encoder_out_layers=layers,
        )
        sync()
        return time.perf_counter() - start

    ours(-1)  # warm: loads, first kernels
    theirs()
    pairs = [(ours(i), theirs()) for i in range(args.renders)]
    sampler.close()
    ours_med = statistics.median(p[0] for p in pairs)
    theirs_med = statistics.median(p[1] for p in pairs)
    result = {
        "preset": args.preset,
        "device": args.device,
        "size": size,
        "steps": 4,
        "renders": args.renders,
        "inline_core_s": round(ours_med, 4),
        "diffusers_s": round(theirs_med, 4),
        "ratio": round(ours_med / theirs_med, 3),
        "load": os.getloadavg()[0],
    }
    print(f"{'preset':>6} {'size':>5} {'inline-core s':>14} {'diffusers s':>12} {'ratio':>6}")
    print(
        f"{args.preset:>6} {size:>5} {ours_med:>14.3f} {theirs_med:>12.3f} {result['ratio']:>6.3f}"
    )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2))
    if out := os.environ.get("OUT"):
        shutil.copy(RESULTS, Path(out) / RESULTS.name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
