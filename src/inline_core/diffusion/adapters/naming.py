"""Reading a LoRA file's naming from its tensor names alone (torch-free: submit-time checks).

A LoRA file names, for each layer it adapts, a down (A) and an up (B) matrix and optionally an
alpha. Trainers spell the three differently (`lora_A.weight` / `lora_down.weight` /
`lora.down.weight`) and prefix the layer names their own way (`transformer.`, `diffusion_model.`,
`lora_unet_`). A family says which prefixes it knows and how each maps a layer name onto its
model's module names (`LoraNamings`); `read_layout` applies that to a file's keys, so a file of
another model, or of no known trainer, is refused before anything loads.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from inline_core.errors import InvalidRequest

# Tensor name endings -> which part of a layer's adapter they hold.
ROLES: Mapping[str, str] = {
    ".lora_A.weight": "down",
    ".lora_B.weight": "up",
    ".lora_down.weight": "down",
    ".lora_up.weight": "up",
    ".lora.down.weight": "down",
    ".lora.up.weight": "up",
    ".alpha": "alpha",
}
# Full weight and bias differences some trainers add beside the pairs (LyCORIS, distilled LoRAs).
DIFFS = (".diff", ".diff_b")


@dataclass(frozen=True)
class Naming:
    """One trainer's spelling: the prefix its layer names start with, and how a layer name
    after the prefix becomes the model's module name (None: the layer is not one this model
    adapts)."""

    title: str  # "diffusers/PEFT", "kohya/ComfyUI", ...
    prefix: str
    module: Callable[[str], str | None]


@dataclass(frozen=True)
class LoraNamings:
    """A family's LoRA namings and what it tells a user whose file matches none."""

    model: str  # the family title, for messages
    namings: tuple[Naming, ...]

    def expected(self) -> str:
        spellings = ", ".join(f"{n.title} ({n.prefix}...)" for n in self.namings)
        return f"a {self.model} LoRA in one of the namings {spellings}"


class NamingMismatch(InvalidRequest):
    """A LoRA file whose layers are not in a family's namings: a file of another model, where
    another family's refusal may say more."""


@dataclass(frozen=True)
class LoraLayout:
    naming: str
    modules: tuple[str, ...]  # the model's modules it adapts, in file order
    # The file's layer names (its tensor names before the down/up/alpha endings) -> modules.
    layers: Mapping[str, str]


def split_key(key: str) -> tuple[str, str] | None:
    """(layer, role) of one tensor name, or None when it is no LoRA tensor."""
    for ending, role in ROLES.items():
        if key.endswith(ending):
            return key[: -len(ending)], role
    return None


def read_layout(file: str, keys: Iterable[str], namings: LoraNamings) -> LoraLayout:
    """The layout of a LoRA file with tensors `keys`; `InvalidRequest` naming the file and what
    was expected when its naming is unknown or it adapts layers this model does not have."""
    keys = [k for k in keys if "dora_scale" not in k]
    split = [(key, split_key(key)) for key in keys]
    strays = [key for key, parts in split if parts is None]
    diffs = [key for key in strays if key.endswith(DIFFS)]
    if diffs:
        raise InvalidRequest(
            f"loras/{file} holds weight or bias differences such as {diffs[0]!r} (.diff, "
            f".diff_b), which are not applied per request: only low-rank (down/up) pairs are; "
            f"expected {namings.expected()}"
        )
    if not keys or strays:
        what = "no tensors" if not keys else f"tensors such as {strays[0]!r} that are not LoRA's"
        raise InvalidRequest(f"loras/{file} has {what}; expected {namings.expected()}")
    layers = {parts[0] for _key, parts in split if parts is not None}
    for naming in namings.namings:
        if not all(layer.startswith(naming.prefix) for layer in layers):
            continue
        modules: dict[str, None] = {}
        by_layer: dict[str, str] = {}
        for layer in sorted(layers):
            module = naming.module(layer[len(naming.prefix) :])
            if module is None:
                raise NamingMismatch(
                    f"loras/{file} adapts {layer!r}, which is not a layer of {namings.model}'s "
                    f"transformer that LoRAs may adapt; it looks like a LoRA for another model "
                    f"(expected {namings.expected()})"
                )
            modules[module] = None
            by_layer[layer] = module
        _check_pairs(file, split)
        return LoraLayout(naming.title, tuple(modules), by_layer)
    raise NamingMismatch(
        f"loras/{file} matches no known LoRA naming (its layers start like "
        f"{sorted(layers)[0]!r}); expected {namings.expected()}"
    )


def _check_pairs(file: str, split: list[tuple[str, tuple[str, str] | None]]) -> None:
    roles: dict[str, set[str]] = {}
    for _key, parts in split:
        if parts is not None:
            roles.setdefault(parts[0], set()).add(parts[1])
    for layer, have in roles.items():
        if not {"down", "up"} <= have:
            missing = "up (B)" if "up" not in have else "down (A)"
            raise InvalidRequest(f"loras/{file}: layer {layer!r} has no {missing} matrix")
