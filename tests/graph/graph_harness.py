"""Real objects wired together for graph-engine tests, plus a few small test-only node types."""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from PIL import Image

from inline_core.errors import ModelMissing, NotFound
from inline_core.graph.builtin import register_builtin_nodes
from inline_core.graph.cache import NodeCache
from inline_core.graph.descriptor import NodeDescriptor, ParamSpec, ParamWidget, PortSpec
from inline_core.graph.executor import ExecutionResult, Executor
from inline_core.graph.registry import Registry
from inline_core.graph.runner import NodeCall, NodeResult, NodeRunner
from inline_core.graph.schema import PortKind, parse_graph
from inline_core.graph.validate import ValidatedGraph, validate_graph
from inline_core.models.catalog import Catalog
from inline_core.runtime.context import ExecutionContext
from inline_core.runtime.file_store import FileTakeStore
from inline_core.runtime.progress import RunEvent
from inline_core.takes import MediaRef


class DictMedia:
    """A MediaResolver over a dict of files."""

    def __init__(self) -> None:
        self.paths: dict[tuple[str, str], Path] = {}

    def resolve(self, ref: MediaRef) -> Path:
        try:
            return self.paths[(ref.ref, ref.id)]
        except KeyError:
            raise NotFound(f"no {ref.ref} {ref.id!r}") from None


class Echo(NodeRunner):
    """test/echo: text in (optional), text out: the input plus the `suffix` param. Counts runs."""

    def __init__(self) -> None:
        self.runs: list[str] = []

    def run(self, call: NodeCall) -> NodeResult:
        self.runs.append(call.node_id)
        text = str(call.inputs.get("text", "")) + str(call.params["suffix"])
        return NodeResult(outputs={"text": text})


class Fail(NodeRunner):
    """test/fail: always raises a plain exception, as a buggy runner would."""

    def run(self, call: NodeCall) -> NodeResult:
        raise ValueError("boom")


class Load(NodeRunner):
    """test/load: a model picker over diffusion_models/. Its `check` refuses the file named
    'refused.safetensors' at submit, as a model runner refuses a model it cannot load."""

    def __init__(self) -> None:
        self.runs = 0

    def check(self, node_id: str, params: Mapping[str, Any]) -> None:
        if params["file"] == "refused.safetensors":
            raise ModelMissing("refused.safetensors needs an extra")

    def run(self, call: NodeCall) -> NodeResult:
        self.runs += 1
        return NodeResult(outputs={"model": ("handle", call.params["file"])})


class Collect(NodeRunner):
    """test/collect: records what arrived on its `images` (image[], fan-in) and `one` ports."""

    def __init__(self) -> None:
        self.seen: list[Mapping[str, Any]] = []

    def run(self, call: NodeCall) -> NodeResult:
        self.seen.append(dict(call.inputs))
        return NodeResult(outputs={"text": str(len(call.inputs.get("images", [])))})


class Volatile(NodeRunner):
    """test/volatile: not cacheable; counts runs."""

    cacheable = False

    def __init__(self) -> None:
        self.runs = 0

    def run(self, call: NodeCall) -> NodeResult:
        self.runs += 1
        return NodeResult(outputs={"text": f"v{self.runs}"})


ECHO = NodeDescriptor(
    type="test/echo",
    title="Echo",
    category="test",
    inputs=(PortSpec("text", PortKind.TEXT, optional=True),),
    outputs=(PortSpec("text", PortKind.TEXT),),
    params=(ParamSpec("suffix", ParamWidget.TEXT, default="", max_length=8),),
)
FAIL = NodeDescriptor(
    type="test/fail",
    title="Fail",
    category="test",
    inputs=(PortSpec("text", PortKind.TEXT, optional=True),),
    outputs=(PortSpec("text", PortKind.TEXT),),
)
LOAD = NodeDescriptor(
    type="test/load",
    title="Load",
    category="test",
    params=(ParamSpec("file", ParamWidget.SELECT, required=True, options_from="diffusion_models"),),
    outputs=(PortSpec("model", PortKind.MODEL),),
)
COLLECT = NodeDescriptor(
    type="test/collect",
    title="Collect",
    category="test",
    inputs=(
        PortSpec("images", PortKind.IMAGES, optional=True, multiple=True),
        PortSpec("one", PortKind.IMAGES, optional=True),
        PortSpec("model", PortKind.MODEL, optional=True),
    ),
    outputs=(PortSpec("text", PortKind.TEXT),),
)
VOLATILE = NodeDescriptor(
    type="test/volatile",
    title="Volatile",
    category="test",
    outputs=(PortSpec("text", PortKind.TEXT),),
)


