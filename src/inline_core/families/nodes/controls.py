"""`load/controlnet`, for every family that takes control models (torch-free).

At submit, `check` asks each family whether the picked file in `controlnet/` is a control model
it takes (each reads its header only): a file none takes is refused with a 422 naming it and what
each expected, and so is a control its family cannot split when this server splits its renders.
`check_wired` refuses a node with neither a control image nor an image to inpaint wired, and a
mask or an image to inpaint on a control model that takes none (its family says why).
At run, the model handle leaves with the control (the family's record, the image and the VAE, and
for a control model that inpaints the mask and the image it masks), so `sample` encodes the images
at the latent's size and the family's denoiser adds the control to that request's rows. A
control image or an image to inpaint must be wired. The control is part of the model handle, so
the node cache keys of everything downstream change with it, and an encode upstream does not.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from PIL import Image

from inline_core.contract.handles import ControlHandle, ModelHandle, VAEHandle
from inline_core.contract.registry import Families
from inline_core.contract.supports import control_of
from inline_core.engine.runtime import ModelRuntime
from inline_core.errors import InlineError, InvalidRequest
from inline_core.families.nodes.inputs import handle_input
from inline_core.graph.mask_nodes import mask_value
from inline_core.graph.primitives import LOAD_CONTROLNET
from inline_core.graph.runner import NodeCall, NodeResult, NodeRunner

NEEDS_AN_IMAGE = (
    "a control model needs a control image, or an image to inpaint (for a control model that "
    "inpaints): wire one"
)


@dataclass(frozen=True)
class Picked:
    family: str
    use: object  # the family's record of the file and strength


class LoadControl(NodeRunner):
    def __init__(self, families: Families, runtime: ModelRuntime) -> None:
        self.families = families
        self.runtime = runtime

    def _pick(self, params: Mapping[str, Any], node_id: str | None) -> Picked:
        """The family that takes the picked file, and its record of it."""
        name, strength = str(params["name"]), float(params["strength"])
        refusals: list[str] = []
        for family in self.families:
            takes = control_of(family)
            if takes is None:  # a family without control models is never asked
                continue
            try:
                use = takes.control_use(name, strength, node_id)
            except InlineError as exc:
                if exc.status != 422:
                    raise
                refusals.append(exc.message)
                continue
            if use is not None:
                return Picked(family.name, use)
        if not refusals:
            raise InvalidRequest(
                "no model family this server runs takes control models", node_id=node_id
            )
        raise InvalidRequest("; ".join(refusals), node_id=node_id)

    def check_wired(self, node_id: str, params: Mapping[str, Any], wired: frozenset[str]) -> None:
        if "image" not in wired and "inpaint_image" not in wired:
            raise InvalidRequest(NEEDS_AN_IMAGE, node_id=node_id)
        if wired & {"mask", "inpaint_image"}:  # only a control model that inpaints takes them
            takes = control_of(self.families.named(self._pick(params, node_id).family))
            if takes is not None:  # always: `_pick` found a family that takes control models
                takes.check_control_inputs(str(params["name"]), wired, node_id)

    def check(self, node_id: str, params: Mapping[str, Any]) -> Picked:
        picked = self._pick(params, node_id)
        # Whichever of its family's models it drives: a control the family cannot split is
        # refused here when the family's renders are split.
        family = self.families.named(picked.family)
        self.runtime.refuse_if_split(family, LOAD_CONTROLNET.type, params, None, node_id)
        return picked

    def cache_identity(self, params: Mapping[str, Any], prepared: object | None = None) -> str:
        # The file's identity: one replaced under the same name re-runs everything downstream.
        picked = prepared if isinstance(prepared, Picked) else self._pick(params, None)
        return str(getattr(picked.use, "identity", ""))

    def run(self, call: NodeCall) -> NodeResult:
        model = handle_input(call, "model", ModelHandle)
        vae = handle_input(call, "vae", VAEHandle)
        image = _optional_image(call, "image")
        inpaint = _optional_image(call, "inpaint_image")
        raw_mask = call.inputs.get("mask")
        mask = None if raw_mask is None else mask_value(raw_mask, "mask", call.node_id)
        if image is None and inpaint is None:  # refused at submit: an input wired to nothing
            raise InvalidRequest(NEEDS_AN_IMAGE, node_id=call.node_id)
        prepared = call.prepared
        picked = prepared if isinstance(prepared, Picked) else self._pick(call.params, call.node_id)
        family, use = picked.family, picked.use
        name = str(call.params["name"])
        if family != model.family:
            raise InvalidRequest(
                f"controlnet/{name} is a control model for {family}; model {model.name!r} is "
                f"{model.family}",
                node_id=call.node_id,
            )
        if model.control is not None:
            raise InvalidRequest(
                f"model {model.name!r} already has a control model "
                f"(controlnet/{model.control.name}); a render takes one",
                node_id=call.node_id,
            )
        control = ControlHandle(family, use, image, vae, name, mask, inpaint)
        return NodeResult(outputs={"model": dataclasses.replace(model, control=control)})


def _optional_image(call: NodeCall, port: str) -> Image.Image | None:
    value = call.inputs.get(port)
    if value is not None and not isinstance(value, Image.Image):
        raise InvalidRequest(f"the {port} input must be an image", node_id=call.node_id)
    return value
