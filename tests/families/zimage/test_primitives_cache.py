"""Node output caching across runs of a primitive graph: only what a change reaches runs again."""

from __future__ import annotations

from pathlib import Path

from primitive_graphs import make_rig, primitive_graph, ran_nodes, take_pixels
from zimage_harness import max_diff

from inline_core.families.zimage.kit import KitPaths
from inline_core.sampling.loop import StepLoopSampler

LOADERS = {"model", "encoder", "vae"}


def test_a_new_seed_reruns_only_sample_and_decode(
    kit: KitPaths, sampler: StepLoopSampler, tmp_path: Path
) -> None:
    rig = make_rig(kit.root, sampler, tmp_path)
    first, events = rig.run(primitive_graph("a fox", seed=1))
    assert ran_nodes(events) == {"prompt", *LOADERS, "positive", "latent", "sample", "decode"}
    loads = rig.runner.stats()["loads"]

    second, events = rig.run(primitive_graph("a fox", seed=2))
    assert ran_nodes(events) == {"sample", "decode"}
    assert max_diff(take_pixels(first.takes[0]), take_pixels(second.takes[0])) > 0

    # The same graph again: everything is cached, and the run still gets its own take.
    again, events = rig.run(primitive_graph("a fox", seed=2))
    assert ran_nodes(events) == set()
    assert (
        again.takes[0].id != second.takes[0].id and again.takes[0].run_id != second.takes[0].run_id
    )
    assert again.takes[0].hash == second.takes[0].hash

    # A new prompt reaches its text node, its encoding and what follows; never the loaders.
    _result, events = rig.run(primitive_graph("a hare", seed=2))
    assert ran_nodes(events) == {"prompt", "positive", "sample", "decode"}
    assert rig.runner.stats()["loads"] == loads  # and nothing was loaded again
