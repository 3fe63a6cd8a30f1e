"""Which LTX-2 a stack is, read from its files at submit (torch-free): the row of `versions.py`
its recipe comes from.

- LTX-2.5: its text encoder is Gemma 4 (`ltx25.py`).
- LTX-2.3: its transformer modulates each cross-attention by the timestep (diffusers'
  `cross_attn_mod` / `audio_cross_attn_mod` in the folder's `transformer/config.json`; in
  Lightricks' and ComfyUI's all-in-one files the embedded config's `cross_attention_adaln`,
  which diffusers' conversion script reads into the same). It is the layer 2.3 added: its
  `prompt_adaln_single` weights (the keys diffusers' 2.3 conversion leaves unmapped, issue
  #14145) and 9 modulation rows a block where 2.0 has 6. LTX-2.0's files have none of it, so
  nothing else is guessed from a name.
- LTX-2.0: the rest.
"""

from __future__ import annotations

from pathlib import Path

from inline_core.contract.files import read_json
from inline_core.families.ltx2.single_file_config import SingleFileError, layout
from inline_core.families.ltx2.versions import LTX2, LTX23, LTX25
from inline_core.models.source import Source

MODULATION = ("cross_attn_mod", "audio_cross_attn_mod")  # diffusers' names of 2.3's layer


def stack_version(transformer: Source | None, decoder: Path | None) -> str:
    """The stack's version: `decoder` is LTX-2.5's diffusion decoder (`check_ltx25`), if any."""
    if decoder is not None:
        return LTX25
    return LTX23 if modulates_cross_attention(transformer) else LTX2


def modulates_cross_attention(transformer: Source | None) -> bool:
    """Whether the transformer has 2.3's timestep-modulated cross-attention (False where its
    config cannot be read: the file's own check names that)."""
    if transformer is None:
        return False
    if transformer.is_file:
        try:
            config = layout(transformer.path).configs["transformer"]
        except SingleFileError:
            return False
    else:
        config = read_json(transformer.location / "config.json") or {}
    return any(bool(config.get(name)) for name in MODULATION)
