"""`StepLoopSampler`: the `BatchedSampler` that model runners submit their `SampleJob`s to.

The denoise steps of every job run on one loop thread (`StepEngine`), batched across jobs where
compatible. A job's one-off phases, `prepare_encode` and `post_decode`, run off that thread by
default (on the thread that called `run`, or a small pool for `submit`), so a text encode or VAE
decode of one run does not stall the steps of the others; at most `phase_slots` of them run at once
so they do not pile up on the device. A pipeline whose phases must not overlap the denoise loop
(e.g. one that swaps modules on and off the device) sets `serial_phases = True`, and its phases
then run on the loop thread, between steps. A CPU server runs every job's phases there
(`phases="loop"`), and nodes hand their own model work to `compute`, so one thread computes
(`diffusion/threads.py`).

Measured (bench/batching_phases.py, 8 and 16 concurrent tiny kit renders on CPU): with the
phases on the loop thread the longest pause between two forwards was 100-170 ms (a VAE decode);
off the loop it was 8-22 ms, at the same throughput within noise.

Decodes of jobs that finish together are batched (`phase_slots.py`, `decode_batch.py`) when the
pipeline supports it (`post_decode_many`), within `max_batch` and the device's decode pixel budget
(`limits.py`). Prompt encodes are not: on the kit's Qwen3 an encode takes about 2 ms a prompt on
a quiet CPU (`bench/batching_decode.py`), a tenth of one 64 px VAE decode, so there is little to
win here, and prompts of different lengths would need padding and masks in one call. (A real 4B
encoder on a GPU may differ: unmeasured.)
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError, ThreadPoolExecutor
from typing import Any, Literal, TypeVar

from inline_core.components.step import StepPipeline
from inline_core.errors import Cancelled, Unavailable
from inline_core.sampling.decode_batch import DecodeItem
from inline_core.sampling.engine import StepEngine
from inline_core.sampling.job import SampleJob
from inline_core.sampling.limits import BatchLimits, resolve_limits
from inline_core.sampling.phase_slots import PhaseSlots

PhasePlacement = Literal["caller", "loop"]
T = TypeVar("T")


class StepLoopSampler:
    def __init__(
        self,
        max_batch: int | None = None,
        token_budget: int | None = None,
        *,
        device: str = "cpu",
        phases: PhasePlacement = "caller",
        phase_slots: int = 1,
        decode_pixel_budget: int | None = None,
        on_loop_start: Callable[[], None] | None = None,
        chunk_grouping: bool = True,
    ) -> None:
        self.limits: BatchLimits = resolve_limits(
            max_batch, token_budget, device, decode_pixel_budget
        )
        self._phases: PhasePlacement = phases
        self._engine = StepEngine(self.limits, on_start=on_loop_start)
        self._engine.chunk_grouping = chunk_grouping  # the loop's policy (`engine.py`)
        self._slots = PhaseSlots(phase_slots, self.limits)
        self._engine.settling = self._slots.adding
        self._pool_workers = max(1, phase_slots)
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self._encoding = 0  # waiting for, or in, prepare_encode off the loop

    # -- public API -------------------------------------------------------------------------

    def run(self, job: SampleJob) -> Any:
        """Run `job` to completion; blocks the calling thread. Raises `Cancelled` when the job's
        token fires, `Unavailable` when the sampler is closed, or the pipeline's exception."""
        _require_step_pipeline(job)
        on_loop = self._phases_on_loop(job)
        self._count_encoding(+1)
        try:
            state = job.state if on_loop else self._encode(job)
            ticket = self._engine.enqueue(
                job, state, encode_on_loop=on_loop, decode_on_loop=on_loop
            )
        finally:
            self._count_encoding(-1)
        if on_loop:
            return ticket.future.result()
        # The decode is queued by the thread that resolves the ticket (the loop, with every job
        # that finished in the same forward), so those can be decoded together.
        queued: Future[DecodeItem] = Future()
        ticket.future.add_done_callback(
            lambda done: _chain(done, queued, lambda sampled: self._slots.add(job, sampled))
        )
        return self._slots.finish(queued.result())

    def submit(self, job: SampleJob) -> Future[Any]:
        """Start `job` without blocking; the future resolves like `run` returns or raises."""
        _require_step_pipeline(job)
        outer: Future[Any] = Future()
        if self._phases_on_loop(job):
            try:
                ticket = self._engine.enqueue(
                    job, job.state, encode_on_loop=True, decode_on_loop=True
                )
            except Exception as exc:
                outer.set_exception(exc)
                return outer
            ticket.future.add_done_callback(lambda done: _chain(done, outer))
            return outer

        def decode(item: DecodeItem) -> None:
            _settle(outer, lambda: self._slots.finish(item))

        def after_sampling(done: Future[Any]) -> None:  # runs on the loop thread: hand off only
            exc = done.exception()
            if exc is not None:
                _fail(outer, exc)
                return
            try:
                item = self._slots.add(job, done.result())
            except BaseException as err:
                _fail(outer, err)
                return
            if not self._in_pool(outer, decode, item):
                self._slots.discard(item)

        def encode_and_enqueue(_: None) -> None:
            try:
                state = self._encode(job)
                ticket = self._engine.enqueue(
                    job, state, encode_on_loop=False, decode_on_loop=False
                )
            except BaseException as exc:
                _fail(outer, exc)
                return
            finally:
                self._count_encoding(-1)
            ticket.future.add_done_callback(after_sampling)

        self._count_encoding(+1)  # counted from acceptance: a backlog in the pool is queued too
        if not self._in_pool(outer, encode_and_enqueue, None):
            self._count_encoding(-1)
        return outer

    def compute(self, fn: Callable[[], T]) -> T:
        """Run a node's own model work (a text encode, a VAE decode) where the phases run: on the
        loop thread with `phases="loop"`, so one thread does all of the process's compute, else
        on the calling thread."""
        if self._phases == "loop":
            return self._engine.call(fn)
        return fn()

    def call_soon(self, call: Callable[[], None]) -> None:
        """Run `call` on the loop thread at its next step boundary (`StepEngine.call_soon`)."""
        self._engine.call_soon(call)

    def stats(self) -> dict[str, Any]:
        incoming, active = self._engine.counts()
        counters = self._engine.counters
        with self._lock:
            encoding = self._encoding
        decoding = self._slots.counts()
        batched_decodes = counters.batched_decodes + self._slots.batched_decodes
        batch_decoded = counters.batch_decoded_jobs + self._slots.batch_decoded_jobs
        forwards = counters.forwards
        return {
            "activeJobs": active,
            "queuedJobs": incoming + encoding,
            "encodingJobs": encoding,
            "decodingJobs": decoding,
            "maxBatch": self.limits.max_batch,
            "tokenBudget": self.limits.token_budget,
            "batching": self.limits.batching,
            "completedJobs": counters.completed,
            "failedJobs": counters.failed,
            "cancelledJobs": counters.cancelled,
            "forwards": forwards,
            "batchedForwards": counters.batched_forwards,
            # Microseconds kept: a tiny model's forwards add up to less than a millisecond.
            "forwardSeconds": round(counters.forward_seconds, 6),
            "previewSeconds": round(counters.preview_seconds, 6),  # the loop's, not the worker's
            "meanBatch": round(counters.jobs_forwarded / forwards, 3) if forwards else 0.0,
            "decodePixelBudget": self.limits.decode_pixel_budget if self.limits.batching else 0,
            "batchedDecodes": batched_decodes,
            "batchDecodedJobs": batch_decoded,
            # Jobs whose batch key changed between steps: a two-expert model's switch.
            "batchKeyChanges": counters.key_changes,
            "groupedSteps": counters.grouped_steps,
            "closed": self._engine.closed,
        }

    def close(self) -> None:
        """Stop the loop thread; jobs not finished fail with `Unavailable`."""
        self._engine.close()
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False)  # queued encode tasks still run and fail fast (closed)

    # -- phases off the loop ----------------------------------------------------------------

    def _phases_on_loop(self, job: SampleJob) -> bool:
        return self._phases == "loop" or getattr(job.pipeline, "serial_phases", False) is True

    def _count_encoding(self, delta: int) -> None:
        with self._lock:
            self._encoding += delta

    def _encode(self, job: SampleJob) -> Any:
        with self._slots.slot():
            self._check_open(job)
            job.on_phase("encode")
            prepared = job.step_pipeline.prepare_encode(job.state)
        return job.state if prepared is None else prepared

    def _check_open(self, job: SampleJob) -> None:
        if self._engine.closed:
            raise Unavailable("the sampler is closed")
        if job.cancel.cancelled:
            raise Cancelled(job.cancel.reason)

    def _in_pool(self, outer: Future[Any], fn: Callable[[Any], None], arg: Any) -> bool:
        """Run `fn(arg)` on the phase pool; False (and `outer` failed) once closed."""
        with self._lock:
            if self._pool is None and not self._engine.closed:
                self._pool = ThreadPoolExecutor(
                    max_workers=self._pool_workers, thread_name_prefix="inline-sampler-phase"
                )
            pool = self._pool
        if pool is None:
            _fail(outer, Unavailable("the sampler is closed"))
            return False
        try:
            pool.submit(fn, arg)
        except RuntimeError:  # shut down between the check and the submit
            _fail(outer, Unavailable("the sampler is closed"))
            return False
        return True


def _require_step_pipeline(job: SampleJob) -> None:
    if not isinstance(job.pipeline, StepPipeline):
        raise TypeError(
            f"a {type(job.pipeline).__name__} is not a step pipeline: it cannot run in process"
        )


def _settle(outer: Future[Any], compute: Callable[[], Any]) -> None:
    try:
        value = compute()
    except BaseException as exc:
        _fail(outer, exc)
        return
    try:
        outer.set_result(value)
    except InvalidStateError:
        pass


def _fail(outer: Future[Any], exc: BaseException) -> None:
    try:
        outer.set_exception(exc)
    except InvalidStateError:
        pass


def _chain(
    done: Future[Any], outer: Future[Any], then: Callable[[Any], Any] = lambda value: value
) -> None:
    exc = done.exception()
    if exc is not None:
        _fail(outer, exc)
    else:
        _settle(outer, lambda: then(done.result()))
