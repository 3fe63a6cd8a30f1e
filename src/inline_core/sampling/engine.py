"""`StepEngine`: the one thread that owns the accelerator and steps every active job.

Data moves one way: `enqueue` -> incoming -> (admit) active -> (next_group) one `denoise_step` ->
each job's `step_scheduler` -> finished jobs resolve their tickets. At every boundary the loop
admits new tickets, drops cancelled ones and runs one group. Inside a forward, the model checks
between its blocks (`diffusion/cancel_blocks.py`): a forward whose every row was cancelled stops
there; one with a live row runs on, and its cancelled rows are dropped at the next boundary. It
sleeps on a condition variable only when there is nothing to do, so a lone job pays no polling
latency.

Failures stay where they belong: an exception in `denoise_step` fails that group's jobs, one in a
job's own `step_scheduler`, callbacks, `prepare_encode` or `post_decode` fails only that job (a
batched decode that raises is retried one job at a time, `decode_batch.py`); the
loop itself keeps going, and when it stops (close, or a bug) every ticket still held is failed, so
no caller waits forever.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any, TypeVar

from inline_core.components.step import (
    StepPipeline,
    supports_chunk_boundary,
    supports_chunk_step_grouping,
    supports_preview,
)
from inline_core.errors import Cancelled, RunFailed, Unavailable
from inline_core.runtime.cancel import forward_rows
from inline_core.sampling.decode_batch import decode_group, decode_item, take_group
from inline_core.sampling.job import PreviewSink, SampleJob
from inline_core.sampling.limits import BatchLimits
from inline_core.sampling.scheduler import next_group
from inline_core.sampling.ticket import Ticket
from inline_core.sampling.waits import ForwardWatch

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass
class EngineCounters:
    completed: int = 0
    failed: int = 0
    cancelled: int = 0
    forwards: int = 0
    batched_forwards: int = 0  # forwards that carried more than one job
    jobs_forwarded: int = 0  # sum of group sizes (mean batch = jobs_forwarded / forwards)
    batched_decodes: int = 0  # on-loop decode calls that carried more than one job
    batch_decoded_jobs: int = 0  # jobs decoded in those calls
    key_changes: int = 0  # steps after which a job's batch key changed (Wan A14B's expert switch)
    forward_seconds: float = 0.0  # wall time inside denoise_step: the model's share of a run
    # Loop time on step previews (x0 estimates, handed to the preview worker): their whole
    # cost on the loop, the rendering being the worker's.
    preview_seconds: float = 0.0
    grouped_steps: int = 0  # forwards run back to back within a chunk (chunk step grouping)


class StepEngine:
    def __init__(
        self,
        limits: BatchLimits,
        *,
        name: str = "inline-step-loop",
        on_start: Callable[[], None] | None = None,
    ) -> None:
        self.limits = limits
        self._name = name
        self._on_start = on_start  # run first on the loop thread (e.g. its intra-op threads)
        self._cond = threading.Condition()
        self._incoming: deque[Ticket] = deque()
        self._active: list[Ticket] = []
        self._thread: threading.Thread | None = None
        self._closed = False
        self._seq = itertools.count()
        self._iteration = 0
        self.counters = EngineCounters()
        # Held while the jobs finished by one forward are resolved, so the decoders off the loop
        # see them all at once and can decode them together (`PhaseSlots.adding`).
        self.settling: Callable[[], AbstractContextManager[None]] = nullcontext
        self._calls: deque[Callable[[], None]] = deque()
        self._waiting: set[Future[Any]] = set()  # `call`s not answered yet: failed at the end
        self._watch = ForwardWatch()  # tells waiting jobs what they wait for
        # Chunk step grouping (spec 003): a chunked render whose forwards no other job could
        # share runs the rest of its chunk's steps back to back (`scheduler.group_chunk`).
        self.chunk_grouping = True

    # -- called from any thread -------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed

    def enqueue(
        self, job: SampleJob, state: Any, *, encode_on_loop: bool, decode_on_loop: bool
    ) -> Ticket:
        """Hand a job to the loop; its ticket's future resolves with the sampled state (or, with
        `decode_on_loop`, with `post_decode`'s output)."""
        with self._cond:
            if self._closed:
                raise Unavailable("the sampler is closed")
            ticket = Ticket(
                job=job,
                state=state,
                seq=next(self._seq),
                encode_on_loop=encode_on_loop,
                decode_on_loop=decode_on_loop,
            )
            self._incoming.append(ticket)
            self._start()
            self._cond.notify()
        self._watch.arrived(ticket)
        return ticket

    def call_soon(self, call: Callable[[], None]) -> None:
        """Run `call` on the loop thread at its next boundary, before it admits jobs: for work that
        must be ordered with the loop's own (a worker group's collectives, which every rank must
        make in one order). An exception it raises is logged and the loop goes on."""
        with self._cond:
            if self._closed:
                raise Unavailable("the sampler is closed")
            self._calls.append(call)
            self._start()
            self._cond.notify()

    def call(self, fn: Callable[[], T]) -> T:
        """Run `fn` on the loop thread at its next boundary and return what it returns (or raise
        what it raises); on the loop thread itself, run it at once."""
        if threading.current_thread() is self._thread:
            return fn()
        done: Future[T] = Future()

        def run() -> None:
            with self._cond:  # claimed here or failed by `_fail_waiting`, never both
                self._waiting.discard(done)
                if not done.set_running_or_notify_cancel():
                    return
            try:
                done.set_result(fn())
            except BaseException as exc:  # the caller's to handle, not the loop's
                done.set_exception(exc)

        with self._cond:
            self._waiting.add(done)
        try:
            self.call_soon(run)
        except Unavailable:
            with self._cond:
                self._waiting.discard(done)
            raise
        return done.result()

    def _fail_waiting(self) -> None:
        """A loop that stops answers the `call`s it will not run (their callers wait on them)."""
        with self._cond:
            waiting = [done for done in self._waiting if done.set_running_or_notify_cancel()]
            self._waiting.clear()
        for done in waiting:
            done.set_exception(Unavailable("the sampler stopped before this call ran"))

    def _start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
            self._thread.start()

    def counts(self) -> tuple[int, int]:
        """(incoming, active) right now."""
        with self._cond:
            return len(self._incoming), len(self._active)

    def close(self, timeout: float | None = 60.0) -> None:
        """Stop the loop after the forward in flight; every job still held fails `Unavailable`."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
        # The loop fails what it holds as it exits; this covers a loop stuck in a forward.
        with self._cond:
            leftovers = [*self._incoming, *self._active]
            self._incoming.clear()
            self._active.clear()
        for ticket in leftovers:
            ticket.fail(Unavailable("the sampler was closed before this job finished"))
        self._fail_waiting()

    # -- the loop thread --------------------------------------------------------------------

    def _loop(self) -> None:
        if self._on_start is not None:
            try:
                self._on_start()
            except Exception:
                log.exception("the step loop's start hook failed; the loop goes on")
        try:
            while True:
                with self._cond:
                    idle = not (self._incoming or self._active or self._calls)
                    while idle and not self._closed:
                        self._cond.wait()
                        idle = not (self._incoming or self._active or self._calls)
                    if self._closed:
                        return
                    admitted = list(self._incoming)
                    self._incoming.clear()
                    calls = list(self._calls)
                    self._calls.clear()
                for call in calls:
                    try:
                        call()
                    except Exception:
                        log.exception("a call on the step loop failed; the loop goes on")
                try:
                    self._admit(admitted)
                    self._drop_cancelled()
                    if self._active:
                        self._iteration += 1
                        self._forward_next()
                except Exception as exc:  # a fault outside any one job: fail what is held, go on
                    with self._cond:
                        held = [*admitted, *self._active]
                        self._active.clear()
                    for ticket in held:
                        self._fail(ticket, exc)
        finally:
            with self._cond:
                self._closed = True
                leftovers = [*self._incoming, *self._active]
                self._incoming.clear()
                self._active.clear()
            for ticket in leftovers:
                ticket.fail(Unavailable("the sampler stopped before this job finished"))
            self._fail_waiting()

    def _admit(self, tickets: list[Ticket]) -> None:
        for ticket in tickets:
            job = ticket.job
            if job.cancel.cancelled:
                self._cancel(ticket)
                continue
            try:
                if ticket.encode_on_loop:
                    job.on_phase("encode")
                    prepared = job.step_pipeline.prepare_encode(ticket.state)
                    ticket.state = ticket.state if prepared is None else prepared
                ticket.read_shape()
                _announce_chunk(ticket)
                job.on_phase("sample")
                done = bool(ticket.state.done)
            except Exception as exc:
                self._fail(ticket, exc)
                continue
            ticket.last_served = self._iteration
            if done:  # zero steps to take (e.g. strength 0): straight to the output
                self._finish([ticket])
                continue
            with self._cond:
                self._active.append(ticket)

    def _drop_cancelled(self) -> None:
        cancelled = [t for t in self._active if t.job.cancel.cancelled]
        for ticket in cancelled:
            self._remove(ticket)
            self._cancel(ticket)

    def _forward(self, group: list[Ticket]) -> None:
        counters = self.counters
        counters.forwards += 1
        counters.jobs_forwarded += len(group)
        if len(group) > 1:
            counters.batched_forwards += 1
        pipeline = group[0].pipeline
        started = time.perf_counter()
        self._watch.waiting([t for t in self._active if t not in group], group)
        try:
            with forward_rows([t.job.cancel for t in group]), self._watch.forward(group):
                predictions = list(pipeline.denoise_step([t.state for t in group]))
            counters.forward_seconds += time.perf_counter() - started
            if len(predictions) != len(group):
                raise RunFailed(
                    f"denoise_step returned {len(predictions)} predictions for {len(group)} jobs"
                )
        except Cancelled as exc:  # every row was cancelled: the model stopped between its blocks
            for ticket in group:
                self._remove(ticket)
                if ticket.job.cancel.cancelled:
                    self._cancel(ticket)
                else:
                    self._fail(ticket, exc)
            return
        except Exception as exc:  # the whole group shared the forward, so the whole group fails
            for ticket in group:
                self._remove(ticket)
                self._fail(ticket, exc)
            return
        finished: list[Ticket] = []
        for ticket, prediction in zip(group, predictions, strict=True):
            ticket.last_served = self._iteration
            state = ticket.state
            preview = ticket.job.preview
            x0 = None
            if preview is not None:
                began = time.perf_counter()
                x0 = _preview_latents(pipeline, state, prediction)
                counters.preview_seconds += time.perf_counter() - began
            try:
                pipeline.step_scheduler(state, prediction)
                _cross_chunk_boundary(ticket)
                ticket.job.on_step(int(state.step_index), int(state.step_count))
                done = bool(state.done)
            except Exception as exc:
                self._remove(ticket)
                self._fail(ticket, exc)
                continue
            if x0 is not None and preview is not None:
                began = time.perf_counter()
                _offer(preview, x0, state)
                counters.preview_seconds += time.perf_counter() - began
            if done:
                self._remove(ticket)
                finished.append(ticket)
            else:
                self._rekey(ticket)
        if finished:
            self._finish(finished)

    def _forward_next(self) -> None:
        """One forward of the next group (and, by the grouping policy, the rest of its chunk).
        Its own method so the group's tickets are not held by the loop once it idles: a finished
        job's pipeline must be free to go when the residency lets it go."""
        group = next_group(self._active, self.limits)
        self._forward(group)
        if self.chunk_grouping:
            self._rest_of_chunk(group)

    def _rest_of_chunk(self, group: list[Ticket]) -> None:
        """The policy: a lone job of a pipeline that may group a chunk's steps runs them back to
        back while nothing waits to be admitted and no other active job could share its
        forwards, until its chunk ends (or it ends, or is cancelled)."""
        if len(group) != 1 or not supports_chunk_step_grouping(group[0].pipeline):
            return
        ticket = group[0]
        crossed = ticket.chunks_crossed
        while ticket.chunks_crossed == crossed and ticket in self._active:
            with self._cond:
                if self._incoming or self._calls or self._closed:
                    return
                if any(t is not ticket and t.key == ticket.key for t in self._active):
                    return
            if ticket.job.cancel.cancelled:
                return
            self._iteration += 1
            self.counters.grouped_steps += 1
            self._forward([ticket])

    def _rekey(self, ticket: Ticket) -> None:
        """A key may follow the step (a two-expert model batches by the expert at this step)."""
        before = ticket.key
        try:
            ticket.read_shape()
        except Exception as exc:
            self._remove(ticket)
            self._fail(ticket, exc)
            return
        if ticket.key != before:
            self.counters.key_changes += 1

    def _finish(self, tickets: list[Ticket]) -> None:
        """Hand sampled states back (decoded off the loop), or decode them here, together."""
        with self.settling():
            for ticket in tickets:
                if not ticket.decode_on_loop and ticket.resolve(ticket.state):
                    self.counters.completed += 1
        on_loop = [t for t in tickets if t.decode_on_loop]
        if on_loop:
            self._decode_on_loop(on_loop)

    def _decode_on_loop(self, tickets: list[Ticket]) -> None:
        items = [decode_item(t.job, t.state, self.limits) for t in tickets]
        waiting = list(items)
        while waiting:
            shared = decode_group(take_group(waiting, self.limits))
            if shared:
                self.counters.batched_decodes += 1
                self.counters.batch_decoded_jobs += shared
        for ticket, item in zip(tickets, items, strict=True):
            if item.error is None:
                if ticket.resolve(item.value):
                    self.counters.completed += 1
            elif isinstance(item.error, Cancelled):
                self._cancel(ticket)
            else:
                self._fail(ticket, item.error)

    def _remove(self, ticket: Ticket) -> None:
        with self._cond:
            self._active.remove(ticket)

    def _fail(self, ticket: Ticket, exc: BaseException) -> None:
        if ticket.fail(exc):
            self.counters.failed += 1

    def _cancel(self, ticket: Ticket) -> None:
        if ticket.fail(Cancelled(ticket.job.cancel.reason)):
            self.counters.cancelled += 1


