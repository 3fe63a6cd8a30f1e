"""Registering families into the graph: each family's high-level nodes, and one runner per
primitive that dispatches by family (torch-free).

A family whose torch side is not installed keeps its nodes listed but unavailable, saying what to
install; the primitives are unavailable when no family serving them can run.
"""

from __future__ import annotations

from inline_core.contract.registry import Families
from inline_core.engine.runtime import ModelRuntime
from inline_core.families.nodes.controls import LoadControl
from inline_core.families.nodes.family_node import FamilyNodeRunner
from inline_core.families.nodes.guidance import ConditioningGuidance
from inline_core.families.nodes.loaders import (
    LoadDiffusionModel,
    Loaders,
    LoadTextEncoder,
    LoadVAE,
)
from inline_core.families.nodes.loras import InputLora, LoadLora, LoraPicker
from inline_core.families.nodes.primitives import (
    EmptyLatent,
    EncodeText,
    NoiseMask,
    Sample,
    VAEDecode,
    VAEEncode,
    VAEEncodeInpaint,
)
from inline_core.graph.primitives import (
    CONDITIONING_GUIDANCE,
    ENCODE_TEXT,
    INPUT_LORA,
    LATENT_EMPTY,
    LATENT_NOISE_MASK,
    LOAD_CONTROLNET,
    LOAD_DIFFUSION_MODEL,
    LOAD_LORA,
    LOAD_TEXT_ENCODER,
    LOAD_VAE,
    PRIMITIVE_DESCRIPTORS,
    SAMPLE,
    VAE_DECODE,
    VAE_ENCODE,
    VAE_ENCODE_INPAINT,
)
from inline_core.graph.registry import Registry
from inline_core.graph.runner import NodeRunner
from inline_core.models.catalog import Catalog

PRIMITIVE_TYPES: tuple[str, ...] = tuple(d.type for d in PRIMITIVE_DESCRIPTORS)


def register_families(
    registry: Registry, families: Families, catalog: Catalog, runtime: ModelRuntime
) -> None:
    """Every family's nodes, then the primitives over the families that serve them. An explicit
    split a family's default model cannot run, or that no family can use, raises
    `InvalidRequest` (a start-up error)."""
    splitting = [runtime.check_split(family) for family in families]
    if not any(splitting):
        runtime.refuse_unused_split(list(families))
    for family in families:
        missing = family.missing_runtime()
        for descriptor in family.nodes():
            registry.register(descriptor, FamilyNodeRunner(family, descriptor, runtime))
            if missing:
                registry.mark_unavailable(
                    descriptor.type, f"{', '.join(missing)} not installed; {family.install_hint}"
                )
    register_primitives(registry, families, catalog, runtime)


def register_primitives(
    registry: Registry, families: Families, catalog: Catalog, runtime: ModelRuntime
) -> None:
    serving = families.with_primitives()
    if not serving:
        return  # the descriptors stay served without runners: refused at submit
    loaders = Loaders(families, catalog, runtime)
    loras = LoraPicker(families, catalog)
    runners: dict[str, NodeRunner] = {
        LOAD_DIFFUSION_MODEL.type: LoadDiffusionModel(loaders),
        LOAD_VAE.type: LoadVAE(loaders),
        LOAD_TEXT_ENCODER.type: LoadTextEncoder(loaders),
        LOAD_LORA.type: LoadLora(loras),
        INPUT_LORA.type: InputLora(loras),
        LOAD_CONTROLNET.type: LoadControl(families, runtime),
        ENCODE_TEXT.type: EncodeText(families, runtime),
        CONDITIONING_GUIDANCE.type: ConditioningGuidance(),
        LATENT_EMPTY.type: EmptyLatent(),
        SAMPLE.type: Sample(families, runtime),
        VAE_DECODE.type: VAEDecode(families, runtime),
        VAE_ENCODE.type: VAEEncode(families, runtime),
        VAE_ENCODE_INPAINT.type: VAEEncodeInpaint(families, runtime),
        LATENT_NOISE_MASK.type: NoiseMask(),
    }
    for descriptor in PRIMITIVE_DESCRIPTORS:
        registry.register(descriptor, runners[descriptor.type])
    missing = {name for family in serving for name in family.missing_runtime()}
    if all(family.missing_runtime() for family in serving):
        hints = "; ".join(sorted({family.install_hint for family in serving}))
        for node_type in PRIMITIVE_TYPES:
            registry.mark_unavailable(
                node_type, f"{', '.join(sorted(missing))} not installed; {hints}"
            )
