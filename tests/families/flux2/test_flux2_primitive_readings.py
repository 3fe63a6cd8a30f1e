"""One Qwen3 file, two readings through the primitives: loaded as type `flux2` it is encoded as
FLUX.2 klein reads it (three layers side by side), as `lumina2` as Z-Image reads it; the two are
two node-cache entries over one resident encoder, and a conditioning read for one family wired
into the other's `sample` is a 422 at submit, naming the type that fits. Loaded without a type,
the prompt is read both ways and each family's `sample` takes its own reading. A guidance set on a
conditioning for Z-Image, which embeds none, is a 422 naming it."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import pytest
import torch
from flux2_graphs import ENCODER, Graph, GraphRig, edge, graph_rig
from flux2_harness import Pixels, make_rig, max_diff, pixels
from PIL import Image
from test_flux2_guidance import guided

from inline_core.contract.handles import ConditioningHandle
from inline_core.errors import InvalidRequest
from inline_core.families.flux2.kit import Flux2Kit
from inline_core.families.zimage import ZImageFamily
from inline_core.families.zimage.kit import build_kit as build_zimage_kit
from inline_core.sampling.loop import StepLoopSampler


@pytest.fixture(scope="module")
def both(flux2_kit: Flux2Kit) -> Path:
    """One models folder holding both kits (ComfyUI layout)."""
    build_zimage_kit(flux2_kit.root, layouts=("comfy",))
    return flux2_kit.root


@pytest.fixture
def rig(both: Path, sampler: StepLoopSampler, tmp_path: Path) -> GraphRig:
    klein = make_rig(both, sampler)
    zimage = ZImageFamily(klein.catalog, klein.config.env)
    return graph_rig(klein, tmp_path, zimage)


def encoded(rig: GraphRig, encoder_type: str) -> ConditioningHandle:
    graph = Graph(encoder_type=encoder_type)
    graph.encode("positive", "a red fox")
    handle = rig.run(graph, "positive").outputs["conditioning"]
    assert isinstance(handle, ConditioningHandle)
    return handle


def test_each_type_reads_the_file_its_familys_way_over_one_resident_copy(rig: GraphRig) -> None:
    klein, zimage = encoded(rig, "flux2"), encoded(rig, "lumina2")
    assert (klein.family, zimage.family) == ("flux-2", "z-image")
    assert klein.width == 3 * zimage.width  # klein's three layers side by side
    k_value = cast(torch.Tensor, klein.conditioning.value)
    z_value = cast(torch.Tensor, zimage.conditioning.value)
    assert k_value.shape[0] == 512 and z_value.shape[0] < 512  # klein pads to 512 tokens
    shared = rig.rig.runtime.stacks().shared()
    assert ("text_encoder", ["flux-2", "z-image"]) in [(s["part"], s["families"]) for s in shared]
    # Each reading again: served from its own node-cache entry, never the other's.
    assert encoded(rig, "flux2").family == "flux-2"
    assert encoded(rig, "lumina2").family == "z-image"


def test_a_conditioning_read_for_another_family_is_refused_at_submit(rig: GraphRig) -> None:
    graph = Graph(encoder_type="lumina2")  # Z-Image's reading, into FLUX.2 klein's sample
    latent = graph.add("latent", "latent/empty", {"width": 64, "height": 64, "batch": 1})
    graph.decode(graph.sample("sample", edge(latent, "latent"), "a red fox", steps=2))
    with pytest.raises(InvalidRequest) as refused:
        rig.validate(graph)
    assert refused.value.status == 422
    message = str(refused.value)
    assert "Z-Image" in message and "FLUX.2" in message and "'flux2'" in message
    assert ENCODER in message


def test_an_unknown_type_is_refused_naming_the_types(rig: GraphRig) -> None:
    graph = Graph(encoder_type="sd3")
    graph.encode("positive", "a red fox")
    with pytest.raises(InvalidRequest, match="'flux2', 'lumina2'"):
        rig.validate(graph, "positive")


def rendered(rig: GraphRig, graph: Graph) -> Pixels:
    [take] = rig.run(graph).takes
    with Image.open(take.path) as png:
        return pixels(png)


@pytest.mark.parametrize(
    ("model", "vae", "typed"),
    [
        (None, None, "flux2"),
        ("zimage_tiny.safetensors", "zimage_tiny_vae.safetensors", "lumina2"),
    ],
    ids=["flux2", "z-image"],
)
def test_without_a_type_each_familys_sample_takes_its_own_reading(
    rig: GraphRig, model: str | None, vae: str | None, typed: str
) -> None:
    def graph(encoder_type: str) -> Graph:
        out = Graph(encoder_type=encoder_type)
        if model is not None and vae is not None:
            out = Graph(model, encoder_type, vae)
        latent = out.add("latent", "latent/empty", {"width": 64, "height": 64, "batch": 1})
        out.decode(out.sample("sample", edge(latent, "latent"), "a red fox", steps=2))
        return out

    both = encoded(rig, "")
    assert {both.family, *both.readings} == {"flux-2", "z-image"}
    untyped, explicit = rendered(rig, graph("")), rendered(rig, graph(typed))
    assert max_diff(untyped, explicit) == 0


def test_a_guidance_on_a_family_that_embeds_none_is_refused_at_submit(rig: GraphRig) -> None:
    """Z-Image has no guidance embedder: `conditioning/guidance` into its `sample` is a 422."""
    graph = guided(Graph("zimage_tiny.safetensors", "lumina2", "zimage_tiny_vae.safetensors"), 5.0)
    with pytest.raises(InvalidRequest) as refused:
        rig.validate(graph)
    assert refused.value.status == 422
    assert "Z-Image's models embed no guidance" in str(refused.value)
    assert "conditioning/guidance" in str(refused.value)
