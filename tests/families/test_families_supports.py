"""A narrow `Family`: what only some families do is an optional protocol, found by its methods.

Z-Image takes control models (and they may inpaint); Wan takes none; a family that implements
only what every family must is a whole family, asked for no capability it lacks.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from pathlib import Path
from typing import Any

from inline_core.contract.capabilities import Capabilities
from inline_core.contract.family import Family, Lowered, Stack
from inline_core.contract.files import StackRules
from inline_core.contract.registry import Families
from inline_core.contract.sources import Sources
from inline_core.contract.supports import (
    comfy_recipe_of,
    control_of,
    imports_comfy,
    supports_control,
    supports_control_inpaint,
)
from inline_core.families.wan.family import WanFamily
from inline_core.families.zimage.family import ZImageFamily
from inline_core.families.zimage.files import RULES
from inline_core.graph.descriptor import NodeDescriptor
from inline_core.models.catalog import Catalog


class Bare(Family):
    """Only what every family must implement (as a family written before the protocols)."""

    name = "bare"
    title = "Bare"
    requires = ()
    install_hint = ""
    builder = "nowhere:BUILDER"
    capabilities = Capabilities()

    def nodes(self) -> tuple[NodeDescriptor, ...]:
        return ()

    def rules(self) -> StackRules:
        return RULES  # any family's table: the rules are not what these tests ask

    def lower(
        self,
        node_type: str,
        params: Mapping[str, Any],
        inputs: Mapping[str, Any],
        node_id: str,
        sources: Sources,
    ) -> Lowered:
        return Lowered({})

    def new_request(
        self, stack: Stack, sources: Sources, model_key: Hashable, **kwargs: Any
    ) -> Any:
        return None


class OnlyControlUse(Bare):
    """Half of the control protocol: not a family that takes control models."""

    def control_use(self, name: str, strength: float, node_id: str | None) -> object | None:
        return name


def test_each_family_has_the_capabilities_it_implements(tmp_path: Path) -> None:
    catalog = Catalog(tmp_path, ttl_s=0.0)
    zimage, wan = ZImageFamily(catalog, {}), WanFamily(catalog, {})
    assert supports_control(zimage) and supports_control_inpaint(zimage)
    assert not supports_control(wan) and not supports_control_inpaint(wan)
    assert imports_comfy(zimage) and imports_comfy(wan)
    own = comfy_recipe_of(wan)
    assert own is not None and own.own_node is not None and own.own_node.node == "alibaba/wan"


def test_a_family_with_only_the_core_is_whole_and_asked_for_nothing_else(tmp_path: Path) -> None:
    catalog = Catalog(tmp_path, ttl_s=0.0)
    bare, half = Bare(catalog, {}), OnlyControlUse(catalog, {})
    assert control_of(bare) is None and control_of(half) is None
    assert comfy_recipe_of(bare) is None and not imports_comfy(bare)
    families = Families([bare, half, WanFamily(catalog, {})])
    # No family takes control models: none is asked whether one inpaints, none answers.
    assert families.control_inpaints("union.safetensors") is None
    assert families.comfy_recipe("bare") is None and families.own_node("bare") is None
