"""FLUX.2 primitive graphs over the kit's ComfyUI-layout files, run through a registry and an
executor on a FLUX.2 rig's runtime (so the `bfl/flux-2` node and the graph share what is loaded)."""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PIL import Image

from inline_core.contract.family import Family
from inline_core.contract.registry import Families
from inline_core.families.nodes.register import register_families
from inline_core.families.standalone import FamilyRig
from inline_core.graph.builtin import register_builtin_nodes
from inline_core.graph.cache import NodeCache
from inline_core.graph.executor import ExecutionResult, Executor
from inline_core.graph.registry import Registry
from inline_core.graph.schema import parse_graph
from inline_core.graph.validate import ValidatedGraph, validate_graph
from inline_core.takes import MediaRef
from tests.families.node_context import node_context
from tests.families.pixels import Pixels, pixels

DISTILLED, BASE = "flux2_klein_tiny.safetensors", "flux2_klein_base_tiny.safetensors"
ENCODER, VAE = "flux2_tiny_qwen3", "flux2_tiny_vae.safetensors"

Json = dict[str, Any]


def edge(node: str, output: str) -> Json:
    return {"from": node, "output": output}


class Graph:
    """A primitive graph under construction: the loaders, then what the test adds."""

    def __init__(
        self,
        model: str = DISTILLED,
        encoder_type: str = "flux2",
        vae: str = VAE,
        encoder: str = ENCODER,
    ) -> None:
        self.nodes: list[Json] = [
            {"id": "model", "type": "load/diffusion-model", "params": {"file": model}},
            {
                "id": "encoder",
                "type": "load/text-encoder",
                "params": {"file": encoder, "type": encoder_type},
            },
            {"id": "vae", "type": "load/vae", "params": {"file": vae}},
        ]

    def add(self, node_id: str, node_type: str, params: Json | None = None, **inputs: Json) -> str:
        self.nodes.append(
            {"id": node_id, "type": node_type, "params": params or {}, "inputs": inputs}
        )
        return node_id

    def encode(self, node_id: str, prompt: str) -> Json:
        text = self.add(f"{node_id}_text", "input/text", {"text": prompt})
        self.add(
            node_id,
            "encode/text",
            text_encoder=edge("encoder", "text_encoder"),
            prompt=edge(text, "text"),
        )
        return edge(node_id, "conditioning")

    def sample(
        self, node_id: str, latent: Json, prompt: str, negative: str | None = None, **params: Any
    ) -> Json:
        inputs = {
            "model": edge("model", "model"),
            "positive": self.encode(f"{node_id}_pos", prompt),
        }
        if negative is not None:
            inputs["negative"] = self.encode(f"{node_id}_neg", negative)
        self.add(node_id, "sample", {"seed": 7, **params}, latent=latent, **inputs)
        return edge(node_id, "latent")

    def decode(self, latent: Json) -> str:
        return self.add("decode", "vae/decode", vae=edge("vae", "vae"), latent=latent)

    def json(self) -> Json:
        return {"schemaVersion": 1, "nodes": self.nodes}


class FolderMedia:
    """Assets by id in one folder (for `input/image`)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    def resolve(self, ref: MediaRef) -> Path:
        return self.root / ref.id

    def add(self, name: str, image: Image.Image) -> Json:
        image.save(self.root / name)
        return {"ref": "asset", "id": name}


@dataclass
class GraphRig:
    registry: Registry
    rig: FamilyRig
    executor: Executor
    media: FolderMedia
    takes_dir: Path

    def validate(self, graph: Graph, target: str = "decode") -> ValidatedGraph:
        parsed = parse_graph(graph.json())
        return validate_graph(parsed, target, self.registry, self.rig.catalog, rng=random.Random(0))

    def run(self, graph: Graph, target: str = "decode") -> ExecutionResult:
        return self.executor.execute(self.validate(graph, target), node_context(self.takes_dir))

    def decoded(self, graph: Graph) -> Pixels:
        """The pixels of the graph's one decoded take."""
        [take] = self.run(graph).takes
        with Image.open(take.path) as png:
            return pixels(png)


def graph_rig(rig: FamilyRig, work: Path, *others: Family) -> GraphRig:
    """A registry serving `rig`'s family (and `others`, on the same runtime) and the primitives."""
    registry = Registry()
    media = FolderMedia(work / "assets")
    register_builtin_nodes(registry, media)
    families = Families([rig.family, *others])
    register_families(registry, families, rig.catalog, rig.runtime)
    executor = Executor(rig.catalog, NodeCache())
    return GraphRig(registry, rig, executor, media, work / "takes")
