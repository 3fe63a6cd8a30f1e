"""Where a download's bytes stand while it runs: bytes per file, and a rate over the last few
seconds (an ETA from it)."""

from __future__ import annotations

import time
from collections import deque

RATE_WINDOW_S = 5.0


class LiveProgress:
    def __init__(self, held: list[int]) -> None:
        self.held = held  # bytes on disk per file
        self._samples: deque[tuple[float, int]] = deque()

    @property
    def done(self) -> int:
        return sum(self.held)

    def update(self, index: int, held: int) -> None:
        self.held[index] = held
        now = time.monotonic()
        self._samples.append((now, self.done))
        while len(self._samples) > 2 and now - self._samples[0][0] > RATE_WINDOW_S:
            self._samples.popleft()

    def rate(self) -> float:
        """Bytes per second over the window (0 until two samples are apart)."""
        if len(self._samples) < 2:
            return 0.0
        (t0, b0), (t1, b1) = self._samples[0], self._samples[-1]
        return max(0.0, (b1 - b0) / (t1 - t0)) if t1 > t0 else 0.0

    def eta_s(self, total: int) -> float | None:
        rate = self.rate()
        return (total - self.done) / rate if rate > 0 else None

    def restarted(self) -> None:
        """A new session of the download: the rate counts only what arrives from now on."""
        self._samples.clear()
