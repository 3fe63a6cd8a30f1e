"""FLUX.2's attention under Ring, alone or over Ulysses groups (imports torch).

cache-dit shards FLUX.2 by its context plan (`split.py`): every rank holds its share of the
prompt's tokens and of the image's, and each block (double- and single-stream) attends its share
of the joint sequence. FLUX.2 attends without a mask (the prompt's padding is attended, as in
diffusers' pipeline), so the shared masked ring (`families/masked_ring.py`, over Ulysses groups:
`families/ulysses_ring.py`) runs it with none: its blocks' processors carry this rank's ring as
their parallel config, and diffusers' `dispatch_attention_fn`, which they call with it, hands
such calls to the ring. cache-dit's own ring calls a flash-attention kernel a CPU rank does not
have (`aten::_scaled_dot_product_flash_attention`), so a FLUX.2 split on CPU needs this too.
"""

from __future__ import annotations

from inline_core.families.masked_ring import RingRoute

PROCESSORS = "diffusers.models.transformers.transformer_flux2"
ROUTE = RingRoute(
    PROCESSORS,
    "dispatch_attention_fn",
    "parallel_config",
    ("transformer_blocks", "single_transformer_blocks"),
)
