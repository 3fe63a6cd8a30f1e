"""Primitive graphs over the kit's ComfyUI-layout files, and a registry + executor to run them."""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PIL import Image
from zimage_harness import Pixels, cpu_config, pixels

from inline_core.contract.registry import Families
from inline_core.errors import NotFound
from inline_core.families.nodes.register import register_families
from inline_core.families.standalone import FamilyRig, family_rig
from inline_core.families.zimage import ZImageFamily
from inline_core.graph.builtin import register_builtin_nodes
from inline_core.graph.cache import NodeCache
from inline_core.graph.executor import ExecutionResult, Executor
from inline_core.graph.registry import Registry
from inline_core.graph.schema import parse_graph
from inline_core.graph.validate import validate_graph
from inline_core.models.catalog import Catalog
from inline_core.runtime.context import ExecutionContext
from inline_core.runtime.file_store import FileTakeStore
from inline_core.runtime.progress import NodeDone, RunEvent
from inline_core.sampling.job import BatchedSampler
from inline_core.takes import MediaRef, Take

MODEL = "zimage_tiny.safetensors"
ENCODER = "zimage_tiny_qwen3"
VAE = "zimage_tiny_vae.safetensors"

Json = dict[str, Any]
_run_ids = itertools.count()


def edge(node: str, output: str) -> Json:
    return {"from": node, "output": output}


def primitive_graph(
    prompt: str,
    *,
    width: int = 64,
    height: int = 64,
    steps: int = 4,
    seed: int = 7,
    cfg: float = 1.0,
    negative: str | None = None,
    sampler: str = "euler",
    scheduler: str = "simple",
    denoise: float = 1.0,
    batch: int = 1,
) -> Json:
    """The primitive graph equivalent to one `alibaba/z-image-turbo` render; target `decode`."""
    sample_inputs: Json = {
        "model": edge("model", "model"),
        "positive": edge("positive", "conditioning"),
        "latent": edge("latent", "latent"),
    }
    nodes: list[Json] = [
        {"id": "prompt", "type": "input/text", "params": {"text": prompt}},
        {"id": "model", "type": "load/diffusion-model", "params": {"file": MODEL}},
        {"id": "encoder", "type": "load/text-encoder", "params": {"file": ENCODER}},
        {"id": "vae", "type": "load/vae", "params": {"file": VAE}},
        {
            "id": "positive",
            "type": "encode/text",
            "inputs": {
                "text_encoder": edge("encoder", "text_encoder"),
                "prompt": edge("prompt", "text"),
            },
        },
        {
            "id": "latent",
            "type": "latent/empty",
            "params": {"width": width, "height": height, "batch": batch},
        },
        {
            "id": "sample",
            "type": "sample",
            "params": {
                "steps": steps,
                "cfg": cfg,
                "sampler": sampler,
                "scheduler": scheduler,
                "seed": seed,
                "denoise": denoise,
            },
            "inputs": sample_inputs,
        },
        {
            "id": "decode",
            "type": "vae/decode",
            "inputs": {"vae": edge("vae", "vae"), "latent": edge("sample", "latent")},
        },
    ]
    if negative is not None:
        nodes += [
            {"id": "negative_text", "type": "input/text", "params": {"text": negative}},
            {
                "id": "negative",
                "type": "encode/text",
                "inputs": {
                    "text_encoder": edge("encoder", "text_encoder"),
                    "prompt": edge("negative_text", "text"),
                },
            },
        ]
        sample_inputs["negative"] = edge("negative", "conditioning")
    return {"schemaVersion": 1, "nodes": nodes}


class FolderMedia:
    """Assets by id in one folder (for `input/image`)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def resolve(self, ref: MediaRef) -> Path:
        path = self.root / ref.id
        if not path.is_file():
            raise NotFound(f"no {ref.ref} {ref.id!r}")
        return path


@dataclass
class Rig:
    """A registry with the Z-Image family registered, and an executor with a node cache."""

    registry: Registry
    catalog: Catalog
    runner: FamilyRig  # the family and the runtime the registry's runners share
    executor: Executor
    takes_dir: Path
    media: FolderMedia

    def run(self, graph: Json, target: str = "decode") -> tuple[ExecutionResult, list[RunEvent]]:
        validated = validate_graph(
            parse_graph(graph), target, self.registry, self.catalog, rng=random.Random(0)
        )
        events: list[RunEvent] = []
        ctx = ExecutionContext(
            run_id=f"prim{next(_run_ids)}",
            takes=FileTakeStore(self.takes_dir),
            events=events.append,
        )
        return self.executor.execute(validated, ctx), events


def make_rig(models_dir: Path, sampler: BatchedSampler, work: Path) -> Rig:
    config = cpu_config(models_dir)
    catalog = Catalog(models_dir, ttl_s=0.0)
    registry = Registry()
    media = FolderMedia(work / "assets")
    media.root.mkdir(parents=True, exist_ok=True)
    register_builtin_nodes(registry, media)
    runner = family_rig(ZImageFamily, models_dir, sampler, config=config)
    register_families(registry, Families([runner.family]), catalog, runner.runtime)
    executor = Executor(catalog, NodeCache())
    return Rig(registry, catalog, runner, executor, work / "takes", media)


def ran_nodes(events: list[RunEvent]) -> set[str]:
    """The nodes a run executed (not served from the node cache)."""
    return {e.node_id for e in events if isinstance(e, NodeDone) and not e.cached}


def take_pixels(take: Take) -> Pixels:
    with Image.open(take.path) as png:
        return pixels(png)