@dataclass
class Harness:
    root: Path
    registry: Registry = field(default_factory=Registry)
    media: DictMedia = field(default_factory=DictMedia)
    echo: Echo = field(default_factory=Echo)
    load: Load = field(default_factory=Load)
    collect: Collect = field(default_factory=Collect)
    volatile: Volatile = field(default_factory=Volatile)
    events: list[RunEvent] = field(default_factory=list[RunEvent])

    def __post_init__(self) -> None:
        for category in ("diffusion_models", "vae", "text_encoders"):
            (self.models / category).mkdir(parents=True, exist_ok=True)
        self.catalog = Catalog(self.models, ttl_s=0.0)
        self.store = FileTakeStore(self.root / "takes")
        register_builtin_nodes(self.registry, self.media)
        self.registry.register(ECHO, self.echo)
        self.registry.register(FAIL, Fail())
        self.registry.register(LOAD, self.load)
        self.registry.register(COLLECT, self.collect)
        self.registry.register(VOLATILE, self.volatile)

    @property
    def models(self) -> Path:
        return self.root / "models"

    def model_file(self, name: str, data: bytes = b"weights") -> Path:
        path = self.models / "diffusion_models" / name
        path.write_bytes(data)
        self.catalog.rescan()
        return path

    def asset(
        self, asset_id: str, size: tuple[int, int], color: tuple[int, int, int] = (200, 10, 10)
    ) -> dict[str, str]:
        """Store a PNG as an asset; return the `input/image` param that names it."""
        path = self.root / "assets" / f"{asset_id}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.new("RGB", size, color).save(path)
        self.media.paths[("asset", asset_id)] = path
        return {"ref": "asset", "id": asset_id}

    def validate(
        self, raw: Mapping[str, Any], target: str, rng: random.Random | None = None
    ) -> ValidatedGraph:
        return validate_graph(
            parse_graph(raw), target, self.registry, self.catalog, rng=rng or random.Random(7)
        )

    def ctx(self, run_id: str = "run-1") -> ExecutionContext:
        return ExecutionContext(run_id=run_id, takes=self.store, events=self.events.append)

    def execute(
        self,
        raw: Mapping[str, Any],
        target: str,
        *,
        cache: NodeCache | None = None,
        ctx: ExecutionContext | None = None,
    ) -> ExecutionResult:
        executor = Executor(self.catalog, cache)
        return executor.execute(self.validate(raw, target), ctx or self.ctx())


def graph(*nodes: Mapping[str, Any]) -> dict[str, Any]:
    return {"schemaVersion": 1, "nodes": list(nodes)}


def node(
    node_id: str,
    type_: str,
    params: Mapping[str, Any] | None = None,
    **inputs: Any,
) -> dict[str, Any]:
    """A node's JSON; each keyword is an input port, given as "node.output" or a list of them."""

    def edge(spec: str) -> dict[str, str]:
        source, output = spec.split(".")
        return {"from": source, "output": output}

    wired: dict[str, Any] = {}
    for port, spec in inputs.items():
        if isinstance(spec, list):
            wired[port] = [edge(s) for s in cast(list[str], spec)]
        else:
            wired[port] = edge(str(spec))
    return {"id": node_id, "type": type_, "params": dict(params or {}), "inputs": wired}
