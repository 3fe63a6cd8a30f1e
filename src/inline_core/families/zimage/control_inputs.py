"""The Z-Image node's control and inpaint inputs: checked at submit, lowered into request fields
at run (torch-free).

- `controlnet` (a file in `controlnet/`) needs `control_image`, and a control image needs a
  control model; a `mask` needs the `image` it masks, and the same size.
- With a control model that takes the inpaint mask (2.x), the mask and image feed the control
  and the render starts from noise (`ZImageControlNetInpaintPipeline`); otherwise the mask
  blends the img2img render (`ZImageInpaintPipeline`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from inline_core.errors import InvalidRequest
from inline_core.families.nodes.inputs import image_input
from inline_core.families.zimage import controlnet
from inline_core.families.zimage.control_files import control_config, control_entry, control_use
from inline_core.models.catalog import Catalog

LATENT_CHANNELS = 16  # the FLUX VAE's
# Request fields that are inputs, not settings: kept off the take's params.
INPUT_FIELDS = ("control", "control_image", "mask", "control_source")


def same_size(mask: tuple[int, int], image: tuple[int, int], node_id: str) -> None:
    if mask != image:
        raise InvalidRequest(
            f"the mask is {mask[0]}x{mask[1]} and the image {image[0]}x{image[1]}: "
            "they must be the same size",
            node_id=node_id,
        )


def check_wired(
    catalog: Catalog,
    params: Mapping[str, Any],
    wired: frozenset[str],
    transformer: dict[str, Any] | None,
    node_id: str,
) -> None:
    """Submit: the inputs wired fit the params, and the control model fits the transformer."""
    if "mask" in wired and "image" not in wired:
        raise InvalidRequest(
            "a mask is wired without the image it masks: wire the image too", node_id=node_id
        )
    name = params.get("controlnet")
    if not name:
        if "control_image" in wired:
            raise InvalidRequest(
                "a control image is wired but no control model is picked: pick one in "
                "controlnet (a Z-Image Fun ControlNet Union file)",
                node_id=node_id,
            )
        return
    if "control_image" not in wired:
        raise InvalidRequest(
            f"controlnet/{name} needs a control image: wire one (canny, depth, pose)",
            node_id=node_id,
        )
    control_config(control_entry(catalog, str(name), node_id), transformer, node_id)


def lower(
    catalog: Catalog, params: Mapping[str, Any], inputs: Mapping[str, Any], node_id: str
) -> dict[str, Any]:
    """The request's control and inpaint fields (none for a plain render); `image: None` when
    the image feeds the control instead of starting an img2img render."""
    out: dict[str, Any] = {}
    mask = image_input(inputs, "mask", node_id)
    image = image_input(inputs, "image", node_id)
    if mask is not None:
        if image is None:
            raise InvalidRequest("a mask needs the image it masks", node_id=node_id)
        same_size(mask.size, image.size, node_id)
        out["mask"] = mask
    name = params.get("controlnet")
    if not name:
        return out
    entry = control_entry(catalog, str(name), node_id)
    config = control_config(entry, None, node_id)
    out["control"] = control_use(entry, float(params["control_strength"]))
    out["control_image"] = image_input(inputs, "control_image", node_id)
    if mask is not None and controlnet.takes_inpaint(config, LATENT_CHANNELS):
        out["control_source"] = image  # the mask and image feed the control, from noise
        out["image"] = None
    return out


def take_params(fields: Mapping[str, Any]) -> dict[str, Any]:
    """What a take says of its control and inpainting."""
    out: dict[str, Any] = {}
    if "control" in fields:
        out["controlnet"] = fields["control"].name
        out["control_strength"] = fields["control"].strength
    if "mask" in fields:
        out["inpaint"] = "control" if "control_source" in fields else "blend"
    return out


def params_identity(catalog: Catalog, params: Mapping[str, Any]) -> str:
    """The picked control model's file identity (empty: none picked, or not there)."""
    name = params.get("controlnet")
    if not name or str(name) not in catalog.options(controlnet.CATEGORY):
        return ""
    return catalog.identity(controlnet.CATEGORY, str(name))
