"""A Qwen3 file loaded without a `type` through the primitives is read only the ways the run's
`sample`s take it, found at submit through the graph's edges: a Z-Image or FLUX.2 klein graph
runs the text encoder once per new prompt (it ran twice, once per family that reads the file),
and renders what it rendered; one conditioning feeding both families' samples is read both ways,
each once, and each sample takes its own. The readings stay apart in the node cache over one
resident encoder, and a typed encoder read for the other family is still a 422 naming the type."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pytest
import torch
from flux2_graphs import Graph, GraphRig, edge, graph_rig
from flux2_harness import Pixels, make_rig, max_diff, pixels
from PIL import Image

from inline_core.contract.family import Family
from inline_core.contract.handles import TextEncoderHandle
from inline_core.errors import InvalidRequest
from inline_core.families.flux2.kit import Flux2Kit
from inline_core.families.zimage import ZImageFamily
from inline_core.families.zimage.kit import build_kit as build_zimage_kit
from inline_core.graph.executor import ExecutionResult
from inline_core.graph.validate import ValidatedGraph
from inline_core.sampling.loop import StepLoopSampler
from tests.families.node_context import node_context

ZIMAGE = ("zimage_tiny.safetensors", "zimage_tiny_vae.safetensors")


@pytest.fixture(scope="module")
def both(flux2_kit: Flux2Kit) -> Path:
    """One models folder holding both kits (ComfyUI layout)."""
    build_zimage_kit(flux2_kit.root, layouts=("comfy",))
    return flux2_kit.root


@dataclass
class Counted:
    """A graph rig over Z-Image and FLUX.2 klein whose one resident Qwen3 counts its forwards."""

    rig: GraphRig
    zimage: Family
    forwards: list[int]

    def validate(self, graph: Graph, target: str = "decode") -> ValidatedGraph:
        return self.rig.validate(graph, target)

    def execute(self, validated: ValidatedGraph) -> ExecutionResult:
        return self.rig.executor.execute(validated, node_context(self.rig.takes_dir))

    def counted(self, validated: ValidatedGraph) -> tuple[int, Pixels]:
        """The text-encoder forwards a run of `validated` took, and its last take's pixels."""
        before = len(self.forwards)
        takes = self.execute(validated).takes
        with Image.open(takes[-1].path) as png:
            return len(self.forwards) - before, pixels(png)


@pytest.fixture
def counted(both: Path, sampler: StepLoopSampler, tmp_path: Path) -> Iterator[Counted]:
    klein = make_rig(both, sampler)
    zimage = ZImageFamily(klein.catalog, klein.config.env)
    rig = graph_rig(klein, tmp_path, zimage)
    # The encoder both families read, loaded before any run (runs find it resident) and hooked.
    handle = encoder_handle(rig.validate(Graph(encoder_type=""), "encoder"))
    encoder = cast(
        Any, klein.runtime.stacks().text_encoder(zimage, handle.encoder, handle.tokenizer)
    )
    model = cast(torch.nn.Module, encoder.model)
    forwards: list[int] = []

    def count(_module: torch.nn.Module, _args: object, _output: object) -> None:
        forwards.append(1)

    hook = model.register_forward_hook(count)
    yield Counted(rig, zimage, forwards)
    hook.remove()


def encoder_handle(validated: ValidatedGraph, node_id: str = "encoder") -> TextEncoderHandle:
    handle = validated.prepared[node_id]
    assert isinstance(handle, TextEncoderHandle)
    return handle


def as_before(counted: Counted, validated: ValidatedGraph) -> ValidatedGraph:
    """`validated` with its untyped encoder read every way a family here reads the file, as
    validation made it before it looked at the consumers."""
    node = validated.graph.by_id["encoder"]
    runner = counted.rig.registry.runner("load/text-encoder")
    assert runner is not None
    wide = runner.check("encoder", node.params)
    assert isinstance(wide, TextEncoderHandle) and len(wide.readers) == 2
    return dataclasses.replace(validated, prepared={**validated.prepared, "encoder": wide})


def one_sample(files: tuple[str, str] | None, encoder_type: str, prompt: str) -> Graph:
    """Load, encode `prompt`, sample 2 steps at 64x64, decode: Z-Image's `files` or klein's."""
    graph = (
        Graph(encoder_type=encoder_type)
        if files is None
        else Graph(files[0], encoder_type, files[1])
    )
    latent = graph.add("latent", "latent/empty", {"width": 64, "height": 64, "batch": 1})
    graph.decode(graph.sample("sample", edge(latent, "latent"), prompt, steps=2))
    return graph


FAMILIES = pytest.mark.parametrize(
    ("files", "family", "typed"),
    [(ZIMAGE, "z-image", "lumina2"), (None, "flux-2", "flux2")],
    ids=["z-image", "flux2"],
)


