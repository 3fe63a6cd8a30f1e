"""SD 1.5's ComfyUI reader: SDXL's chain (`comfy_reader.py`) onto `stability/sd15`, which takes
no LoRAs and no refiner: a LoraLoader on the chain, or two KSamplerAdvanced stages, are refused
naming the node."""

from __future__ import annotations

from typing import Any

from inline_core.families.sdxl.comfy_reader import SDXLCollapse
from inline_core.families.sdxl.sd15 import NODE_TYPE
from inline_core.importer.dropped import UnsupportedNode
from inline_core.importer.own_node import Sampling
from inline_core.importer.values import describe


class SD15Collapse(SDXLCollapse):
    def model(self, sampling: Sampling, node_id: str) -> dict[str, Any]:
        if sampling.last is not None:
            raise UnsupportedNode(
                f"{describe(sampling.last)}: a second KSamplerAdvanced stage (a refiner) is "
                f"SDXL's; {NODE_TYPE} samples one model"
            )
        _values, adapters, _node = self.model_way(sampling.first)
        loaders = [self.nodes[i] for i in sorted(self.clip_loras)] + adapters
        if loaders:
            raise UnsupportedNode(
                f"{describe(loaders[0])}: {NODE_TYPE} takes no LoRAs; remove the LoraLoader"
            )
        return super().model(sampling, node_id)
