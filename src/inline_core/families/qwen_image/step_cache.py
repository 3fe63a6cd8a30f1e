"""How Qwen-Image's transformer blocks are called, for the step cache (torch-free).

`QwenImageTransformer2DModel.forward` calls each of `transformer_blocks` by keyword with the
image's tokens (rows, tokens, dim), the prompt's (rows, text tokens, dim), the prompt's padding
mask (rows, text tokens; None when every prompt is as long as the longest), the timestep embedding
(rows, dim; Edit 2511 stacks the references' timestep-zero rows after them), the rotary
frequencies (one pair for every row), the attention kwargs and Edit 2511's modulation index
(rows, tokens). Each block updates both streams and returns (prompt, image), so a reused row adds
the middle blocks' residual of each. The image's tokens are never padded (rows of one forward
share their image shapes), so no row is trimmed."""

from __future__ import annotations

from inline_core.diffusion.stepcache.layout import BlockLayout

NAMES = (
    "hidden_states",
    "encoder_hidden_states",
    "encoder_hidden_states_mask",
    "temb",
    "image_rotary_emb",
    "joint_attention_kwargs",
    "modulate_index",
)

LAYOUT = BlockLayout(
    blocks="transformer_blocks",
    hidden=0,
    rows={0: True, 1: False, 2: False, 3: False, 6: True},
    names=NAMES,
    context=1,
    context_mask=2,
    returns=(1, 0),
)
