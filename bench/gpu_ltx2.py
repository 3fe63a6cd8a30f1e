"""LTX-2 at 1280x704, 121 frames with random weights on a GPU: the node's render against bare
diffusers' LTX2Pipeline, bf16, side by side in one process, with the streamed decode's first
chunk and the peak GPU memory.

Run on a GPU machine: `python bench/gpu_ltx2.py [--layers 8] [--steps 8] [--renders 2]
[--workdir DIR]`. Needs nothing from the network: it writes its own random-weight model.

The transformer has LTX-2's widths (video: 32 heads of 128, cross-attention 4096; audio: 32 heads
of 64, cross-attention 2048; 128 latent channels each; Gemma's 3840-wide captions) but
`--layers` of its 48 blocks, so its random weights build, save, load and run within one
10-minute call; the Gemma 3 text encoder has its real width with 2 layers and the kit's
byte-level tokenizer (it runs once a render); the video and audio VAEs and the vocoder are
diffusers' default LTX-2 configurations, the connectors the kit's widened to 3840. Weights are
drawn N(0, 0.02) so activations stay finite in bf16. Both sides load the same diffusers folder;
renders alternate between them (guidance 4 and 7: two rows a forward), `--steps` steps each (the
published 40 scale the denoise linearly); the first render of each side (it warms up) is left
out.

`--preset tiny --device cpu` runs the same script on the kit's tiny stack (a smoke test on any
machine). Results: bench/results/gpu_ltx2.json (a smoke run writes gpu_ltx2_smoke.json), copied
to $OUT when it is set.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_zimage import randomize, write_results  # noqa: E402

from inline_core.diffusion.libs import diffusers, manual_seed, module, transformers  # noqa: E402
from inline_core.families.ltx2 import kit  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "gpu_ltx2.json"
FULL_TRANSFORMER: dict[str, Any] = {
    **kit.TRANSFORMER_CONFIG,
    "num_attention_heads": 32,
    "attention_head_dim": 128,
    "cross_attention_dim": 4096,
    "audio_num_attention_heads": 32,
    "audio_attention_head_dim": 64,
    "audio_cross_attention_dim": 2048,
    "audio_in_channels": 128,
    "audio_out_channels": 128,
    "caption_channels": 3840,
}
SIZES = {"full": (1280, 704, 121), "tiny": (32, 32, 9)}


def build_parts(preset: str, layers: int, device: str) -> dict[str, Any]:
    """The random-weight stack as LTX2Pipeline takes it (the kit's for `tiny`)."""
    if preset == "tiny":
        return kit.build_parts()
    lib, ltx2 = diffusers(), module("diffusers.pipelines.ltx2")
    manual_seed(0)
    tokenizer = kit.build_tokenizer()
    gemma = kit.gemma3_config(len(tokenizer) + 3)
    text = gemma.text_config
    text.hidden_size, text.intermediate_size = 3840, 15360
    text.num_attention_heads, text.num_key_value_heads, text.head_dim = 16, 8, 256
    connectors_config = {**kit.CONNECTORS_CONFIG, "caption_channels": 3840}
    connectors_config["video_connector_num_attention_heads"] = 30
    connectors_config["video_connector_attention_head_dim"] = 128
    connectors_config["audio_connector_num_attention_heads"] = 30
    connectors_config["audio_connector_attention_head_dim"] = 128
    with torch.device(device):
        parts: dict[str, Any] = {
            "transformer": lib.LTX2VideoTransformer3DModel(
                **{**FULL_TRANSFORMER, "num_layers": layers}
            ),
            "text_encoder": transformers().Gemma3ForConditionalGeneration(gemma),
            "connectors": ltx2.LTX2TextConnectors(**connectors_config),
            "vae": lib.AutoencoderKLLTX2Video(),
            "audio_vae": lib.AutoencoderKLLTX2Audio(),
            "vocoder": ltx2.LTX2Vocoder(),
        }
    for name, part in parts.items():
        randomize(part)
        parts[name] = part.to(torch.bfloat16).eval()
    parts["tokenizer"] = tokenizer
    parts["scheduler"] = lib.FlowMatchEulerDiscreteScheduler(**kit.SCHEDULER_CONFIG)
    return parts


def first_chunk(seen: list[float]) -> Any:
    """An `on_chunk` that notes when the first chunk of frames came."""

    def on_chunk(_first: int, _frames: Any, _total: int) -> None:
        if not seen:
            seen.append(time.perf_counter())

    return on_chunk


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--preset", choices=("full", "tiny"), default="full")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--renders", type=int, default=2)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()

    from inline_core.config import Config
    from inline_core.families.ltx2 import LTX2Family
    from inline_core.families.standalone import family_rig
    from inline_core.runtime.video import Video
    from inline_core.sampling.job import SampleJob
    from inline_core.sampling.loop import StepLoopSampler

    work = args.workdir or Path(tempfile.mkdtemp(prefix="gpu-ltx2-"))
    folder = work / "models" / "diffusion_models" / f"ltx-2_{args.preset}_random"
    started = time.perf_counter()
    parts = build_parts(args.preset, args.layers, args.device)
    diffusers().LTX2Pipeline(**parts).save_pretrained(str(folder))
    del parts
    build_s = time.perf_counter() - started
    on_gpu = args.device.startswith("cuda")
    dtype = torch.bfloat16 if on_gpu else torch.float32
    pipe: Any = (
        diffusers()
        .LTX2Pipeline.from_pretrained(str(folder), dtype=dtype, local_files_only=True)
        .to(args.device)
    )
    pipe.set_progress_bar_config(disable=True)
    sampler = StepLoopSampler(device=args.device)
    config = Config(
        models_dir=work / "models",
        profile="gpu-max" if on_gpu else "cpu",
        dtype="bfloat16" if on_gpu else "float32",
    )
    pipeline: Any = family_rig(LTX2Family, work / "models", sampler, config=config).pipeline()
    width, height, frames = SIZES[args.preset]
    render = {"width": width, "height": height, "frames": frames, "fps": 24}
    times: dict[str, list[float]] = {"pipeline": [], "node": [], "first chunk": []}
    peaks: dict[str, float] = {}
    for seed in range(args.renders + 1):
        for side in ("pipeline", "node"):
            if on_gpu:
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
            t0 = time.perf_counter()
            first: list[float] = []
            if side == "pipeline":
                pipe(
                    prompt="a robot dancing in the rain",
                    width=width,
                    height=height,
                    num_frames=frames,
                    frame_rate=24.0,
                    num_inference_steps=args.steps,
                    guidance_scale=4.0,
                    audio_guidance_scale=7.0,
                    max_sequence_length=int(pipe.tokenizer.model_max_length),
                    generator=torch.Generator("cpu").manual_seed(seed),
                    output_type="np",
                )
            else:
                state = pipeline.request(
                    prompt="a robot dancing in the rain",
                    steps=args.steps,
                    guidance=4.0,
                    audio_guidance=7.0,
                    seed=seed,
                    format="png",
                    **render,
                )
                state.on_chunk = first_chunk(first)
                out = sampler.run(SampleJob(pipeline, state))
                assert isinstance(out, Video) and out.frames.shape[0] == frames
            if on_gpu:
                torch.cuda.synchronize()
                peaks[side] = max(peaks.get(side, 0.0), torch.cuda.max_memory_allocated() / 2**30)
            elapsed = time.perf_counter() - t0
            if seed:  # the first render of each side warms up
                times[side].append(elapsed)
                if first:
                    times["first chunk"].append(first[0] - t0)
    sampler.close()
    medians = {side: statistics.median(v) for side, v in times.items() if v}
    body = {
        "preset": args.preset,
        "layers": args.layers if args.preset == "full" else None,
        "render": {**render, "steps": args.steps},
        "buildSeconds": build_s,
        "medianSeconds": medians,
        "nodeOverPipeline": medians["node"] / medians["pipeline"],
        "peakGiB": peaks,
    }
    for side, value in medians.items():
        print(f"{side:<12}{value:>10.2f} s")
    print(f"node / pipeline: {body['nodeOverPipeline']:.3f}; peak GiB {peaks}")
    write_results(RESULTS, body, device=args.device, preset=args.preset)
    return 0


if __name__ == "__main__":
    sys.exit(main())
