"""`ModelFormat`: how one kind of component is recognised in its files and built (torch-free)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, cast

from inline_core.diffusion.files.shapes import Shapes

# Keys as stored in a single file -> keys of the library class (torch tensors; typed loosely so
# this description stays torch-free).
Convert = Callable[[dict[str, Any], Mapping[str, Any]], dict[str, Any]]


def diffusers_converted(
    sd: dict[str, Any], prefixes: tuple[str, ...], already: str, converter: str
) -> dict[str, Any]:
    """A single file's state -> diffusers keys: the first of `prefixes` every key has is cut, and
    unless `already` (a key only diffusers' naming has) is there, diffusers' own single-file
    `converter` (a function of `diffusers.loaders.single_file_utils`) renames the rest."""
    from inline_core.diffusion.files.shapes import strip_prefix
    from inline_core.diffusion.libs import module

    prefix, _ = strip_prefix({k: tuple(v.shape) for k, v in sd.items()}, prefixes)
    if prefix:
        sd = {k[len(prefix) :]: v for k, v in sd.items()}
    if already in sd:
        return sd
    convert = getattr(module("diffusers.loaders.single_file_utils"), converter)
    return cast(dict[str, Any], convert(dict(sd)))


def keep_keys(state: dict[str, Any], _config: Mapping[str, Any]) -> dict[str, Any]:
    """For a format whose single files already use the library's key names."""
    return state


@dataclass(frozen=True)
class ModelFormat:
    """One component format: what it is called in messages, which library class builds it, and
    how a single file of it is recognised, configured and renamed."""

    what: str  # "diffusion model", "vae", "text encoder": how errors name the component
    title: str  # what a file of this format is: "... is not a <title>"
    library: Literal["diffusers", "transformers"]
    class_name: str  # e.g. "AutoencoderKL" (diffusers) or "Qwen3Model" (transformers)
    recognize: Callable[[Shapes], bool]
    infer_config: Callable[[Shapes], dict[str, Any]]
    convert: Convert = keep_keys
    config_class: str | None = None  # transformers: the config class the inferred kwargs build
    folder_loader: str = "from_pretrained"  # transformers folders load with AutoModel instead
    # Modules whose code reads their weights' dtype (e.g. to cast a timestep embedding to it):
    # their weights are converted to the compute dtype at load, never kept in a file's lower one.
    # Module names, or dotted parts of them ("t_embedder" matches "t_embedder.mlp.0").
    computed_at_load: tuple[str, ...] = ()

    def computes_at_load(self, module_name: str) -> bool:
        dotted = f".{module_name}."
        return any(f".{part}." in dotted for part in self.computed_at_load)
