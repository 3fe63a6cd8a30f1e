"""LTX-2's text connectors in ComfyUI's all-in-one checkpoint against diffusers'
`LTX2TextConnectors` naming (torch-free). In the checkpoint the two connectors sit inside the
diffusion model (`model.diffusion_model.video_embeddings_connector.*`, `...audio_...`; diffusers'
single-file transformer converter drops them) and the projection of Gemma's stacked layers
beside it (`text_embedding_projection.aggregate_embed`, which ComfyUI's LTXAVTextEncoderLoader
reads from the checkpoint). The renames are those of diffusers' own conversion script
(`scripts/convert_ltx2_to_diffusers.py`). LTX-2.3 projects the stacked layers once per stream
(`text_embedding_projection.video_aggregate_embed`, `...audio_...`): diffusers'
`per_modality_projections` (`video_text_proj_in`, `audio_text_proj_in`)."""

from __future__ import annotations

from inline_core.families.ltx2.key_renames import Renames, rename

MODEL_PREFIX = "model.diffusion_model."
PROJECTIONS = "text_embedding_projection."  # the stacked layers' projections, 2.0's and 2.3's
PROJECTION = PROJECTIONS + "aggregate_embed"
# LTX-2.3's projection per stream: (the checkpoint's name, diffusers').
STREAM_PROJECTIONS = (
    ("text_embedding_projection.video_aggregate_embed", "video_text_proj_in"),
    ("text_embedding_projection.audio_aggregate_embed", "audio_text_proj_in"),
)
CONNECTORS = ("video_embeddings_connector", "audio_embeddings_connector")
RENAMES: Renames = (
    ("video_embeddings_connector", "video_connector"),
    ("audio_embeddings_connector", "audio_connector"),
    ("transformer_1d_blocks", "transformer_blocks"),
    ("q_norm", "norm_q"),
    ("k_norm", "norm_k"),
)


def to_diffusers(key: str) -> str | None:
    """A checkpoint key as `LTX2TextConnectors`' (None: not the connectors')."""
    if key.startswith(PROJECTION + "."):
        return "text_proj_in" + key[len(PROJECTION) :]
    for ours, theirs in STREAM_PROJECTIONS:
        if key.startswith(ours + "."):
            return theirs + key[len(ours) :]
    inner = key[len(MODEL_PREFIX) :] if key.startswith(MODEL_PREFIX) else None
    if inner is None or not inner.startswith(CONNECTORS):
        return None
    return rename(inner, RENAMES)


def from_diffusers(key: str) -> str:
    """An `LTX2TextConnectors` key as the checkpoint names it."""
    if key.startswith("text_proj_in."):
        return PROJECTION + key[len("text_proj_in") :]
    for ours, theirs in STREAM_PROJECTIONS:
        if key.startswith(theirs + "."):
            return ours + key[len(theirs) :]
    return MODEL_PREFIX + rename(key, RENAMES, reverse=True)
