"""The Z-Image node runner: lowers a node to a step pipeline and submits it to the sampler.

Torch-free at import. The first run imports the engine (torch, diffusers); `check` runs at submit
and only looks at files, so a missing model is refused in milliseconds with `model_missing`.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from PIL import Image

from inline_core.config import Config
from inline_core.errors import InvalidRequest
from inline_core.graph.runner import NodeCall, NodeResult, NodeRunner
from inline_core.models.catalog import Catalog
from inline_core.models.zimage.residency import ResidentCache
from inline_core.models.zimage.resolve import ZImageResolver
from inline_core.sampling.job import BatchedSampler, SampleJob

if TYPE_CHECKING:
    from inline_core.device import DevicePolicy
    from inline_core.models.zimage.engine import ZImageEngine

MIB = 1024 * 1024


class ZImageRunner(NodeRunner):
    def __init__(
        self,
        *,
        catalog: Catalog,
        config: Config,
        sampler: BatchedSampler,
        policy: DevicePolicy | None = None,
    ) -> None:
        self.config = config
        self.sampler = sampler
        self.resolver = ZImageResolver(catalog, config)
        self._policy = policy
        self._engine: ZImageEngine | None = None
        self._engine_lock = threading.Lock()
        self.cache = ResidentCache()

    # -- submit-time hooks -----------------------------------------------------------------------

    def check(self, node_id: str, params: Mapping[str, Any]) -> None:
        self.resolver.resolve(_model(params)).require(node_id)

    def cache_identity(self, params: Mapping[str, Any]) -> str:
        sources = self.resolver.resolve(_model(params)).sources
        return "" if sources is None else sources.identity()

    # -- run ---------------------------------------------------------------------------------------

    def run(self, call: NodeCall) -> NodeResult:
        ctx, node_id, params = call.ctx, call.node_id, call.params
        reporter = ctx.reporter(node_id)
        reporter.phase("loading")
        sources = self.resolver.resolve(_model(params)).require(node_id)
        pipeline = self.engine().pipeline_for(sources)
        reporter.phase("loading", 1.0)
        ctx.cancel.raise_if_cancelled()
        prompt = _prompt(call.inputs.get("prompt"), node_id)
        image = _image(call.inputs.get("image"), node_id)
        request: dict[str, Any] = {
            "prompt": prompt,
            "negative_prompt": str(params.get("negative_prompt") or ""),
            "width": int(params["width"]),
            "height": int(params["height"]),
            "steps": int(params["steps"]),
            "guidance": float(params["guidance"]),
            "seed": int(params["seed"]),
        }
        if image is not None:
            request["image"] = image
            request["strength"] = float(params["strength"])
        state = pipeline.request(**request)

        def on_phase(phase: str) -> None:
            reporter.phase(phase)

        def on_step(step: int, count: int) -> None:
            reporter.step(step, count)

        job = SampleJob(
            pipeline=pipeline,
            state=state,
            cancel=ctx.cancel,
            on_phase=on_phase,
            on_step=on_step,
            label=f"{ctx.run_id}/{node_id}",
        )
        output: Image.Image = self.sampler.run(job)
        reporter.phase("save")
        take_params = {k: v for k, v in request.items() if k != "image"}
        take_params.update(model=sources.model_name, img2img=image is not None)
        take = ctx.save_image(node_id, output, take_params)
        reporter.phase("save", 1.0)
        return NodeResult(outputs={"image": output}, takes=(take,))

    # -- the engine, built on first use ------------------------------------------------------------

    def engine(self) -> ZImageEngine:
        with self._engine_lock:
            if self._engine is None:
                from inline_core.device import policy_from_config
                from inline_core.models.zimage.engine import ZImageEngine

                policy = self._policy or policy_from_config(self.config)
                budget = policy.memory_budget_mb
                self.cache.budget_bytes = budget * MIB if budget > 0 else None
                self._engine = ZImageEngine(policy, self.cache)
            return self._engine

    def stats(self) -> dict[str, Any]:
        """Residency counters (loads, hits, evictions, resident bytes) for health and tests."""
        return self.cache.stats().to_json()


def _model(params: Mapping[str, Any]) -> str | None:
    value = params.get("model")
    return str(value) if value else None


def _prompt(value: object, node_id: str) -> str:
    if isinstance(value, list):
        parts: list[object] = list(value)  # pyright: ignore[reportUnknownArgumentType]
        value = " ".join(str(v) for v in parts)
    if not isinstance(value, str):
        raise InvalidRequest("the prompt input must be text", node_id=node_id)
    return value


def _image(value: object, node_id: str) -> Image.Image | None:
    if isinstance(value, list):
        items: list[object] = list(value)  # pyright: ignore[reportUnknownArgumentType]
        value = items[0] if items else None
    if value is None:
        return None
    if not isinstance(value, Image.Image):
        raise InvalidRequest("the image input must be an image", node_id=node_id)
    return value
