"""A second family from a distribution of its own: found through the entry point group, rendered
through its own node and through the shared primitives, sharing the one residency budget with
Z-Image, and split across two CPU ranks by the one worker group.

The family (`tiny_chroma`: Chroma, a FLUX-style flow DiT on T5 and the FLUX VAE, batched as one
tensor per latent shape) lives in `tests/families/tiny_chroma/`, and is installed by pip into a
folder of its own for these tests only.
"""

from __future__ import annotations

import io
import json
import logging
import random
import re
from collections.abc import Generator, Iterator
from contextlib import contextmanager, nullcontext
from functools import cache
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import numpy.typing as npt
import pytest
import torch
from fastapi.testclient import TestClient
from PIL import Image
from websockets.exceptions import ConnectionClosedOK
from websockets.sync.client import connect

from inline_core.config import Config
from inline_core.contract.registry import Families
from inline_core.device import policy_from_config
from inline_core.device.split import ParallelSpec
from inline_core.diffusion.libs import diffusers
from inline_core.engine.runtime import ModelRuntime
from inline_core.families.nodes.register import register_families
from inline_core.graph.builtin import register_builtin_nodes
from inline_core.graph.cache import NodeCache
from inline_core.graph.executor import Executor
from inline_core.graph.registry import Registry
from inline_core.graph.schema import parse_graph
from inline_core.graph.validate import validate_graph
from inline_core.models.catalog import Catalog
from inline_core.runtime.context import ExecutionContext
from inline_core.runtime.file_store import FileTakeStore
from inline_core.sampling import StepLoopSampler
from inline_core.server.app import create_app
from inline_core.takes import MediaRef
from tests.families.cfg_pp_reference import cfg_pp_scheduler
from tests.parallel.live_server import LiveServer, started_split_server

Pixels = npt.NDArray[np.int16]
NODE = "test/chroma"
RENDER: dict[str, Any] = {"width": 64, "height": 80, "steps": 3, "guidance": 3.0, "seed": 5}
JOB_DONE = re.compile(r"worker group job done \(ulysses=2\): engine (\S+), (\d+) forwards, (.*)")


def edge(node: str, output: str) -> dict[str, str]:
    return {"from": node, "output": output}


def node_graph(prompt: str, node_type: str = NODE, **params: Any) -> dict[str, Any]:
    return {
        "schemaVersion": 1,
        "nodes": [
            {"id": "p", "type": "input/text", "params": {"text": prompt}},
            {
                "id": "img",
                "type": node_type,
                "params": params,
                "inputs": {"prompt": edge("p", "text")},
            },
        ],
    }


def primitive_graph(prompt: str, *, cfg: float, seed: int, steps: int) -> dict[str, Any]:
    """load/* -> encode/text (positive, negative "") -> sample -> vae/decode over Chroma's files."""
    encoder = edge("encoder", "text_encoder")
    return {
        "schemaVersion": 1,
        "nodes": [
            {"id": "prompt", "type": "input/text", "params": {"text": prompt}},
            {"id": "empty", "type": "input/text", "params": {"text": ""}},
            {"id": "model", "type": "load/diffusion-model", "params": {"file": "chroma_tiny"}},
            {"id": "encoder", "type": "load/text-encoder", "params": {"file": "chroma_tiny_t5"}},
            {"id": "vae", "type": "load/vae", "params": {"file": "chroma_tiny_vae"}},
            {
                "id": "positive",
                "type": "encode/text",
                "inputs": {"text_encoder": encoder, "prompt": edge("prompt", "text")},
            },
            {
                "id": "negative",
                "type": "encode/text",
                "inputs": {"text_encoder": encoder, "prompt": edge("empty", "text")},
            },
            {"id": "latent", "type": "latent/empty", "params": {"width": 64, "height": 80}},
            {
                "id": "sample",
                "type": "sample",
                "params": {"steps": steps, "cfg": cfg, "seed": seed},
                "inputs": {
                    "model": edge("model", "model"),
                    "positive": edge("positive", "conditioning"),
                    "negative": edge("negative", "conditioning"),
                    "latent": edge("latent", "latent"),
                },
            },
            {
                "id": "decode",
                "type": "vae/decode",
                "inputs": {"vae": edge("vae", "vae"), "latent": edge("sample", "latent")},
            },
        ],
    }


def pixels(image: Image.Image) -> Pixels:
    return np.asarray(image.convert("RGB"), dtype=np.int16)


# diffusers' Chroma pipeline loaded once per models folder, and each reference render made once:
# the shift and CFG++ cases all compare against one plain render (inference only: no state kept).
_references: dict[tuple[object, ...], Pixels] = {}


