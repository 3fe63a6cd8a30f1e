"""`Ticket`: one job's life inside the step loop: its state, its future, when it was last served."""

from __future__ import annotations

from collections.abc import Hashable
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field
from typing import Any

from inline_core.components.step import StepPipeline
from inline_core.sampling.job import SampleJob


@dataclass(eq=False)
class Ticket:
    job: SampleJob
    state: Any
    seq: int  # arrival order: oldest first within the limits
    encode_on_loop: bool = False  # prepare_encode still to run, on the loop thread
    decode_on_loop: bool = False  # post_decode to run on the loop thread when done
    # Resolves with the sampled state (or post_decode's output when decode_on_loop).
    future: Future[Any] = field(default_factory=lambda: Future[Any]())
    last_served: int = -1  # loop iteration of this ticket's last forward (or its admission)
    # Read from the prepared state at admission and after each step (see `read_shape`).
    key: tuple[int, Hashable] = (0, None)
    tokens: int = 0
    chunks_crossed: int = 0  # a chunked render's boundaries passed (chunk step grouping)

    @property
    def pipeline(self) -> StepPipeline:
        return self.job.step_pipeline

    def read_shape(self) -> None:
        """Cache what grouping needs. Compatible: same pipeline object, equal `batch_key`."""
        self.key = (id(self.job.pipeline), self.state.batch_key)
        self.tokens = int(self.state.tokens)

    def resolve(self, value: Any) -> bool:
        """Settle with `value`; False if already settled (e.g. failed by close: first wins)."""
        try:
            self.future.set_result(value)
        except InvalidStateError:
            return False
        return True

    def fail(self, exc: BaseException) -> bool:
        try:
            self.future.set_exception(exc)
        except InvalidStateError:
            return False
        return True
