"""`ModelFacts`: all the importer may ask of the model families this server runs.

The importer names no family: it asks these questions of whatever families are installed (the
server passes its `Families`), so a new family is recognised in workflows without an edit here.
"""

from __future__ import annotations

from typing import Protocol

from inline_core.contract.comfy_recipe import ComfyRecipe
from inline_core.graph.descriptor import NodeDescriptor


class ModelFacts(Protocol):
    def flow_shift(self, model_file: str) -> float | None:
        """The flow shift `sample` runs `diffusion_models/<model_file>` at; None when unknown."""
        ...

    def family_names(self) -> list[tuple[str, str]]:
        """(name, title) of each family the server runs."""
        ...

    def names_model(self, family: str, file_name: str) -> bool:
        """Whether a model file name (a workflow's UNETLoader's) reads as one of `family`'s."""
        ...

    def importable(self, family: str) -> bool:
        """Whether workflows can be mapped onto `family` (the importer maps onto the low-level
        vocabulary: a family that does not serve it runs only its own nodes)."""
        ...

    def own_node(self, family: str) -> NodeDescriptor | None:
        """The node a workflow for `family` collapses onto when the family serves no low-level
        vocabulary (its recipe's `own_node`); None: such workflows are refused."""
        ...

    def comfy_recipe(self, family: str) -> ComfyRecipe | None:
        """`family`'s ComfyUI recipe: its classes' handlers, its own node's chain."""
        ...

    def text_encoder_types(self, family: str) -> tuple[str, ...]:
        """The `type`s ComfyUI's CLIPLoader loads `family`'s text encoder as."""
        ...

    def family_of(self, category: str, file_name: str) -> str | None:
        """The family that takes the catalog's `category/file_name`, by its contents; None if
        none does (or the file is not there)."""
        ...

    def takes(self, family: str, category: str, file_name: str) -> bool:
        """Whether `family` takes the catalog's `category/file_name` by its contents (a file
        several families can read, e.g. the Wan 2.1 VAE that Qwen-Image reads too, is each's)."""
        ...

    def control_inpaints(self, file_name: str) -> bool | None:
        """Whether the control model `controlnet/<file_name>` takes an inpaint mask and an image
        to inpaint; None when no family takes the file (or it is not there)."""
        ...
