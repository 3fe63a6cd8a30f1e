"""A prompt change on a Z-Image primitive graph whose `load/text-encoder` has no `type`, before and
after the encoder is read only the ways the run's samples take it.

    .venv/bin/python bench/untyped_encoder.py [--renders 8] [--steps 2] [--size 64]

In process, on the CPU, over one models folder holding the tiny Z-Image and FLUX.2 klein kits
(both read the kit's Qwen3). Each pair of renders gets new prompts: "before" runs the graph with
its encoder handle as validation made it before (every family that reads the file reads the
prompt: two forwards), "after" as validation makes it now (Z-Image's reading alone); the order
alternates within pairs. It times the whole run (validation and execution) and the `encode/text`
node alone, counts the text encoder's forwards, and checks both renders give the same pixels.
Prints a table (medians, ms) and writes bench/results/untyped_encoder.json.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, cast

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "untyped_encoder.json"
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
from PIL import Image  # noqa: E402

from inline_core.contract.handles import TextEncoderHandle  # noqa: E402
from inline_core.families.flux2.kit import build_kit  # noqa: E402
from inline_core.families.zimage import ZImageFamily  # noqa: E402
from inline_core.families.zimage.kit import build_kit as build_zimage_kit  # noqa: E402
from inline_core.graph.validate import ValidatedGraph  # noqa: E402
from inline_core.runtime.progress import NodeDone, NodeStarted, RunEvent  # noqa: E402
from inline_core.sampling.loop import StepLoopSampler  # noqa: E402
from tests.families.flux2.flux2_graphs import Graph, GraphRig, edge, graph_rig  # noqa: E402
from tests.families.flux2.flux2_harness import make_rig  # noqa: E402
from tests.families.node_context import node_context  # noqa: E402

ZIMAGE = ("zimage_tiny.safetensors", "zimage_tiny_vae.safetensors")


def graph(prompt: str, steps: int, size: int) -> Graph:
    out = Graph(ZIMAGE[0], "", ZIMAGE[1])  # no `type`
    latent = out.add("latent", "latent/empty", {"width": size, "height": size, "batch": 1})
    out.decode(out.sample("sample", edge(latent, "latent"), prompt, steps=steps))
    return out


def as_before(rig: GraphRig, validated: ValidatedGraph) -> ValidatedGraph:
    """`validated` with its encoder read every way a family here reads the file."""
    runner = rig.registry.runner("load/text-encoder")
    assert runner is not None
    wide = runner.check("encoder", validated.graph.by_id["encoder"].params)
    assert isinstance(wide, TextEncoderHandle) and len(wide.readers) == 2
    return dataclasses.replace(validated, prepared={**validated.prepared, "encoder": wide})


class Timed:
    """One render: its whole time, its encode node's, the encoder's forwards, its pixels."""

    def __init__(self, rig: GraphRig, forwards: list[int], before: bool, prompt: str) -> None:
        started: dict[str, float] = {}
        self.encode_ms = 0.0

        def on_event(event: RunEvent) -> None:
            if isinstance(event, NodeStarted):
                started[event.node_id] = time.perf_counter()
            elif isinstance(event, NodeDone) and event.node_id == "sample_pos":
                self.encode_ms = (time.perf_counter() - started[event.node_id]) * 1000

        counted = len(forwards)
        start = time.perf_counter()
        validated = rig.validate(graph(prompt, ARGS.steps, ARGS.size))
        if before:
            validated = as_before(rig, validated)
        ctx = node_context(rig.takes_dir, on_event=on_event)
        takes = rig.executor.execute(validated, ctx).takes
        self.total_ms = (time.perf_counter() - start) * 1000
        self.forwards = len(forwards) - counted
        with Image.open(takes[-1].path) as png:
            self.pixels = png.tobytes()


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="untyped_encoder_"))
    models = work / "models"
    build_kit(models, layouts=("comfy",))
    build_zimage_kit(models, layouts=("comfy",))
    sampler = StepLoopSampler()
    try:
        klein = make_rig(models, sampler)
        zimage = ZImageFamily(klein.catalog, klein.config.env)
        rig = graph_rig(klein, work, zimage)
        handle = as_before(rig, rig.validate(graph("warm", 1, 64))).prepared["encoder"]
        assert isinstance(handle, TextEncoderHandle)
        encoder = cast(
            Any, klein.runtime.stacks().text_encoder(zimage, handle.encoder, handle.tokenizer)
        )
        forwards: list[int] = []

        def count(_module: torch.nn.Module, _args: object, _output: object) -> None:
            forwards.append(1)

        cast(torch.nn.Module, encoder.model).register_forward_hook(count)
        Timed(rig, forwards, True, "warm up one")
        Timed(rig, forwards, False, "warm up two")
        rows: dict[str, list[Timed]] = {"before": [], "after": []}
        for i in range(ARGS.renders):
            order = (True, False) if i % 2 == 0 else (False, True)
            for before in order:
                # Each render a prompt of its own: nothing kept from another render.
                prompt = f"a red fox number {i} {'before' if before else 'after'}"
                rows["before" if before else "after"].append(Timed(rig, forwards, before, prompt))
        same = Timed(rig, forwards, True, "the same prompt").pixels
        same_after = Timed(rig, forwards, False, "the same prompt").pixels
    finally:
        sampler.close()
    report(rows, same == same_after)


def report(rows: dict[str, list[Timed]], pixel_equal: bool) -> None:
    def median(name: str, field: str) -> float:
        return statistics.median(getattr(t, field) for t in rows[name])

    table = {
        name: {
            "render_ms": median(name, "total_ms"),
            "encode_ms": median(name, "encode_ms"),
            "forwards": median(name, "forwards"),
        }
        for name in rows
    }
    ratio_render = table["after"]["render_ms"] / table["before"]["render_ms"]
    ratio_encode = table["after"]["encode_ms"] / table["before"]["encode_ms"]
    load = os.getloadavg()
    print(
        f"untyped Z-Image primitive graph, {ARGS.size}px, {ARGS.steps} steps, {ARGS.renders} pairs"
    )
    print(f"{'':8} {'render ms':>10} {'encode ms':>10} {'forwards':>9}")
    for name, row in table.items():
        print(f"{name:8} {row['render_ms']:10.1f} {row['encode_ms']:10.1f} {row['forwards']:9.0f}")
    print(f"after/before: render {ratio_render:.3f}, encode {ratio_encode:.3f}")
    print(f"same pixels before and after: {pixel_equal}; load {load[0]:.1f} {load[1]:.1f}")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(
        json.dumps(
            {
                "args": vars(ARGS),
                "medians": table,
                "after_over_before": {"render": ratio_render, "encode": ratio_encode},
                "pixel_equal": pixel_equal,
                "load": load,
                "machine": platform.platform(),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--renders", type=int, default=8, help="pairs of renders")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--size", type=int, default=64)
    ARGS = parser.parse_args()
    main()
