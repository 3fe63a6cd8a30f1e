"""`SampleJob`: one request's denoise, as a model runner hands it to the sampler."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

from inline_core.components.step import StepPipeline
from inline_core.runtime.cancel import CancelToken


def _ignore_phase(_phase: str) -> None:
    return None


def _ignore_wait(_what: str, _eta_s: float) -> None:
    pass


def _ignore_step(_step: int, _count: int) -> None:
    return None


def _ignore_chunk(_media: Any) -> None:
    return None


# How long a finished job's runner waits for its last preview to be delivered (a bound: the
# render of one preview takes milliseconds).
PREVIEW_FLUSH_S = 2.0


class PreviewSink(Protocol):
    """Where a job's step previews go (`sampling/previews.py`): called on the loop thread with the
    x0 estimate after each step, so it must only hand the value over, never render it there."""

    def offer(self, latents: Any, latent_format: str, step: int, step_count: int, /) -> None: ...

    def flush(self, timeout: float, /) -> bool:
        """Wait until every offer is delivered (off the loop: the job's runner, once it is done)."""
        ...

    @property
    def remote(self) -> dict[str, Any] | None:
        """What a worker group's rank 0 needs to render the same previews ({"method", "size",
        "vaeApprox"}); None: they are rendered here only."""
        ...

    def show(self, image: Any, step: int, step_count: int, /) -> None:
        """Deliver an image rendered elsewhere (rank 0 of a worker group), as this sink's own."""
        ...


class RemoteHandle(Protocol):
    """A handle on a pipeline that lives elsewhere (a worker group's ranks): what the group's
    sampler reads of it (`parallel.remote.RemotePipeline`)."""

    def remote_spec(self) -> Any: ...

    def remote_request(self, state: Any, /) -> Any: ...


@dataclass
class SampleJob:
    """A request for the sampler: the pipeline to drive and the request's initial state.

    The in-process sampler calls `pipeline.prepare_encode(state)`, then steps it (possibly in a
    batch with other jobs), then `pipeline.post_decode(state)`, and resolves the job's future with
    that output. The worker group's sampler takes the same job with the server's handle on a
    pipeline that lives in its ranks (a `RemoteHandle`), and its ranks do the same.
    """

    pipeline: StepPipeline | RemoteHandle
    state: Any
    cancel: CancelToken = field(default_factory=CancelToken)
    on_phase: Callable[[str], None] = _ignore_phase  # "encode" | "sample" | "decode"
    on_step: Callable[[int, int], None] = _ignore_step  # (steps done, step count)
    # A chunked render's chunk as it starts (`components.step.ChunkMediaSpec`), on the loop.
    on_chunk: Callable[[Any], None] = _ignore_chunk
    # What it waits for on the loop and about how long, in seconds (`sampling/waits.py`).
    on_wait: Callable[[str, float], None] = _ignore_wait
    label: str = ""
    # Step previews (None: off, and the loop does nothing for them). Taken only from a pipeline
    # that supports them (`components.step.SupportsPreview`).
    preview: PreviewSink | None = None
    # How a worker group's compiled blocks ran, per block class (its sampler fills it: the
    # ranks' `compile` notes, merged); in process, the stacks say it (`ModelRuntime.compile_notes`).
    compiled: list[dict[str, object]] = field(default_factory=list[dict[str, object]])

    @property
    def step_pipeline(self) -> StepPipeline:
        """The pipeline as the in-process loop drives it (checked when the job is submitted)."""
        return cast(StepPipeline, self.pipeline)


class BatchedSampler(Protocol):
    def run(self, job: SampleJob) -> Any:
        """Run `job` to completion on the calling thread's behalf and return `post_decode`'s output.

        Raises `Cancelled` if the job's token fires, or the pipeline's exception if it fails.
        """
        ...

    def stats(self) -> dict[str, Any]:
        """Active and queued jobs and the limits in force (served in `/v1/health`)."""
        ...

    def close(self) -> None: ...
