"""`lower` reads a node's LoRA stack only when a LoRA is wired: a node without one lowers to the
same render as before, without the LoRA-stack machinery (the common render's walk), and a node
with one still carries its stack and is still refused a LoRA of another family."""

from __future__ import annotations

from typing import Any

import pytest
from zimage_harness import node_params

from inline_core.contract import lora_stacks
from inline_core.contract.handles import LoraHandle
from inline_core.diffusion.adapters.stack import LoraUse
from inline_core.errors import InvalidRequest
from inline_core.families.zimage import ZImageFamily
from inline_core.families.zimage.descriptor import NODE_TYPE
from inline_core.families.zimage.kit import KitPaths
from inline_core.models.catalog import Catalog


def lowered(family: ZImageFamily, inputs: dict[str, Any]) -> Any:
    params = node_params()
    sources = family.resolve(NODE_TYPE, params).require("z")
    return family.lower(NODE_TYPE, params, inputs, "z", sources)


def kit_lora(family: ZImageFamily, kit: KitPaths, owner: str | None = None) -> LoraHandle:
    name = kit.loras["a"].name
    entry = family.catalog.entry("loras", name)
    return LoraHandle(owner or family.name, LoraUse(name, str(entry.path), entry.identity, 0.8))


def test_no_lora_wired_lowers_the_same_render_without_the_stack_machinery(
    kit: KitPaths, monkeypatch: pytest.MonkeyPatch
) -> None:
    family = ZImageFamily(Catalog(kit.root), {})
    read = lowered(family, {"prompt": "a fox", "loras": []})  # read through lora_stacks

    def not_read(*_args: object) -> Any:
        raise AssertionError("the LoRA stack was read with no LoRA wired")

    monkeypatch.setattr(lora_stacks, "lora_handles", not_read)
    skipped = lowered(family, {"prompt": "a fox"})
    assert skipped == read
    assert "loras" not in skipped.request


def test_a_wired_lora_is_still_lowered_and_checked(kit: KitPaths) -> None:
    family = ZImageFamily(Catalog(kit.root), {})
    handle = kit_lora(family, kit)
    request = lowered(family, {"prompt": "a fox", "loras": [handle]}).request
    assert request["loras"] == (handle.use,)
    with pytest.raises(InvalidRequest, match="is a LoRA for wan"):
        lowered(family, {"prompt": "a fox", "loras": [kit_lora(family, kit, "wan")]})
