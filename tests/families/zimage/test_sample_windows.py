"""ComfyUI's KSamplerAdvanced on Z-Image: `sample` runs a window of its schedule (start_step,
end_step), from its latent without added noise, and hands the latent on with its leftover
noise, so two windows chained as ComfyUI's two-stage workflows chain them render what one whole
`sample` renders."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from primitive_graphs import Json, Rig, edge, make_rig, primitive_graph, take_pixels
from zimage_harness import max_diff

from inline_core.errors import InvalidRequest
from inline_core.families.zimage.kit import KitPaths
from inline_core.sampling.loop import StepLoopSampler

STEPS = 6


@pytest.fixture
def rig(kit: KitPaths, sampler: StepLoopSampler, tmp_path: Path) -> Rig:
    return make_rig(kit.root, sampler, tmp_path)


def node(graph: Json, node_id: str) -> Json:
    return next(n for n in graph["nodes"] if n["id"] == node_id)


def two_windows(split: int, sampler: str = "euler") -> Json:
    """Steps 0..split with the leftover noise handed on, then split..end without adding noise."""
    graph = primitive_graph("a fox", steps=STEPS, sampler=sampler)
    first = node(graph, "sample")
    first["params"].update(end_step=split, leftover_noise=True)
    second: dict[str, Any] = {
        **first,
        "id": "sample_2",
        "params": {**first["params"], "start_step": split, "end_step": 10000},
        "inputs": {**first["inputs"], "latent": edge("sample", "latent")},
    }
    second["params"].update(add_noise=False, leftover_noise=False)
    graph["nodes"].append(second)
    node(graph, "decode")["inputs"]["latent"] = edge("sample_2", "latent")
    return graph


@pytest.mark.parametrize("name", ["euler", "dpmpp_2m"])
def test_two_chained_windows_render_the_whole_schedule(rig: Rig, name: str) -> None:
    [whole] = rig.run(primitive_graph("a fox", steps=STEPS, sampler=name))[0].takes
    [chained] = rig.run(two_windows(2, name))[0].takes
    # euler is exact across the cut (up to the leftover latent's rescaling); a multistep sampler
    # restarts its history at the second window, as ComfyUI's does, so it may differ slightly.
    tolerance = 1 if name == "euler" else 12
    assert max_diff(take_pixels(chained), take_pixels(whole)) <= tolerance
    assert chained.params["start_step"] == 2 and chained.params["add_noise"] is False


def test_a_window_stopped_early_is_another_picture(rig: Rig) -> None:
    [whole] = rig.run(primitive_graph("a fox", steps=STEPS))[0].takes
    graph = primitive_graph("a fox", steps=STEPS)
    node(graph, "sample")["params"].update(end_step=3)  # denoised to 0 from step 3's level
    [early] = rig.run(graph)[0].takes
    assert max_diff(take_pixels(early), take_pixels(whole)) > 5


def test_a_window_with_no_step_is_refused(rig: Rig) -> None:
    graph = primitive_graph("a fox", steps=STEPS)
    node(graph, "sample")["params"].update(start_step=STEPS)
    with pytest.raises(InvalidRequest, match="hold no step to run"):
        rig.run(graph)
