"""Helpers of the LoRA tests (Z-Image's and Wan's): a kit's LoRAs picked as `input/lora` picks
them, and a diffusers pipeline with the same LoRAs loaded through PEFT (the pixel reference)."""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

from inline_core.contract.handles import LoraHandle
from inline_core.contract.registry import Families
from inline_core.families.nodes.loras import LoraPicker
from inline_core.families.standalone import FamilyRig


class KitPaths(Protocol):
    """A family kit's written files: its LoRAs by key."""

    @property
    def loras(self) -> Mapping[str, Path]: ...


# (kit LoRA key, strength) pairs: a stack.
Stack = Sequence[tuple[str, float]]


def lora_name(kit: KitPaths, key: str) -> str:
    return kit.loras[key].name


def picks(rig: FamilyRig, kit: KitPaths, stack: Stack) -> list[LoraHandle]:
    picker = LoraPicker(Families([rig.family]), rig.catalog)
    return [picker.pick({"name": lora_name(kit, key), "strength": s}) for key, s in stack]


@contextmanager
def reference_with(pipe: Any, kit: KitPaths, stack: Stack) -> Generator[Any]:
    """`pipe` with the stack loaded (`load_lora_weights` + `set_adapters`), unloaded after."""
    names: list[str] = []
    for i, (key, _strength) in enumerate(stack):
        name = f"adapter{i}"
        pipe.load_lora_weights(str(kit.loras[key]), adapter_name=name)
        names.append(name)
    pipe.set_adapters(names, adapter_weights=[s for _key, s in stack])
    try:
        yield pipe
    finally:
        pipe.unload_lora_weights()
