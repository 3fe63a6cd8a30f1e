"""The control model a Z-Image node picks in `controlnet/`, checked at submit (torch-free).

Only the header is read: a file that is not a Z-Image Fun ControlNet Union (another model's
ControlNet, a LoRA, a diffusion model) is a 422 naming it and what was expected, and so is one
whose width or depth does not fit the diffusion model it would drive.
"""

from __future__ import annotations

from typing import Any

from inline_core.contract.files import read_json
from inline_core.diffusion.files.shapes import ConfigInferenceError, read_shapes
from inline_core.errors import InvalidRequest, ModelMissing, NotFound
from inline_core.families.zimage import controlnet
from inline_core.families.zimage.controlnet import CATEGORY, ControlUse
from inline_core.models.catalog import Catalog, CatalogEntry


def control_entry(catalog: Catalog, name: str, node_id: str | None) -> CatalogEntry:
    try:
        return catalog.entry(CATEGORY, name)
    except NotFound as exc:
        raise ModelMissing(exc.message, node_id=node_id) from exc


def control_config(
    entry: CatalogEntry, transformer: dict[str, Any] | None, node_id: str | None
) -> dict[str, Any]:
    """The control model's config, checked against the transformer's (None: not readable)."""
    where = f"{CATEGORY}/{entry.name}"
    if entry.is_folder:
        config = read_json(entry.path / "config.json")
        if config is None or config.get("_class_name") != controlnet.CLASS_NAME:
            raise InvalidRequest(f"{where} is not {controlnet.EXPECTED}", node_id=node_id)
    else:
        shapes = read_shapes(entry.path)  # None: not a readable safetensors file
        if shapes is None or not controlnet.is_zimage_control(shapes):
            raise InvalidRequest(f"{where} is not {controlnet.EXPECTED}", node_id=node_id)
        n_layers = int((transformer or {}).get("n_layers") or controlnet.TURBO_LAYERS)
        try:
            config = controlnet.infer_config(shapes, n_layers)
        except ConfigInferenceError as exc:
            raise InvalidRequest(
                f"{where} does not fit this model: {exc}", node_id=node_id
            ) from exc
    if transformer is not None and (why := controlnet.mismatch(config, transformer)):
        raise InvalidRequest(f"{where} cannot drive this Z-Image model: {why}", node_id=node_id)
    return config


def control_use(entry: CatalogEntry, strength: float) -> ControlUse:
    return ControlUse(entry.name, str(entry.path), entry.identity, strength)


def split_refusal(name: str) -> str:
    """Why a control render does not run split: the control branch adds hints over the whole
    sequence, where a split transformer holds a shard of it (cache-dit's plan for that gathers
    after every layer, a cost every render of the group would pay)."""
    return (
        f"controlnet/{name}: a control render cannot run split across a worker group's ranks "
        "yet (the control model's hints cover the whole image, each rank holds a part of it); "
        "render it on a server without INLINE_PARALLEL"
    )
