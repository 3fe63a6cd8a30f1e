"""How Wan's transformer blocks are called, for the step cache (torch-free).

`WanTransformer3DModel.forward` calls each of `blocks` with, positionally: the patchified hidden
states (rows, tokens, dim), the prompt's hidden states (rows, 512 text tokens, dim), the
timestep projection (rows, 6, dim; Wan 2.2 TI2V's is per token, rows, tokens, 6, dim) and the
rotary frequencies (a pair of (1, tokens, 1, d) tensors, one for every row). Rows are never
trimmed: requests of one latent shape share a forward and no padding mask is passed, so only the
row dimension matters here."""

from __future__ import annotations

from inline_core.diffusion.stepcache.layout import BlockLayout

LAYOUT = BlockLayout(blocks="blocks", hidden=0, rows={0: True, 1: False, 2: False})
