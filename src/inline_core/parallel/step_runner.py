"""The standard rank runner: a resident step pipeline (spec 003), split by an engine, driven by the
same step loop as in process.

Every rank rebuilds the same pipeline with the loader the server's pipeline names. Rank 0 runs
`sampling`'s `StepLoopSampler`, so jobs sent to a split are admitted, grouped and stepped by the
same rules as in one process (model, dtype and guidance mode, the token budget; the split engine
itself may run one batch as several forwards: xDiT's padding masks). Each decision that involves
the other ranks is shared before rank 0 acts on it, from its loop thread alone, so every rank makes
the same collectives in the same order:
- `Admit`: every rank builds the job's state with its own pipeline's `request()` from the fields
  the wire carried, and encodes its prompt (the encoders are replicated, not split);
- `Forward`: the jobs of the next forward, in order; every rank runs it (the split transformer
  forward is the collective) and steps each job's own scheduler. It also names every job rank 0
  still holds, so the others drop a job rank 0 cancelled or failed.
Only rank 0 finishes a job: decoded, or as latents when the request asks for them. The others
report each job they finished with their own counters (what their attention saw).
"""

from __future__ import annotations

import queue
import threading
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Protocol, cast, runtime_checkable

from inline_core.components.step import (
    step_cache_counts,
    supports_latent_output,
    supports_preview,
)
from inline_core.config import Config
from inline_core.diffusion.compile.progress import BOARD
from inline_core.diffusion.compile.regional import compiled_classes
from inline_core.diffusion.packed_linear import packed_bytes
from inline_core.errors import Cancelled, InlineError
from inline_core.parallel.collective import STOP, TICK, Admit, Command, Forward
from inline_core.parallel.engines import SplitEngine, apply_split, resolve_module
from inline_core.parallel.hold_gate import Gate
from inline_core.parallel.probe import AttentionProbe
from inline_core.parallel.protocol import (
    Cancel,
    Failure,
    Hold,
    Job,
    Json,
    Message,
    Phase,
    Progress,
    Result,
    Shutdown,
)
from inline_core.parallel.rank_previews import RankPreviews
from inline_core.parallel.remote import RemoteRequest, encode_output
from inline_core.parallel.runner import WorkerContext, resolve
from inline_core.parallel.wire import decode_fields
from inline_core.runtime.cancel import CancelToken
from inline_core.sampling.job import SampleJob
from inline_core.sampling.loop import StepLoopSampler
from inline_core.sampling.previews import PreviewChannel

Share = Callable[[Command], Command]  # rank 0: share a command with every rank
Receive = Callable[[], Command]  # the other ranks: the next command rank 0 shared
Send = Callable[[Message], None]  # to the server


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


def rebuild(pipeline: RankPipeline, params: Mapping[str, Json], blobs: Mapping[str, bytes]) -> Any:
    return pipeline.request(**decode_fields(RemoteRequest(dict(params), dict(blobs))))


class Meter:
    """Each job's debug counters on this rank: forwards taken part in, the tokens its first and
    last forwards' attention layers saw (a shard of the sequence under a split; a pair of experts
    runs its last forwards on the second), control time, and the bytes of the rank's packed
    linear weights (`diffusion/packed_linear.py`)."""

    def __init__(self, probe: AttentionProbe | None, packed_bytes: int = 0) -> None:
        self.probe = probe
        self.packed_bytes = packed_bytes  # this rank's packed linear weights (0: none)
        self.forwards: dict[int, int] = {}
        self.tokens: dict[int, list[int]] = {}
        self.last_tokens: dict[int, list[int]] = {}
        self.control_s: dict[int, float] = {}

    def forwarded(self, job_ids: Sequence[int], control_s: float) -> None:
        seen: list[int] = []
        if self.probe is not None:  # taken: a forward the probe did not see leaves none
            seen, self.probe.last_forward = self.probe.last_forward, []
        for job_id in job_ids:
            self.forwards[job_id] = self.forwards.get(job_id, 0) + 1
            self.tokens.setdefault(job_id, list(seen))
            self.last_tokens[job_id] = list(seen)
            self.control_s[job_id] = self.control_s.get(job_id, 0.0) + control_s

    def meta(self, job_id: int) -> dict[str, Json]:
        meta: dict[str, Json] = {
            "controlS": self.control_s.pop(job_id, 0.0),
            "packedBytes": self.packed_bytes,
        }
        if self.probe is not None:
            meta["attentionTokens"] = cast(list[Json], self.tokens.pop(job_id, []))
            meta["lastAttentionTokens"] = cast(list[Json], self.last_tokens.pop(job_id, []))
            meta["forwards"] = self.forwards.pop(job_id, 0)
        compiled = BOARD.all_notes()
        if compiled:  # how this rank's compiled blocks ran: compiled, or eager after a failure
            meta["compile"] = cast(list[Json], compiled)
        return meta

    def forget(self, job_id: int) -> None:
        for counters in (self.forwards, self.tokens, self.last_tokens, self.control_s):
            counters.pop(job_id, None)


