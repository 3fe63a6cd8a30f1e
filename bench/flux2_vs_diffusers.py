"""FLUX.2 klein (or dev) through Inline Core against a bare `Flux2KleinPipeline` (or
`Flux2Pipeline`), on the same files.

    python bench/flux2_vs_diffusers.py --preset tiny [--renders 5] [--size 64]
    GOMP_SPINCOUNT=0 python bench/flux2_vs_diffusers.py --preset mid,dev-tiny,dev-mid [--renders 3]
    python bench/flux2_vs_diffusers.py --preset 4b --device cuda --size 1024   # GPU, random weights

`tiny` is the kit's model on the CPU in float32; `mid` a distilled klein of dev-mid's transformer
size (random weights, float32, 256 px; its Qwen3 256 wide with 4 layers); `dev-tiny` the dev kit's
(its Mistral, guidance embedded at 4, 4 steps); `dev-mid` a mid-size dev (random weights, float32,
256 px by default: 768 wide, 6 heads of 128, 2 double and 8 single blocks, about 100M parameters;
its Mistral 256 wide with the 32 layers FLUX.2 reads from; the kit's VAE). `4b` has klein 4B's real
transformer shape (5 double and 20 single blocks, 24 heads of 128, 7680-wide text input; about 3.9B
parameters) and FLUX.2's real VAE, in bf16 with weights drawn N(0, 0.02); its Qwen3 has the real
width (2560) but 4 layers and the kit's byte-level tokenizer (it runs once per prompt; a full
encoder adds load time, not step time). Both sides load one diffusers folder written once; renders
alternate between the bare pipeline and the family's node runner (its resident pipeline, the step
loop, the take written), same prompt and seed, 4 steps (klein distilled: no guidance). Several
presets (comma-separated) run one after another in one process, a row each. It prints a table and
writes bench/results/flux2_vs_diffusers.json (copied to $OUT when set). The node runner is what a
server runs per render; HTTP is left out (bench/zimage_server_vs_pipeline.py measures it). On a
CPU, run it with GOMP_SPINCOUNT=0 (bench/openmp_spin.py: spinning OpenMP threads starve the other
side's on a shared machine)."""

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
from inline_core.families.flux2.kit import build_kit, build_scheduler, build_vae  # noqa: E402
from inline_core.families.flux2.kit_dev import (  # noqa: E402
    build_dev_kit,
    build_dev_transformer,
    build_text_encoder,
    mistral_tokenizer,
    tekken_json,
)
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
DEV_MID: dict[str, Any] = {  # dev's layout at about 100M parameters
    "num_layers": 2,
    "num_single_layers": 8,
    "attention_head_dim": 128,
    "num_attention_heads": 6,
    "joint_attention_dim": 3 * 256,  # three layers of a 256-wide Mistral
    "timestep_guidance_channels": 256,
    "axes_dims_rope": (32, 32, 32, 32),
}
MID_MISTRAL_WIDTH = 256
MID_QWEN3_WIDTH = 256
KLEIN_MID: dict[str, Any] = {  # klein's layout (no guidance embedder) at dev-mid's size
    **KLEIN_4B,
    "num_layers": 2,
    "num_single_layers": 8,
    "num_attention_heads": 6,
    "joint_attention_dim": 3 * MID_QWEN3_WIDTH,  # three layers of a 256-wide Qwen3
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


def write_dev_mid(folder: Path) -> Path:
    """A mid-size dev `Flux2Pipeline` folder (random weights, float32), the kit's VAE."""
    tokenizer = mistral_tokenizer(tekken_json())
    diffusers().Flux2Pipeline(
        scheduler=build_scheduler(),
        vae=build_vae(),
        text_encoder=build_text_encoder(len(tokenizer), MID_MISTRAL_WIDTH),
        tokenizer=tokenizer,
        transformer=build_dev_transformer(**DEV_MID),
    ).save_pretrained(str(folder))
    return folder


def write_klein_mid(folder: Path) -> Path:
    """A mid-size distilled klein `Flux2KleinPipeline` folder (random weights, float32), the
    kit's VAE."""
    manual_seed(0)
    tokenizer = qwen3_tokenizer()
    config = tiny_qwen3_config(len(tokenizer), MID_QWEN3_WIDTH, 4)
    diffusers().Flux2KleinPipeline(
        scheduler=build_scheduler(),
        vae=build_vae(),
        text_encoder=transformers().Qwen3ForCausalLM(config),
        tokenizer=tokenizer,
        transformer=diffusers().Flux2Transformer2DModel(**KLEIN_MID),
        is_distilled=True,
    ).save_pretrained(str(folder))
    return folder


PRESETS = ("tiny", "mid", "dev-tiny", "dev-mid", "4b")
DEFAULT_SIZE = {"tiny": 64, "mid": 256, "dev-tiny": 64, "dev-mid": 256, "4b": 1024}


def write_folder(preset: str, models: Path, device: str) -> tuple[Path, tuple[int, ...]]:
    """The preset's diffusers folder in `models`, and the text encoder layers it reads."""
    if preset == "dev-tiny":
        folder = build_dev_kit(models, layouts=("diffusers",)).diffusers_dir
        assert folder is not None
        return folder, DEV_TEXT_LAYERS
    if preset == "tiny":
        folder = build_kit(models, layouts=("diffusers",)).diffusers_dir
        assert folder is not None
        return folder, text_layers(4)
    for category in ("diffusion_models", "vae", "text_encoders"):
        (models / category).mkdir(parents=True, exist_ok=True)
    if preset == "dev-mid":
        return write_dev_mid(models / "diffusion_models" / "flux2_dev_mid"), DEV_TEXT_LAYERS
    if preset == "mid":
        return write_klein_mid(models / "diffusion_models" / "flux2_klein_mid"), text_layers(4)
    return write_4b(models / "diffusion_models" / "flux2_klein_4b_random", device), text_layers(4)


def run_preset(preset: str, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """One row: the medians of `args.renders` alternating renders, ours and the bare one's."""
    tiny = preset != "4b"
    pipeline_class = "Flux2Pipeline" if preset.startswith("dev") else "Flux2KleinPipeline"
    size = args.size or DEFAULT_SIZE[preset]
    dtype = "float32" if tiny else "bfloat16"
    models = work / preset / "models"
    folder, layers = write_folder(preset, models, args.device)
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
    takes = work / preset / "takes"

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
    return {
        "preset": preset,
        "device": args.device,
        "size": size,
        "steps": 4,
        "renders": args.renders,
        "inline_core_s": round(ours_med, 4),
        "diffusers_s": round(theirs_med, 4),
        "ratio": round(ours_med / theirs_med, 3),
        "load": os.getloadavg()[0],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--preset", default="tiny", help=f"comma-separated, of {PRESETS}")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--size", type=int, default=None)
    parser.add_argument("--renders", type=int, default=5)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    presets = [p for p in str(args.preset).split(",") if p]
    unknown = [p for p in presets if p not in PRESETS]
    if unknown or not presets:
        parser.error(f"--preset: {unknown or 'none'}; choose from {', '.join(PRESETS)}")
    work = args.workdir or Path(tempfile.mkdtemp(prefix="flux2_bench_"))
    rows = [run_preset(preset, args, work) for preset in presets]
    header = ("preset", "size", "inline-core s", "diffusers s", "ratio", "load")
    print(" ".join(f"{h:>{w}}" for h, w in zip(header, (8, 5, 14, 12, 6, 5), strict=True)))
    for row in rows:
        print(
            f"{row['preset']:>8} {row['size']:>5} {row['inline_core_s']:>14.3f} "
            f"{row['diffusers_s']:>12.3f} {row['ratio']:>6.3f} {row['load']:>5.1f}"
        )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"rows": rows}, indent=2))
    if out := os.environ.get("OUT"):
        shutil.copy(RESULTS, Path(out) / RESULTS.name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
