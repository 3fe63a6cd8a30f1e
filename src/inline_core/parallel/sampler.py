"""`ParallelSampler`: the `BatchedSampler` for a split placement; jobs run in the worker group.

A model runner submits the same `SampleJob` it would give the in-process sampler; its pipeline must
implement `RemotePipeline`. The group is started on the first job and holds that pipeline; a job
for a different pipeline (other model files) has the ranks load the new one in place of it (no
relaunch). The job's phases, steps
and cancel token cross the boundary, and the output comes back as the same type, pixel for pixel.
A job that loses its group to a fault (a rank killed or hung) is retried once on a fresh group.
Every finished job is logged with what each rank's attention saw: under a real split, a shard.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, Protocol, cast

from inline_core.device.split import ParallelSpec
from inline_core.diffusion.compile.progress import merge_rank_notes
from inline_core.errors import InvalidRequest, Unavailable
from inline_core.parallel.config import GroupConfig
from inline_core.parallel.group import WorkerGroup
from inline_core.parallel.protocol import Json, PreviewFrame
from inline_core.parallel.remote import PipelineSpec, RemotePipeline, decode_output
from inline_core.parallel.settings import RankSettings
from inline_core.runtime.cancel import CancelToken
from inline_core.runtime.preview import EncodedPreview
from inline_core.runtime.step_cache import ReportedCounts

log = logging.getLogger(__name__)


class SampleJobLike(Protocol):
    """The fields of `sampling.SampleJob` this sampler reads (`sampling` imports `parallel`, so
    the job is described structurally here rather than imported)."""

    @property
    def pipeline(self) -> Any: ...

    @property
    def state(self) -> Any: ...

    @property
    def cancel(self) -> CancelToken: ...

    @property
    def on_phase(self) -> Callable[[str], None]: ...

    @property
    def on_step(self) -> Callable[[int, int], None]: ...

    @property
    def preview(self) -> Any: ...  # a `sampling.job.PreviewSink`, or None

    @property
    def compiled(self) -> list[dict[str, object]]: ...  # filled: how the ranks' blocks ran


def ranks_compiled(meta: Mapping[int, Mapping[str, Json]]) -> list[dict[str, object]]:
    """How the ranks' compiled blocks ran (each rank's `compile`, merged), with a warning for
    each block class a rank could not compile (it ran eager there)."""
    by_rank = {
        rank: cast(list[Mapping[str, object]], notes)
        for rank, rank_meta in meta.items()
        if isinstance(notes := rank_meta.get("compile"), list)
    }
    merged = merge_rank_notes(by_rank)
    for note in merged:
        if note["ran"] != "compiled":
            log.warning(
                "worker group: rank(s) %s could not compile %s and ran it eager: %s",
                note.get("failedRanks"),
                note["block"],
                note.get("error"),
            )
    return merged


def ranks_packed(meta: Mapping[int, Mapping[str, Json]]) -> list[dict[str, int]]:
    """Each rank's packed linear weights in a job's metadata (`packedBytes`), by rank."""
    return [
        {"rank": rank, "bytes": packed}
        for rank, rank_meta in sorted(meta.items())
        if isinstance(packed := rank_meta.get("packedBytes"), int)
    ]


def _show_on(preview: Any) -> Callable[[PreviewFrame], None]:
    """Rank 0's rendered previews, shown through the job's preview sink as it shows its own."""

    def show(frame: PreviewFrame) -> None:
        if preview is None:
            return
        info = frame.info
        image = EncodedPreview(
            frame.image,
            str(info["format"]),
            int(cast(int, info["width"])),
            int(cast(int, info["height"])),
            str(info["method"]),
        )
        preview.show(image, frame.step, frame.count)

    return show


class ParallelSampler:
    def __init__(self, config: GroupConfig, *, retries: int = 1) -> None:
        self.config = config
        self.retries = retries
        self._lock = threading.Lock()
        self._turn = threading.Condition(self._lock)  # a job for another pipeline waits its turn
        self._group: WorkerGroup | None = None
        self._spec: PipelineSpec | None = None
        self._closed = False
        self._in_flight = 0
        self._waiting = 0  # jobs for another pipeline, waiting for the group to be idle
        self._completed = 0
        self._failed = 0
        self.last_meta: dict[int, dict[str, Json]] = {}  # each rank's debug counters, last job
        # How the ranks' compiled blocks ran in the last job (`ranks_compiled`; health shows it).
        self.last_compiled: list[dict[str, object]] = []

    @classmethod
    def for_split(cls, split: ParallelSpec, *, cuda: bool, engine: str = "auto") -> ParallelSampler:
        """The sampler for a split the device policy chose: NCCL ranks (one GPU each) on CUDA,
        gloo CPU ranks otherwise (`INLINE_PROFILE=cpu INLINE_PARALLEL=ulysses=2`)."""
        ranks = RankSettings(split=split, backend="nccl" if cuda else "gloo", engine=engine)
        return cls(GroupConfig(ranks))

    def run(self, job: SampleJobLike) -> Any:
        """Run `job` in the worker group; blocks the calling thread like `StepLoopSampler.run`."""
        pipeline = job.pipeline
        if not isinstance(pipeline, RemotePipeline):
            raise InvalidRequest(
                f"{type(pipeline).__name__} cannot run split across ranks (no RemotePipeline)"
            )
        request = pipeline.remote_request(job.state)
        preview = job.preview
        try:
            group = self._hold(pipeline.remote_spec())
        except BaseException:
            with self._lock:
                self._failed += 1
            raise
        try:
            reply = group.submit(
                request.params,
                request.blobs,
                cancel=job.cancel,
                on_phase=job.on_phase,
                on_step=job.on_step,
                retries=self.retries,
                preview=None if preview is None else preview.remote,
                on_preview=_show_on(preview),
            )
        except BaseException:
            with self._lock:
                self._failed += 1
            raise
        finally:
            self._release()
        with self._lock:
            self._completed += 1
        self.last_meta = reply.meta
        counts = reply.meta[0].get("stepCache")
        if isinstance(counts, dict) and hasattr(job.state, "cache"):
            job.state.cache = ReportedCounts(cast(dict[str, int], counts))
        self.last_compiled = ranks_compiled(reply.meta)
        job.compiled[:] = self.last_compiled
        log.info("worker group job done (%s): %s", self.config.ranks.split, summarize(reply.meta))
        return decode_output(reply.meta[0].get("output"), reply.arrays)

    def _hold(self, spec: PipelineSpec) -> WorkerGroup:
        """The group holding `spec`, counted as in use (`_release` when done). Jobs for the
        pipeline the group holds run at once (its ranks batch them); a job for another one
        waits until the group is idle, then has its ranks load that one in place of theirs
        (`WorkerGroup.load`: no relaunch): one group holds the devices, so jobs in flight are
        never cut short."""
        with self._turn:
            while True:
                if self._closed:
                    raise Unavailable("the sampler is closed")
                group = self._group
                if group is not None and self._spec is not None and self._spec.key == spec.key:
                    self._in_flight += 1
                    return group
                if self._in_flight == 0:
                    break
                self._waiting += 1
                try:
                    self._turn.wait()
                finally:
                    self._waiting -= 1
            self._spec = spec
            self._in_flight += 1
            if group is None:
                self._group = WorkerGroup(self._config_for(spec))
                return self._group
        try:  # jobs for `spec` arriving meanwhile wait in the group for the ranks to be ready
            group.load(_runner_args(spec))
        except BaseException:
            self._release()
            raise
        return group

    def _release(self) -> None:
        with self._turn:
            self._in_flight -= 1
            self._turn.notify_all()

    def _config_for(self, spec: PipelineSpec) -> GroupConfig:
        # The configured runner factory (the step runner unless a caller chose another) builds
        # this spec's pipeline in every rank.
        ranks = replace(self.config.ranks, runner_args=_runner_args(spec))
        return replace(self.config, ranks=ranks)

    def _group_for(self, spec: PipelineSpec) -> WorkerGroup:
        """The group for `spec`, loading it into an idle one that holds another pipeline."""
        group = self._hold(spec)
        self._release()
        return group

    def start(self, spec: PipelineSpec) -> dict[str, Json]:
        """Launch the group for `spec` ahead of the first job (e.g. at server start-up)."""
        group = self._hold(spec)
        try:
            return group.start()
        finally:
            self._release()

    def gather(self, spec: PipelineSpec, count: int, timeout_s: float = 30.0) -> None:
        """Have the group's rank 0 admit the next `count` jobs for `spec` together
        (`WorkerGroup.gather`), loading `spec` first if the group holds another pipeline."""
        group = self._hold(spec)
        try:
            group.gather(count, timeout_s)
        finally:
            self._release()

    @property
    def spec(self) -> PipelineSpec | None:
        """The pipeline the group holds (or is starting with); None before the first job and
        once closed."""
        with self._lock:
            return self._spec if self._group is not None else None

    @property
    def closed(self) -> bool:
        return self._closed

    def stats(self) -> dict[str, Any]:
        group = self._group
        with self._lock:
            return {
                "activeJobs": self._in_flight,  # in the ranks (which may batch them)
                "queuedJobs": self._waiting,
                "completedJobs": self._completed,
                "failedJobs": self._failed,
                "retriedJobs": 0 if group is None else group.retried,
                "closed": self._closed,
                "group": None if group is None else group.stats(),
                # Rank 0's step loop as of the last job: how it grouped the jobs it was sent.
                "rankLoop": self.last_meta.get(0, {}).get("loop"),
                # How the ranks' compiled blocks ran in the last job: a rank whose compile failed
                # ran that block class eager, named with its error (`failedRanks`).
                "compile": [dict(note) for note in self.last_compiled],
                # Each rank's linear weights packed for oneDNN at load (bytes; 0: none), as of
                # the last job.
                "packedLinear": ranks_packed(self.last_meta),
            }

    def close(self) -> None:
        with self._turn:
            self._closed = True
            group, self._group = self._group, None
            self._turn.notify_all()
        if group is not None:
            group.close()


def _runner_args(spec: PipelineSpec) -> dict[str, Json]:
    return {"loader": spec.loader, "loaderArgs": spec.args}


def summarize(meta: Mapping[int, Mapping[str, Json]]) -> str:
    """One line per job: engine, forwards, and the most tokens one attention layer of each rank
    saw in the first forward (half of one process's under a two-way split)."""
    parts: list[str] = []
    for rank in sorted(meta):
        tokens = meta[rank].get("attentionTokens")
        seen = tokens if isinstance(tokens, list) else []
        most = max((n for n in seen if isinstance(n, int)), default=0)
        parts.append(f"rank {rank} attention tokens {most}")
    first = meta.get(0, {})
    return f"engine {first.get('engine')}, {first.get('forwards')} forwards, " + ", ".join(parts)
