"""The runner of every family's high-level nodes: resolve, lower, one job through one seam, a take.

Torch-free at import. `check` resolves the node's files at submit (headers only, so a missing or
wrong model is refused in milliseconds with `model_missing`), and the run reuses that resolution.
The check sees no seed and no text, so a render that changes only those is not checked again.
The family lowers the node's params and inputs into its pipeline's request. The job then reaches
the accelerator through one seam, a `BatchedSampler`: the in-process step loop, or, where the
device policy splits this model across ranks, the worker group (the server then loads no weights of
its own). The output becomes a take of the node's output kind.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any, NamedTuple

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
from inline_core.contract.supports import checks_texts
from inline_core.diffusion.sigma.shift import ModelShift
from inline_core.engine.runtime import ModelRuntime
from inline_core.engine.target import node_target
from inline_core.errors import InvalidRequest, RunFailed
from inline_core.graph.descriptor import NodeDescriptor
from inline_core.graph.params import CheckParams, seed_params
from inline_core.graph.runner import NodeCall, NodeResult, NodeRunner, SubmitFacts
from inline_core.graph.schema import PortKind
from inline_core.models.catalog import CATEGORIES, Catalog
from inline_core.models.source import Source
from inline_core.runtime.cancel import CancelToken
from inline_core.runtime.context import ExecutionContext
from inline_core.runtime.interactions import InteractionInbox
from inline_core.runtime.progress import NodeReporter
from inline_core.runtime.video import Frames, Video
from inline_core.runtime.video_stream import LiveVideo
from inline_core.sampling.job import PREVIEW_FLUSH_S, SampleJob
from inline_core.takes import Take

# Checks kept per family node, most recently used last: a client posting new params without end
# pushes the oldest out.
CHECKS_KEPT = 64


class CheckKey(NamedTuple):
    """What a family node's check read: its inputs (`read`), the registry's state and the
    catalog's."""

    read: Hashable
    generation: int
    fingerprint: str


