"""How Krea 2's transformer blocks are called, for the step cache (torch-free).

`Krea2Transformer2DModel.forward` calls each of `transformer_blocks` with, positionally: the
joint text-and-image hidden states (rows, tokens, dim), the timestep modulation (rows, ...), the
rotary frequencies (one for every row) and the key-padding mask (rows, 1, 1, tokens; None when
every text token is real). Rows are never trimmed: the real tokens are not a prefix (the prompt's
suffix follows its padding), so every row is compared over its whole sequence."""

from __future__ import annotations

from inline_core.diffusion.stepcache.layout import BlockLayout

LAYOUT = BlockLayout(blocks="transformer_blocks", hidden=0, rows={0: True, 1: False, 3: False})
