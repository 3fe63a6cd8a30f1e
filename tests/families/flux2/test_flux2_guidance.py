"""FLUX.2 dev's embedded guidance through the primitives: `conditioning/guidance` (ComfyUI's
FluxGuidance) sets it on the prompt's conditioning, and `sample` renders the `bfl/flux-2` node's
pixels at that guidance (not ComfyUI's default 3.5); klein, which has no guidance embedder,
refuses it at submit naming it."""

from __future__ import annotations

from pathlib import Path

import pytest
from flux2_graphs import Graph, edge, graph_rig
from flux2_harness import make_rig, max_diff, render, take_pixels

from inline_core.errors import InvalidRequest
from inline_core.families.flux2.kit import Flux2Kit
from inline_core.families.flux2.kit_dev import Flux2DevKit
from inline_core.sampling.loop import StepLoopSampler

TOLERANCE = 1  # float ordering may move a channel by a level; never more
STEPS, PROMPT, GUIDANCE = 3, "a red fox in the snow", 5.0
DEV, DEV_ENCODER = "flux2_dev_tiny.safetensors", "mistral_3_small_flux2_tiny.safetensors"


def guided(graph: Graph, guidance: float) -> Graph:
    """The prompt's conditioning through `conditioning/guidance` into one `sample`."""
    latent = graph.add("latent", "latent/empty", {"width": 64, "height": 64, "batch": 1})
    graph.add("guided", "conditioning/guidance", {"guidance": guidance},
              conditioning=graph.encode("prompt", PROMPT))  # fmt: skip
    graph.add("s", "sample", {"seed": 7, "steps": STEPS}, latent=edge(latent, "latent"),
              model=edge("model", "model"), positive=edge("guided", "conditioning"))  # fmt: skip
    graph.decode(edge("s", "latent"))
    return graph


def test_dev_embeds_the_conditionings_guidance_as_the_node_does(
    flux2_dev_kit: Flux2DevKit, sampler: StepLoopSampler, tmp_path: Path
) -> None:
    dev = graph_rig(make_rig(flux2_dev_kit.root, sampler), tmp_path)
    ours = dev.decoded(guided(Graph(DEV, encoder=DEV_ENCODER), GUIDANCE))
    node = render(dev.rig, tmp_path, PROMPT, model=DEV, steps=STEPS, guidance=GUIDANCE)
    assert max_diff(ours, take_pixels(node)) <= TOLERANCE
    default = render(dev.rig, tmp_path, PROMPT, model=DEV, steps=STEPS, guidance=3.5)
    assert max_diff(ours, take_pixels(default)) > TOLERANCE  # the guidance reached the model


def test_klein_refuses_a_guidance_at_submit_naming_it(
    flux2_kit: Flux2Kit, sampler: StepLoopSampler, tmp_path: Path
) -> None:
    klein = graph_rig(make_rig(flux2_kit.root, sampler), tmp_path)
    with pytest.raises(InvalidRequest, match="no guidance embedder.*guidance 5 .*FluxGuidance"):
        klein.validate(guided(Graph(), GUIDANCE))