class KeptChecks:
    """The files a family node's check found, kept per everything the check reads: the node's
    id, its params but the seeds, the inputs wired, the sizes known, what the nodes wired in
    prepared (no text), the registry's state and the catalog's files (`Catalog.fingerprint`:
    every entry's name, size and mtime). The files the catalog does not list (a tokenizer
    folder, a file an override names, a package's) are not in that fingerprint: one found again
    is reused only while their identity (`Source.identity`) is the one they had. Only a check
    that passed is kept."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self._lock = threading.Lock()
        # key -> (the files found, those the catalog does not list, and their identity)
        self._kept: OrderedDict[CheckKey, tuple[Sources, tuple[Source, ...], str]] = OrderedDict()

    def __len__(self) -> int:
        with self._lock:
            return len(self._kept)

    def key(
        self,
        node_id: str,
        params: CheckParams,
        facts: SubmitFacts,
        sizes: Mapping[str, tuple[int, int]],
        upstream: Mapping[str, Sequence[object]],
    ) -> CheckKey | None:
        """The key of a check, the catalog's state read before the check reads any file (None:
        something it reads cannot be keyed; it is not kept)."""
        handles = tuple((port, tuple(values)) for port, values in sorted(upstream.items()))
        read = (node_id, params.key(), facts.wired, tuple(sorted(sizes.items())), handles)
        key = CheckKey(read, facts.generation, self.catalog.fingerprint())
        try:
            hash(key)
        except TypeError:  # a prepared value that is not hashable
            return None
        return key

    def find(self, key: CheckKey) -> Sources | None:
        with self._lock:
            kept = self._kept.get(key)
            if kept is not None:
                self._kept.move_to_end(key)
        if kept is None:
            return None
        sources, unlisted, identity = kept
        if unlisted and _identity(unlisted) != identity:  # changed where the catalog cannot see
            with self._lock:
                self._kept.pop(key, None)
            return None
        return sources

    def keep(self, key: CheckKey, sources: Sources) -> None:
        """Keep what a check found, unless the catalog changed since its key was made."""
        listed = _listed(self.catalog)
        if self.catalog.fingerprint() != key.fingerprint:
            return
        unlisted = tuple(s for _part, s in sources.parts if s is not None and not listed(s))
        identity = _identity(unlisted)
        with self._lock:
            self._kept[key] = (sources, unlisted, identity)
            while len(self._kept) > CHECKS_KEPT:
                self._kept.popitem(last=False)


def _identity(sources: tuple[Source, ...]) -> str:
    return "|".join(source.identity() for source in sources)


def _listed(catalog: Catalog) -> Callable[[Source], bool]:
    """Whether a source's files are in the catalog's fingerprint: a file it lists (a view of
    one included), or inside a model folder it lists (whose every file it stats)."""
    files: set[Path] = set()
    folders: list[Path] = []
    for category in CATEGORIES:
        for entry in catalog.entries(category):
            if entry.is_folder:
                folders.append(entry.path)
            else:
                files.add(entry.path)

    def listed(source: Source) -> bool:
        where = source.location
        return where in files or any(where.is_relative_to(folder) for folder in folders)

    return listed


class FamilyNodeRunner(NodeRunner):
    samples_steps = True

    def __init__(self, family: Family, descriptor: NodeDescriptor, runtime: ModelRuntime) -> None:
        self.family = family
        self.descriptor = descriptor
        self.runtime = runtime
        # Its renders follow the run's `options.cache` where its family caches steps at all.
        self.caches_steps = bool(family.capabilities.step_cache)
        self._seeds = seed_params(descriptor)
        self._checks_texts = checks_texts(family)
        self._kept = KeptChecks(family.catalog)

    # -- submit ----------------------------------------------------------------------------------

    def check_node(self, node_id: str, params: Mapping[str, Any], facts: SubmitFacts) -> Sources:
        """One check at submit: the texts wired in checked (where the family checks them), then
        the node's files resolved once, the family's one check with everything it needs, the
        files required and the split asked; the files found are the run's (`NodeCall.prepared`),
        for `lower` and the render. None of the latter sees a seed or a text (`CheckParams`,
        `Submit.upstream`), so its result is kept (`KeptChecks`) and a render that changes only
        those finds it again."""
        texts, handles = _split_upstream(facts.upstream)
        if self._checks_texts is not None:
            self._checks_texts.check_texts(self.descriptor.type, texts, node_id)
        view = CheckParams(params, self._seeds)
        sizes = facts.sizes()
        key = self._kept.key(node_id, view, facts, sizes, handles)  # the catalog read first
        kept = None if key is None else self._kept.find(key)
        if kept is not None:
            return kept
        sources = self._check(node_id, view, facts.wired, sizes, handles)
        if key is not None:
            self._kept.keep(key, sources)
        return sources

    def _check(
        self,
        node_id: str,
        params: CheckParams,
        wired: frozenset[str],
        sizes: Mapping[str, tuple[int, int]],
        upstream: Mapping[str, Sequence[object]],
    ) -> Sources:
        node_type = self.descriptor.type
        if self.descriptor.param("mu") is not None:  # a node with `SHIFT_PARAMS`: one of the two
            try:
                ModelShift.of(params.get("shift"), params.get("mu"))
            except ValueError as exc:
                raise InvalidRequest(str(exc), node_id=node_id) from None
        resolution = self.family.resolve(node_type, params)
        submit = Submit(node_type, params, node_id, resolution, wired, sizes, upstream)
        self.family.check(submit)
        sources = resolution.require(node_id)
        images = {port: sizes.get(port) for port in wired}
        self.runtime.refuse_if_split(self.family, node_type, params, sources, node_id, images)
        return sources

    def kept_checks(self) -> int:
        """How many checks it keeps now (at most `CHECKS_KEPT`)."""
        return len(self._kept)

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


def _split_upstream(
    upstream: Mapping[str, Sequence[object]],
) -> tuple[dict[str, list[str]], dict[str, list[object]]]:
    """What the nodes wired in prepared, as (the texts, the rest), each by input name: a text
    (an `input/text`'s) changes render to render, so the check that is kept never sees one."""
    texts: dict[str, list[str]] = {}
    handles: dict[str, list[object]] = {}
    for port, values in upstream.items():
        for value in values:
            if isinstance(value, str):
                texts.setdefault(port, []).append(value)
            else:
                handles.setdefault(port, []).append(value)
    return texts, handles


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
