"""Where a download's bytes stand while it runs: bytes per file, and a rate over the last few
seconds (an ETA from it). The rate runs to now, so a stalled link shows it: it falls while no
bytes come, and is 0 once none have come for a whole window."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

RATE_WINDOW_S = 5.0


class LiveProgress:
    def __init__(self, held: list[int], clock: Callable[[], float] = time.monotonic) -> None:
        self.held = held  # bytes on disk per file
        self._clock = clock
        self._samples: deque[tuple[float, int]] = deque()

    @property
    def done(self) -> int:
        return sum(self.held)

    def update(self, index: int, held: int) -> None:
        before = self.done
        self.held[index] = held
        now = self._clock()
        if self.done < before:
            self._samples.clear()  # a file started over: the rate counts from here
        self._samples.append((now, self.done))
        while len(self._samples) > 2 and now - self._samples[1][0] > RATE_WINDOW_S:
            self._samples.popleft()

    def rate(self) -> float:
        """Bytes per second from the window's first sample to now (0 before two samples, and
        once the last bytes are a window old)."""
        if len(self._samples) < 2:
            return 0.0
        now = self._clock()
        (t0, b0), (t1, b1) = self._samples[0], self._samples[-1]
        if now - t1 > RATE_WINDOW_S or now <= t0:
            return 0.0
        return max(0.0, (b1 - b0) / (now - t0))

    def eta_s(self, total: int) -> float | None:
        rate = self.rate()
        return (total - self.done) / rate if rate > 0 else None