@FAMILIES
def test_an_untyped_encoder_runs_once_per_new_prompt_and_renders_as_before(
    counted: Counted, files: tuple[str, str] | None, family: str, typed: str
) -> None:
    fitted = counted.validate(one_sample(files, "", "a red fox"))
    forwards, untyped = counted.counted(fitted)
    assert forwards == 1
    assert encoder_handle(fitted).readers == (family,)
    # A prompt change: one forward again, where reading it every way took two.
    forwards, _ = counted.counted(counted.validate(one_sample(files, "", "a blue bird")))
    assert forwards == 1
    forwards, before = counted.counted(as_before(counted, fitted))
    assert forwards == 1  # its own reading of "a red fox" is kept; the other family's is new
    forwards, _ = counted.counted(
        as_before(counted, counted.validate(one_sample(files, "", "a cat")))
    )
    assert forwards == 2
    # The same pixels as read every way, and as with the family's type.
    assert max_diff(untyped, before) == 0
    _, explicit = counted.counted(counted.validate(one_sample(files, typed, "a red fox")))
    assert max_diff(untyped, explicit) == 0


def both_samples(zimage_encoder: str, klein_encoder: str | None) -> Graph:
    """One prompt's conditioning into klein's `sample`, whose picture Z-Image's `sample` then
    repaints at denoise 0.6 (vae/encode of klein's decode). `klein_encoder` None: both take
    the conditioning of the `encoder` loader (type `zimage_encoder`); else klein's comes from a
    loader of its own, of that type."""
    graph = Graph(encoder_type=zimage_encoder)
    latent = graph.add("latent", "latent/empty", {"width": 64, "height": 64, "batch": 1})
    positive = graph.encode("positive", "a red fox")
    klein_positive = positive
    if klein_encoder is not None:
        graph.add(
            "klein_encoder",
            "load/text-encoder",
            {"file": "flux2_tiny_qwen3", "type": klein_encoder},
        )
        graph.add("klein_text", "input/text", {"text": "a red fox"})
        graph.add(
            "klein_positive",
            "encode/text",
            text_encoder=edge("klein_encoder", "text_encoder"),
            prompt=edge("klein_text", "text"),
        )
        klein_positive = edge("klein_positive", "conditioning")
    klein = graph.add(
        "klein",
        "sample",
        {"seed": 7, "steps": 2},
        model=edge("model", "model"),
        positive=klein_positive,
        latent=edge(latent, "latent"),
    )
    graph.add("klein_decode", "vae/decode", vae=edge("vae", "vae"), latent=edge(klein, "latent"))
    graph.add("zmodel", "load/diffusion-model", {"file": ZIMAGE[0]})
    graph.add("zvae", "load/vae", {"file": ZIMAGE[1]})
    encoded = graph.add(
        "zencode", "vae/encode", vae=edge("zvae", "vae"), image=edge("klein_decode", "image")
    )
    zimage = graph.add(
        "zimage",
        "sample",
        {"seed": 7, "steps": 2, "denoise": 0.6},
        model=edge("zmodel", "model"),
        positive=positive,
        latent=edge(encoded, "latent"),
    )
    graph.add("decode", "vae/decode", vae=edge("zvae", "vae"), latent=edge(zimage, "latent"))
    return graph


def test_one_conditioning_into_both_families_is_read_both_ways_once_each(
    counted: Counted,
) -> None:
    shared = counted.validate(both_samples("", None))
    assert set(encoder_handle(shared).readers) == {"flux-2", "z-image"}
    forwards, mixed = counted.counted(shared)
    assert forwards == 2
    # Each sample took its own reading: the same pixels as each reading from a typed loader.
    forwards, typed = counted.counted(counted.validate(both_samples("lumina2", "flux2")))
    assert forwards == 0  # both readings of the prompt are kept by the encoder
    assert max_diff(mixed, typed) == 0


def test_the_readings_are_separate_node_cache_entries_over_one_encoder(
    counted: Counted,
) -> None:
    zimage = counted.validate(one_sample(ZIMAGE, "", "a red fox"))
    klein = counted.validate(one_sample(None, "", "a red fox"))
    cache = counted.rig.executor.cache
    assert cache is not None
    forwards, _ = counted.counted(zimage)
    entries = len(cache)
    # The same prompt for klein: not Z-Image's cached conditioning, its own reading.
    forwards, _ = counted.counted(klein)
    assert forwards == 1 and len(cache) > entries
    forwards, _ = counted.counted(zimage)
    assert forwards == 0  # Z-Image's entry is still there
    shared = counted.rig.rig.runtime.stacks().shared()
    assert ("text_encoder", ["flux-2", "z-image"]) in [(s["part"], s["families"]) for s in shared]


def test_a_typed_encoder_for_the_other_family_is_still_refused_naming_the_type(
    counted: Counted,
) -> None:
    with pytest.raises(InvalidRequest) as refused:
        counted.validate(one_sample(ZIMAGE, "flux2", "a red fox"))
    assert refused.value.status == 422
    assert "'lumina2'" in str(refused.value) and "Z-Image" in str(refused.value)


def test_without_a_sample_in_the_run_every_reading_is_kept(counted: Counted) -> None:
    """An encode run on its own (its conditioning the run's result): no consumer says whose
    reading, so the file is read every way, as before."""
    graph = one_sample(ZIMAGE, "", "a red fox")
    assert set(encoder_handle(counted.validate(graph, "sample_pos")).readers) == {
        "flux-2",
        "z-image",
    }
