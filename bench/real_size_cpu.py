"""Real-size Z-Image on a CPU: the edits a user makes, through the server, beside bare calls.

    .venv/bin/python bench/real_size_cpu.py [--renders 10] [--models DIR] [--keep]
        [--budget-gb 8] [--dtype auto]

Builds, deterministically and from random weights, the smallest Z-Image set ComfyUI accepts: the
transformer full width with one main layer (0.9B, ComfyUI's single-file naming, bf16), a full
Qwen3-4B text encoder (bf16, one file: 8 GB) and a FLUX VAE; about 10 GB on disk, deleted after
unless `--keep` or `--models` (reused when present). Then, on a real server (uvicorn, the CPU
profile, the dtype its policy picks for this CPU), ComfyUI's Z-Image API workflow imported
through `POST /v1/import/comfy` at 64x64, 4 steps, euler:
- seed-only changes, prompt changes and identical resubmissions, `--renders` each, timed from
  the POST to the websocket's `run_done` (the PNG take written and committed);
- each of those paired with the same work called bare in this process right after it (our
  loaders, same files and dtype, mapping the same pages, computing as diffusers does: nothing
  compiled, no packed weights): a prompt encode, the 4-step sample, the VAE decode, so both see
  the same machine load;
- the server's peak anonymous and file-backed RSS (polled from /proc), the pages it read from
  disk (major faults), and its residency counters (reloads must stay 0 in steady state: the bench
  fails loudly otherwise);
- first, a small machine: a server with `INLINE_RAM_BUDGET_GB=--budget-gb`, confined (as root)
  to a memory cgroup of that size with the files dropped from the page cache, its times.
Targets on this machine (issue 21): prompt change <= 3 s, seed-only <= 1.05x the bare sample plus
decode, peak anonymous RSS <= 8 GiB, no reloads. Prints a table; writes
bench/results/real_size_cpu.json.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, cast

sys.path.insert(0, str(Path(__file__).resolve().parent))

from real_size import (  # noqa: E402
    HTTP,
    QWEN3_4B,
    MemoryCage,
    RssPeaks,
    drop_cached,
    print_rows,
    qwen3_shapes,
    residency,
    run_graph,
    server,
    write_results,
)

from tests.importer.comfy_workflows import zimage_api  # noqa: E402

MODEL, ENCODER, VAE = "zimage_real_1layer.safetensors", "qwen_3_4b.safetensors", "ae.safetensors"
SIZE, STEPS = 64, 4
PROMPTS = [f"a lighthouse on a cliff at dusk, study {i}" for i in range(1000)]
GIB = 1024**3

# Z-Image's published transformer at one main layer (its two refiner stacks kept).
TRANSFORMER = {
    "all_patch_size": (2,),
    "all_f_patch_size": (1,),
    "in_channels": 16,
    "dim": 3840,
    "n_layers": 1,
    "n_refiner_layers": 2,
    "n_heads": 30,
    "n_kv_heads": 30,
    "qk_norm": True,
    "cap_feat_dim": 2560,
    "rope_theta": 256.0,
    "t_scale": 1000.0,
    "axes_dims": [32, 48, 48],
    "axes_lens": [1536, 512, 512],
}
FLUX_VAE: dict[str, Any] = {
    "in_channels": 3,
    "out_channels": 3,
    "down_block_types": ["DownEncoderBlock2D"] * 4,
    "up_block_types": ["UpDecoderBlock2D"] * 4,
    "block_out_channels": [128, 256, 512, 512],
    "layers_per_block": 2,
    "latent_channels": 16,
    "norm_num_groups": 32,
    "scaling_factor": 0.3611,
    "shift_factor": 0.1159,
    "use_quant_conv": False,
    "use_post_quant_conv": False,
}


# -- the set ---------------------------------------------------------------------------------------


def build_set(models: Path) -> dict[str, float]:
    """Write the three files (skipping those present); seconds each took."""
    import torch

    from inline_core.diffusion.formats import ldm_vae
    from inline_core.diffusion.kit import write_random_safetensors
    from inline_core.diffusion.libs import diffusers
    from inline_core.families.zimage.transformer import to_original

    took: dict[str, float] = {}
    dit = models / "diffusion_models" / MODEL
    if not dit.exists():
        start = time.perf_counter()
        with torch.device("meta"):
            model = diffusers().ZImageTransformer2DModel(**TRANSFORMER)
        shapes = {k: tuple(v.shape) for k, v in to_original(model.state_dict()).items()}
        write_random_safetensors(dit, shapes, torch.bfloat16, seed=12)
        took["transformer"] = time.perf_counter() - start
    encoder = models / "text_encoders" / ENCODER
    if not encoder.exists():
        start = time.perf_counter()
        write_random_safetensors(encoder, qwen3_shapes(QWEN3_4B), torch.bfloat16, seed=11)
        took["text_encoder"] = time.perf_counter() - start
    vae = models / "vae" / VAE
    if not vae.exists():
        start = time.perf_counter()
        with torch.device("meta"):
            model = diffusers().AutoencoderKL(**FLUX_VAE)
        blocks = len(cast(list[int], FLUX_VAE["block_out_channels"]))
        sd = ldm_vae.to_ldm(dict(model.state_dict()), blocks)
        shapes = {k: tuple(v.shape) for k, v in sd.items()}
        write_random_safetensors(vae, shapes, torch.float32, seed=13)
        took["vae"] = time.perf_counter() - start
    return took


# -- the server ------------------------------------------------------------------------------------


def imported(base: str, prompt: str, seed: int) -> dict[str, Any]:
    workflow = zimage_api(
        prompt=prompt,
        seed=seed,
        width=SIZE,
        height=SIZE,
        steps=STEPS,
        model=MODEL,
        encoder=ENCODER,
        vae=VAE,
    )
    response = HTTP.post(f"http://{base}/v1/import/comfy", json=workflow)
    response.raise_for_status()
    return cast(dict[str, Any], response.json())


def render(base: str, prompt: str, seed: int) -> float:
    """Seconds from the POST to `run_done`."""
    body = imported(base, prompt, seed)
    return run_graph(base, body["graph"], body["target"])


def sampler_forward_s(base: str) -> float:
    health = HTTP.get(f"http://{base}/v1/health", timeout=10).json()
    return float(health["sampler"]["forwardSeconds"])


def measure_server(
    models: Path,
    renders: int,
    env: dict[str, str],
    with_bare: bool = False,
    prefix: list[str] | None = None,
) -> dict[str, Any]:
    """Seed-only changes, prompt changes and identical resubmissions through a server; with
    `with_bare`, each server render is followed by the same work called bare in this process
    (in the server's dtype), so the two see the same machine load (this machine is shared)."""
    bare_sd: list[float] = []
    bare_full: list[float] = []
    bare: BareCalls | None = None
    with server(models, env, prefix) as (base, proc):
        peaks = RssPeaks(proc.pid)
        first = render(base, PROMPTS[0], 1)
        after_first = residency(base)
        faults_after_first = peaks.major_faults()
        dtype = str(HTTP.get(f"http://{base}/v1/health", timeout=10).json()["device"]["dtype"])
        if with_bare:
            bare = BareCalls(models, dtype)
        forwards_before = sampler_forward_s(base)
        seeds: list[float] = []
        server_faults = bare_faults = 0
        for i in range(renders):
            before = peaks.minor_faults()
            seeds.append(render(base, PROMPTS[0], 2 + i))
            server_faults += peaks.minor_faults() - before
            if bare is not None:
                before = own_minor_faults()
                bare_sd.append(bare.sample_decode(PROMPTS[0], 2 + i))
                bare_faults += own_minor_faults() - before
        seed_forwards_s = (sampler_forward_s(base) - forwards_before) / renders
        prompts: list[float] = []
        for i in range(renders):
            prompts.append(render(base, PROMPTS[1 + i], 2))
            if bare is not None:
                bare_full.append(bare.encode_sample_decode(PROMPTS[500 + i], 2))
        same = [render(base, PROMPTS[renders], 2) for _ in range(renders)]
        counters = residency(base)
        steady_faults = peaks.major_faults() - faults_after_first
        peaks.close()
        device = HTTP.get(f"http://{base}/v1/health", timeout=10).json()["device"]
        if bare is not None:
            bare.close()
    result: dict[str, Any] = {
        "env": env,
        "confined": prefix is not None,
        "dtype": device.get("dtype"),
        "memoryBudgetMb": device.get("memoryBudgetMb"),
        "firstS": round(first, 3),
        "seedOnlyS": _summary(seeds),
        "promptChangeS": _summary(prompts),
        "identicalS": _summary(same),
        "peakAnonGiB": round(peaks.anon / GIB, 2),
        "peakFileGiB": round(peaks.file / GIB, 2),
        "residencyAfterFirst": after_first,
        "residency": counters,
        "steadyReloads": counters["reloads"] - after_first["reloads"],
        "steadyLoads": counters["loads"] - after_first["loads"],
        "steadyMajorFaults": steady_faults,
        "seedOnlyForwardsS": round(seed_forwards_s, 3),  # the server's own time in the model
        # Fresh pages touched per seed-only render: memory unmapped and faulted in again.
        "seedOnlyMinorFaults": server_faults // renders,
    }
    if bare is not None:
        result["bareSeedOnlyMinorFaults"] = bare_faults // renders
        result["bareSampleDecodeS"] = _summary(bare_sd)
        result["bareEncodeSampleDecodeS"] = _summary(bare_full)
        result["bareParts"] = bare.parts()
        # Paired: each server render against the bare call right after it.
        result["seedOnlyOverBareMs"] = round(
            statistics.median(a - b for a, b in zip(seeds, bare_sd, strict=True)) * 1000, 1
        )
        result["seedOnlyOverBareRatio"] = round(
            statistics.median(a / b for a, b in zip(seeds, bare_sd, strict=True)), 3
        )
        result["promptChangeOverBareRatio"] = round(
            statistics.median(a / b for a, b in zip(prompts, bare_full, strict=True)), 3
        )
    return result


def own_minor_faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def _summary(values: list[float]) -> dict[str, float]:
    return {
        "median": round(statistics.median(values), 3),
        "min": round(min(values), 3),
        "max": round(max(values), 3),
    }


# -- bare calls ------------------------------------------------------------------------------------


class BareCalls:
    """The same components called directly in this process: our loaders, the server's files and
    dtype, no server. Their weights map the same files, so they share the server's page cache."""

    def __init__(self, models: Path, dtype: str) -> None:
        from inline_core.config import Config
        from inline_core.families.standalone import family_rig
        from inline_core.families.zimage import ZImageFamily
        from inline_core.sampling import StepLoopSampler

        # As a bare diffusers call computes: no compiled blocks, no packed linear weights.
        config = Config(models_dir=models, profile="cpu", dtype=dtype, no_compile=True)
        self.rig = family_rig(ZImageFamily, models, StepLoopSampler(), config=config)
        self.pipe: Any = self.rig.pipeline(MODEL)
        self.encoded: dict[str, Any] = {}
        self.times: dict[str, list[float]] = {"encode": [], "sample": [], "decode": []}
        self.encode_sample_decode(PROMPTS[999], 0)  # warm up
        for values in self.times.values():
            values.clear()

    def _state(self, prompt: str, seed: int) -> Any:
        return self.pipe.request(
            prompt=prompt, width=SIZE, height=SIZE, steps=STEPS, guidance=0.0, seed=seed
        )

    def _sample_decode(self, state: Any) -> None:
        import torch

        start = time.perf_counter()
        with torch.inference_mode():
            while not state.done:
                [prediction] = self.pipe.denoise_step([state])
                self.pipe.step_scheduler(state, prediction)
        sampled = time.perf_counter()
        self.pipe.post_decode(state)
        self.times["sample"].append(sampled - start)
        self.times["decode"].append(time.perf_counter() - sampled)

    def sample_decode(self, prompt: str, seed: int) -> float:
        """A seed change: the prompt's encoding kept from before (the server caches it too)."""
        if prompt not in self.encoded:
            self.encoded[prompt] = self.pipe.text_encoder.encode(prompt)
        state = self._state(prompt, seed)
        state.positive = self.encoded[prompt]
        start = time.perf_counter()
        self.pipe.prepare_encode(state)  # the noise and schedule; the encoding is given
        self._sample_decode(state)
        return time.perf_counter() - start

    def encode_sample_decode(self, prompt: str, seed: int) -> float:
        state = self._state(prompt, seed)
        start = time.perf_counter()
        self.pipe.prepare_encode(state)
        encoded = time.perf_counter()
        self._sample_decode(state)
        self.times["encode"].append(encoded - start)
        return time.perf_counter() - start

    def parts(self) -> dict[str, dict[str, float]]:
        return {name: _summary(values) for name, values in self.times.items() if values}

    def close(self) -> None:
        self.rig.close()


# -- main ------------------------------------------------------------------------------------------


def main() -> int:
    from inline_core.server.openmp import choose_wait

    # Before torch loads (libgomp reads it once): the bare calls in this process wait at
    # barriers as the server chooses to; spinning at load 5-13 on 2 cores made them 7-10x slower
    # (13-22 s against 1.7-2.0 s waiting passively for a seed-only sample and decode).
    choose_wait()
    parser = argparse.ArgumentParser(description="real-size Z-Image on a CPU through the server")
    parser.add_argument("--renders", type=int, default=10)
    parser.add_argument("--models", type=Path, default=None, help="build into / reuse this folder")
    parser.add_argument("--keep", action="store_true", help="keep the built set")
    parser.add_argument("--budget-gb", type=float, default=8.0)
    parser.add_argument(
        "--dtype", default="auto", help="INLINE_DTYPE for the server and bare calls"
    )
    args = parser.parse_args()
    renders = cast(int, args.renders)
    given = cast(Path | None, args.models)
    models = given or Path(tempfile.mkdtemp(prefix="real-size-models-"))
    try:
        built = build_set(models)
        env = {"INLINE_DTYPE": str(args.dtype)}
        # The small machine first, before this process maps any weights: a confined server must
        # read its pages itself, not find them mapped (and so cached) by someone else.
        budget = int(cast(float, args.budget_gb) * 1024**3)
        budget_env = {**env, "INLINE_RAM_BUDGET_GB": str(args.budget_gb)}
        cage = MemoryCage(budget)
        try:
            if cage.prefix is not None:
                drop_cached(models)
            small = measure_server(models, max(3, renders // 2), budget_env, prefix=cage.prefix)
        finally:
            cage.close()
        full = measure_server(models, renders, env, with_bare=True)
    finally:
        if given is None and not args.keep:
            shutil.rmtree(models, ignore_errors=True)
    parts = cast(dict[str, dict[str, float]], full["bareParts"])
    small_name = f"{args.budget_gb:g} GB" + (" machine" if small["confined"] else " budget")
    rows: list[tuple[str, object, str]] = [
        ("compute dtype", full["dtype"], ""),
        ("first render (loads) s", full["firstS"], ""),
        ("prompt change s (median)", full["promptChangeS"]["median"], "<= 3"),
        ("  bare encode+sample+decode s", full["bareEncodeSampleDecodeS"]["median"], ""),
        ("seed-only change s (median)", full["seedOnlyS"]["median"], ""),
        ("  bare sample+decode s", full["bareSampleDecodeS"]["median"], ""),
        ("  server's forwards in a seed-only render s", full["seedOnlyForwardsS"], ""),
        ("  page faults per seed-only render, server", full["seedOnlyMinorFaults"], ""),
        ("  page faults per seed-only render, bare", full["bareSeedOnlyMinorFaults"], ""),
        ("identical resubmission s (median)", full["identicalS"]["median"], ""),
        ("bare encode s", parts["encode"]["median"], ""),
        ("bare sample s", parts["sample"]["median"], ""),
        ("bare decode s", parts["decode"]["median"], ""),
        ("seed-only / bare sample+decode (paired)", full["seedOnlyOverBareRatio"], "<= 1.05"),
        ("seed-only - bare sample+decode ms (paired)", full["seedOnlyOverBareMs"], "<= 30"),
        ("prompt change / bare (paired)", full["promptChangeOverBareRatio"], ""),
        ("peak anonymous RSS GiB", full["peakAnonGiB"], "<= 8"),
        ("peak file-backed RSS GiB", full["peakFileGiB"], ""),
        ("pages read from disk (steady)", full["steadyMajorFaults"], ""),
        ("reloads in steady state", full["steadyReloads"], "0"),
        (f"{small_name}: first render s", small["firstS"], ""),
        (f"{small_name}: prompt change s", small["promptChangeS"]["median"], ""),
        (f"{small_name}: seed-only s", small["seedOnlyS"]["median"], ""),
        (f"{small_name}: peak anon GiB", small["peakAnonGiB"], ""),
        (f"{small_name}: peak file GiB", small["peakFileGiB"], ""),
        (f"{small_name}: pages read from disk (steady)", small["steadyMajorFaults"], ""),
        (f"{small_name}: reloads in steady state", small["steadyReloads"], "0"),
    ]
    print_rows(rows)
    result = {
        "machine": {"cpus": os.cpu_count(), "loadAverage": os.getloadavg()},
        "renders": renders,
        "built": built,
        "server": full,
        "smallMachine": small,
    }
    write_results("real_size_cpu", result)
    if full["steadyReloads"] or small["steadyReloads"]:
        print("FAIL: a steady workload reloaded models", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
