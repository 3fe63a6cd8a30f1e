"""What of ComfyUI's SkyReels-V2 chain the recipe's data does not reach (`comfy.py`'s reader):
the sampler's sampler_name and scheduler, the node's `sampler` and `schedule` one to one (a name
it does not run refused, naming the closest; a SamplerCustomAdvanced chain read as the KSampler
it amounts to, as Wan's), and the one way the render differs from ComfyUI's, said rather than
left silent. ComfyUI's Wan model has no fps embedding and leaves a SkyReels-V2 file's unused; this
node conditions every step on the video's fps through it, as diffusers and SkyReels' own code do.
A model known to hold no fps embedding renders as ComfyUI's, and is not listed."""

from __future__ import annotations

import json
from pathlib import Path

from inline_core.diffusion.files.shapes import read_shapes, strip_prefix
from inline_core.families.skyreels.transformer import FPS_KEY
from inline_core.families.wan import transformer as wan
from inline_core.importer.custom_collapse import CustomCollapse
from inline_core.importer.own_node import Sampling
from inline_core.importer.workflow import ComfyNode

FPS_EMBEDDING = (
    "ComfyUI's Wan model leaves this SkyReels-V2 file's fps embedding unused; "
    "{node} conditions on the video's fps through it, as diffusers and SkyReels-V2's own code do"
)


class SkyReelsCollapse(CustomCollapse):
    def sampling(self, sampler: ComfyNode) -> Sampling:
        return self.node_names(sampler, super().sampling(sampler))

    def sampling_notes(self, sampler: ComfyNode) -> None:
        self.denoise_note(sampler)  # the names are the node's own (`sampling`)

    def model_file(self, loader: ComfyNode, node_id: str) -> str:
        """The loader's file, its fps embedding listed as changing the picture."""
        name = super().model_file(loader, node_id)
        category = self.MODEL_LOADERS[loader.class_type][1]
        here = name in self.mapper.catalog.options(category)
        if not here or has_fps_embedding(self.mapper.catalog.path(category, name)) is not False:
            self.mapper.substituted(loader, FPS_EMBEDDING.format(node=self.descriptor.type))
        return name


def has_fps_embedding(path: Path) -> bool | None:
    """Whether the model at `path` (a diffusers folder or a single file) holds SkyReels-V2's fps
    embedding; None when it cannot be read."""
    if path.is_dir():
        config = path / "transformer" / "config.json"  # a pipeline's; else a transformer's
        config = config if config.is_file() else path / "config.json"
        try:
            return bool(json.loads(config.read_text()).get("inject_sample_info", False))
        except (OSError, ValueError):
            return None
    shapes = read_shapes(path)
    if shapes is None:
        return None
    return FPS_KEY in strip_prefix(shapes, wan.PREFIXES)[1]