@cache
def chroma_parts(models: Path) -> dict[str, Any]:
    """The modules of diffusers' own `ChromaPipeline` over the kit's Chroma folder."""
    pipe: Any = diffusers().ChromaPipeline.from_pretrained(
        str(models / "diffusion_models" / "chroma_tiny"), local_files_only=True
    )
    return dict(pipe.components)


def diffusers_render(
    models: Path, prompt: str, *, shift: float | None = None, sampler: str = "euler", **params: Any
) -> Pixels:
    """What diffusers' own `ChromaPipeline` renders from the kit's folder with these settings:
    at a static `shift` in place of its dynamic one (its scheduler so configured), and with a
    CFG++ `sampler`'s step written out by hand (`tests/families/cfg_pp_reference.py`)."""
    key = (models, prompt, shift, sampler, tuple(sorted(params.items())))
    if key not in _references:
        _references[key] = _render_with_diffusers(models, prompt, shift, sampler, params)
    return _references[key]


def _render_with_diffusers(
    models: Path, prompt: str, shift: float | None, sampler: str, params: dict[str, Any]
) -> Pixels:
    d = diffusers()
    parts = chroma_parts(models)
    # A fresh pipeline and scheduler over the shared modules (CFG++ patches its scheduler's step).
    loaded: Any = parts["scheduler"]
    scheduler: Any = loaded.from_config(loaded.config)  # its own class, a fresh instance
    if shift is not None:
        static = {**loaded.config, "use_dynamic_shifting": False, "shift": shift}
        scheduler = d.FlowMatchEulerDiscreteScheduler.from_config(static)
    pipe: Any = d.ChromaPipeline(**{**parts, "scheduler": scheduler})
    pipe.set_progress_bar_config(disable=True)
    stepping = cfg_pp_scheduler(pipe, sampler) if sampler != "euler" else nullcontext()
    with stepping:
        image = pipe(
            prompt,
            width=params["width"],
            height=params["height"],
            num_inference_steps=params["steps"],
            guidance_scale=params["guidance"],
            generator=torch.Generator("cpu").manual_seed(params["seed"]),
        ).images[0]
    return pixels(image)


class NoMedia:
    def resolve(self, ref: MediaRef) -> Path:
        raise AssertionError(f"these graphs read no media ({ref.id})")


def registry_of(families: Families, catalog: Catalog, runtime: ModelRuntime) -> Registry:
    registry = Registry()
    register_builtin_nodes(registry, NoMedia())
    register_families(registry, families, catalog, runtime)
    return registry


@contextmanager
def served(families: Families, models: Path) -> Generator[tuple[Registry, Catalog, ModelRuntime]]:
    """The families' nodes over `models` on a CPU runtime of their own, closed afterwards."""
    catalog = Catalog(models, ttl_s=0.0)
    config = Config(models_dir=models, profile="cpu", dtype="float32")
    sampler = StepLoopSampler()
    runtime = ModelRuntime(config, sampler, policy_from_config(config))
    try:
        yield registry_of(families, catalog, runtime), catalog, runtime
    finally:
        sampler.close()


def run_graph(
    registry: Registry, catalog: Catalog, graph: dict[str, Any], target: str, takes: Path
) -> list[Pixels]:
    validated = validate_graph(parse_graph(graph), target, registry, catalog, rng=random.Random(0))
    ctx = ExecutionContext(run_id=f"r{random.random()}", takes=FileTakeStore(takes))
    result = Executor(catalog, NodeCache()).execute(validated, ctx)
    return [pixels(Image.open(take.path)) for take in result.takes]


@pytest.fixture(scope="module")
def families(installed: Path, two_families: Path) -> Families:
    return Families.discovered(Catalog(two_families, ttl_s=0.0), {})


def test_the_family_is_found_through_its_distributions_entry_point(families: Families) -> None:
    chroma = families.named("chroma")
    assert type(chroma).__module__ == "tiny_chroma.family"
    assert [d.type for d in chroma.nodes()] == [NODE]
    listed = {f["name"]: f for f in families.describe()}
    assert listed["chroma"]["available"] is True and listed["chroma"]["batching"] == "shapes"
    assert listed["z-image"]["available"] is True
    # A family whose module fails to import is listed with its reason; the others still run.
    assert listed["broken"]["available"] is False
    assert "a_library_this_install_lacks" in str(listed["broken"]["reason"])