@dataclass
class _Entry:
    job: Job
    token: CancelToken
    began: float = field(default_factory=time.perf_counter)


class SharedPipeline:
    """Rank 0's pipeline as its step loop sees it: each call that involves the other ranks is
    shared with them first. Called from the loop thread only."""

    def __init__(self, pipeline: RankPipeline, share: Share, meter: Meter) -> None:
        self.pipeline = pipeline
        self._share_with_ranks = share
        self.meter = meter
        self._lock = threading.Lock()
        self._entries: dict[int, _Entry] = {}  # id(state) -> its job
        self._stopped = False

    # -- the jobs rank 0 holds -----------------------------------------------------------------

    def hold(self, state: Any, job: Job, token: CancelToken) -> None:
        with self._lock:
            self._entries[id(state)] = _Entry(job, token)

    def release(self, state: Any) -> _Entry | None:
        with self._lock:
            return self._entries.pop(id(state), None)

    def cancel(self, job_id: int, reason: str) -> None:
        with self._lock:
            entries = [e for e in self._entries.values() if e.job.job_id == job_id]
        for entry in entries:
            entry.token.cancel(reason)

    def _job(self, state: Any) -> Job:
        with self._lock:
            return self._entries[id(state)].job

    def _live(self) -> tuple[int, ...]:
        with self._lock:
            return tuple(e.job.job_id for e in self._entries.values())

    # -- commands ------------------------------------------------------------------------------

    def share(self, command: Command) -> float:
        """Share `command`; the seconds it took (control traffic, not compute)."""
        if self._stopped:
            raise RuntimeError("the worker group is stopping")
        began = time.perf_counter()
        self._share_with_ranks(command)
        if command == STOP:
            self._stopped = True
        return time.perf_counter() - began

    def tick(self) -> None:
        if not self._stopped:
            self.share(TICK)

    # -- spec 003, as the step loop calls it ---------------------------------------------------

    def prepare_encode(self, state: Any, /) -> Any:
        job = self._job(state)
        self.share(Admit(job.job_id, job.params, job.blobs))
        return self.pipeline.prepare_encode(state)

    def denoise_step(self, states: Sequence[Any], /) -> Sequence[Any]:
        job_ids = tuple(self._job(s).job_id for s in states)
        control_s = self.share(Forward(job_ids, self._live()))
        predictions = self.pipeline.denoise_step(states)
        self.meter.forwarded(job_ids, control_s)
        return predictions

    def step_scheduler(self, state: Any, noise_pred: Any, /) -> None:
        self.pipeline.step_scheduler(state, noise_pred)

    def post_decode(self, state: Any, /) -> Any:
        return finish(self.pipeline, state, self._job(state).params.get("output"))

    # -- previews (components.step.SupportsPreview), rank 0's alone: no collective -------------

    def preview_format(self, state: Any, /) -> str:
        inner = self.pipeline
        return inner.preview_format(state) if supports_preview(inner) else ""

    def preview_latents(self, state: Any, noise_pred: Any, /) -> Any:
        """The rank's pipeline's x0 estimate; None where it has no previews."""
        inner = self.pipeline
        return inner.preview_latents(state, noise_pred) if supports_preview(inner) else None


