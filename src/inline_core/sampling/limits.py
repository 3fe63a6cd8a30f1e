"""How many jobs may share one forward: `max_batch` and the image-token budget, per device.

`max_batch` caps the jobs in one `denoise_step` (1 turns batching off). `token_budget` caps the
padded size of one forward, `len(group) * max(state.tokens)` (see `scheduler.py`), so that a large
image is not slowed down by small ones riding along; a single job over the budget still runs, alone.

Defaults come from measurements (`bench/batching_forward.py`, results in `bench/results/`): one
transformer forward of the built-in family over k requests against k separate forwards.
- CPU (2 shared cores, torch CPU, one intra-op thread): batching pays while a forward is dominated
  by per-call and weight-traffic cost, i.e. few tokens. Tiny model fp32: 1.9x (k=2) to 5x (k=16)
  at 64 px (16 tokens each), 2.25x at 4 x 128 px (256 padded tokens), 1.7x at 2 x 256 px (512),
  0.86x at 2 x 512 px (2048). The ~110M "mid" model, closer to a real one in compute per token:
  1.65-1.7x at 2-4 x 64 px, 1.4x (fp32) / 1.76x (bf16) at 4 x 128 px (256 tokens), but only
  1.07x at 2 x 256 px (512) and 1.06x at 4 x 256 px (1024), and the real pipeline measured 1.05x
  for a 256 px pair: within noise, and through the server it measured as slower as often as
  faster. So 256 padded tokens: every measured group within it gained at least 1.4x, and past it
  a compute-bound model gains nothing. `max_batch` 16: sixteen 64 px renders fit and the tiny
  model still gained from 8 to 16.
- CUDA: vLLM-Omni measured two concurrent requests of a 6B DiT on an H800 at +23% throughput at
  512 px (1024 image tokens each) and +8.5% at 1024 px (4096 each): batching still pays at two
  1024 px images, so the budget admits that much (not yet measured here: no GPU was lent).

`decode_pixel_budget` caps one batched VAE decode (`post_decode_many`), as the sum of the output
pixels of the jobs decoded together; 0 decodes one job at a time. Measured three times
(`bench/batching_decode.py`: the kit's VAE, one thread, one batched call against the same decodes
one by one): 64 px 1.2-1.6x for 2 to 16 images (16 = 65536 px); 128 px 1.1-1.2x (2), 1.03-1.2x
(4 = 65536 px), 0.91-0.98x (8; once 1.49x under heavy load); 256 px 0.95-1.16x (2), 0.71-0.87x (4).
Past ~64k pixels the activations outgrow the caches and a batch stops paying, so the CPU budget is
65536: sixteen 64 px images, four 128 px, a 256 px image alone. End to end (`bench/batching.py
--off decodes`, forwards batched either way) batched decodes added 1.17x throughput at 16
concurrent 64 px renders, 1.03x at 4. CUDA: 0 (off) until measured on a GPU; none was lent.
"""

from __future__ import annotations

from dataclasses import dataclass

from inline_core.errors import InvalidRequest


@dataclass(frozen=True)
class BatchLimits:
    max_batch: int
    token_budget: int
    decode_pixel_budget: int = 0  # 0: decodes run one job at a time

    @property
    def batched_decodes(self) -> bool:
        return self.batching and self.decode_pixel_budget > 0

    @property
    def batching(self) -> bool:
        return self.max_batch > 1


# Measured on the development machine (2 CPU cores, torch CPU): see the module docstring.
CPU_LIMITS = BatchLimits(max_batch=16, token_budget=256, decode_pixel_budget=65536)
# From vLLM-Omni's H800 figures (module docstring); re-measure with the GPU bench when lent one.
CUDA_LIMITS = BatchLimits(max_batch=8, token_budget=8192, decode_pixel_budget=0)


def default_limits(device: str = "cpu") -> BatchLimits:
    """Defaults for a device description such as "cpu", "cuda", "cuda:0 NVIDIA H200", "mps"."""
    kind = device.strip().lower()
    if kind.startswith(("cuda", "gpu", "rocm", "hip")):
        return CUDA_LIMITS
    return CPU_LIMITS


def resolve_limits(
    max_batch: int | None = None,
    token_budget: int | None = None,
    device: str = "cpu",
    decode_pixel_budget: int | None = None,
) -> BatchLimits:
    """Explicit values (INLINE_MAX_BATCH, INLINE_BATCH_TOKEN_BUDGET) over the device defaults."""
    defaults = default_limits(device)
    batch = defaults.max_batch if max_batch is None else max_batch
    budget = defaults.token_budget if token_budget is None else token_budget
    pixels = defaults.decode_pixel_budget if decode_pixel_budget is None else decode_pixel_budget
    if batch < 1:
        raise InvalidRequest(f"INLINE_MAX_BATCH must be at least 1 (1 = off), got {batch}")
    if budget < 1:
        raise InvalidRequest(f"INLINE_BATCH_TOKEN_BUDGET must be at least 1, got {budget}")
    if pixels < 0:
        raise InvalidRequest(f"the decode pixel budget must be at least 0 (0 = off), got {pixels}")
    return BatchLimits(max_batch=batch, token_budget=budget, decode_pixel_budget=pixels)
