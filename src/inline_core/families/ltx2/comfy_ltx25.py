"""ComfyUI's LTX-2.5 files, as far as they are pinned from ComfyUI's source (torch-free): what
each holds, and why the server refuses them (LTX-2.5 renders from its diffusers folder,
`ltx25.py`). Their templates (`video_ltx2_5_t2v.json`) load four files: UNETLoader's int8
"convrot" transformer, CLIPLoader (type `ltxv`)'s Gemma 4 with its projection, and two
VAELoaders' video and audio VAEs.

Pinned from source: ComfyUI's LTX-2.5 support (Comfy-Org/ComfyUI 57ce8e1, "Add support for LTX
2.5 (#15499)"), read in the stored mirror zoidypuh/ComfyUI at e5ba269 (comfyanonymous/ComfyUI's
stored `comfy/text_encoders/lt.py` and `gemma4.py` predate it; its repository is too large to
fetch here):
- The Gemma 4 file (`comfy/text_encoders/lt.py`): Gemma 4 12B's language model under `model.`
  (`model.layers.N.self_attn.q_proj`, ...; its global layers have no `v_proj`, V reusing K) and
  LTX's text projection beside it, one per stream: `text_embedding_projection.
  video_aggregate_embed` and `.audio_aggregate_embed` (`sd_detect`: "dual_linear", each Linear's
  bias by its key). Their encode RMS-normalises each hidden state over its width, stacks all of
  them, and scales each stream's input by sqrt(its width / Gemma's) before its Linear
  (`DualLinearProjection`); the prompt is padded to 1024 tokens (`ltxav_gemma4_tokenizer`). The
  model's config is not in the file: `gemma4.py`'s `Gemma4_12B_Config` (3840 wide, 48 layers, 16
  heads, 8 KV heads, 1 on global layers with `attention_k_eq_v`, sliding window 1024 on 5 of 6
  layers). diffusers keeps the same projections in its connectors (`convert_ltx2_to_diffusers.py`:
  `audio_aggregate_embed` -> `audio_text_proj_in`, `video_aggregate_embed` -> `video_text_proj_in`).
- The video VAE file (`comfy/sd.py`, `VAE.__init__`): told by `decoder.conv_in_x_t.weight`, a
  `na_diffusion_decoder.CausalDiffusionVAE` built from the header's `__metadata__["config"]`
  JSON, its `"vae"` object (as Lightricks' all-in-one files keep theirs); 32x spatial, 8x temporal.
- The audio VAE file (`comfy/sd.py`, and `comfy/ldm/lightricks/vae/audio_vae.py`): told by
  `vocoder.resblocks.0.convs1.0.weight` (or `vocoder.vocoder.` for the bandwidth-extended one),
  its autoencoder under `audio_vae.`, configured from the same header JSON's `"audio_vae"` and
  `"vocoder"` objects.

Not pinned: where the Gemma 4 file keeps its tokenizer (a third-party loader of it pops a
`tokenizer_json` tensor, ComfyUI's own code for that was not found), the Gemma 4 12B key names
against transformers' `Gemma4UnifiedForConditionalGeneration`, and the transformer file's
config and whether it carries the text connectors. So of the four only the video VAE file is
read, as a 2.5 diffusers folder's decoder (`diffusion_vae_file.py`: ComfyUI's
`na_diffusion_decoder.py` pins its config, `ltx25.py`); a file recognised below where a text
encoder is named is refused naming what it is.
"""

from __future__ import annotations

from pathlib import Path

from inline_core.diffusion.files.shapes import read_shapes

PROJECTIONS = tuple(
    f"text_embedding_projection.{stream}_aggregate_embed.weight" for stream in ("video", "audio")
)
GEMMA_LAYER = "model.layers.0.self_attn.q_proj.weight"
DIFFUSION_VAE = "decoder.conv_in_x_t.weight"
AUDIO_VOCODER = (
    "vocoder.resblocks.0.convs1.0.weight",
    "vocoder.vocoder.resblocks.0.convs1.0.weight",
)
TRANSFORMER = "model.diffusion_model."  # an all-in-one file's transformer: not a VAE file
WHERE = (
    "LTX-2.5 renders from its diffusers folder in diffusion_models "
    "(`inline-core download --family ltx2 ltx-2.5` fetches it)"
)


def ltx25_piece(path: Path) -> str | None:
    """What ComfyUI LTX-2.5 file `path` is, by its keys (None: none of them)."""
    shapes = read_shapes(path)
    if shapes is None:
        return None
    if all(key in shapes for key in PROJECTIONS):
        gemma = " and Gemma's language model" if GEMMA_LAYER in shapes else ""
        return (
            "ComfyUI's LTX-2.5 Gemma 4 file (its video and audio text projections, "
            f"text_embedding_projection.video_aggregate_embed/.audio_aggregate_embed{gemma})"
        )
    if DIFFUSION_VAE in shapes:
        return f"ComfyUI's LTX-2.5 diffusion video VAE file ({DIFFUSION_VAE})"
    alone = not any(key.startswith(TRANSFORMER) for key in shapes)
    if alone and any(key in shapes for key in AUDIO_VOCODER):
        return "ComfyUI's LTX audio VAE file (audio_vae. and vocoder. in one file)"
    return None


def refusal(path: Path) -> str | None:
    """Why the server does not read `path` when it is one of ComfyUI's LTX-2.5 files."""
    piece = ltx25_piece(path)
    if piece is None:
        return None
    return f"it is {piece}, not a text encoder this server reads (comfy_ltx25.py); {WHERE}"