class StepLoopRunner:
    """Every rank's runner of a resident step pipeline (see the module docstring)."""

    def __init__(
        self,
        pipeline: RankPipeline,
        context: WorkerContext,
        engine: SplitEngine,
        probe: AttentionProbe | None,
        loader: str,
        packed_bytes: int = 0,
    ) -> None:
        self.pipeline = pipeline
        self.context = context
        self.engine = engine
        self.meter = Meter(probe, packed_bytes)
        self.loader = loader
        self.sampler: StepLoopSampler | None = None  # rank 0's step loop, once serving
        self.previews = RankPreviews()  # rank 0's step previews

    def describe(self) -> dict[str, Json]:
        return {
            "loader": self.loader,
            "engine": self.engine.name,
            "split": str(self.context.split),
            "device": self.context.device,
        }

    # -- rank 0 --------------------------------------------------------------------------------

    def serve_leader(
        self, inbox: queue.Queue[Message], send: Send, share: Share, idle_tick_s: float
    ) -> None:
        """Run jobs from `inbox` until `Shutdown`, then tell the other ranks to stop."""
        config = Config.from_env()  # the server's INLINE_MAX_BATCH etc. reach the ranks
        sampler = StepLoopSampler(
            config.max_batch,
            config.batch_token_budget,
            device="cuda" if self.context.device.startswith("cuda") else "cpu",
            phases="loop",  # every collective from one thread, in one order on every rank
        )
        self.sampler = sampler
        shared = SharedPipeline(self.pipeline, share, self.meter)
        ticking = threading.Event()
        ticker = threading.Thread(
            target=_tick, args=(sampler, shared, idle_tick_s, ticking), daemon=True
        )
        ticker.start()
        gate: Gate | None = None
        try:
            while True:
                message = inbox.get()
                if isinstance(message, Shutdown):
                    return
                if isinstance(message, Cancel):
                    shared.cancel(message.job_id, message.reason)
                elif isinstance(message, Hold):
                    if gate is not None:
                        gate.open()
                    gate = Gate(message.count, message.timeout_s)
                    gate.close_on(sampler)
                elif isinstance(message, Job):
                    self._start(message, sampler, shared, send)
                    if gate is not None and gate.arrived():
                        gate = None
        finally:
            if gate is not None:  # a `Shutdown` (or a `Load`) ends a hold: the stop goes next
                gate.open()
            ticking.set()
            stopped = threading.Event()

            def stop() -> None:
                try:
                    shared.share(STOP)
                finally:
                    stopped.set()

            sampler.call_soon(stop)
            stopped.wait(60.0)  # the forward in flight, then the stop
            sampler.close()
            self.previews.close()

    def _start(
        self, job: Job, sampler: StepLoopSampler, shared: SharedPipeline, send: Send
    ) -> None:
        try:
            state = rebuild(self.pipeline, job.params, job.blobs)
        except Exception as exc:  # refused before any rank heard of it
            send(_failure(job.job_id, exc))
            return
        self.engine.before_job(state)
        token = CancelToken()
        shared.hold(state, job, token)
        job_id = job.job_id
        preview = self.previews.channel(job, send)
        future = sampler.submit(
            SampleJob(
                pipeline=shared,
                state=state,
                cancel=token,
                on_phase=lambda phase: send(Phase(job_id, phase)),
                on_step=lambda step, count: send(Progress(job_id, step, count)),
                label=f"job {job_id}",
                preview=preview,
            )
        )
        future.add_done_callback(
            lambda done: self._finished(job_id, state, done, shared, send, preview)
        )

    def _finished(
        self,
        job_id: int,
        state: Any,
        done: Future[Any],
        shared: SharedPipeline,
        send: Send,
        preview: PreviewChannel | None,
    ) -> None:
        entry = shared.release(state)
        exc = done.exception()
        if exc is not None:
            self.meter.forget(job_id)
            if not isinstance(exc, InlineError):
                traceback.print_exception(exc)
            send(_failure(job_id, exc))
            return
        description, arrays = encode_output(done.result())
        meta: dict[str, Json] = {
            "rank": 0,
            "engine": self.engine.name,
            "output": description,
            "computeS": time.perf_counter() - entry.began if entry is not None else 0.0,
            **self.meter.meta(job_id),
            "loop": self._loop_counters(),
        }
        counts = step_cache_counts(state)
        if counts is not None:  # the server's copy of the request never held its cache
            meta["stepCache"] = cast(dict[str, Json], counts)
        result = Result(job_id, 0, meta=meta, arrays=arrays)
        if preview is None:
            send(result)
        else:  # after its last preview (the server ends the run on the result), never waiting
            preview.then(lambda: send(result))

    def _loop_counters(self) -> dict[str, Json]:
        """How rank 0's step loop has grouped its jobs so far (forwards, and those shared)."""
        stats = {} if self.sampler is None else self.sampler.stats()
        keys = ("forwards", "batchedForwards", "meanBatch", "maxBatch", "tokenBudget")
        return {key: stats.get(key) for key in keys}

    # -- the other ranks -----------------------------------------------------------------------

    def serve_follower(self, receive: Receive, send: Send) -> None:
        """Mirror rank 0's loop until it says stop."""
        held: dict[int, Any] = {}
        began: dict[int, float] = {}
        while True:
            command = receive()
            if command == STOP:
                return
            if isinstance(command, Admit):
                try:
                    state = rebuild(self.pipeline, command.params, command.blobs)
                    self.engine.before_job(state)
                    prepared = self.pipeline.prepare_encode(state)
                    held[command.job_id] = state if prepared is None else prepared
                    began[command.job_id] = time.perf_counter()
                except Exception:  # rank 0 fails it the same way; nothing to hold
                    traceback.print_exc()
            elif isinstance(command, Forward):
                for job_id in set(held) - set(command.live) - set(command.job_ids):
                    del held[job_id]  # cancelled or failed on rank 0
                    self.meter.forget(job_id)
                self._forward(command, held, began, send)

    def _forward(
        self, command: Forward, held: dict[int, Any], began: dict[int, float], send: Send
    ) -> None:
        missing = [job_id for job_id in command.job_ids if job_id not in held]
        if missing:  # rank 0 holds jobs this rank does not: the ranks are out of step
            raise RuntimeError(f"rank {self.context.rank} holds no state for jobs {missing}")
        states = [held[job_id] for job_id in command.job_ids]
        try:
            predictions = self.pipeline.denoise_step(states)
        except Exception:  # the whole forward failed, as on rank 0
            traceback.print_exc()
            for job_id in command.job_ids:
                held.pop(job_id, None)
            return
        self.meter.forwarded(command.job_ids, 0.0)
        for job_id, state, prediction in zip(command.job_ids, states, predictions, strict=True):
            try:
                self.pipeline.step_scheduler(state, prediction)
                finished = bool(state.done)
            except Exception:
                traceback.print_exc()
                held.pop(job_id, None)
                continue
            if finished:
                del held[job_id]
                meta: dict[str, Json] = {
                    "rank": self.context.rank,
                    "engine": self.engine.name,
                    "computeS": time.perf_counter() - began.pop(job_id, time.perf_counter()),
                    **self.meter.meta(job_id),
                }
                send(Result(job_id, self.context.rank, meta=meta))


