"""ComfyUI's per-layer `comfy_quant` markers read from loaded tensors (torch); what they say is
`files/comfy_quant.py`'s."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import torch

from inline_core.diffusion.files.comfy_quant import (
    MARKER,
    QuantMarker,
    file_markers,
    parse,
    unread_format,
)
from inline_core.diffusion.files.header import read_metadata
from inline_core.errors import RunFailed


def read_marker(stored: torch.Tensor, layer: str) -> QuantMarker:
    """A layer's marker: its uint8 bytes of JSON, parsed."""
    return parse(stored.to(torch.uint8).cpu().numpy().tobytes(), layer)


def refuse_unread(raw: Mapping[str, torch.Tensor]) -> None:
    """`RunFailed` naming the first layer marked as a format this server does not read (ComfyUI's
    mxfp8, convrot_w4a4, ...), before its tensors are taken for another layout's."""
    for key, stored in raw.items():
        if key.endswith(MARKER):
            layer = key.removesuffix(MARKER)
            problem = unread_format(read_marker(stored, layer), layer)
            if problem is not None:
                raise RunFailed(problem)


def with_file_markers(
    raw: Mapping[str, torch.Tensor], path: Path, view: str | None = None
) -> dict[str, torch.Tensor]:
    """`raw` with the markers its file's header lists (`_quantization_metadata`) as tensors, as
    ComfyUI adds them before loading; `RunFailed` naming the file when that list is malformed."""
    try:
        listed = file_markers(read_metadata(path), view)
    except RunFailed as exc:
        raise RunFailed(f"{path}: {exc.message}") from exc
    out = dict(raw)
    for key, marker in listed.items():
        out[key] = torch.tensor(list(marker), dtype=torch.uint8)
    return out