def _announce_chunk(ticket: Ticket) -> None:
    """A chunked render's job hears of each chunk as it starts (`peek_chunk_media`)."""
    pipeline = ticket.pipeline
    if supports_chunk_boundary(pipeline):
        ticket.job.on_chunk(pipeline.peek_chunk_media(ticket.state))


def _cross_chunk_boundary(ticket: Ticket) -> None:
    """Spec 003's chunk boundary, where a step ended a chunk and another follows: the
    interactions queued for it are applied, then the next chunk is set up, and announced."""
    pipeline, state = ticket.pipeline, ticket.state
    if supports_chunk_boundary(pipeline) and pipeline.at_chunk_boundary(state):
        ticket.chunks_crossed += 1
        pipeline.apply_interaction_at_chunk_boundary(state)
        pipeline.prepare_next_chunk(state)
        _announce_chunk(ticket)


def _preview_latents(pipeline: StepPipeline, state: Any, prediction: Any) -> tuple[Any, str] | None:
    """The state's x0 estimate and its latent format, taken before its step (None: the
    pipeline has no previews, or it failed: a preview never fails a job)."""
    if not supports_preview(pipeline):
        return None
    try:
        latents = pipeline.preview_latents(state, prediction)
        return None if latents is None else (latents, pipeline.preview_format(state))
    except Exception:
        log.exception("a step preview's latents failed; the job goes on without it")
        return None


def _offer(preview: PreviewSink, x0: tuple[Any, str], state: Any) -> None:
    try:
        preview.offer(x0[0], x0[1], int(state.step_index), int(state.step_count))
    except Exception:
        log.exception("a step preview could not be handed over; the job goes on without it")
