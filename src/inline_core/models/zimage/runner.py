"""The Z-Image node runner: lowers a node to a step pipeline and submits it to the sampler.

Torch-free at import. The first run imports the engine (torch, diffusers); `check` runs at submit
and only looks at files, so a missing model is refused in milliseconds with `model_missing`.

Where the device policy splits this family across ranks (`INLINE_PARALLEL`, or two or more GPUs),
renders go to a resident worker group instead of the in-process sampler, and the server loads no
weights of its own; otherwise they stay in process, with nothing of the group started.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from PIL import Image

from inline_core.config import Config
from inline_core.device.split import ParallelSpec
from inline_core.errors import InvalidRequest, Unavailable
from inline_core.graph.runner import NodeCall, NodeResult, NodeRunner
from inline_core.models.catalog import Catalog
from inline_core.models.zimage.placements import zimage_placements
from inline_core.models.zimage.residency import ResidentCache
from inline_core.models.zimage.resolve import Source, ZImageResolver, ZImageSources
from inline_core.models.zimage.split import support_for, support_for_transformer
from inline_core.runtime.context import ExecutionContext
from inline_core.runtime.progress import NodeReporter
from inline_core.sampling.job import BatchedSampler, SampleJob

if TYPE_CHECKING:
    from inline_core.device import DevicePolicy
    from inline_core.models.zimage.engine import ZImageEngine
    from inline_core.models.zimage.remote import ZImageGroup

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
        self._policy_lock = threading.Lock()
        self._engine: ZImageEngine | None = None
        self._engine_lock = threading.Lock()
        self.cache = ResidentCache()
        # The worker group, once a render was split; the split per transformer (its heads count).
        self._group: ZImageGroup | None = None
        self._group_lock = threading.Lock()
        self._splits: dict[str, ParallelSpec | None] = {}
        self._closed = False

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
        split = self.split_for(sources, node_id)
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
        if split is None:
            output = self._render_in_process(sources, request, ctx, reporter, node_id)
        else:
            output = self._render_in_group(split, sources, request, ctx, reporter)
        reporter.phase("save")
        take_params = {k: v for k, v in request.items() if k != "image"}
        take_params.update(model=sources.model_name, img2img=image is not None)
        take = ctx.save_image(node_id, output, take_params)
        reporter.phase("save", 1.0)
        return NodeResult(outputs={"image": output}, takes=(take,))

    # -- where the denoise runs: this process, or the worker group ------------------------------

    def _render_in_process(
        self,
        sources: ZImageSources,
        request: dict[str, Any],
        ctx: ExecutionContext,
        reporter: NodeReporter,
        node_id: str,
    ) -> Image.Image:
        pipeline = self.engine().pipeline_for(sources)
        reporter.phase("loading", 1.0)
        ctx.cancel.raise_if_cancelled()
        job = SampleJob(
            pipeline=pipeline,
            state=pipeline.request(**request),
            cancel=ctx.cancel,
            on_phase=reporter.phase,
            on_step=reporter.step,
            label=f"{ctx.run_id}/{node_id}",
        )
        output: Image.Image = self.sampler.run(job)
        return output

    def _render_in_group(
        self,
        split: ParallelSpec,
        sources: ZImageSources,
        request: dict[str, Any],
        ctx: ExecutionContext,
        reporter: NodeReporter,
    ) -> Image.Image:
        group = self.group_for(split)
        pipeline = group.pipeline_for(sources, zimage_placements(self.policy()))
        state = pipeline.request(**request)  # validated here, before any rank is bothered
        group.start(pipeline)  # the ranks load the model: part of the loading phase
        reporter.phase("loading", 1.0)
        ctx.cancel.raise_if_cancelled()
        return group.run(
            pipeline, state, cancel=ctx.cancel, on_phase=reporter.phase, on_step=reporter.step
        )

    # -- device policy: in process, or split across a worker group ---------------------------------

    def policy(self) -> DevicePolicy:
        with self._policy_lock:
            if self._policy is None:
                from inline_core.device import policy_from_config

                self._policy = policy_from_config(self.config)
            return self._policy

    def check_split(self) -> ParallelSpec | None:
        """The split for the default model, checked at start-up (torch-free): an explicit
        INLINE_PARALLEL this family cannot run raises `InvalidRequest` naming what it can."""
        return self.policy().split_for(support_for(self.resolver.resolve(None).sources))

    def split_for(self, sources: ZImageSources, node_id: str | None = None) -> ParallelSpec | None:
        """The policy's split for this model (None: in process), computed once per transformer."""
        return self.split_for_transformer(sources.transformer, node_id)

    def split_for_transformer(
        self, transformer: Source, node_id: str | None = None
    ) -> ParallelSpec | None:
        """The split for renders with this transformer: the node's, or a `sample` primitive's."""
        key = transformer.identity()
        with self._group_lock:
            if key in self._splits:
                return self._splits[key]
        try:
            split = self.policy().split_for(support_for_transformer(transformer))
        except InvalidRequest as exc:  # e.g. a Ulysses degree this model's heads do not allow
            raise InvalidRequest(exc.message, node_id=node_id) from exc
        with self._group_lock:
            self._splits[key] = split
        return split

    def group_for(self, split: ParallelSpec) -> ZImageGroup:
        """The worker group running `split`, launched on its first job (one group at a time:
        its ranks hold the devices)."""
        from inline_core.models.zimage.remote import ZImageGroup

        with self._group_lock:
            if self._closed:
                raise Unavailable("the Z-Image worker group is shut down")
            old = self._group
            if old is not None and old.split == split:
                return old
            group = ZImageGroup.for_split(split, cuda=self.policy().kind == "cuda")
            self._group = group
        if old is not None:
            old.close()
        return group

    def close(self) -> None:
        """Stop the worker group, if one was started (server shutdown)."""
        with self._group_lock:
            self._closed = True
            group, self._group = self._group, None
        if group is not None:
            group.close()

    # -- the engine, built on first use ------------------------------------------------------------

    def engine(self) -> ZImageEngine:
        policy = self.policy()
        with self._engine_lock:
            if self._engine is None:
                from inline_core.models.zimage.engine import ZImageEngine

                budget = policy.memory_budget_mb
                self.cache.budget_bytes = budget * MIB if budget > 0 else None
                self._engine = ZImageEngine(policy, self.cache)
            return self._engine

    def stats(self) -> dict[str, Any]:
        """Residency counters (loads, hits, evictions, resident bytes) for health and tests, and
        the worker group's when renders are split."""
        body: dict[str, Any] = self.cache.stats().to_json()
        group = self._group
        if group is not None:
            body["workerGroup"] = group.stats()
        return body


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
