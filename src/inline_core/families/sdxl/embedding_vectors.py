"""An SDXL textual-inversion file's vectors (torch side): `clip_l` for CLIP-L and `clip_g` for
OpenCLIP-G, as SDXL embeddings carry them and ComfyUI reads them; read once per file identity."""

from __future__ import annotations

import threading
from typing import Any, cast

import torch

from inline_core.diffusion.encoders.clip_prompt import ClipEmbedding, ClipPromptEncoder
from inline_core.diffusion.libs import module
from inline_core.errors import InvalidRequest
from inline_core.families.sdxl.embeddings import EmbeddingFile

KEYS = ("clip_l", "clip_g")  # one per tower, in tower order
MAX_KEPT = 64  # files kept read (each a few KB)


class EmbeddingVectors:
    def __init__(self, encoder: ClipPromptEncoder) -> None:
        self.widths = [int(cast(Any, t.model).config.hidden_size) for t in encoder.towers]
        self._kept: dict[str, ClipEmbedding] = {}
        self._lock = threading.Lock()

    def get(self, file: EmbeddingFile) -> ClipEmbedding:
        with self._lock:
            known = self._kept.get(file.identity)
        if known is not None:
            return known
        made = ClipEmbedding(file.identity, self._read(file))
        with self._lock:
            if len(self._kept) >= MAX_KEPT:
                self._kept.pop(next(iter(self._kept)))
            self._kept[file.identity] = made
        return made

    def _read(self, file: EmbeddingFile) -> tuple[torch.Tensor, ...]:
        safe_open = module("safetensors").safe_open
        with safe_open(file.path, framework="pt") as f:
            keys = set(f.keys())
            missing = [k for k in KEYS if k not in keys]
            if missing:
                raise InvalidRequest(
                    f"embeddings/{file.name} has no {' or '.join(missing)} tensor (it holds "
                    f"{sorted(keys)}): an SDXL embedding carries clip_l and clip_g"
                )
            vectors = tuple(cast(torch.Tensor, f.get_tensor(k)).to(torch.float32) for k in KEYS)
        for key, vector, width in zip(KEYS, vectors, self.widths, strict=True):
            if vector.dim() != 2 or vector.shape[1] != width or vector.shape[0] < 1:
                raise InvalidRequest(
                    f"embeddings/{file.name}: its {key} is {tuple(vector.shape)}; this model's "
                    f"encoder takes (vectors, {width}): the embedding is for another model"
                )
        if vectors[0].shape[0] != vectors[1].shape[0]:
            raise InvalidRequest(
                f"embeddings/{file.name}: clip_l and clip_g hold different numbers of vectors"
            )
        return vectors
