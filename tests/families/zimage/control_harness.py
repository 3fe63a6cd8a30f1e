"""Helpers of the control and inpaint tests: deterministic control images, sources and masks, and
diffusers' control and inpaint pipelines over the kit's models (the pixel references)."""

from __future__ import annotations

from typing import Any

import numpy as np
from PIL import Image, ImageDraw

from inline_core.families.zimage.kit import KitPaths

UNION = "zimage_tiny_control_union.safetensors"
UNION_21 = "zimage_tiny_control_union_2.1.safetensors"
UNION_FOLDER = "zimage_tiny_control_union_diffusers"


def edges(width: int = 64, height: int = 64, shift: int = 0) -> Image.Image:
    """A canny-like control image: white strokes on black."""
    image = Image.new("RGB", (width, height), "black")
    draw = ImageDraw.Draw(image)
    draw.line((5 + shift, 5, width - 4, height - 14), fill="white", width=2)
    draw.ellipse((20, 20 + shift, 44, 44 + shift), outline="white")
    return image


def control_fields(
    rig: Any, name: str, strength: float, width: int = 64, shift: int = 0
) -> dict[str, Any]:
    """A request's control fields: the kit's control model `name` at `strength`, on `edges`."""
    from inline_core.families.zimage.control_files import control_entry, control_use

    entry = control_entry(rig.catalog, name, None)
    return {"control": control_use(entry, strength), "control_image": edges(width, 64, shift)}


def source(width: int = 64, height: int = 64, seed: int = 3) -> Image.Image:
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 255, (height, width, 3), dtype=np.uint8))


def mask(width: int = 64, height: int = 64) -> Image.Image:
    """White (repaint) in the middle, black (keep) around it."""
    image = Image.new("L", (width, height), 0)
    ImageDraw.Draw(image).rectangle((16, 16, width - 17, height - 17), fill=255)
    return image


def control_model(reference_pipe: Any, kit: KitPaths, key: str) -> Any:
    """The kit's control model as diffusers reads a single file (`from_single_file`, its config
    from the kit's diffusers folder for 1.0, from the kit's own recipe for 2.1)."""
    from diffusers import ZImageControlNetModel  # pyright: ignore[reportPrivateImportUsage]

    from inline_core.diffusion.libs import load_safetensors
    from inline_core.families.zimage.kit_control import control_config

    if key == "union":
        return ZImageControlNetModel.from_single_file(  # pyright: ignore[reportUnknownMemberType]
            str(kit.controls["union"]),
            config=str(kit.controls["union-diffusers"]),
            local_files_only=True,
        )
    model: Any = ZImageControlNetModel(**control_config(reference_pipe.transformer, key))
    model.load_state_dict(load_safetensors(kit.controls[key]))
    return model


def reference(reference_pipe: Any, kind: str, controlnet: Any = None) -> Any:
    """diffusers' `ZImage<kind>Pipeline` over the reference pipeline's parts."""
    import diffusers

    parts: dict[str, Any] = {
        name: getattr(reference_pipe, name)
        for name in ("scheduler", "vae", "text_encoder", "tokenizer", "transformer")
    }
    if controlnet is not None:
        parts["controlnet"] = controlnet
    pipe: Any = getattr(diffusers, f"ZImage{kind}Pipeline")(**parts)
    pipe.set_progress_bar_config(disable=True)
    return pipe
