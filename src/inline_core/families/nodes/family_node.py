"""The runner of every family's high-level nodes: resolve, lower, one job through one seam, a take.

Torch-free at import. `check` resolves the node's files at submit (headers only, so a missing or
wrong model is refused in milliseconds with `model_missing`), and the run reuses that resolution.
The family lowers the node's params and inputs into its pipeline's request. The job then reaches
the accelerator through one seam, a `BatchedSampler`: the in-process step loop, or, where the
device policy splits this model across ranks, the worker group (the server then loads no weights of
its own). The output becomes a take of the node's output kind.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import ExitStack
from typing import Any

from PIL import Image

from inline_core.components.step import (
    caches_steps,
    step_cache_counts,
    streams_chunks,
    streams_sound,
    takes_interactions,
)
from inline_core.contract.family import Family
from inline_core.contract.sources import Sources
from inline_core.contract.submit import Submit
from inline_core.diffusion.sigma.shift import ModelShift
from inline_core.engine.runtime import ModelRuntime
from inline_core.engine.target import node_target
from inline_core.errors import InvalidRequest, RunFailed
from inline_core.graph.descriptor import NodeDescriptor
from inline_core.graph.runner import NodeCall, NodeResult, NodeRunner, SubmitFacts
from inline_core.graph.schema import PortKind
from inline_core.runtime.cancel import CancelToken
from inline_core.runtime.context import ExecutionContext
from inline_core.runtime.interactions import InteractionInbox
from inline_core.runtime.progress import NodeReporter
from inline_core.runtime.video import Frames, Video
from inline_core.runtime.video_stream import LiveVideo
from inline_core.sampling.job import PREVIEW_FLUSH_S, SampleJob
from inline_core.takes import Take


class FamilyNodeRunner(NodeRunner):
    samples_steps = True

    def __init__(self, family: Family, descriptor: NodeDescriptor, runtime: ModelRuntime) -> None:
        self.family = family
        self.descriptor = descriptor
        self.runtime = runtime
        # Its renders follow the run's `options.cache` where its family caches steps at all.
        self.caches_steps = bool(family.capabilities.step_cache)

    # -- submit ----------------------------------------------------------------------------------

    def check_node(self, node_id: str, params: Mapping[str, Any], facts: SubmitFacts) -> Sources:
        """One check at submit: the node's files resolved once, the family's one check with
        everything it needs, then the files required and the split asked; the files found are
        the run's (`NodeCall.prepared`), for `lower` and the render."""
        node_type = self.descriptor.type
        if self.descriptor.param("mu") is not None:  # a node with `SHIFT_PARAMS`: one of the two
            try:
                ModelShift.of(params.get("shift"), params.get("mu"))
            except ValueError as exc:
                raise InvalidRequest(str(exc), node_id=node_id) from None
        resolution = self.family.resolve(node_type, params)
        sizes = facts.sizes()
        submit = Submit(node_type, params, node_id, resolution, facts.wired, sizes, facts.upstream)
        self.family.check(submit)
        sources = resolution.require(node_id)
        images = {port: sizes.get(port) for port in facts.wired}
        self.runtime.refuse_if_split(self.family, node_type, params, sources, node_id, images)
        return sources

    def cache_identity(self, params: Mapping[str, Any], prepared: object | None = None) -> str:
        sources = prepared if isinstance(prepared, Sources) else self._sources(params, None)
        extra = self.family.params_identity(self.descriptor.type, params)
        return sources.identity() + (f"|{extra}" if extra else "")

    def _sources(self, params: Mapping[str, Any], node_id: str | None) -> Sources:
        return self.family.resolve(self.descriptor.type, params).require(node_id)

    # -- run ---------------------------------------------------------------------------------------

    def run(self, call: NodeCall) -> NodeResult:
        ctx, node_id, family = call.ctx, call.node_id, self.family
        reporter = ctx.reporter(node_id)
        reporter.phase("loading")
        prepared = call.prepared
        sources = prepared if isinstance(prepared, Sources) else self._sources(call.params, node_id)
        lowered = family.lower(self.descriptor.type, call.params, call.inputs, node_id, sources)
        target = node_target(self.runtime, family, sources, ctx.run_id, node_id)
        state = target.request(**lowered.request)
        target.start()  # a worker group's ranks load the model: part of the loading phase
        cache = None
        if caches_steps(state):  # the same settings travel to every rank of a worker group
            cache = self.runtime.step_cache_for(family, ctx.step_cache, state.step_count)
            state.step_cache = cache
        with ExitStack() as streams:
            # Its clients see each decoded chunk before the take (decoded here: a worker group
            # decodes on its rank 0, whose chunks do not cross back, and its take comes whole).
            if target.in_process and streams_chunks(state):
                live = streams.enter_context(ctx.streaming(node_id, state.fps))
                state.on_chunk = chunk_listener(reporter, live, ctx.cancel, state.fps)
                if live is not None and streams_sound(state):
                    state.on_audio = live.set_audio
            inbox = None
            if takes_interactions(state):  # its stored interactions replay at their boundaries
                inbox = InteractionInbox(state.chunk_count, ctx.interactions)
                state.inbox = inbox
                streams.enter_context(ctx.interacting(inbox))
            reporter.phase("loading", 1.0)
            ctx.cancel.raise_if_cancelled()
            job = SampleJob(
                pipeline=target.pipeline,
                state=state,
                cancel=ctx.cancel,
                on_phase=reporter.phase,
                on_step=reporter.step,
                on_wait=reporter.waiting,
                label=f"{ctx.run_id}/{node_id}",
                preview=self.runtime.preview_sink(ctx.preview, ctx.run_id, node_id),
                on_chunk=chunk_announcer(reporter, inbox),
            )
            output: object = target.sampler.run(job)
            if job.preview is not None:  # its last preview out before the run can end
                job.preview.flush(PREVIEW_FLUSH_S)
            reporter.phase("save")
            chosen = {}
            if not call.params.get("model") and sources.model_name in family.catalog.options(
                "diffusion_models"
            ):  # "auto": the embedded graph names the model it picked
                chosen = {"model": sources.model_name}
            params = {**lowered.take_params, "model": sources.model_name}
            steered = inbox is not None and bool(inbox.applied)
            if inbox is not None:  # the take's timeline: each interaction and its chunk
                params["interactions"] = inbox.timeline()
            if cache is not None:  # cached steps are an approximation: the take says how
                params["cache"] = cache.to_json()
                counts = step_cache_counts(state)
                if counts is not None:  # and what the cache skipped
                    params["cacheCounts"] = counts
                    self.runtime.step_cache_totals.add(counts)
            compiled = self.runtime.compile_notes(target.pipeline) or job.compiled
            if compiled:  # compiled blocks equal eager within a level: the take says how it ran
                params["compile"] = compiled
            takes = [self._save(ctx, node_id, output, params, chosen)]
            outputs = {self.descriptor.outputs[0].name: output}
            sound = self._audio_port()
            if sound is not None and isinstance(output, Video) and output.audio is not None:
                # A video's soundtrack is also a take of its own, the node's audio output.
                audio_format = str(call.params.get("audio_format") or "wav")
                takes.append(ctx.save_audio(node_id, output.audio, params, audio_format, 1, chosen))
                outputs[sound] = output.audio
            reporter.phase("save", 1.0)
            return NodeResult(outputs=outputs, takes=tuple(takes), cacheable=not steered)

    def _audio_port(self) -> str | None:
        """The node's audio output beside its video, where it has one."""
        ports = self.descriptor.outputs[1:]
        return next((p.name for p in ports if p.kind == PortKind.AUDIO), None)

    def _save(
        self,
        ctx: ExecutionContext,
        node_id: str,
        output: object,
        params: Mapping[str, Any],
        chosen: Mapping[str, Any],
    ) -> Take:
        if self.descriptor.output_kind == "image" and isinstance(output, Image.Image):
            return ctx.save_image(node_id, output, params, chosen=chosen)
        if self.descriptor.output_kind == "video" and isinstance(output, Video):
            return ctx.save_video(node_id, output, params, chosen=chosen)
        raise RunFailed(
            f"{self.descriptor.type} produced a {type(output).__name__}, not its "
            f"{self.descriptor.output_kind}"
        )


def chunk_announcer(
    reporter: NodeReporter, inbox: InteractionInbox | None
) -> Callable[[Any], None]:
    """What the loop calls as a chunked render starts a chunk (`ChunkMediaSpec`): a
    `chunk_started` event with the interactions that took effect at it."""

    def on_chunk(media: Any) -> None:
        applied = () if inbox is None else inbox.applied_at(int(media.chunk))
        reporter.chunk_started(media.to_info(), tuple(i.to_info() for i in applied))

    return on_chunk


def chunk_listener(
    reporter: NodeReporter, live: LiveVideo | None, cancel: CancelToken, fps: float
) -> Callable[[int, Frames, int], None]:
    """What a streaming decode calls with each chunk (its first frame's index, its frames, the
    total): a `chunk` event (with the video's `fps`), the frames to the node's live video, and
    the run's cancel checked, so a cancel during the decode stops it at the next chunk."""

    def on_chunk(first: int, frames: Frames, total: int) -> None:
        reporter.chunk(first, len(frames), total, fps)
        if live is not None:
            live.add(frames)
        cancel.raise_if_cancelled()

    return on_chunk
