"""Primitive graphs in the worker-group tests: the graph a client posts, and its in-process take."""

from __future__ import annotations

import random
from collections.abc import Generator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from PIL import Image

from inline_core.config import Config
from inline_core.contract.registry import Families
from inline_core.device import policy_from_config
from inline_core.engine.runtime import ModelRuntime
from inline_core.families.nodes.register import register_families
from inline_core.families.zimage import ZImageFamily
from inline_core.graph.builtin import register_builtin_nodes
from inline_core.graph.cache import NodeCache
from inline_core.graph.executor import Executor
from inline_core.graph.registry import Registry
from inline_core.graph.schema import parse_graph
from inline_core.graph.validate import validate_graph
from inline_core.models.catalog import Catalog
from inline_core.models.source import Source
from inline_core.parallel.probe import AttentionProbe
from inline_core.runtime.context import ExecutionContext
from inline_core.runtime.file_store import FileTakeStore
from inline_core.sampling import SampleJob, StepLoopSampler
from inline_core.takes import MediaRef

MODEL = "zimage_tiny.safetensors"  # the kit's ComfyUI layout
ENCODER = "zimage_tiny_qwen3"
VAE = "zimage_tiny_vae.safetensors"

Json = dict[str, Any]


def _edge(node: str, output: str) -> Json:
    return {"from": node, "output": output}


def primitive_graph(prompt: str, negative: str, **sample: Any) -> Json:
    """load -> encode/text (positive, negative) -> latent/empty -> sample -> vae/decode, the graph
    the ComfyUI importer produces for a Z-Image workflow; target `decode`."""
    batch = int(sample.pop("batch", 1))
    size = {"width": sample.pop("width", 64), "height": sample.pop("height", 64)}
    settings: Json = {"steps": 4, "cfg": 1.0, "sampler": "euler", "scheduler": "simple"}
    settings.update(seed=7, denoise=1.0)
    settings.update(sample)
    encoder = _edge("encoder", "text_encoder")
    nodes: list[Json] = [
        {"id": "prompt", "type": "input/text", "params": {"text": prompt}},
        {"id": "negative_text", "type": "input/text", "params": {"text": negative}},
        {"id": "model", "type": "load/diffusion-model", "params": {"file": MODEL}},
        {"id": "encoder", "type": "load/text-encoder", "params": {"file": ENCODER}},
        {"id": "vae", "type": "load/vae", "params": {"file": VAE}},
        {
            "id": "positive",
            "type": "encode/text",
            "inputs": {"text_encoder": encoder, "prompt": _edge("prompt", "text")},
        },
        {
            "id": "negative",
            "type": "encode/text",
            "inputs": {"text_encoder": encoder, "prompt": _edge("negative_text", "text")},
        },
        {"id": "latent", "type": "latent/empty", "params": {**size, "batch": batch}},
        {
            "id": "sample",
            "type": "sample",
            "params": settings,
            "inputs": {
                "model": _edge("model", "model"),
                "positive": _edge("positive", "conditioning"),
                "negative": _edge("negative", "conditioning"),
                "latent": _edge("latent", "latent"),
            },
        },
        {
            "id": "decode",
            "type": "vae/decode",
            "inputs": {"vae": _edge("vae", "vae"), "latent": _edge("sample", "latent")},
        },
    ]
    return {"schemaVersion": 1, "nodes": nodes}


class _NoMedia:
    def resolve(self, ref: MediaRef) -> Path:
        raise AssertionError(f"this graph reads no media ({ref.id})")


class _SampleAtThreads:
    """The in-process sampler with its denoise at the ranks' thread count (oneDNN's float
    reductions depend on it); encode and decode stay at the server's, as in the server."""

    def __init__(self, threads: int) -> None:
        self.threads = threads
        # The batch's items share forwards, as the ranks' step loop batches them.
        self.inner = StepLoopSampler()

    def run(self, job: SampleJob) -> Any:
        before = torch.get_num_threads()
        torch.set_num_threads(self.threads)
        try:
            return self.inner.run(job)
        finally:
            torch.set_num_threads(before)

    def stats(self) -> dict[str, Any]:
        return self.inner.stats()

    def close(self) -> None:
        self.inner.close()


Pixels = npt.NDArray[np.uint8]


def render_in_process(
    models_dir: Path, graph: Json, work: Path, rank_threads: int
) -> tuple[list[Pixels], list[int]]:
    """The graph's takes rendered in this process without a split, and the tokens each attention
    layer of the transformer saw in its first forward (one process sees the whole sequence)."""
    config = Config(models_dir=models_dir, profile="cpu", dtype="float32")
    catalog = Catalog(models_dir, ttl_s=0.0)
    registry = Registry()
    register_builtin_nodes(registry, _NoMedia())
    sampler = _SampleAtThreads(rank_threads)
    family = ZImageFamily(catalog, config.env)
    runtime = ModelRuntime(config, sampler, policy_from_config(config))
    register_families(registry, Families([family]), catalog, runtime)
    try:
        _key, transformer = runtime.stacks().part(
            family, "transformer", Source(models_dir / "diffusion_models" / MODEL)
        )
        with _probe(AttentionProbe(transformer)) as probe:
            validated = validate_graph(
                parse_graph(graph), "decode", registry, catalog, rng=random.Random(0)
            )
            ctx = ExecutionContext(run_id="in-process", takes=FileTakeStore(work))
            result = Executor(catalog, NodeCache()).execute(validated, ctx)
            whole = list(probe.first_forward)
    finally:
        sampler.close()
    takes: list[Pixels] = []
    for take in result.takes:
        with Image.open(take.path) as png:
            takes.append(np.asarray(png.convert("RGB")))
    return takes, whole


@contextmanager
def _probe(probe: AttentionProbe) -> Generator[AttentionProbe]:
    try:
        yield probe
    finally:
        probe.remove()