def _tick(
    sampler: StepLoopSampler, shared: SharedPipeline, every_s: float, stop: threading.Event
) -> None:
    """Keep the other ranks inside the group timeout while rank 0 has nothing to share."""
    while not stop.wait(every_s):
        try:
            sampler.call_soon(shared.tick)
        except InlineError:  # the sampler closed
            return


def _failure(job_id: int, exc: BaseException) -> Failure:
    if isinstance(exc, Cancelled):
        code, status, message = exc.code, exc.status, exc.message
    elif isinstance(exc, InlineError):
        code, status, message = exc.code, exc.status, exc.message
    else:
        code, status, message = "run_failed", 500, f"{type(exc).__name__}: {exc}"
    return Failure(job_id, 0, code, status, message, at=time.monotonic(), final=True)


def load_step_runner(context: WorkerContext, args: Mapping[str, Json]) -> StepLoopRunner:
    """Runner factory; `args` is a `PipelineSpec` as `{"loader": ..., "loaderArgs": {...}}`."""
    loader = str(args["loader"])
    loader_args = cast(dict[str, Any], args.get("loaderArgs") or {})
    pipeline: object = resolve(loader)(device=context.device, **loader_args)
    if not isinstance(pipeline, RankPipeline):
        raise TypeError(f"{loader} built a {type(pipeline).__name__}, not a step pipeline")
    engine = apply_split(pipeline, context)
    dit_paths = cast(list[str], getattr(pipeline, "_dit_modules", []))
    dits = [resolve_module(pipeline, path) for path in dit_paths]
    # The probe's hooks inside the blocks would run compiled blocks eager: none where they compile.
    compiled = any(compiled_classes(dit) for dit in dits)
    probe = AttentionProbe(*dits) if dits and not compiled else None
    packed = sum(packed_bytes(dit) for dit in dits)  # the loader packed them (`engine/remote.py`)
    return StepLoopRunner(pipeline, context, engine, probe, loader, packed)
