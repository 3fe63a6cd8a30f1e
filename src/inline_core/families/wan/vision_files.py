"""Where a Wan 2.1 image-to-video model's CLIP vision encoder is found (torch-free; runs at
submit).

Only a transformer with an image embedder (`image_dim` in its config) takes one. In order:
`INLINE_WAN_CLIP_VISION`; the diffusers folder the model came from (`image_encoder/`, with its
`image_processor/`); a scan of ComfyUI's `clip_vision/` folder for a CLIP vision encoder as wide
as the image embedder takes (`clip_vision_h` names first). A single file brings no image
processor: the stack's `image_processor` is then None, CLIP's own settings
(`clip_vision.PROCESSOR_CONFIG`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from inline_core.contract.files import TRANSFORMER, read_json
from inline_core.contract.sources import Missing
from inline_core.diffusion.files.shapes import read_shapes
from inline_core.families.wan import clip_vision
from inline_core.families.wan.transformer import config_of
from inline_core.models.catalog import Catalog, CatalogEntry
from inline_core.models.source import Source

IMAGE_ENCODER, IMAGE_PROCESSOR = "image_encoder", "image_processor"
CATEGORY = "clip_vision"
OVERRIDE = "INLINE_WAN_CLIP_VISION"
FOLDER_MODEL_TYPE = "clip_vision_model"
H_NAME = re.compile(r"clip[_-]?vision[_-]?h|vit[_-]?h", re.IGNORECASE)


def width_of(path: Path, is_folder: bool) -> int | None:
    """A CLIP vision encoder's width; None: not one."""
    if is_folder:
        config = read_json(path / "config.json")
        if config is None or config.get("model_type") != FOLDER_MODEL_TYPE:
            return None
        width = config.get("hidden_size")
        return width if isinstance(width, int) else None
    shapes = read_shapes(path)
    if shapes is None or not clip_vision.is_clip_vision(shapes):
        return None
    return clip_vision.hidden_size(shapes)


def _score(entry: CatalogEntry, width: int) -> int | None:
    if width_of(entry.path, entry.is_folder) != width:
        return None
    return 1 if H_NAME.search(entry.name) else 0


def with_image_encoder(
    parts: Mapping[str, Source | None],
    missing: list[Missing],
    catalog: Catalog,
    env: Mapping[str, str],
) -> dict[str, Source | None]:
    """The parts with the image encoder (and processor) a Wan 2.1 i2v transformer takes;
    unchanged for any other model."""
    transformer = parts.get(TRANSFORMER)
    config = None if transformer is None else config_of(transformer)
    width = None if config is None else config.get("image_dim")
    if transformer is None or not isinstance(width, int):
        return dict(parts)
    encoder: Source | None = None
    processor: Source | None = None
    root = transformer.path if transformer.subfolder == TRANSFORMER else None
    override = env.get(OVERRIDE)
    if override:
        path = Path(override).expanduser()
        if path.exists():
            encoder = Source(path)
        else:
            missing.append(Missing("image encoder", f"{OVERRIDE}={path} does not exist"))
            return {**parts, IMAGE_ENCODER: None, IMAGE_PROCESSOR: None}
    elif root is not None and (root / IMAGE_ENCODER).is_dir():
        encoder = Source(root, IMAGE_ENCODER)
        if (root / IMAGE_PROCESSOR).is_dir():
            processor = Source(root, IMAGE_PROCESSOR)
    else:
        scored = [(_score(e, width), e) for e in catalog.entries(CATEGORY)]
        ranked = sorted(
            ((s, i, e) for i, (s, e) in enumerate(scored) if s is not None),
            key=lambda item: (-item[0], item[1]),
        )
        encoder = Source(ranked[0][2].path) if ranked else None
    if encoder is None:
        missing.append(
            Missing(
                "image encoder",
                f"Wan 2.1 image-to-video is conditioned on a CLIP vision encoder {width} wide: "
                f"put clip_vision_h.safetensors in {catalog.root / CATEGORY}, or set {OVERRIDE}",
            )
        )
    return {**parts, IMAGE_ENCODER: encoder, IMAGE_PROCESSOR: processor}