def test_the_node_renders_what_diffusers_renders_through_the_asgi_app(
    families: Families, two_families: Path, tmp_path: Path
) -> None:
    config = Config(
        models_dir=two_families, data_dir=tmp_path / "data", profile="cpu", dtype="float32"
    )
    with TestClient(create_app(config)) as client:
        health = client.get("/v1/health").json()
        names = {f["name"]: f["available"] for f in health["models"]["families"]}
        assert {"chroma": True, "z-image": True, "wan": True, "broken": False}.items() <= (
            names.items()
        )  # the installed families (the built-in ones among them) are listed too
        assert client.get(f"/v1/models/{NODE}").status_code == 200
        body = {"graph": node_graph("a red fox", **RENDER), "target": "img"}
        run_id = client.post("/v1/runs", json=body).json()["runId"]
        with client.websocket_connect(f"/v1/runs/{run_id}/events") as ws:
            while (event := ws.receive_json())["type"] not in ("run_done", "error"):
                pass
        assert event["type"] == "run_done", event
        [take] = event["takes"]
        assert take["params"]["model"] == "chroma_tiny" and take["params"]["guidance"] == 3.0
        got = pixels(Image.open(io.BytesIO(client.get(take["uri"]).content)))
    assert np.array_equal(got, diffusers_render(two_families, "a red fox", **RENDER))


def test_the_primitives_render_the_second_family_as_its_node_does(
    families: Families, two_families: Path, tmp_path: Path
) -> None:
    with served(families, two_families) as (registry, catalog, runtime):
        [node] = run_graph(registry, catalog, node_graph("a lighthouse", **RENDER), "img", tmp_path)
        steps, seed = RENDER["steps"], RENDER["seed"]
        graph = primitive_graph("a lighthouse", cfg=RENDER["guidance"], seed=seed, steps=steps)
        [primitive] = run_graph(registry, catalog, graph, "decode", tmp_path)
        # Every loader found the Chroma family's files; the node's parts were already resident.
        loads = runtime.stats()["loads"]
        run_graph(registry, catalog, graph, "decode", tmp_path / "again")
        assert runtime.stats()["loads"] == loads
    assert np.array_equal(primitive, node)


@pytest.mark.parametrize(
    "changes", [{"sampler": "euler_cfg_pp"}, {"sampler": "dpmpp_2m_cfg_pp"}, {"shift": 6.0}]
)
def test_the_shared_flow_pipeline_runs_a_requests_shift_and_cfg_pp(
    families: Families, two_families: Path, tmp_path: Path, changes: dict[str, Any]
) -> None:
    """Chroma is built on the shared flow pipeline: it runs a request's own shift, and hands a
    CFG++ sampler the unconditional prediction (without it the sampler raises), as diffusers'
    ChromaPipeline renders them at that static shift or with CFG++'s step written out."""
    settings: dict[str, Any] = {"width": 64, "height": 80, "steps": 3, "guidance": 3.0, "seed": 5}
    with served(families, two_families) as (registry, catalog, _runtime):
        graph = primitive_graph("a lighthouse", cfg=3.0, seed=5, steps=3)
        sample = next(n for n in graph["nodes"] if n["id"] == "sample")
        sample["params"].update(changes)
        [changed] = run_graph(registry, catalog, graph, "decode", tmp_path / "changed")
    expected = diffusers_render(two_families, "a lighthouse", **settings, **changes)
    assert np.abs(changed - expected).max() <= 1  # float ordering may move a level; no more
    plain = diffusers_render(two_families, "a lighthouse", **settings)
    assert np.abs(expected - plain).max() > 1  # the change shows in the picture


def test_two_families_under_a_budget_for_one_evict_each_other(
    families: Families, two_families: Path, tmp_path: Path
) -> None:
    catalog = Catalog(two_families, ttl_s=0.0)
    # In bfloat16 from float32 files every part is a copy of its own, counted against the budget
    # (in its file's dtype a part is mapped from the file and costs none).
    config = Config(models_dir=two_families, profile="cpu", dtype="bfloat16")
    zimage = node_graph("a fox", "alibaba/z-image-turbo", width=64, height=64, steps=2, seed=1)
    chroma = node_graph("a fox", **RENDER)
    sampler = StepLoopSampler()
    try:
        sizes: dict[str, int] = {}
        for name, graph in (("z-image", zimage), ("chroma", chroma)):
            alone = ModelRuntime(config, sampler, policy_from_config(config))
            run_graph(registry_of(families, catalog, alone), catalog, graph, "img", tmp_path)
            sizes[name] = alone.stats()["residentBytes"]
        # One runtime, one budget: either family's stack fits, both do not.
        runtime = ModelRuntime(config, sampler, policy_from_config(config))
        runtime.residency.budget_bytes = max(sizes.values()) + 1024
        assert sum(sizes.values()) > runtime.residency.budget_bytes
        registry = registry_of(families, catalog, runtime)
        loads: list[int] = []
        for graph in (zimage, chroma, zimage, chroma):
            run_graph(registry, catalog, graph, "img", tmp_path)
            stats = runtime.stats()
            assert stats["residentBytes"] <= runtime.residency.budget_bytes
            loads.append(stats["loads"])
        # Each switch of family loaded its stack again: the other's had been evicted.
        assert loads[0] < loads[1] < loads[2] < loads[3]
        assert runtime.stats()["evictions"] > 0
    finally:
        sampler.close()


