"""Rank 0's hold (`protocol.Hold`, `WorkerGroup.gather`): its step loop paused at a boundary
while the jobs sent together reach it, so they are admitted, and forwarded, together."""

from __future__ import annotations

import logging
import threading

from inline_core.sampling.loop import StepLoopSampler

log = logging.getLogger(__name__)


class Gate:
    """A `Hold` on rank 0: its loop paused at a step boundary until the next `count` jobs the
    server sends have reached it, refused ones included (or `timeout_s` passes). The jobs are
    counted as they arrive, not as the loop sees them: the loop admits what waited when it
    paused only after the pause, so those are not in its queue, and a refused job never is."""

    def __init__(self, count: int, timeout_s: float) -> None:
        self.left = count
        self.timeout_s = timeout_s
        self._paused = threading.Event()
        self._open = threading.Event()

    def close_on(self, sampler: StepLoopSampler) -> None:
        """Pause the loop, returning once it is paused: the jobs that follow wait in its queue
        and are admitted together when it resumes."""
        sampler.call_soon(self._pause)
        self._paused.wait(self.timeout_s)

    def arrived(self) -> bool:
        """One of the held-for jobs reached rank 0; True when that was the last (it opens)."""
        self.left -= 1
        if self.left > 0:
            return False
        self.open()
        return True

    def open(self) -> None:
        self._open.set()

    def _pause(self) -> None:  # on the loop thread
        self._paused.set()
        if not self._open.wait(self.timeout_s):
            log.warning(
                "rank 0 held its loop %.0f s for %d more jobs; going on", self.timeout_s, self.left
            )
