"""How Z-Image's main transformer blocks are called, for the step cache (torch-free).

`ZImageTransformer2DModel.forward` calls each of `layers` with, positionally: the unified
hidden states (rows, tokens, dim), the padding mask (rows, tokens; None when every row is
whole), the rotary frequencies (rows, tokens, ...), the timestep embedding (rows, dim), and the
omni-mode noise mask and timestep embeddings (None here)."""

from __future__ import annotations

from inline_core.diffusion.stepcache.layout import BlockLayout

LAYOUT = BlockLayout(
    blocks="layers",
    hidden=0,
    rows={0: True, 1: True, 2: True, 3: False, 4: True, 5: False, 6: False},
    mask=1,
)