def test_a_ring_split_leaves_chroma_in_process_beside_a_family_that_rings(
    families: Families, two_families: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Chroma splits with Ulysses alone (its mask is laid out for it): a server given
    INLINE_PARALLEL=ring=2 starts, splits Z-Image, which rings, and renders Chroma in process,
    saying so."""
    caplog.set_level(logging.WARNING)
    config = Config(models_dir=two_families, profile="cpu", dtype="float32", parallel="ring=2")
    sampler = StepLoopSampler()
    runtime = ModelRuntime(config, sampler)
    try:
        chroma, zimage = families.named("chroma"), families.named("z-image")
        catalog = Catalog(two_families, ttl_s=0.0)
        register_families(Registry(), Families([chroma, zimage]), catalog, runtime)
        assert runtime.split_for(chroma, None) is None
        assert runtime.split_for(zimage, None) == ParallelSpec.parse("ring=2")
        assert "Chroma cannot be split with ring (it splits with ulysses)" in caplog.text
    finally:
        runtime.close()
        sampler.close()


@pytest.fixture(scope="module")
def split_server(
    installed: Path, two_families: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    with started_split_server(
        tmp_path_factory.mktemp("split-server") / "data", two_families
    ) as live:
        yield live


def group_jobs(server: LiveServer) -> list[re.Match[str]]:
    """The worker group's job lines in the server's whole log (`log()` keeps only its end)."""
    log = (server.data_dir.parent / f"server-{server.starts}.log").read_text(errors="replace")
    return [m for m in map(JOB_DONE.search, log.splitlines()) if m is not None]


def render_live(server: LiveServer, graph: dict[str, Any]) -> Pixels:
    response = httpx.post(
        server.base + "/v1/runs", json={"graph": graph, "target": "img"}, timeout=30
    )
    assert response.status_code == 201, response.text
    run_id = response.json()["runId"]
    messages: list[dict[str, Any]] = []
    with connect(f"ws://127.0.0.1:{server.port}/v1/runs/{run_id}/events") as ws:
        try:
            while True:
                messages.append(json.loads(ws.recv(timeout=180)))
        except ConnectionClosedOK:
            pass
    assert messages[-1]["type"] == "run_done", (messages[-1], server.log())
    [take] = messages[-1]["takes"]
    png = httpx.get(server.base + take["uri"], timeout=30).content
    return pixels(Image.open(io.BytesIO(png)))


@pytest.mark.worker_group
def test_the_worker_group_splits_the_second_family_on_two_cpu_ranks(
    split_server: LiveServer, two_families: Path
) -> None:
    got = render_live(split_server, node_graph("a harbour", **RENDER))
    chroma_group = split_server.group_pids()
    assert len(chroma_group) == 3  # torchrun + 2 ranks, resident after the run
    [job] = group_jobs(split_server)
    assert job.group(1) == "cache-dit"
    tokens = [int(n) for n in re.findall(r"attention tokens (\d+)", job.group(3))]
    # 512 text tokens and 20 image tokens, in two halves (one per rank), each forward.
    assert tokens == [(512 + 20) // 2] * 2
    expected = diffusers_render(two_families, "a harbour", **RENDER)
    assert int(np.abs(got - expected).max()) <= 1  # a split sums attention in another order
    # The one group then serves Z-Image too: its ranks drop Chroma's stack and load that
    # family's, in the same processes (the ranks hold the devices: one family's stack makes way
    # for the other's).
    zimage = node_graph("a fox", "alibaba/z-image-turbo", width=64, height=64, steps=2, seed=1)
    assert render_live(split_server, zimage).std() > 1.0
    zimage_group = split_server.group_pids()
    assert sorted(zimage_group) == sorted(chroma_group)  # no relaunch
    assert [j.group(1) for j in group_jobs(split_server)] == ["cache-dit", "cache-dit"]
