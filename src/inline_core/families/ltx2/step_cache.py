"""How LTX-2's transformer blocks are called, for the step cache (torch-free).

`LTX2VideoTransformer3DModel.forward` calls each of `transformer_blocks` by keyword (its layout
names none, so the cache binds them to the block's parameters in order): the video's hidden states
(rows, tokens, dim) and the soundtrack's (rows, audio tokens, audio dim), which a block returns as
a pair, then each stream's prompt, timestep embeddings, rotary (cos, sin) pairs and prompt masks,
every one with a row per batch item (the pipeline prepares the rotary coordinates for every row).
Requests of one video shape share a forward and no padding mask trims them, so only the row
dimension matters here. The video's residual decides;
the soundtrack's is kept and reused with it."""

from __future__ import annotations

from inline_core.diffusion.stepcache.layout import BlockLayout

# Positions in LTX2VideoTransformerBlock.forward: 0 video, 1 audio, 2-3 prompts, 4-11 timestep
# embeddings, 12-15 rotary pairs, 16-17 prompt masks, 18-21 attention masks (unused here), 24
# the perturbation mask (spatio-temporal guidance, off here).
LAYOUT = BlockLayout(
    blocks="transformer_blocks",
    hidden=0,
    context=1,  # the soundtrack: never padded, so no mask trims it
    returns=(0, 1),
    rows={0: True, 1: True, 2: True, 3: True, **dict.fromkeys((*range(4, 22), 24), False)},
)
