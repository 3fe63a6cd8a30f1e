"""A real, deterministic step pipeline for the sampler tests (pure Python, no torch).

Each request holds a latent vector drawn from its seed; `denoise_step` computes every state's
prediction from that state alone (so a batched forward equals separate ones, bit for bit), and
records which requests shared each forward so tests can see the grouping the sampler chose.
Hooks let a test act at a precise step (cancel a job, submit another, raise) without timing.
"""

from __future__ import annotations

import math
import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from inline_core.runtime.cancel import CancelToken
from inline_core.sampling.job import BatchedSampler, SampleJob


@dataclass
class ToyState:
    name: str
    seed: int
    size: int  # side in "latent pixels"; tokens = size * size
    steps: int
    prompt: str = "a cat"
    cfg: bool = False
    step_index: int = 0
    latents: list[float] = field(default_factory=list[float])
    cond: float = 0.0
    encoded: bool = False

    @property
    def step_count(self) -> int:
        return self.steps

    @property
    def done(self) -> bool:
        return self.step_index >= self.steps

    @property
    def batch_key(self) -> tuple[str, bool]:
        return ("toy-fp32", self.cfg)

    @property
    def tokens(self) -> int:
        return self.size * self.size


Hook = Callable[[Sequence[ToyState]], object]


class ToyPipeline:
    def __init__(self, name: str = "toy") -> None:
        self.name = name
        self.serial_phases = False  # the sampler's opt-in: phases on the loop thread
        self.lock = threading.Lock()
        self.batches: list[tuple[str, ...]] = []  # names sharing each forward, in order
        self.batch_tokens: list[int] = []  # padded size of each forward
        self.before_forward: list[Hook] = []  # run inside denoise_step, on the loop thread
        self.fail_forward_when: Callable[[Sequence[ToyState]], bool] = lambda _states: False
        self.fail_step_for: set[str] = set()
        self.fail_decode_for: set[str] = set()
        self.fail_encode_for: set[str] = set()
        self.encode_threads: list[str] = []
        self.decode_threads: list[str] = []

    def prepare_encode(self, state: ToyState, /) -> ToyState:
        if state.name in self.fail_encode_for:
            raise ValueError(f"encode failed for {state.name}")
        with self.lock:
            self.encode_threads.append(threading.current_thread().name)
        rng = random.Random(state.seed)
        state.latents = [rng.gauss(0.0, 1.0) for _ in range(state.size * state.size)]
        state.cond = (sum(map(ord, state.prompt)) % 97) / 97.0
        state.step_index = 0
        state.encoded = True
        return state

    def denoise_step(self, states: Sequence[ToyState], /) -> list[list[float]]:
        with self.lock:
            self.batches.append(tuple(s.name for s in states))
            self.batch_tokens.append(len(states) * max(s.tokens for s in states))  # padded
        for hook in list(self.before_forward):
            hook(states)
        if self.fail_forward_when(states):
            raise RuntimeError("forward failed")
        return [self._predict(s) for s in states]

    def step_scheduler(self, state: ToyState, noise_pred: list[float], /) -> None:
        if state.name in self.fail_step_for:
            raise ValueError(f"scheduler failed for {state.name}")
        dt = 1.0 / state.steps
        state.latents = [x - dt * (x - p) for x, p in zip(state.latents, noise_pred, strict=True)]
        state.step_index += 1

    def post_decode(self, state: ToyState, /) -> tuple[float, ...]:
        if state.name in self.fail_decode_for:
            raise ValueError(f"decode failed for {state.name}")
        with self.lock:
            self.decode_threads.append(threading.current_thread().name)
        return tuple(round(math.tanh(x), 12) for x in state.latents)

    @staticmethod
    def _predict(state: ToyState) -> list[float]:
        t = 1.0 - state.step_index / state.steps
        scale = 2.0 if state.cfg else 1.0
        return [math.tanh(x * (1.0 + t)) * scale + state.cond for x in state.latents]


