"""ComfyUI's Z-Image control patches onto `load/controlnet` (Z-Image's recipe's handlers).

`QwenImageDiffsynthControlnet` (model, model_patch, vae, image, strength, optional mask) and
`ZImageFunControlnet` (the same with image, inpaint_image and mask all optional) fed by a
`ModelPatchLoader` become a `load/controlnet` on the model's way: the patch's `name` looked up in
`controlnet/`, its strength, the workflow's VAE and the images. A mask (white repaints) and an
image to inpaint feed a control model that inpaints (a 2.x Fun ControlNet Union) as ComfyUI feeds
them: QwenImageDiffsynthControlnet has no image to inpaint, so its masked image is mid-gray. A
control file that takes neither (1.x), as the server reads it, gets neither: ComfyUI ignores them
with it, and the import warns that they were left out.
"""

from __future__ import annotations

from dataclasses import replace

from inline_core.graph.schema import PortKind
from inline_core.importer.dropped import UnsupportedNode
from inline_core.importer.mapper import Handler, Mapper
from inline_core.importer.values import Port, Value, describe
from inline_core.importer.workflow import ComfyNode, Link

MODEL_PATCH_LOADER = "ModelPatchLoader"


def control_patch(m: Mapper, node: ComfyNode, slot: int) -> Value | None:
    where = describe(node)
    model = m.input_value(node, "model", PortKind.MODEL)
    if model is None or model.port is None:
        return None
    patch = node.inputs.get("model_patch")
    loader = m.workflow.nodes.get(patch.node) if isinstance(patch, Link) else None
    if loader is None or loader.class_type != MODEL_PATCH_LOADER:
        shown = describe(loader) if loader is not None else "nothing"
        raise UnsupportedNode(
            f"{where}: its model_patch comes from {shown}; Inline Core maps a "
            f"{MODEL_PATCH_LOADER} there (a Z-Image Fun ControlNet Union file)"
        )
    m.mark_used(loader.id)
    vae = m.input_value(node, "vae", PortKind.VAE)
    # ZImageFunControlnet's image is optional (mid-gray without one); the other's is not.
    optional = node.class_type != "QwenImageDiffsynthControlnet"
    image = m.input_value(node, "image", PortKind.IMAGE, optional=optional)
    name = m.text(loader, "name")
    if _ignores_inpaint(m, node, name, image is not None):
        mask = inpaint = None
    else:
        mask = m.input_value(node, "mask", PortKind.MASK, optional=True)
        inpaint = m.input_value(node, "inpaint_image", PortKind.IMAGE, optional=True)
    if image is None and inpaint is None:
        raise UnsupportedNode(
            f"{where} has neither a control image nor an image to inpaint that Inline Core can "
            "map: wire one (or remove the node to import the rest)"
        )
    port = m.loader(
        f"c{node.id}",
        "load/controlnet",
        name,
        f"{where} ({describe(loader)})",
        param="name",
        params={"strength": m.number(node, "strength", 1.0)},
        inputs={
            "model": model.port,
            "vae": _port(vae),
            "image": _port(image),
            "mask": _port(mask),
            "inpaint_image": _port(inpaint),
        },
    )
    return replace(model, port=port)


def _ignores_inpaint(m: Mapper, node: ComfyNode, name: str, has_image: bool) -> bool:
    """Whether the node's mask and image to inpaint are left out: its control file, as the
    server's families read it, takes neither (a 1.x layout), and ComfyUI ignores them with it,
    so the picture stays ComfyUI's (a warning says so). Without a control image there is then
    nothing to control with: refused."""
    wired = [p for p in ("mask", "inpaint_image") if isinstance(node.inputs.get(p), Link)]
    if not wired or m.facts is None:
        return False
    chosen = m.chosen_file("load/controlnet", "name", name)
    if m.facts.control_inpaints(chosen) is not False:
        return False
    where = describe(node)
    if not has_image:
        raise UnsupportedNode(
            f"{where}: controlnet/{chosen} takes no image to inpaint (a 1.x layout: control "
            "latents only) and the node has no control image, so it has nothing to control "
            "with: wire a control image, or pick a 2.x file, which inpaints"
        )
    m.warn(
        f"{where}: its {' and '.join(wired)} are left out: controlnet/{chosen} takes no inpaint "
        "mask or image to inpaint (a 1.x layout), and ComfyUI ignores them with it; a 2.x file "
        "inpaints"
    )
    return True


def _port(value: Value | None) -> Port | None:
    return value.port if value is not None else None


HANDLERS: dict[str, Handler] = {
    "QwenImageDiffsynthControlnet": control_patch,
    "ZImageFunControlnet": control_patch,
}
