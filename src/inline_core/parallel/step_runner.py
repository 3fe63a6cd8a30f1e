"""The standard rank runner: a resident step pipeline (spec 003), split by an engine, driven
collectively one request at a time.

Every rank rebuilds the same pipeline with the loader the server's pipeline names, rebuilds each
request with the pipeline's own `request()` from the fields the wire carried, encodes its prompt
and steps it in lockstep with the other ranks (the split transformer forward is the collective).
Only rank 0 finishes it: decoded, or as latents when the request asks for them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, cast, runtime_checkable

from inline_core.components.step import supports_latent_output
from inline_core.parallel.engines import SplitEngine, apply_split, resolve_module
from inline_core.parallel.probe import AttentionProbe
from inline_core.parallel.protocol import Json
from inline_core.parallel.remote import RemoteRequest, encode_output
from inline_core.parallel.runner import JobControl, JobOutput, WorkerContext, resolve
from inline_core.parallel.wire import decode_fields


@runtime_checkable
class RankPipeline(Protocol):
    """What a rank drives: the four calls of spec 003, and `request()` to rebuild a state."""

    def request(self, **kwargs: Any) -> Any: ...

    def prepare_encode(self, state: Any, /) -> Any: ...

    def denoise_step(self, states: Sequence[Any], /) -> Sequence[Any]: ...

    def step_scheduler(self, state: Any, noise_pred: Any, /) -> None: ...

    def post_decode(self, state: Any, /) -> Any: ...


def finish(pipeline: RankPipeline, state: Any, output: object) -> Any:
    """A finished state's output as the request asked for it: decoded, or its latents' tensor."""
    if output != "latents":
        return pipeline.post_decode(state)
    if not supports_latent_output(pipeline):
        raise TypeError(f"{type(pipeline).__name__} cannot hand back latents")
    latents = pipeline.post_latents(state)
    return getattr(latents, "value", latents)  # the tensor crosses; the server wraps it again


class StepRunner:
    def __init__(
        self,
        pipeline: RankPipeline,
        context: WorkerContext,
        engine: SplitEngine,
        probe: AttentionProbe | None,
        loader: str,
    ) -> None:
        self.pipeline = pipeline
        self.context = context
        self.engine = engine
        self.probe = probe
        self.loader = loader

    def describe(self) -> dict[str, Json]:
        return {
            "loader": self.loader,
            "engine": self.engine.name,
            "split": str(self.context.split),
            "device": self.context.device,
        }

    def run(
        self, params: Mapping[str, Json], blobs: Mapping[str, bytes], control: JobControl
    ) -> JobOutput:
        pipeline = self.pipeline
        state = pipeline.request(**decode_fields(RemoteRequest(dict(params), dict(blobs))))
        control.phase("encode")
        prepared = pipeline.prepare_encode(state)
        state = state if prepared is None else prepared
        self.engine.before_job(state)
        if self.probe is not None:
            self.probe.reset()
        control.phase("sample")
        while not state.done:
            predictions = pipeline.denoise_step([state])
            pipeline.step_scheduler(state, predictions[0])
            control.step(int(state.step_index), int(state.step_count))
        control.phase("decode")
        meta: dict[str, Json] = {"rank": self.context.rank, "engine": self.engine.name}
        if self.probe is not None:
            meta["attentionTokens"] = cast(list[Json], list(self.probe.first_forward))
            meta["forwards"] = self.probe.forwards
        if not self.context.is_leader:
            return JobOutput(meta=meta)  # the output is rank 0's; the others skip the decode
        description, arrays = encode_output(finish(pipeline, state, params.get("output")))
        meta["output"] = description
        return JobOutput(meta=meta, arrays=arrays)


def load_step_runner(context: WorkerContext, args: Mapping[str, Json]) -> StepRunner:
    """Runner factory; `args` is a `PipelineSpec` as `{"loader": ..., "loaderArgs": {...}}`."""
    loader = str(args["loader"])
    loader_args = cast(dict[str, Any], args.get("loaderArgs") or {})
    pipeline: object = resolve(loader)(device=context.device, **loader_args)
    if not isinstance(pipeline, RankPipeline):
        raise TypeError(f"{loader} built a {type(pipeline).__name__}, not a step pipeline")
    engine = apply_split(pipeline, context)
    dit_paths = cast(list[str], getattr(pipeline, "_dit_modules", []))
    probe = AttentionProbe(resolve_module(pipeline, dit_paths[0])) if dit_paths else None
    return StepRunner(pipeline, context, engine, probe, loader)