class BatchDecodeToy(ToyPipeline):
    """The toy plus `post_decode_many` (components.step.SupportsBatchedDecode): states of one size
    decode together. Records each decode call's names; `before_decode` hooks run in every call."""

    def __init__(self, name: str = "toy-batch-decode") -> None:
        super().__init__(name)
        self.decode_calls: list[tuple[str, ...]] = []
        self.before_decode: list[Hook] = []

    def decode_key(self, state: ToyState, /) -> int:
        return state.size

    def decode_pixels(self, state: ToyState, /) -> int:
        return state.size * state.size

    def post_decode(self, state: ToyState, /) -> tuple[float, ...]:
        self._enter_decode([state])
        return super().post_decode(state)

    def post_decode_many(self, states: Sequence[ToyState], /) -> list[tuple[float, ...]]:
        self._enter_decode(states)
        bad = [s.name for s in states if s.name in self.fail_decode_for]
        if bad:
            raise ValueError(f"batched decode failed for {bad}")
        return [ToyPipeline.post_decode(self, s) for s in states]

    def _enter_decode(self, states: Sequence[ToyState]) -> None:
        with self.lock:
            self.decode_calls.append(tuple(s.name for s in states))
        for hook in list(self.before_decode):
            hook(states)


def make_state(
    name: str, seed: int, size: int = 2, steps: int = 4, prompt: str = "a cat", cfg: bool = False
) -> ToyState:
    return ToyState(name=name, seed=seed, size=size, steps=steps, prompt=prompt, cfg=cfg)


def fresh(states: Sequence[ToyState]) -> list[ToyState]:
    """The same requests again, unstepped."""
    return [make_state(s.name, s.seed, s.size, s.steps, s.prompt, s.cfg) for s in states]


def make_job(pipeline: ToyPipeline, state: ToyState) -> SampleJob:
    return SampleJob(pipeline=pipeline, state=state, cancel=CancelToken(), label=state.name)


def solo_render(state: ToyState) -> tuple[float, ...]:
    """The reference: one request driven through the four calls on its own, no sampler."""
    pipeline = ToyPipeline("reference")
    state = pipeline.prepare_encode(state)
    while not state.done:
        (prediction,) = pipeline.denoise_step([state])
        pipeline.step_scheduler(state, prediction)
    return pipeline.post_decode(state)


def wait_until(condition: Callable[[], bool], what: str, timeout_s: float = 30.0) -> None:
    """Wait for a state the test arranged (never a timing assertion: the bound only stops hangs)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.001)


class Callers:
    """One thread per state calling the sampler's blocking `run`, results keyed by state name."""

    def __init__(self, sampler: BatchedSampler, pipeline: ToyPipeline, states: Sequence[ToyState]):
        self.results: dict[str, tuple[float, ...]] = {}
        self._threads = [
            threading.Thread(target=self._call, args=(sampler, pipeline, s)) for s in states
        ]
        for thread in self._threads:
            thread.start()

    def _call(self, sampler: BatchedSampler, pipeline: ToyPipeline, state: ToyState) -> None:
        self.results[state.name] = sampler.run(make_job(pipeline, state))

    def join(self, timeout_s: float) -> None:
        for thread in self._threads:
            thread.join(timeout_s)


class PreviewToy(ToyPipeline):
    """The toy plus step previews (components.step.SupportsPreview): its x0 estimate is the
    prediction itself, copied; counts its calls and can be told to fail."""

    def __init__(self, name: str = "toy-preview") -> None:
        super().__init__(name)
        self.preview_calls = 0
        self.fail_preview = False

    def preview_format(self, state: ToyState, /) -> str:
        return "toy"

    def preview_latents(self, state: ToyState, noise_pred: list[float], /) -> list[float]:
        with self.lock:
            self.preview_calls += 1
        if self.fail_preview:
            raise ValueError("preview latents failed")
        return list(noise_pred)
