"""How FLUX.2's transformer blocks are called, for the step cache (torch-free).

The step cache runs on the single-stream blocks (`single_transformer_blocks`): after the
double-stream ones, which always run, `Flux2Transformer2DModel.forward` calls each with the text
and image tokens in one tensor (rows, tokens, dim), no second stream, the single-stream
modulation (rows, ...), the rotary frequencies (one for every row) and its attention kwargs, by
keyword (bound in the order of the block's parameters). Requests of one shape share a forward,
so rows are never trimmed."""

from __future__ import annotations

from inline_core.diffusion.stepcache.layout import BlockLayout

LAYOUT = BlockLayout(blocks="single_transformer_blocks", hidden=0, rows={0: True, 2: False})
